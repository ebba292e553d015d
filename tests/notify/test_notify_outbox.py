"""The outbox trigger: one row per (run, event, segment), written with the status change that causes it."""

from __future__ import annotations

from datetime import timedelta

import psycopg
import pytest
from psycopg.rows import DictRow

from agentlab_sched import database as db
from agentlab_sched.errors import ValidationError, from_database
from agentlab_sched.notify import CHANNEL, set_webhook
from tests.support.notify_fakes import FEISHU_URL, add_run, add_schedule, outbox, set_status, settings
from tests.support.rows import fetched


async def subscribed(
    conn: psycopg.AsyncConnection[DictRow], name: str = "daily-report", events: list[str] | None = None
) -> int:
    sid = await add_schedule(conn, name)
    await set_webhook(conn, name, url=FEISHU_URL, settings=settings(), events=events)
    return sid


async def test_finished_run_writes_one_row_with_a_snapshot(conn: psycopg.AsyncConnection[DictRow]) -> None:
    sid = await subscribed(conn)
    run = await add_run(conn, sid)
    assert await outbox(conn) == []
    await set_status(conn, run, "succeeded")
    [row] = await outbox(conn)
    assert (row["run_id"], row["event"], row["segment"], row["status"], row["attempts"]) == (
        run,
        "finished",
        1,
        "pending",
        0,
    )
    assert row["payload"]["status"] == "succeeded" and row["payload"]["error"] is None


async def test_status_set_twice_is_notified_once(conn: psycopg.AsyncConnection[DictRow]) -> None:
    sid = await subscribed(conn)
    run = await add_run(conn, sid)
    await set_status(conn, run, "failed", error="boom")
    await set_status(conn, run, "failed", error="boom again")
    await set_status(conn, run, "running")
    await set_status(conn, run, "failed", error="third time")
    rows = await outbox(conn)
    assert [(r["event"], r["payload"]["error"]) for r in rows] == [("failed", "boom")]


async def test_suspended_then_abandoned_is_one_failed_row(conn: psycopg.AsyncConnection[DictRow]) -> None:
    sid = await subscribed(conn)
    run = await add_run(conn, sid)
    await set_status(conn, run, "suspended")
    await set_status(conn, run, "queued")  # resumed
    await set_status(conn, run, "suspended")  # and suspended again
    await set_status(conn, run, "failed", error="abandoned")
    rows = await outbox(conn)
    assert [(r["event"], r["payload"]["status"]) for r in rows] == [("failed", "suspended")]


async def test_timed_out_is_a_failure_never_finished(conn: psycopg.AsyncConnection[DictRow]) -> None:
    sid = await subscribed(conn)
    run = await add_run(conn, sid)
    await set_status(conn, run, "timed_out")
    await set_status(conn, run, "succeeded")  # a late success of an aborted task changes nothing
    rows = await outbox(conn)
    assert [(r["event"], r["payload"]["status"]) for r in rows] == [("failed", "timed_out")]


async def test_awaiting_approval_once_per_segment(conn: psycopg.AsyncConnection[DictRow]) -> None:
    sid = await subscribed(conn, events=["finished", "failed", "awaiting_approval"])
    run = await add_run(conn, sid)
    await set_status(conn, run, "awaiting_approval")
    await set_status(conn, run, "running")
    await set_status(conn, run, "awaiting_approval")  # same segment: once
    await set_status(conn, run, "running", segment=2)
    await set_status(conn, run, "awaiting_approval")
    await set_status(conn, run, "succeeded")
    rows = await outbox(conn)
    assert [(r["event"], r["segment"]) for r in rows] == [
        ("awaiting_approval", 1),
        ("awaiting_approval", 2),
        ("finished", 2),
    ]


async def test_only_subscribed_events_of_schedules_with_a_webhook(conn: psycopg.AsyncConnection[DictRow]) -> None:
    plain = await add_schedule(conn, "no-webhook")
    only_failed = await subscribed(conn, "only-failed", events=["failed"])
    for sid in (plain, only_failed):
        a = await add_run(conn, sid)
        await set_status(conn, a, "succeeded")
        await set_status(conn, await add_run(conn, sid, kind="manual"), "awaiting_approval")
    b = await add_run(conn, only_failed, kind="backfill")
    await set_status(conn, b, "cancelled")  # cancelled by a person: never notified
    c = await add_run(conn, only_failed, kind="misfire")
    await set_status(conn, c, "failed")
    assert [(r["run_id"], r["event"]) for r in await outbox(conn)] == [(c, "failed")]


async def test_a_run_inserted_finished_is_notified(conn: psycopg.AsyncConnection[DictRow]) -> None:
    sid = await subscribed(conn)
    run = await add_run(conn, sid, status="failed")
    assert [r["run_id"] for r in await outbox(conn)] == [run]


async def test_row_and_status_change_commit_or_roll_back_together(db_url: str) -> None:
    async with await db.connect(db_url, locale="en") as conn:
        sid = await subscribed(conn)
        run = await add_run(conn, sid)
        with pytest.raises(RuntimeError):
            async with conn.transaction():
                await set_status(conn, run, "succeeded")
                assert len(await outbox(conn)) == 1
                raise RuntimeError("the engine's transaction fails after the change")
        assert await outbox(conn) == []
        cur = await conn.execute("SELECT status FROM agentlab_sched.runs WHERE id = %s", (run,))
        assert fetched(await cur.fetchone())["status"] == "running"


async def test_a_new_row_notifies_the_dispatcher_channel(db_url: str) -> None:
    async with await db.connect(db_url) as listener, await db.connect(db_url, locale="en") as conn:
        await listener.execute(f"LISTEN {CHANNEL}")
        sid = await subscribed(conn)
        run = await add_run(conn, sid)
        await set_status(conn, run, "succeeded")
        got = [n async for n in listener.notifies(timeout=5, stop_after=1)]
        assert [(n.channel, n.payload) for n in got] == [(CHANNEL, str(sid))]


@pytest.mark.parametrize("column", ["webhook_url_enc", "webhook_secret_enc"])
async def test_sql_refuses_plaintext_webhook_urls_and_secrets(
    conn: psycopg.AsyncConnection[DictRow], column: str
) -> None:
    await add_schedule(conn)
    with pytest.raises(psycopg.Error) as caught:
        await conn.execute(
            f"UPDATE agentlab_sched.schedules SET {column} = %s WHERE name = 'daily-report'", (FEISHU_URL,)
        )
    message = str(caught.value)
    assert "encrypted" in message and "--webhook-url" in message
    assert FEISHU_URL not in message  # the plaintext is not echoed
    err = from_database(caught.value)
    assert isinstance(err, ValidationError) and err.field in ("webhook_url", "webhook_secret")
    assert "加密" in err.message("zh-CN")


async def test_runs_launched_by_the_engine_notify_when_their_job_ends(conn: psycopg.AsyncConnection[DictRow]) -> None:
    """The whole path: a tick launches the run; its Procrastinate job's status (as a worker or the
    procrastinate CLI sets it) moves the run; the outbox row arrives with that change and is delivered."""
    from agentlab_sched.firing.tick import fire_due
    from agentlab_sched.notify import deliver_due
    from tests.support.firing_helpers import EN, NINE, make_schedule, runs_of, set_job_status
    from tests.support.notify_fakes import WECOM_URL, FakePlatforms

    sid = await make_schedule(conn, "store-report")
    await set_webhook(conn, "store-report", url=WECOM_URL, settings=settings())
    await fire_due(conn, NINE + timedelta(seconds=10), settings=EN)
    [run] = await runs_of(conn, sid)
    await set_job_status(conn, run["job_id"], "doing")
    assert await outbox(conn) == []
    await set_job_status(conn, run["job_id"], "failed")
    [row] = await outbox(conn)
    assert (row["run_id"], row["event"], row["payload"]["status"]) == (str(run["id"]), "failed", "failed")
    fake = FakePlatforms()
    fake.add(WECOM_URL)
    cur = await conn.execute("SELECT clock_timestamp() AS now")
    now = fetched(await cur.fetchone())["now"]
    assert (await deliver_due(conn, settings(), sender=fake.sender(), now=now))["sent"] == 1
    content = fake.seen[0].json["markdown"]["content"]
    assert content.startswith(f"**store-report: run #{str(run['id'])[:6]} failed**\n")
    assert "Due at 2026-10-05 09:00 (Asia/Shanghai)." in content
