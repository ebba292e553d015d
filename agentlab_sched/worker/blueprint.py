"""The scheduler as a Procrastinate blueprint: include it in any app and plain workers fire schedules.

    app.add_tasks_from(agentlab_sched.blueprint, namespace="agentlab_sched")

The tick runs every second as a periodic task (with a queueing lock, so ticks never pile up); it
claims what is due and fires it (`tick.fire_due`), using the database clock. `agentlab-sched worker`
adds a precise loop beside it so that fires start on time rather than up to a tick late.

Procrastinate renames a blueprint's tasks and binds them to the app that includes it, so one blueprint
object can serve one app only: every read of ``agentlab_sched.blueprint`` (and of this module's
``blueprint``) is a new one, made by `make_blueprint`. Both tasks run on the queue
``AGENTLAB_SCHED_SCHEDULER_QUEUE`` (``default`` unless set): a worker must take that queue for the
periodic tick and housekeeping to run.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import procrastinate
import psycopg

from agentlab_sched.database.connections import scheduler_connection
from agentlab_sched.firing import tick as tick_module
from agentlab_sched.runs import housekeeping
from agentlab_sched.schedules import code
from agentlab_sched.settings import Settings
from agentlab_sched.tasks import sql as sql_task

logger = logging.getLogger(__name__)

#: Seconds between two registrations of a worker's task names (a fire for a task that no live worker
#: registered within 10 minutes is refused).
REGISTER_EVERY = 60.0
_registered_at: dict[int, float] = {}


async def register_app_tasks(
    app: procrastinate.App, conn: psycopg.AsyncConnection[Any], *, force: bool = False
) -> None:
    """Record the app's task names as runnable by a live worker (throttled to once a minute); the first
    time in this process, sync the schedules its code declares (``agentlab_sched.schedule``)."""
    now = time.monotonic()
    if not force and now - _registered_at.get(id(app), -REGISTER_EVERY) < REGISTER_EVERY:
        return
    await tick_module.register_tasks(conn, list(app.tasks))
    _registered_at[id(app)] = now
    await code.sync_once(conn, app)


async def run_tick(app: procrastinate.App, settings: Settings | None = None) -> tick_module.TickReport | None:
    """One tick on the app's pool: register tasks, fire what is due. None when firing is off."""
    settings = settings or Settings.from_env()
    if not settings.scheduler:
        return None
    async with scheduler_connection(app, settings) as conn:
        await register_app_tasks(app, conn)
        return await tick_module.fire_due(conn, settings=settings)


async def tick(context: procrastinate.JobContext, timestamp: int) -> dict[str, Any] | None:
    """Fire every schedule that is due (the database clock decides, not ``timestamp``)."""
    report = await run_tick(context.app)
    if report is None:
        return None
    return {"claimed": report.claimed, "fires": report.fires}


#: Every second (Procrastinate's cron: five fields, then seconds).
TICK_CRON = "* * * * * *"


def make_blueprint(queue: str | None = None) -> procrastinate.Blueprint:
    """A new blueprint with the scheduler's tasks, on ``queue`` (the ``AGENTLAB_SCHED_SCHEDULER_QUEUE``
    setting by default). Procrastinate renames a blueprint's tasks when an app includes it, so each app
    needs its own."""
    queue = queue or Settings.from_env().scheduler_queue
    bp = procrastinate.Blueprint()
    task = bp.task(name="tick", queue=queue, queueing_lock="agentlab_sched:tick", pass_context=True)(tick)
    bp.periodic(cron=TICK_CRON, periodic_id="tick")(task)
    housekeeping.register(bp, queue)
    sql_task.register(bp)
    return bp
