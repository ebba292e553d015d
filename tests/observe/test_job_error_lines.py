"""A job that fails with one of our refusals (a sql run's SQLSTATE and message) is one line in the reader's
language in any Procrastinate worker of an installed app: no traceback, no English "ended with status"
line; when the run line said it already, Procrastinate's record is left out."""

from __future__ import annotations

import io
import json
import logging
import sys

import procrastinate
import pytest

import agentlab_sched
from agentlab_sched.observe import output
from agentlab_sched.tasks.sql import SqlTaskError
from agentlab_sched.worker.middleware import install


def failing_app(db_url: str) -> procrastinate.App:
    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=db_url))

    @app.task(name="nightly")
    def nightly() -> None:
        raise SqlTaskError(
            "sql.failed", message='relation "nope" does not exist', sqlstate="42P01", database="shop", username="rep"
        )

    return install(app)


@pytest.mark.parametrize(
    ("locale", "expected"),
    [
        (
            "en",
            'job nightly #{id} failed: sql: relation "nope" does not exist (SQLSTATE 42P01) in database shop as rep',
        ),
        ("zh-CN", '任务 nightly #{id} 失败:sql:relation "nope" does not exist(SQLSTATE 42P01),数据库 shop,角色 rep'),
    ],
)
async def test_a_refused_job_is_one_line_in_the_reader_language(
    db_url: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch, locale: str, expected: str
) -> None:
    monkeypatch.setenv("AGENTLAB_SCHED_LOCALE", locale)
    app = failing_app(db_url)
    async with app.open_async():
        job_id = await app.configure_task("nightly").defer_async()
        with caplog.at_level(logging.INFO, logger="procrastinate.worker"):
            await app.run_worker_async(wait=False, install_signal_handlers=False)
    ended = [r for r in caplog.records if r.name == "procrastinate.worker" and getattr(r, "action", "") == "job_error"]
    assert len(ended) == 1
    assert ended[0].getMessage() == expected.format(id=job_id)
    assert ended[0].exc_info is None
    assert "Traceback" not in caplog.text and "ended with status" not in caplog.text


def test_a_failure_the_run_line_said_is_left_out() -> None:
    output.quiet_aborts()
    exc = SqlTaskError("sql.failed", message="boom", sqlstate="P0001", database="d", username="u")
    record = logging.LogRecord("procrastinate.worker", logging.ERROR, __file__, 1, "Job ended", (), (None, None, None))
    record.action = "job_error"
    record.exc_info = (type(exc), exc, None)
    worker_logger = logging.getLogger("procrastinate.worker")
    assert worker_logger.filter(record)  # not told: kept (as one line)
    output.told(exc)
    record.exc_info = (type(exc), exc, None)
    assert not worker_logger.filter(record)
    other = ValueError("a bug in the task")  # not one of ours: the traceback is the developer's
    record.exc_info = (type(other), other, sys.exc_info()[2])
    assert worker_logger.filter(record) and record.exc_info[1] is other


async def test_a_plain_worker_says_nothing_at_info_about_the_tick(
    db_url: str, caplog: pytest.LogCaptureFixture
) -> None:

    app = failing_app(db_url)
    app.add_tasks_from(agentlab_sched.blueprint, namespace="agentlab_sched")
    async with app.open_async():
        await app.configure_task("agentlab_sched:tick").defer_async(timestamp=0)
        await app.configure_task("nightly").defer_async()
        with caplog.at_level(logging.INFO, logger="procrastinate"):
            await app.run_worker_async(wait=False, install_signal_handlers=False)
    worker_lines = [r for r in caplog.records if r.name == "procrastinate.worker"]
    assert not [r.getMessage() for r in worker_lines if "agentlab_sched:" in r.getMessage()]
    assert any("nightly" in r.getMessage() for r in worker_lines)  # the app's own jobs are still said


@pytest.mark.parametrize("fmt", output.FORMATS)
async def test_a_failed_jobs_inputs_are_not_in_its_error_line(db_url: str, fmt: str) -> None:
    """Procrastinate's ERROR line names the job as task[id]: its inputs (a token, a command) are not in it,
    in either log format."""
    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=db_url))

    @app.task(name="leaky")
    def leaky(token: str) -> None:
        raise ValueError("a bug in the task")

    install(app)
    stream = io.StringIO()
    async with app.open_async():
        job_id = await app.configure_task("leaky").defer_async(token="s3cret-token")
        with output.configure(fmt, stream=stream):
            await app.run_worker_async(wait=False, install_signal_handlers=False)
    text = stream.getvalue()
    assert "s3cret-token" not in text
    [line] = [x for x in text.splitlines() if "ended with status" in x]
    if fmt == "json":
        record = json.loads(line)
        assert record["message"].startswith(f"Job leaky[{job_id}] ended with status: Error")
        assert record["job"]["call_string"] == f"leaky[{job_id}]" and "task_kwargs" not in record["job"]
    else:
        assert line.startswith(f"error: Job leaky[{job_id}] ended with status: Error")
