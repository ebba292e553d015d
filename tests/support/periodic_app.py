"""A Procrastinate app with periodic tasks, for
`agentlab-sched import procrastinate --app tests.support.periodic_app.app`."""

from __future__ import annotations

import procrastinate
from procrastinate.testing import InMemoryConnector

app = procrastinate.App(connector=InMemoryConnector())


@app.periodic(cron="0 9 * * 1")
@app.task(name="reports.weekly", queue="reports")
def weekly(timestamp: int) -> int:
    return timestamp


@app.periodic(cron="*/5 * * * * 30", periodic_id="fast")
@app.task(name="sync.fast", queueing_lock="sync")
def fast(timestamp: int) -> int:
    return timestamp


@app.periodic(cron="0 0 */2 * MON")  # croniter: odd days OR Mondays
@app.task(name="odd.or.monday", lock="odd")
def odd_or_monday(timestamp: int) -> int:
    return timestamp


@app.periodic(cron="0 18 * * L5", task_kwargs={"kind": "month-end"})
@app.task(name="last.friday", priority=5)
def last_friday(timestamp: int, kind: str) -> str:
    return kind


@app.periodic(cron="*/90 * * * *")  # croniter reads */90 as 0
@app.task(name="bad.step")
def bad_step(timestamp: int) -> int:
    return timestamp
