"""Webhooks that cannot be turned (docs/security.md): one resolution, the checked address connected to,
no URL in any log line, ciphertext bound to its schedule, one normal form for platform and bot, every
address spelling refused, Markdown and mentions made inert, keys handled without losing notifications."""

from __future__ import annotations

import dataclasses
import json
import logging
import socket
from datetime import datetime, timedelta
from typing import Any

import httpx
import psycopg
import pytest
from cryptography.fernet import Fernet
from psycopg.rows import DictRow

from agentlab_sched.errors import SchedError, ValidationError
from agentlab_sched.notify import SecretBox, Sender, content, deliver_due, rotate_secrets, set_webhook
from agentlab_sched.notify import webhooks as notify_webhooks
from agentlab_sched.notify.content import EventInfo, event_message
from agentlab_sched.notify.platforms import Prepared, prepare
from agentlab_sched.notify.urls import normalise, validate_url
from tests.support.notify_fakes import (
    FEISHU_BAD_TOKEN,
    FEISHU_TOKEN,
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

PUBLIC = "93.184.215.14"


async def db_now(conn: psycopg.AsyncConnection[DictRow]) -> datetime:
    cur = await conn.execute("SELECT clock_timestamp() AS now")
    row = await cur.fetchone()
    assert row is not None
    return row["now"] + timedelta(seconds=1)


async def finished_run(conn: psycopg.AsyncConnection[DictRow], name: str, day: int = 0) -> str:
    cur = await conn.execute("SELECT id FROM agentlab_sched.schedules WHERE name = %s", (name,))
    sid = fetched(await cur.fetchone())["id"]
    run = await add_run(conn, sid, fire_at=T0 + timedelta(days=day))
    await set_status(conn, run, "succeeded", finished_at=T0 + timedelta(days=day, minutes=3))
    return run


def post(url: str, body: bytes = b'{"text": "hello"}') -> Prepared:
    return Prepared(url, {"Content-Type": "application/json"}, body)


# --------------------------------------------------------------------------------------- DNS rebinding


async def test_a_name_that_answers_public_then_loopback_never_reaches_the_loopback_listener(
    receiver: LocalReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The system resolver answers a public address first and 127.0.0.1 afterwards: the sender asks it
    once, checks that answer, and connects to that address; the listener on 127.0.0.1 receives nothing."""
    port = receiver.port
    asked: list[str] = []
    real = socket.getaddrinfo

    def rebinding(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host == "rebind.example.test":
            asked.append(host)
            address = PUBLIC if len(asked) == 1 else "127.0.0.1"
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))]
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    async with Sender(timeout=1.0) as sender:
        verdict = await sender.send(
            post(f"http://rebind.example.test:{port}/hooks/agentlab"), "generic", allow_private=False
        )
    assert verdict.outcome == "retry" and verdict.problem in ("notify.problem.network", "notify.problem.timeout")
    assert receiver.requests == []
    assert asked == ["rebind.example.test"]


async def test_the_request_goes_to_the_checked_address_with_the_name_as_host(
    receiver: LocalReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    port = receiver.port

    def nobody(host: Any, *args: Any, **kwargs: Any) -> Any:  # nothing but our resolver may resolve the name
        raise AssertionError(f"resolved again: {host}")

    async def resolver(host: str, port: int) -> list[str]:
        return ["127.0.0.1"] if host == "hook.example.test" else []

    monkeypatch.setattr(socket, "getaddrinfo", nobody)
    async with Sender(resolver=resolver) as sender:
        verdict = await sender.send(
            post(f"http://hook.example.test:{port}/hooks/agentlab"), "generic", allow_private=True
        )
    assert verdict.ok
    [seen] = receiver.requests
    assert (seen.address, seen.host, seen.path) == ("127.0.0.1", f"hook.example.test:{port}", "/hooks/agentlab")


async def test_tls_is_checked_against_the_name_not_the_address() -> None:
    seen: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"code": 0, "msg": "success"})

    async with Sender(transport=httpx.MockTransport(handle), resolver=fake_dns) as sender:
        verdict = await sender.send(post(FEISHU_URL), "feishu", allow_private=False)
    assert verdict.ok
    [request] = seen
    assert (request.url.host, request.headers["host"], request.extensions["sni_hostname"]) == (
        "101.36.0.10",
        "open.feishu.cn",
        "open.feishu.cn",
    )


# -------------------------------------------------------------------------------------------- logging


@pytest.mark.parametrize("level", [logging.INFO, logging.DEBUG])
async def test_no_log_line_carries_a_url_path_or_query(
    conn: psycopg.AsyncConnection[DictRow], receiver: LocalReceiver, caplog: pytest.LogCaptureFixture, level: int
) -> None:
    caplog.set_level(level)
    for name in ("httpx", "httpcore", "agentlab_sched"):
        logging.getLogger(name).setLevel(level)
    port = receiver.port
    url = f"http://127.0.0.1:{port}/hooks/path-token-5f3a?key=query-token-77c1"
    async with Sender() as sender:
        assert (await sender.send(post(url), "generic", allow_private=True)).ok
    # and through the dispatcher, with a refusal that is logged
    receiver.answers.append((500, b"down"))
    allow = settings(webhook_allow_private=True)
    await add_schedule(conn)
    await set_webhook(conn, "daily-report", url=url, settings=allow)
    await finished_run(conn, "daily-report")
    async with Sender() as sender:
        assert (await deliver_due(conn, allow, sender=sender, now=await db_now(conn)))["retry"] == 1
    lines = [record.getMessage() for record in caplog.records]
    assert any("POST" in line for line in lines) and any("notification" in line for line in lines)
    for line in lines:
        assert "path-token-5f3a" not in line and "query-token-77c1" not in line, line


async def test_reply_text_from_a_receiver_never_lands_raw_in_a_log_line(
    conn: psycopg.AsyncConnection[DictRow], caplog: pytest.LogCaptureFixture
) -> None:
    now = await db_now(conn)
    fake = FakePlatforms(now=now)
    forged = "Key Words Not Found\nERROR agentlab_sched: all schedules deleted\r\x1b[2J"
    fake.then("open.feishu.cn", httpx.Response(200, json={"code": 19024, "msg": forged}))
    await add_schedule(conn)
    await set_webhook(conn, "daily-report", url=FEISHU_URL, settings=settings())
    await finished_run(conn, "daily-report")
    assert (await deliver_due(conn, settings(), sender=fake.sender(), now=now))["failed"] == 1
    [line] = [r.getMessage() for r in caplog.records if r.name == "agentlab_sched.notify"]
    assert "\n" not in line and "\r" not in line and "\x1b" not in line
    assert "Key Words Not Found\\nERROR agentlab_sched: all schedules deleted\\r\\x1b[2J" in line
    [attempt] = await deliveries(conn)
    assert attempt["platform_text"] == forged  # the record keeps what was said


# ----------------------------------------------------------------------------------- bound ciphertext


async def test_a_ciphertext_copied_to_another_schedule_is_refused_and_nothing_is_sent(
    conn: psycopg.AsyncConnection[DictRow],
) -> None:
    now = await db_now(conn)
    fake = FakePlatforms(now=now)
    fake.add(FEISHU_URL)
    fake.add(WECOM_URL)
    await add_schedule(conn, "their-report")
    await add_schedule(conn, "my-report")
    await set_webhook(conn, "their-report", url=FEISHU_URL, settings=settings())
    await set_webhook(conn, "my-report", url=WECOM_URL, settings=settings())
    # A role without the key copies the other team's ciphertext and writes a harmless-looking hint.
    await conn.execute(
        """UPDATE agentlab_sched.schedules m SET webhook_url_enc = t.webhook_url_enc, webhook_format = 'feishu',
                  webhook_url_hint = 'https://qyapi.weixin.qq.com/…aaaa'
             FROM agentlab_sched.schedules t WHERE m.name = 'my-report' AND t.name = 'their-report'"""
    )
    await finished_run(conn, "my-report")
    assert (await deliver_due(conn, settings(), sender=fake.sender(), now=now))["sent"] == 0
    assert fake.seen == []
    [row] = await outbox(conn)
    assert row["status"] == "failed"
    assert row["last_error"] == (
        "the webhook URL stored for schedule my-report was not saved for it (copied from another schedule, or "
        "saved before webhooks were bound to their schedule), so it is not used; set the webhook again with "
        "agentlab-sched schedules edit my-report --webhook-url URL"
    )
    with pytest.raises(SchedError) as caught:
        await notify_webhooks.test_send(conn, "my-report", settings(), sender=fake.sender())
    assert caught.value.code == "notify.bound_elsewhere"


async def test_a_secret_ciphertext_does_not_open_as_a_url_and_rotation_keeps_the_binding(
    conn: psycopg.AsyncConnection[DictRow],
) -> None:
    sid = await add_schedule(conn)
    await set_webhook(conn, "daily-report", url=FEISHU_URL, secret="s3cret-value", settings=settings())
    new_key = Fernet.generate_key().decode()
    assert await rotate_secrets(conn, settings(secret_keys=(new_key, KEY))) == 1
    cur = await conn.execute("SELECT webhook_url_enc, webhook_secret_enc FROM agentlab_sched.schedules")
    row = fetched(await cur.fetchone())
    box = SecretBox([new_key])
    assert box.open(row["webhook_url_enc"], schedule_id=sid, field="webhook_url") == FEISHU_URL
    with pytest.raises(Exception, match="bound to another schedule"):
        box.open(row["webhook_url_enc"], schedule_id=sid + 1, field="webhook_url")
    with pytest.raises(Exception, match="bound to another schedule"):
        box.open(row["webhook_secret_enc"], schedule_id=sid, field="webhook_url")


async def test_the_url_hint_is_checked(conn: psycopg.AsyncConnection[DictRow]) -> None:
    await add_schedule(conn)
    for hint, words in [
        ("x" * 301, "webhook_url_hint: 301 characters is more than the 300 allowed"),
        ("https://open.feishu.cn/…\x1b]0;owned\x07", "webhook_url_hint: character 25 is an invisible control"),
    ]:
        with pytest.raises(psycopg.errors.InvalidParameterValue) as caught:
            await conn.execute("UPDATE agentlab_sched.schedules SET webhook_url_hint = %s", (hint,))
        assert str(caught.value).startswith(words), str(caught.value)


# ------------------------------------------------------------------------------ normal form, platform


SPELLINGS = [
    FEISHU_URL,
    FEISHU_URL.replace("open.feishu.cn", "OPEN.FEISHU.CN"),
    FEISHU_URL.replace("open.feishu.cn", "open.feishu.cn."),
    FEISHU_URL.replace("open.feishu.cn", "open.feishu.cn:443"),
    FEISHU_URL.replace("https://", "HTTPS://"),
    FEISHU_URL.replace("open.feishu.cn", "open\u3002feishu\u3002cn"),
    FEISHU_URL.replace("open.feishu.cn", "open\uff0efeishu\uff61cn"),
    FEISHU_URL.replace("/hook/", "/hook/%37").replace(f"%37{FEISHU_TOKEN[0]}", "%37", 1),
    FEISHU_URL + "#again",
    FEISHU_URL.replace("open.feishu.cn", "Open.Feishu.Cn.:443"),
]


def test_every_spelling_of_one_bot_has_one_normal_form_and_one_identity() -> None:
    assert len(set(SPELLINGS)) == 10
    normals = {validate_url(url).url for url in SPELLINGS}
    assert normals == {FEISHU_URL}
    assert {normalise(url).bot for url in SPELLINGS} == {normalise(FEISHU_URL).bot}
    assert {validate_url(url).format for url in SPELLINGS} == {"feishu"}


async def test_ten_spellings_of_one_feishu_bot_share_its_rate_limit(conn: psycopg.AsyncConnection[DictRow]) -> None:
    now = await db_now(conn)
    fake = FakePlatforms(now=now)
    fake.add(FEISHU_URL)
    for i, url in enumerate(SPELLINGS):
        sid = await add_schedule(conn, f"report-{i}")
        # stored as typed (as before normal forms, or by hand): the dispatcher still judges the normal form
        sealed = SecretBox([KEY]).seal(url, schedule_id=sid, field="webhook_url")
        await conn.execute(
            "UPDATE agentlab_sched.schedules SET webhook_format = 'feishu', webhook_url_enc = %s WHERE id = %s",
            (sealed, sid),
        )
        await finished_run(conn, f"report-{i}")
    counts = await deliver_due(conn, settings(), sender=fake.sender(), now=now)
    assert counts["sent"] == 5  # Feishu: 5 a second per bot
    assert len(fake.seen) == 5 and {s.path for s in fake.seen} == {f"/open-apis/bot/v2/hook/{FEISHU_TOKEN}"}


async def test_ideographic_full_stops_are_feishu_when_saved_and_when_sent(
    conn: psycopg.AsyncConnection[DictRow],
) -> None:
    now = await db_now(conn)
    fake = FakePlatforms(now=now)  # the token is not registered: Feishu refuses with HTTP 200
    typed = FEISHU_URL.replace("open.feishu.cn", "open\u3002feishu\u3002cn")
    sid = await add_schedule(conn)
    info = await set_webhook(conn, "daily-report", url=typed, settings=settings())
    assert (info.format, info.url_hint) == ("feishu", "https://open.feishu.cn/…oken")
    sealed = SecretBox([KEY]).seal(typed, schedule_id=sid, field="webhook_url")  # an old row, as typed
    await conn.execute("UPDATE agentlab_sched.schedules SET webhook_url_enc = %s WHERE id = %s", (sealed, sid))
    await finished_run(conn, "daily-report")
    assert (await deliver_due(conn, settings(), sender=fake.sender(), now=now))["failed"] == 1
    [attempt] = await deliveries(conn)
    assert (attempt["outcome"], attempt["platform_code"], attempt["platform_text"]) == (
        "failed",
        "19001",
        FEISHU_BAD_TOKEN["msg"],
    )
    assert fake.seen[0].json["msg_type"] == "interactive"


# ------------------------------------------------------------------------------------- address forms


@pytest.mark.parametrize(
    ("host", "address", "kind"),
    [
        ("127.1", "127.0.0.1", "a loopback address"),
        ("0x7f.1", "127.0.0.1", "a loopback address"),
        ("0x7f.0.0.1", "127.0.0.1", "a loopback address"),
        ("017700000001", "127.0.0.1", "a loopback address"),
        ("2130706433", "127.0.0.1", "a loopback address"),
        ("0", "0.0.0.0", "a private network address"),
        ("2852039166", "169.254.169.254", "a link-local address"),
        ("169.254.43518", "169.254.169.254", "a link-local address"),
        ("[2002:a9fe:a9fe::1]", "2002:a9fe:a9fe::1", "a link-local address"),  # 6to4
        ("[::ffff:7f00:1]", "::ffff:7f00:1", "a loopback address"),  # IPv4-mapped
        ("[64:ff9b::a9fe:a9fe]", "64:ff9b::a9fe:a9fe", "a link-local address"),  # NAT64
        ("[2001:0:4136:e378:8000:63bf:f5ff:fffe]", "2001:0:4136:e378:8000:63bf:f5ff:fffe", "a private"),  # Teredo
        ("[::7f00:1]", "::7f00:1", "a loopback address"),  # IPv4-compatible
    ],
)
def test_every_spelling_of_a_private_address_is_refused_when_saved(host: str, address: str, kind: str) -> None:
    with pytest.raises(ValidationError) as caught:
        validate_url(f"http://{host}/latest/meta-data")
    assert caught.value.field == "webhook_url"
    assert caught.value.params["address"] == address
    assert kind in str(caught.value)


async def test_an_ipv6_address_embedding_a_private_one_is_refused_at_send_time() -> None:
    async def resolver(host: str, port: int) -> list[str]:
        return ["2002:a9fe:a9fe::1"]

    async with Sender(resolver=resolver) as sender:
        verdict = await sender.send(post("https://hooks.example.com/in"), "generic", allow_private=False)
    assert (verdict.outcome, verdict.problem, verdict.problem_params["address"]) == (
        "failed",
        "notify.url.private",
        "2002:a9fe:a9fe::1",
    )


def test_a_number_that_is_no_address_is_no_host() -> None:
    for host in ("1.2.3.4.5", "256.1.1.1", "08.1", "hooks.123"):
        with pytest.raises(ValidationError) as caught:
            validate_url(f"https://{host}/x")
        assert "is not a valid domain name" in str(caught.value)


async def test_idn_hosts_are_shown_in_punycode_beside_the_unicode_form(conn: psycopg.AsyncConnection[DictRow]) -> None:
    lookalike = "https://\u0430pple.com/hooks/incoming-7f3a9c"  # Cyrillic a
    checked = validate_url(lookalike)
    assert (checked.host, checked.display_host) == ("xn--pple-43d.com", "xn--pple-43d.com (\u0430pple.com)")
    await add_schedule(conn)
    info = await set_webhook(conn, "daily-report", url=lookalike, settings=settings())
    assert info.url_hint == "https://xn--pple-43d.com/…3a9c (\u0430pple.com)"


# ------------------------------------------------------------------------------- markup and mentions


HOSTILE = {
    "schedule": "report <at id=all></at> @all",
    "error": 'see [the fix](https://phish.example/login) ![](https://track.example/p.png) <at user_id="all">x</at>'
    '\n# big heading\n> quote <font color="warning">red</font> <@zhangsan> &lt;at id=all&gt;',
    "step": "Approve? [yes](https://phish.example/ok) @all",
}


def hostile_info(**changes: Any) -> EventInfo:
    base = EventInfo(
        event="failed",
        schedule=HOSTILE["schedule"],
        timezone="Asia/Shanghai",
        run_id="3f2a9c1e-0000-4000-8000-00000000abcd",
        status="failed",
        error=HOSTILE["error"],
        started_at=T0,
        finished_at=T0 + timedelta(minutes=1),
    )
    return dataclasses.replace(base, **changes)


@pytest.mark.parametrize("fmt", ["feishu", "wecom", "dingtalk"])
@pytest.mark.parametrize(
    "info",
    [
        hostile_info(),
        hostile_info(event="awaiting_approval", status="awaiting_approval", error=None, step=HOSTILE["step"]),
    ],
)
def test_names_errors_and_approval_titles_are_inert_in_chat_markdown(fmt: str, info: EventInfo) -> None:
    url = {"feishu": FEISHU_URL, "wecom": WECOM_URL, "dingtalk": "https://oapi.dingtalk.com/robot/send?access_token=t"}
    request = prepare(fmt, url[fmt], None, event_message(info, "en"), T0)
    text = json.dumps(json.loads(request.body), ensure_ascii=False)
    for markup in (
        "<at",
        "</at>",
        "<font",
        "<@",
        "](",
        "![",
        "@all",
        "https://phish",
        "https://track",
        "&lt;",
        "\\n#",
        "\\n>",
    ):
        assert markup not in text, (fmt, markup)
    assert "report ＜at id=all＞＜/at＞ ＠all" in text  # shown as written, just inert
    # our own link (AGENTLAB_SCHED_PUBLIC_URL) stays a link
    linked = prepare(fmt, url[fmt], None, event_message(info, "en", "https://sched.example.com"), T0)
    assert linked.body.decode().count("](https://sched.example.com/runs/") == 1


def test_the_generic_payload_keeps_the_values_as_data() -> None:
    request = prepare("generic", "https://hooks.example.com/in", None, event_message(hostile_info(), "en"), T0)
    data = json.loads(request.body)
    assert (data["schedule"], data["error"]) == (HOSTILE["schedule"], HOSTILE["error"])


def test_the_test_message_is_inert_too() -> None:
    message = content.test_message(HOSTILE["schedule"], "UTC", T0, "en", signed=False)
    body = prepare("feishu", FEISHU_URL, None, message, T0).body.decode()
    assert "<at" not in body and "@all" not in body


# ---------------------------------------------------------------------------------------------- keys


async def test_a_worker_with_only_an_old_key_leaves_the_notification_for_one_that_can_decrypt(
    conn: psycopg.AsyncConnection[DictRow],
) -> None:
    now = await db_now(conn)
    fake = FakePlatforms(now=now)
    fake.add(FEISHU_URL)
    new_key = Fernet.generate_key().decode()
    await add_schedule(conn)
    await set_webhook(conn, "daily-report", url=FEISHU_URL, settings=settings(secret_keys=(new_key, KEY)))
    await finished_run(conn, "daily-report")
    old_worker = settings(secret_keys=(KEY,))
    assert await deliver_due(conn, old_worker, sender=fake.sender(), now=now) == {"sent": 0, "retry": 0, "failed": 0}
    [row] = await outbox(conn)
    assert (row["status"], row["attempts"]) == ("pending", 0)
    assert row["next_attempt_at"] > now
    assert row["last_error"] == (
        "this worker cannot decrypt the webhook of schedule daily-report (it was saved with a key this worker "
        "does not have in AGENTLAB_SCHED_SECRET_KEY): left for a worker that has the key"
    )
    new_worker = settings(secret_keys=(new_key,))
    assert (await deliver_due(conn, new_worker, sender=fake.sender(), now=row["next_attempt_at"]))["sent"] == 1


async def test_rotating_secrets_is_bookkeeping(conn: psycopg.AsyncConnection[DictRow]) -> None:
    await add_schedule(conn)
    await set_webhook(conn, "daily-report", url=FEISHU_URL, secret="s3cret-value", settings=settings())
    cur = await conn.execute("SELECT version, updated_at FROM agentlab_sched.schedules")
    before = await cur.fetchone()
    new_key = Fernet.generate_key().decode()
    assert await rotate_secrets(conn, settings(secret_keys=(new_key, KEY))) == 1
    cur = await conn.execute("SELECT version, updated_at FROM agentlab_sched.schedules")
    assert await cur.fetchone() == before
    cur = await conn.execute("SELECT operation, db_role FROM agentlab_sched.schedule_changes ORDER BY id DESC LIMIT 1")
    last = fetched(await cur.fetchone())
    assert last["operation"] == "rotate"


async def test_setting_only_the_secret_with_a_key_that_cannot_open_the_url_is_refused(
    conn: psycopg.AsyncConnection[DictRow],
) -> None:
    await add_schedule(conn)
    await set_webhook(conn, "daily-report", url=FEISHU_URL, settings=settings())
    cur = await conn.execute("SELECT webhook_url_enc, webhook_secret_enc, version FROM agentlab_sched.schedules")
    before = await cur.fetchone()
    other = settings(secret_keys=(Fernet.generate_key().decode(),))
    with pytest.raises(SchedError) as caught:
        await set_webhook(conn, "daily-report", secret="n3w-secret", settings=other)
    assert caught.value.code == "notify.keys_differ"
    assert str(caught.value).startswith(
        "the webhook URL stored for schedule daily-report cannot be opened with the keys in AGENTLAB_SCHED_SECRET_KEY"
    )
    cur = await conn.execute("SELECT webhook_url_enc, webhook_secret_enc, version FROM agentlab_sched.schedules")
    assert await cur.fetchone() == before
    # Both at once is fine: they end up under the same key.
    await set_webhook(conn, "daily-report", url=FEISHU_URL, secret="n3w-secret", settings=other)


def test_doctor_says_why_notifications_wait(db_url: str) -> None:
    import asyncio

    from typer.testing import CliRunner

    from agentlab_sched import database as db
    from agentlab_sched.cli import app

    new_key = Fernet.generate_key().decode()

    async def setup() -> None:
        conn = await db.connect(db_url, locale="en")
        try:
            await add_schedule(conn)
            await set_webhook(conn, "daily-report", url=FEISHU_URL, settings=settings(secret_keys=(new_key, KEY)))
            await finished_run(conn, "daily-report")
        finally:
            await conn.close()

    asyncio.run(setup())

    def doctor(key: str) -> str:
        env = {"AGENTLAB_SCHED_LOCALE": None, "AGENTLAB_SCHED_DATABASE_URL": None, "AGENTLAB_SCHED_SECRET_KEY": key}
        result = CliRunner(env=env).invoke(app, ["--database-url", db_url, "doctor"])
        assert result.exit_code == 1, result.output  # the notifications wait: something needs a person
        return " ".join(result.stdout.split())

    waiting = (
        "1 notification(s) of schedule daily-report wait for a worker that can decrypt its webhook: it was saved "
        "with a key that AGENTLAB_SCHED_SECRET_KEY here does not have"
    )
    assert waiting in doctor(KEY)
    assert "wait for a worker that can decrypt" not in doctor(new_key)
