"""The private names of Procrastinate the worker relies on: all listed in worker/internals.py, all there.

A release that drops or reshapes one is named, by this test and when `agentlab-sched worker` starts; one
that reshapes what we no longer rely on (the side tasks and shutdown of its worker) does not break us.
"""

from __future__ import annotations

import ast
import asyncio
from pathlib import Path
from typing import Any

import procrastinate
import psycopg
import pytest
from procrastinate import worker as procrastinate_worker

from agentlab_sched import messages
from agentlab_sched.errors import SchedError
from agentlab_sched.worker import internals
from agentlab_sched.worker.batch import BatchWorker
from agentlab_sched.worker.middleware import install
from agentlab_sched.worker.process import connector_for, run_worker

WORKER_PACKAGE = Path(internals.__file__).parent


def test_the_installed_procrastinate_has_every_private_name_we_use() -> None:
    assert internals.problems() == []
    assert procrastinate.__version__ in internals.CHECKED_AGAINST


def test_a_reshaped_method_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    async def reshaped(self: Any, job: Any, status: Any, context: Any) -> None: ...

    monkeypatch.setattr(procrastinate_worker.Worker, "_persist_job_status", reshaped)
    assert internals.problems() == [
        "procrastinate.worker.Worker._persist_job_status takes (job, status, context), not (job, status, "
        "retry_decision, context, job_result) (batch.BatchWorker overrides it: a job's end is written in a "
        "batch, with its run's result)"
    ]


def test_a_missing_attribute_and_a_method_that_is_gone_are_named(monkeypatch: pytest.MonkeyPatch) -> None:
    original = procrastinate_worker.Worker.__init__

    def without_running_jobs(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        del self._running_jobs

    monkeypatch.setattr(procrastinate_worker.Worker, "__init__", without_running_jobs)
    monkeypatch.delattr(procrastinate_worker.Worker, "_handle_notification")
    found = internals.problems()
    assert [line.split(" (")[0] for line in found] == [
        "procrastinate.worker.Worker._handle_notification is gone",
        "procrastinate.worker.Worker._running_jobs is gone",
    ]


def test_an_override_nobody_calls_any_more_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    async def run_loop(self: Any) -> None:
        await self._fetch_jobs_some_other_way()

    monkeypatch.setattr(procrastinate_worker.Worker, "_run_loop", run_loop)
    assert internals.problems() == [
        "procrastinate.worker.Worker._fetch_and_process_jobs is no longer called by _run_loop: our override "
        "would never run"
    ]


def test_changed_sql_words_are_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(internals, "SQL_WORDS", (("sql/schema.sql", "Job was not found in this release"),))
    assert internals.problems() == [
        "procrastinate/sql/schema.sql no longer raises 'Job was not found in this release' (worker/jobs.py "
        "recognises it)"
    ]


def _procrastinate_privates() -> set[str]:
    names: set[str] = set()
    for owner in (procrastinate_worker.Worker, procrastinate.PsycopgConnector, procrastinate.manager.JobManager):
        names |= {n for n in dir(owner) if n.startswith("_") and not n.startswith("__")}
        try:
            instance = internals._instance(owner)
        except AssertionError:
            continue
        names |= {n for n in vars(instance) if n.startswith("_") and not n.startswith("__")}
    return names


def test_every_private_name_of_procrastinate_the_worker_uses_is_listed() -> None:
    """In worker/: any `self._x` or `super()._x` in a subclass of Procrastinate's, and any `obj._x` or
    `getattr(obj, "_x")` elsewhere, that is a private name of Procrastinate's worker, connector or job
    manager must be in internals.PRIVATE."""
    theirs = _procrastinate_privates()
    listed = {p.name for p in internals.PRIVATE}
    unlisted = []
    for path in sorted(WORKER_PACKAGE.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        subclasses = [
            node
            for node in ast.walk(tree)
            if isinstance(node, ast.ClassDef)
            and any(ast.unparse(base).endswith(("Worker", "JobManager")) for base in node.bases)
        ]
        inside = {id(n) for cls in subclasses for n in ast.walk(cls)}
        for node in ast.walk(tree):
            name: str | None = None
            if isinstance(node, ast.Attribute):
                on_self = isinstance(node.value, ast.Name) and node.value.id == "self"
                on_super = isinstance(node.value, ast.Call) and ast.unparse(node.value.func) == "super"
                if (on_self or on_super) and id(node) not in inside:
                    continue  # a class of ours: its own private names
                name = node.attr
            elif isinstance(node, ast.Call) and ast.unparse(node.func) == "getattr" and len(node.args) >= 2:
                if isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str):
                    name = node.args[1].value
            if isinstance(node, ast.expr) and name in theirs and name not in listed:
                unlisted.append(f"{path.name}:{node.lineno} uses {name}")
    assert not unlisted, "private names of Procrastinate not in worker/internals.py PRIVATE:\n" + "\n".join(unlisted)


async def test_the_worker_refuses_to_start_on_a_procrastinate_that_changed(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delattr(procrastinate_worker.Worker, "_log_extra")
    app = procrastinate.App(connector=connector_for(db_url))
    with pytest.raises(SchedError) as refused:
        await run_worker(app, db_url, stop=asyncio.Event(), install_signal_handlers=False)
    assert refused.value.code == "worker.procrastinate_changed"
    assert refused.value.message("en").startswith(
        f"this Procrastinate ({procrastinate.__version__}) changed what agentlab-sched worker relies on: "
        "procrastinate.worker.Worker._log_extra is gone (batch.BatchWorker logs a job's end"
    )
    assert "请安装经过验证的 Procrastinate 版本" in refused.value.message("zh-CN")
    assert messages.render("worker.procrastinate_changed", "en", version="x", problems="y", checked="z")


async def test_side_tasks_and_shutdown_reshaped_upstream_do_not_stop_the_batch_worker(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Procrastinate whose worker starts its side tasks as a tuple and shuts down with
    (heartbeat_task, side_tasks) -- a change proposed upstream -- still runs the batch worker's jobs."""
    start, shutdown = procrastinate_worker.Worker._start_side_tasks, procrastinate_worker.Worker._shutdown

    def start_side_tasks(self: Any) -> tuple[Any, list[Any]]:
        tasks = start(self)
        return tasks[0], tasks[1:]

    async def reshaped_shutdown(self: Any, heartbeat_task: Any, side_tasks: list[Any]) -> None:
        await shutdown(self, [heartbeat_task, *side_tasks])

    async def run_loop(self: Any) -> None:  # the upstream loop, in short
        self._running_jobs = {}
        heartbeat, side_tasks = self._start_side_tasks()
        try:
            await self._fetch_and_process_jobs()
            while self.wait and not self._stop_event.is_set():
                await asyncio.wait_for(self._new_job_event.wait(), self.fetch_job_polling_interval)
                await self._fetch_and_process_jobs()
        finally:
            await self._shutdown(heartbeat, side_tasks)

    monkeypatch.setattr(procrastinate_worker.Worker, "_start_side_tasks", start_side_tasks)
    monkeypatch.setattr(procrastinate_worker.Worker, "_shutdown", reshaped_shutdown)
    monkeypatch.setattr(procrastinate_worker.Worker, "_run_loop", run_loop)
    assert internals.problems() == []

    app = procrastinate.App(connector=connector_for(db_url))
    ran: list[int] = []

    @app.task(name="internals.echo")
    async def echo(n: int) -> int:
        ran.append(n)
        return n

    install(app)
    async with app.open_async():
        for n in range(3):
            await echo.defer_async(n=n)
        worker = BatchWorker(app, listen_url=db_url, concurrency=2, wait=False)
        await asyncio.wait_for(worker.run(), timeout=20)
    assert sorted(ran) == [0, 1, 2]
    with psycopg.connect(db_url) as check:
        statuses = check.execute("SELECT status FROM procrastinate_jobs ORDER BY id").fetchall()
    assert statuses == [("succeeded",), ("succeeded",), ("succeeded",)]
