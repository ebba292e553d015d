"""`import procrastinate --app` on an app that includes the scheduler's blueprint (the README's set-up)
imports the app's own periodic tasks, never the scheduler's tick and housekeeping, however often it runs."""

from __future__ import annotations

import procrastinate

import agentlab_sched
from agentlab_sched.imports.periodic import import_periodic
from tests.support.rows import Conn


def host_app(db_url: str) -> procrastinate.App:
    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=db_url))
    app.add_tasks_from(agentlab_sched.blueprint, namespace="agentlab_sched")

    @app.periodic(cron="0 9 * * 1")
    @app.task(name="reports.weekly")
    def weekly(timestamp: int) -> None:
        """A report every Monday."""

    return app


async def test_the_scheduler_own_periodic_tasks_are_never_imported(db_url: str, conn: Conn) -> None:
    app = host_app(db_url)
    assert {p.task.name for p in app.periodic_registry.periodic_tasks.values()} >= {
        "agentlab_sched:tick",
        "agentlab_sched:housekeeping",
    }
    for _ in range(2):  # importing again creates nothing of them either
        report = await import_periodic(conn, app, locale="en")
        assert [i.task for i in report.imported] == ["reports.weekly"]
        assert report.refused == []
    cur = await conn.execute("SELECT name FROM agentlab_sched.schedules ORDER BY name")
    assert [r["name"] for r in await cur.fetchall()] == ["reports.weekly"]
