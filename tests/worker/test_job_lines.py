"""Procrastinate's lines about jobs under `agentlab-sched worker`: the ones every job gets (loaded,
started, succeeded, its end written) cost nothing when they are not shown; shown, and for a failed job,
they carry Procrastinate's fields as before."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from typing import Any

import procrastinate
import pytest
from procrastinate import jobs

from agentlab_sched.worker.batch import BatchWorker
from agentlab_sched.worker.process import connector_for


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """The ids of the jobs whose fields Procrastinate built for a log line (``Job.log_context``)."""
    ids: list[int] = []
    original = jobs.Job.log_context

    def counted(self: jobs.Job) -> Any:
        ids.append(self.id or 0)
        return original(self)

    monkeypatch.setattr(jobs.Job, "log_context", counted)
    yield ids


@pytest.fixture
def procrastinate_level() -> Iterator[Any]:
    """Set Procrastinate's log level for the test (`agentlab-sched worker` sets WARNING); restored after."""
    logger = logging.getLogger("procrastinate")
    saved = logger.level

    def set_level(level: int) -> None:
        logger.setLevel(level)

    yield set_level
    logger.setLevel(saved)


async def _run(db_url: str, built: list[int]) -> tuple[int, int]:
    """Two jobs through the batch worker, one that succeeds and one that fails; their ids. ``built`` counts
    from when the worker starts (deferring them builds their fields for Procrastinate's own lines)."""
    app = procrastinate.App(connector=connector_for(db_url))

    @app.task(name="lines.ok")
    async def ok() -> None:
        return None

    @app.task(name="lines.broken")
    async def broken() -> None:
        raise RuntimeError("broken on purpose")

    async with app.open_async():
        good = await ok.defer_async()
        bad = await broken.defer_async()
        worker = BatchWorker(app, listen_url=db_url, concurrency=2, wait=False)
        built.clear()
        await asyncio.wait_for(worker.run(), timeout=20)
    return good, bad


async def test_lines_not_shown_are_not_built_and_a_failure_keeps_its_fields(
    db_url: str, built: list[int], procrastinate_level: Any, caplog: pytest.LogCaptureFixture
) -> None:
    procrastinate_level(logging.WARNING)
    with caplog.at_level(logging.WARNING, logger="procrastinate"):
        _, bad = await _run(db_url, built)
    assert built == [bad]  # only for the failure's line, which is shown
    [failure] = [r for r in caplog.records if getattr(r, "action", None) == "job_error"]
    assert failure.job["id"] == bad  # type: ignore[attr-defined]
    assert failure.levelno == logging.ERROR


async def test_lines_shown_carry_procrastinates_fields(
    db_url: str, built: list[int], procrastinate_level: Any, caplog: pytest.LogCaptureFixture
) -> None:
    procrastinate_level(logging.INFO)
    with caplog.at_level(logging.INFO, logger="procrastinate"):
        good, bad = await _run(db_url, built)
    actions = {(r.action, r.job["id"]) for r in caplog.records if hasattr(r, "action") and hasattr(r, "job")}
    assert {("start_job", good), ("job_success", good), ("start_job", bad), ("job_error", bad)} <= actions
    assert set(built) == {good, bad}
