"""A notification gives the run's error in the dispatcher's own locale: the system's error (a term) is
rendered when the row is claimed, whatever the locale of the worker that wrote it; a task's own words are
sent as written."""

from __future__ import annotations

import psycopg
from psycopg.rows import DictRow
from psycopg.types.json import Jsonb

from agentlab_sched.database import queries
from agentlab_sched.notify import set_webhook
from agentlab_sched.notify.dispatcher import event_info
from tests.support.notify_fakes import FEISHU_URL, add_run, add_schedule, outbox, set_status, settings

UNKNOWN = {
    "en": "the worker that took this job does not know the task demo.echo (it is not in that worker's app); run "
    "it on workers whose app includes the task",
    "zh-CN": "接手这个作业的 worker 不认识任务 demo.echo(它的 app 里没有这个任务);请让包含该任务的 worker 来执行",
}


async def _claimed_error(conn: psycopg.AsyncConnection[DictRow], locale: str) -> str | None:
    await conn.execute("SELECT set_config('agentlab_sched.locale', %s, false)", (locale,))
    async with conn.transaction(force_rollback=True):
        [due] = await outbox(conn)
        row = await queries.one(conn, "claim_outbox", {"now": due["next_attempt_at"]})
        assert row is not None
        return event_info(row).error


async def test_the_error_of_a_notification_reads_in_the_dispatchers_locale(
    conn: psycopg.AsyncConnection[DictRow],
) -> None:
    sid = await add_schedule(conn, "daily-report")
    await set_webhook(conn, "daily-report", url=FEISHU_URL, settings=settings())
    run = await add_run(conn, sid)
    term = {"msg": "run.task_unknown", "params": {"task": "demo.echo"}}
    await set_status(conn, run, "failed", error=UNKNOWN["zh-CN"], error_code="run.task_unknown", error_term=Jsonb(term))
    assert await _claimed_error(conn, "en") == UNKNOWN["en"]
    assert await _claimed_error(conn, "zh-CN") == UNKNOWN["zh-CN"]


async def test_a_tasks_own_words_are_notified_as_written(conn: psycopg.AsyncConnection[DictRow]) -> None:
    sid = await add_schedule(conn, "daily-report")
    await set_webhook(conn, "daily-report", url=FEISHU_URL, settings=settings())
    run = await add_run(conn, sid)
    await set_status(conn, run, "failed", error="磁盘已满", error_code="run.task_failed")
    assert await _claimed_error(conn, "en") == "磁盘已满"
