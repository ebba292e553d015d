"""The dispatcher: delivery, retries with backoff, no retry of configuration errors, per-bot rate limits
across workers, judging by host, and stopping within the grace while a receiver hangs."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta

import httpx
import psycopg
from psycopg.rows import DictRow

from agentlab_sched import database as db
from agentlab_sched.notify import Dispatcher, SecretBox, Sender, deliver_due, set_webhook
from agentlab_sched.notify.dispatcher import MAX_ATTEMPTS, Outbox
from tests.support.notify_fakes import (
    DINGTALK_SECRET,
    DINGTALK_URL,
    FEISHU_BAD_TOKEN,
    FEISHU_LIMITED,
    FEISHU_SECRET,
    FEISHU_URL,
    KEY,
    T0,
    WECOM_URL,
    FakePlatforms,
    LocalReceiver,
    add_run,
    add_schedule,
    deliveries,
    fake_dns,
    outbox,
    receiver,
    set_status,
    settings,
)
from tests.support.rows import fetched

__all__ = ["receiver"]  # the fixture


async def db_now(conn: psycopg.AsyncConnection[DictRow]) -> datetime:
    cur = await conn.execute("SELECT clock_timestamp() AS now")
    row = await cur.fetchone()
    assert row is not None
    return row["now"] + timedelta(seconds=1)


async def finished_runs(
    conn: psycopg.AsyncConnection[DictRow], name: str, count: int = 1, kind: str = "scheduled"
) -> list[str]:
    sid_cur = await conn.execute("SELECT id FROM agentlab_sched.schedules WHERE name = %s", (name,))
    sid = fetched(await sid_cur.fetchone())["id"]
    runs = []
    for i in range(count):
        run = await add_run(conn, sid, kind=kind, fire_at=T0 + timedelta(days=i))
        await set_status(conn, run, "succeeded", finished_at=T0 + timedelta(days=i, minutes=3))
        runs.append(run)
    return runs


async def webhook(
    conn: psycopg.AsyncConnection[DictRow], name: str, url: str, secret: str | None = None, **kw: object
) -> None:
    await add_schedule(conn, name)
    await set_webhook(conn, name, url=url, secret=secret, settings=settings(**kw))


async def test_each_platform_gets_its_body_and_every_attempt_is_recorded(
    conn: psycopg.AsyncConnection[DictRow],
) -> None:
    now = await db_now(conn)
    fake = FakePlatforms(now=now)
    fake.add(FEISHU_URL, FEISHU_SECRET)
    fake.add(DINGTALK_URL, DINGTALK_SECRET)
    fake.add(WECOM_URL)
    await webhook(conn, "feishu-report", FEISHU_URL, FEISHU_SECRET)
    await webhook(conn, "dingtalk-report", DINGTALK_URL, DINGTALK_SECRET)
    await webhook(conn, "wecom-report", WECOM_URL)
    for name in ("feishu-report", "dingtalk-report", "wecom-report"):
        await finished_runs(conn, name)
    counts = await deliver_due(conn, settings(public_url="https://sched.example.com"), sender=fake.sender(), now=now)
    assert counts == {"sent": 3, "retry": 0, "failed": 0}
    assert [s.host for s in fake.seen] == ["open.feishu.cn", "oapi.dingtalk.com", "qyapi.weixin.qq.com"]
    card = fake.seen[0].json["card"]
    assert card["header"]["title"]["content"].startswith("feishu-report: run #")
    assert card["header"]["template"] == "green"
    assert "[Open the run](https://sched.example.com/runs/" in card["elements"][0]["text"]["content"]
    rows = await outbox(conn)
    assert [(r["status"], r["attempts"], r["last_error"]) for r in rows] == [("sent", 1, None)] * 3
    assert [
        (d["outcome"], d["http_status"], d["platform_code"], d["platform_text"]) for d in await deliveries(conn)
    ] == [
        ("sent", 200, "0", "success"),
        ("sent", 200, "0", "ok"),
        ("sent", 200, "0", "ok"),
    ]
    assert await deliver_due(conn, settings(), sender=fake.sender(), now=now + timedelta(hours=1)) == {
        "sent": 0,
        "retry": 0,
        "failed": 0,
    }  # sent once


async def test_429_and_5xx_and_platform_throttling_are_retried_with_backoff(
    conn: psycopg.AsyncConnection[DictRow],
) -> None:
    now = await db_now(conn)
    fake = FakePlatforms(now=now)
    fake.add(FEISHU_URL, FEISHU_SECRET)
    fake.then(
        "open.feishu.cn",
        httpx.Response(429, headers={"Retry-After": "3"}),
        httpx.Response(503, text="upstream unavailable"),
        httpx.Response(200, json=FEISHU_LIMITED),
    )
    await webhook(conn, "daily-report", FEISHU_URL, FEISHU_SECRET)
    await finished_runs(conn, "daily-report")
    sender = fake.sender()
    s = settings()
    assert (await deliver_due(conn, s, sender=sender, now=now))["retry"] == 1
    [row] = await outbox(conn)
    assert (row["status"], row["attempts"], row["next_attempt_at"]) == ("pending", 1, now + timedelta(seconds=10))
    assert (
        row["last_error"] == "the receiver answered HTTP 429, a temporary failure (attempt 1; next try in 10 seconds)"
    )
    assert (await deliver_due(conn, s, sender=sender, now=now + timedelta(seconds=9)))["retry"] == 0  # not yet due
    assert (await deliver_due(conn, s, sender=sender, now=now + timedelta(seconds=10)))["retry"] == 1
    [row] = await outbox(conn)
    assert row["next_attempt_at"] == now + timedelta(seconds=30)  # 10 s, then 20 s
    assert (await deliver_due(conn, s, sender=sender, now=now + timedelta(seconds=30)))["retry"] == 1
    [row] = await outbox(conn)
    assert row["next_attempt_at"] == now + timedelta(seconds=70)
    assert "code 11232" in row["last_error"]
    fake.now = now + timedelta(seconds=70)
    assert (await deliver_due(conn, s, sender=sender, now=now + timedelta(seconds=70)))["sent"] == 1
    assert [(d["outcome"], d["http_status"], d["platform_code"]) for d in await deliveries(conn)] == [
        ("retry", 429, None),
        ("retry", 503, None),
        ("retry", 200, "11232"),
        ("sent", 200, "0"),
    ]
    [row] = await outbox(conn)
    assert (row["status"], row["attempts"]) == ("sent", 4)


async def test_configuration_errors_are_not_retried(conn: psycopg.AsyncConnection[DictRow]) -> None:
    now = await db_now(conn)
    fake = FakePlatforms(now=now)
    fake.add(DINGTALK_URL, DINGTALK_SECRET)
    await webhook(conn, "daily-report", DINGTALK_URL, "SEC-a-secret-from-another-bot")
    await finished_runs(conn, "daily-report")
    assert (await deliver_due(conn, settings(), sender=fake.sender(), now=now))["failed"] == 1
    [row] = await outbox(conn)
    assert (row["status"], row["attempts"]) == ("failed", 1)
    assert row["last_error"].startswith("DingTalk refused the message (HTTP 200, code 310000: sign not match")
    [attempt] = await deliveries(conn)
    assert (attempt["outcome"], attempt["http_status"], attempt["platform_code"]) == ("failed", 200, "310000")
    assert attempt["platform_text"].startswith("sign not match")
    assert await deliver_due(conn, settings(), sender=fake.sender(), now=now + timedelta(days=1)) == {
        "sent": 0,
        "retry": 0,
        "failed": 0,
    }
    assert len(fake.seen) == 1


async def test_retryable_failures_give_up_after_max_attempts(conn: psycopg.AsyncConnection[DictRow]) -> None:
    now = await db_now(conn)
    fake = FakePlatforms(now=now)
    fake.then("hooks.example.com", *[httpx.Response(502) for _ in range(MAX_ATTEMPTS)])
    await webhook(conn, "daily-report", "https://hooks.example.com/agentlab")
    await finished_runs(conn, "daily-report")
    for hour in range(MAX_ATTEMPTS):
        await deliver_due(conn, settings(), sender=fake.sender(), now=now + timedelta(hours=hour))
    [row] = await outbox(conn)
    assert (row["status"], row["attempts"]) == ("failed", MAX_ATTEMPTS)
    assert row["last_error"] == (
        f"gave up after {MAX_ATTEMPTS} attempts; the last: the receiver answered HTTP 502, a temporary failure"
    )
    assert len(fake.seen) == MAX_ATTEMPTS


async def test_a_platform_host_saved_with_the_wrong_format_is_judged_by_its_host(
    conn: psycopg.AsyncConnection[DictRow],
) -> None:
    """An old row (written before validation, or by hand) with a Feishu URL and format generic: Feishu's
    refusal arrives with HTTP 200, and is still a failure."""
    now = await db_now(conn)
    fake = FakePlatforms(now=now)  # no bot registered: the token is invalid
    sid = await add_schedule(conn)
    await conn.execute(
        "UPDATE agentlab_sched.schedules SET webhook_format = 'generic', webhook_url_enc = %s",
        (SecretBox([KEY]).seal(FEISHU_URL, schedule_id=sid, field="webhook_url"),),
    )
    await finished_runs(conn, "daily-report")
    assert (await deliver_due(conn, settings(), sender=fake.sender(), now=now))["failed"] == 1
    assert fake.seen[0].json["msg_type"] == "interactive"  # the host's body, too
    [attempt] = await deliveries(conn)
    assert (attempt["outcome"], attempt["platform_code"], attempt["platform_text"]) == (
        "failed",
        "19001",
        FEISHU_BAD_TOKEN["msg"],
    )


async def test_a_host_resolving_to_a_private_address_is_refused_at_send_time(
    conn: psycopg.AsyncConnection[DictRow],
) -> None:
    now = await db_now(conn)
    fake = FakePlatforms(now=now)
    await webhook(conn, "daily-report", "https://intranet.example.com/hook")  # a public-looking name
    await finished_runs(conn, "daily-report")
    assert (await deliver_due(conn, settings(), sender=fake.sender(), now=now))["failed"] == 1
    assert fake.seen == []  # never sent
    [row] = await outbox(conn)
    assert "intranet.example.com is a private network address (10.1.2.3)" in row["last_error"]


async def test_rate_limits_hold_across_workers(db_url: str, conn: psycopg.AsyncConnection[DictRow]) -> None:
    now = await db_now(conn)
    fake = FakePlatforms(now=now)
    fake.add(DINGTALK_URL)
    await webhook(conn, "daily-report", DINGTALK_URL)
    await finished_runs(conn, "daily-report", 25)
    s = settings()

    async def worker() -> dict[str, int]:
        async with await db.connect(db_url, locale="en") as own:
            return await deliver_due(own, s, sender=fake.sender(), now=now)

    first, second = await asyncio.gather(worker(), worker())
    assert first["sent"] + second["sent"] == 20  # DingTalk: 20 a minute per bot
    assert first["sent"] > 0 and second["sent"] > 0
    waiting = [r for r in await outbox(conn) if r["status"] == "pending"]
    assert len(waiting) == 5 and {r["attempts"] for r in waiting} == {0}  # postponed, not failed attempts
    assert {r["next_attempt_at"] for r in waiting} == {now + timedelta(minutes=1)}
    assert (await deliver_due(conn, s, sender=fake.sender(), now=now + timedelta(seconds=59)))["sent"] == 0
    assert (await deliver_due(conn, s, sender=fake.sender(), now=now + timedelta(minutes=1)))["sent"] == 5
    assert len(fake.seen) == 25


async def test_feishu_five_a_second(conn: psycopg.AsyncConnection[DictRow]) -> None:
    now = await db_now(conn)
    fake = FakePlatforms(now=now)
    fake.add(FEISHU_URL)
    await webhook(conn, "daily-report", FEISHU_URL)
    await finished_runs(conn, "daily-report", 7)
    assert (await deliver_due(conn, settings(), sender=fake.sender(), now=now))["sent"] == 5
    assert (await deliver_due(conn, settings(), sender=fake.sender(), now=now + timedelta(seconds=1)))["sent"] == 2


async def test_unsubscribed_or_removed_webhooks_drop_their_rows(conn: psycopg.AsyncConnection[DictRow]) -> None:
    now = await db_now(conn)
    fake = FakePlatforms(now=now)
    await webhook(conn, "daily-report", FEISHU_URL)
    await webhook(conn, "weekly-report", WECOM_URL)
    await finished_runs(conn, "daily-report")
    await finished_runs(conn, "weekly-report")
    await set_webhook(conn, "daily-report", events=["failed"], settings=settings())
    await set_webhook(conn, "weekly-report", url=None, settings=settings())
    await deliver_due(conn, settings(), sender=fake.sender(), now=now)
    assert fake.seen == []
    assert [(r["status"], r["last_error"]) for r in await outbox(conn)] == [
        ("dropped", "not sent: the schedule no longer subscribes to finished"),
        ("dropped", "not sent: the schedule no longer has a webhook"),
    ]


async def test_a_lease_left_by_a_dead_worker_is_retried_after_it_ends(conn: psycopg.AsyncConnection[DictRow]) -> None:
    now = await db_now(conn)
    fake = FakePlatforms(now=now)
    fake.add(WECOM_URL)
    await webhook(conn, "daily-report", WECOM_URL)
    await finished_runs(conn, "daily-report")
    sender = fake.sender(timeout=5)
    claim = await Outbox(conn, settings(), sender).claim(now)  # ... and the worker dies here
    assert claim is not None
    assert (await deliver_due(conn, settings(), sender=sender, now=now + timedelta(seconds=20)))["sent"] == 0
    assert (await deliver_due(conn, settings(), sender=sender, now=now + timedelta(seconds=25)))["sent"] == 1


async def test_generic_payload_to_a_real_local_server(
    conn: psycopg.AsyncConnection[DictRow], receiver: LocalReceiver
) -> None:
    now = await db_now(conn)
    allow = settings(webhook_allow_private=True, locale="zh-CN")
    await add_schedule(conn)
    await set_webhook(conn, "daily-report", url=receiver.url, secret="s3cret", settings=allow)
    [run] = await finished_runs(conn, "daily-report", kind="manual")
    assert (await deliver_due(conn, allow, sender=Sender(resolver=fake_dns), now=now))["sent"] == 1
    [seen] = receiver.requests
    payload = seen.json
    assert set(payload) == {
        "event", "schedule", "run_id", "status", "segment", "kind", "fire_at", "started_at", "finished_at",
        "error", "title", "text", "idempotency_key",
    }  # fmt: skip
    assert (payload["event"], payload["schedule"], payload["run_id"], payload["status"], payload["kind"]) == (
        "finished",
        "daily-report",
        run,
        "succeeded",
        "manual",
    )
    assert payload["title"] == f"daily-report:运行 #{run[:6]} 已完成"
    assert "手动触发" in payload["text"]
    assert seen.headers["idempotency-key"] == f"agentlab-sched:{run}:finished:1"
    assert seen.headers["x-agentlab-signature"].startswith(f"t={int(now.timestamp())},v1=")


def notify_tasks() -> list[asyncio.Task]:
    return [t for t in asyncio.all_tasks() if t.get_name().startswith("agentlab-sched-notify") and not t.done()]


async def wait_until(predicate: Callable[[], Awaitable[bool]]) -> None:
    """A bounded wait (5 s at most) on a condition another task brings about."""
    for _ in range(250):
        if await predicate():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("the condition did not come about within 5 s")


async def test_stop_while_the_receiver_hangs_returns_within_the_grace_leaving_the_row_pending(
    db_url: str, conn: psycopg.AsyncConnection[DictRow], receiver: LocalReceiver
) -> None:
    receiver.hang = True
    allow = settings(webhook_allow_private=True)
    await add_schedule(conn)
    await set_webhook(conn, "daily-report", url=receiver.url, settings=allow)
    dispatcher = Dispatcher(db_url, allow, sender=Sender(timeout=10, resolver=fake_dns))
    await dispatcher.start()
    try:
        await finished_runs(conn, "daily-report")
        assert await asyncio.to_thread(receiver.arrived.wait, 10)
    finally:
        began = time.monotonic()
        await dispatcher.stop(grace=0.6)
        took = time.monotonic() - began
    assert took < 0.75, took
    assert notify_tasks() == [] and not dispatcher.running
    [row] = await outbox(conn)
    assert (row["status"], row["attempts"]) == ("pending", 0)
    assert row["next_attempt_at"] <= await db_now(conn)  # due at once for the next worker
    [attempt] = await deliveries(conn)
    assert attempt["outcome"] == "interrupted" and "stays pending for the next worker" in attempt["detail"]


async def test_a_run_finished_while_no_dispatcher_ran_is_notified_once_after_start(
    db_url: str, conn: psycopg.AsyncConnection[DictRow], receiver: LocalReceiver
) -> None:
    allow = settings(webhook_allow_private=True)
    await add_schedule(conn)
    await set_webhook(conn, "daily-report", url=receiver.url, settings=allow)
    await finished_runs(conn, "daily-report")  # nobody is dispatching

    async def sent() -> bool:
        return [r["status"] for r in await outbox(conn)] == ["sent"]

    for _ in range(2):  # a restart later sends nothing again
        dispatcher = Dispatcher(db_url, allow, sender=Sender(resolver=fake_dns), poll_interval=60)
        await dispatcher.start()
        try:
            await wait_until(sent)
        finally:
            await dispatcher.stop()
    assert len(receiver.requests) == 1


async def test_the_dispatcher_is_woken_by_notify(db_url: str, conn: psycopg.AsyncConnection[DictRow]) -> None:
    now = await db_now(conn)
    fake = FakePlatforms(now=now + timedelta(minutes=1))
    fake.add(WECOM_URL)
    await webhook(conn, "daily-report", WECOM_URL)
    dispatcher = Dispatcher(db_url, settings(), sender=fake.sender(), poll_interval=60)  # no polling to speak of
    await dispatcher.start()

    async def idle() -> bool:  # listening, and every worker done with its first pass and waiting
        cur = await conn.execute(
            """SELECT count(*) FILTER (WHERE query LIKE 'LISTEN%%') AS listening,
                      count(*) FILTER (WHERE query LIKE '%%min(next_attempt_at)%%') AS waiting
                 FROM pg_stat_activity WHERE datname = current_database() AND state = 'idle'"""
        )
        row = fetched(await cur.fetchone())
        return row["listening"] == 1 and row["waiting"] == dispatcher.concurrency

    try:
        await wait_until(idle)
        await finished_runs(conn, "daily-report")

        async def delivered() -> bool:
            return len(fake.seen) == 1

        await wait_until(delivered)
    finally:
        await dispatcher.stop()
    assert notify_tasks() == []


async def test_without_a_key_the_dispatcher_stays_idle(db_url: str) -> None:
    dispatcher = Dispatcher(db_url, settings(secret_keys=()))
    await dispatcher.start()
    assert not dispatcher.running
    await dispatcher.stop()


async def test_a_start_scheduled_before_stop_never_starts(db_url: str) -> None:
    """The worker schedules ``start()`` as a task; a stop that comes first leaves nothing running."""
    dispatcher = Dispatcher(db_url, settings())
    starting = asyncio.create_task(dispatcher.start())
    await dispatcher.stop()
    await starting
    assert not dispatcher.running and notify_tasks() == []
