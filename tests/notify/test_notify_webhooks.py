"""Setting a webhook (encrypted, masked, validated only when it changes), key rotation, and test-send."""

from __future__ import annotations

import asyncio
import json

import psycopg
import pytest
import typer
from cryptography.fernet import Fernet
from psycopg.rows import DictRow
from typer.testing import CliRunner

from agentlab_sched import database as db
from agentlab_sched.errors import NotFound, SchedError, ValidationError
from agentlab_sched.notify import SecretBox, Sender, get_webhook, rotate_secrets, set_webhook
from agentlab_sched.notify import webhooks as notify_webhooks
from tests.support.notify_fakes import (
    DINGTALK_SECRET,
    DINGTALK_URL,
    FEISHU_SECRET,
    FEISHU_URL,
    KEY,
    T0,
    WECOM_URL,
    FakePlatforms,
    LocalReceiver,
    add_schedule,
    fake_dns,
    receiver,
    settings,
)

__all__ = ["receiver"]  # the fixture

MAKE_KEY = 'python -c "from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())"'


async def columns(conn: psycopg.AsyncConnection[DictRow], name: str = "daily-report") -> dict:
    cur = await conn.execute(
        """SELECT id, webhook_format, webhook_url_enc, webhook_secret_enc, webhook_url_hint, webhook_events, version
             FROM agentlab_sched.schedules WHERE name = %s""",
        (name,),
    )
    row = await cur.fetchone()
    assert row is not None
    return row


# ------------------------------------------------------------------------------------------- set_webhook


async def test_url_and_secret_are_stored_encrypted_and_shown_masked(conn: psycopg.AsyncConnection[DictRow]) -> None:
    await add_schedule(conn)
    info = await set_webhook(conn, "daily-report", url=FEISHU_URL, secret=FEISHU_SECRET, settings=settings())
    assert (info.format, info.url_hint, info.secret, info.events, info.validated) == (
        "feishu",
        "https://open.feishu.cn/…oken",
        "••••••",
        ("finished", "failed"),
        True,
    )
    row = await columns(conn)
    assert row["webhook_url_enc"].startswith("gAAAAA") and row["webhook_secret_enc"].startswith("gAAAAA")
    assert FEISHU_URL not in json.dumps(row, default=str) and FEISHU_SECRET not in json.dumps(row, default=str)
    box = SecretBox([KEY])
    assert box.open(row["webhook_url_enc"], schedule_id=row["id"], field="webhook_url") == FEISHU_URL
    assert box.open(row["webhook_secret_enc"], schedule_id=row["id"], field="webhook_secret") == FEISHU_SECRET
    assert (await get_webhook(conn, "daily-report")).url_hint == "https://open.feishu.cn/…oken"
    # the audit trail and the status view never show them either
    cur = await conn.execute("SELECT old_values, new_values FROM agentlab_sched.schedule_changes")
    audit = json.dumps(await cur.fetchall(), default=str)
    assert FEISHU_URL not in audit and FEISHU_SECRET not in audit and "gAAAAA" not in audit


async def test_saving_without_a_key_says_how_to_make_one(conn: psycopg.AsyncConnection[DictRow]) -> None:
    await add_schedule(conn)
    with pytest.raises(SchedError) as caught:
        await set_webhook(conn, "daily-report", url=FEISHU_URL, settings=settings(secret_keys=()))
    err = caught.value
    assert err.code == "notify.no_key" and err.field == "AGENTLAB_SCHED_SECRET_KEY"
    assert MAKE_KEY in str(err) and "AGENTLAB_SCHED_SECRET_KEY" in str(err)
    assert MAKE_KEY in err.message("zh-CN") and "生成一个密钥" in err.message("zh-CN")
    assert (await columns(conn))["webhook_url_enc"] is None
    with pytest.raises(SchedError) as caught:
        await set_webhook(conn, "daily-report", url=FEISHU_URL, settings=settings(secret_keys=("not-a-key",)))
    assert caught.value.code == "notify.bad_key" and "key 1 is not a Fernet key" in str(caught.value)


async def test_format_is_inferred_and_a_mismatch_refused(conn: psycopg.AsyncConnection[DictRow]) -> None:
    await add_schedule(conn)
    with pytest.raises(ValidationError) as caught:
        await set_webhook(conn, "daily-report", url=WECOM_URL, format="generic", settings=settings())
    assert caught.value.field == "webhook_format" and "WeCom bot address" in str(caught.value)
    assert (await columns(conn))["webhook_url_enc"] is None  # nothing written
    info = await set_webhook(conn, "daily-report", url=DINGTALK_URL, settings=settings())
    assert info.format == "dingtalk"
    with pytest.raises(ValidationError):  # the format alone changed: the saved URL is checked against it
        await set_webhook(conn, "daily-report", format="feishu", settings=settings())


async def test_private_targets_need_the_allow_setting(conn: psycopg.AsyncConnection[DictRow]) -> None:
    await add_schedule(conn)
    with pytest.raises(ValidationError) as caught:
        await set_webhook(conn, "daily-report", url="http://10.0.0.7/hook", settings=settings())
    assert "AGENTLAB_SCHED_WEBHOOK_ALLOW_PRIVATE=1" in str(caught.value)
    info = await set_webhook(
        conn, "daily-report", url="http://10.0.0.7/hook", settings=settings(webhook_allow_private=True)
    )
    assert (info.format, info.url_hint) == ("generic", "http://10.0.0.7/…")


async def test_validation_runs_only_when_url_or_format_changes(conn: psycopg.AsyncConnection[DictRow]) -> None:
    """A URL saved while private targets were allowed does not block later edits of other settings."""
    await add_schedule(conn)
    await set_webhook(conn, "daily-report", url="http://10.0.0.7/hook", settings=settings(webhook_allow_private=True))
    strict = settings()
    info = await set_webhook(conn, "daily-report", events=["failed", "awaiting_approval"], settings=strict)
    assert (info.events, info.validated) == (("failed", "awaiting_approval"), False)
    info = await set_webhook(conn, "daily-report", url=" http://10.0.0.7/hook ", secret="s3cret", settings=strict)
    assert (info.validated, info.secret) == (False, "••••••")  # same URL: not re-checked
    info = await set_webhook(conn, "daily-report", format="generic", settings=strict)
    assert info.validated is False
    with pytest.raises(ValidationError):
        await set_webhook(conn, "daily-report", url="http://10.0.0.8/hook", settings=strict)
    # events alone need no key at all
    info = await set_webhook(conn, "daily-report", events="finished", settings=settings(secret_keys=()))
    assert info.events == ("finished",)


async def test_secret_rules_and_removal(conn: psycopg.AsyncConnection[DictRow]) -> None:
    await add_schedule(conn)
    with pytest.raises(ValidationError) as caught:
        await set_webhook(conn, "daily-report", url=WECOM_URL, secret="abc", settings=settings())
    assert caught.value.field == "webhook_secret" and "WeCom bots are not signed" in str(caught.value)
    with pytest.raises(ValidationError) as caught:
        await set_webhook(conn, "daily-report", secret="abc", settings=settings())
    assert caught.value.field == "webhook_url"  # a secret without a URL
    await set_webhook(conn, "daily-report", url=DINGTALK_URL, secret=DINGTALK_SECRET, settings=settings())
    with pytest.raises(ValidationError) as caught:
        await set_webhook(conn, "daily-report", secret="SEC\u200b123", settings=settings())
    assert "U+200B ZERO WIDTH SPACE" in str(caught.value)
    assert (await set_webhook(conn, "daily-report", secret="", settings=settings())).secret is None
    with pytest.raises(ValidationError) as caught:
        await set_webhook(conn, "daily-report", events=["finished", "done"], settings=settings())
    assert str(caught.value) == "webhook event done is not one of finished, failed, awaiting_approval"
    info = await set_webhook(conn, "daily-report", url=None, settings=settings())
    assert (info.format, info.url_hint, info.secret) == (None, None, None)
    row = await columns(conn)
    assert row["webhook_url_enc"] is None and row["webhook_secret_enc"] is None
    with pytest.raises(NotFound):
        await set_webhook(conn, "no-such-schedule", url=FEISHU_URL, settings=settings())


# ------------------------------------------------------------------------------------------- rotation


async def test_encrypted_columns_are_unreadable_without_the_key_and_readable_after_rotation(
    conn: psycopg.AsyncConnection[DictRow],
) -> None:
    await add_schedule(conn)
    await add_schedule(conn, "weekly-report")
    await set_webhook(conn, "daily-report", url=FEISHU_URL, secret=FEISHU_SECRET, settings=settings())
    await set_webhook(conn, "weekly-report", url=WECOM_URL, settings=settings())
    old_cipher = (await columns(conn))["webhook_url_enc"]
    new_key = Fernet.generate_key().decode()
    assert SecretBox([new_key]).rotate(old_cipher) is None  # unreadable without the key it was saved with
    with pytest.raises(SchedError) as caught:  # and test-send says so
        await notify_webhooks.test_send(conn, "daily-report", settings(secret_keys=(new_key,)))
    assert caught.value.code == "notify.undecryptable"

    assert await rotate_secrets(conn, settings(secret_keys=(new_key, KEY))) == 2
    row = await columns(conn)
    assert row["webhook_url_enc"] != old_cipher
    sid = row["id"]
    assert SecretBox([new_key]).open(row["webhook_url_enc"], schedule_id=sid, field="webhook_url") == FEISHU_URL
    assert (
        SecretBox([new_key]).open(row["webhook_secret_enc"], schedule_id=sid, field="webhook_secret") == FEISHU_SECRET
    )
    assert SecretBox([KEY]).rotate(row["webhook_url_enc"]) is None  # the old key can be retired


async def test_rotation_is_all_or_nothing(conn: psycopg.AsyncConnection[DictRow]) -> None:
    await add_schedule(conn)
    await add_schedule(conn, "weekly-report")
    await set_webhook(conn, "daily-report", url=FEISHU_URL, settings=settings())
    lost_key = Fernet.generate_key().decode()
    await set_webhook(conn, "weekly-report", url=WECOM_URL, settings=settings(secret_keys=(lost_key,)))
    before = await columns(conn)
    with pytest.raises(SchedError) as caught:
        await rotate_secrets(conn, settings(secret_keys=(Fernet.generate_key().decode(), KEY)))
    assert str(caught.value).startswith("nothing was re-encrypted: no key in AGENTLAB_SCHED_SECRET_KEY decrypts the ")
    assert "weekly-report" in str(caught.value) and "daily-report" not in str(caught.value)
    assert await columns(conn) == before


# ------------------------------------------------------------------------------------------- test-send


async def test_send_feishu_signed(conn: psycopg.AsyncConnection[DictRow]) -> None:
    fake = FakePlatforms()
    fake.add(FEISHU_URL, FEISHU_SECRET)
    await add_schedule(conn)
    await set_webhook(conn, "daily-report", url=FEISHU_URL, secret=FEISHU_SECRET, settings=settings())
    result = await notify_webhooks.test_send(conn, "daily-report", settings(), sender=fake.sender(), now=T0)
    assert result.ok and (result.http_status, result.platform_code) == (200, "0")
    assert result.message == (
        "delivered (HTTP 200): Feishu/Lark accepted the message and its signature; check that the group received it"
    )
    [seen] = fake.seen
    card = seen.json["card"]
    assert card["header"]["title"]["content"] == "daily-report: test message"
    assert "Signed with the configured secret." in card["elements"][0]["text"]["content"]
    zh = await notify_webhooks.test_send(conn, "daily-report", settings(locale="zh-CN"), sender=fake.sender(), now=T0)
    assert zh.message == "已送达(HTTP 200):飞书接受了这条消息,签名校验通过;请到群里确认已收到"


async def test_send_feishu_wrong_secret_says_what_to_fix(conn: psycopg.AsyncConnection[DictRow]) -> None:
    fake = FakePlatforms()
    fake.add(FEISHU_URL, FEISHU_SECRET)
    await add_schedule(conn)
    await set_webhook(conn, "daily-report", url=FEISHU_URL, secret="an-old-secret", settings=settings())
    result = await notify_webhooks.test_send(conn, "daily-report", settings(), sender=fake.sender(), now=T0)
    assert not result.ok and not result.retryable
    assert (result.http_status, result.platform_code) == (200, "19021")
    assert result.message.startswith("not delivered: Feishu/Lark refused the message (HTTP 200, code 19021: sign ")
    assert "set the secret shown under the bot's signature verification" in result.message


async def test_send_wecom_never_mentions_signing(conn: psycopg.AsyncConnection[DictRow]) -> None:
    fake = FakePlatforms()
    fake.add(WECOM_URL)
    await add_schedule(conn)
    await set_webhook(conn, "daily-report", url=WECOM_URL, settings=settings())
    result = await notify_webhooks.test_send(conn, "daily-report", settings(), sender=fake.sender(), now=T0)
    assert result.message == "delivered (HTTP 200): WeCom accepted the message; check that the group received it"
    assert "ign" not in fake.seen[0].json["markdown"]["content"]
    fake.bots.clear()  # the bot was removed from the group
    result = await notify_webhooks.test_send(conn, "daily-report", settings(), sender=fake.sender(), now=T0)
    assert result.platform_code == "93000" and "copy the webhook URL" in result.message


async def test_send_dingtalk_signed_in_the_query(conn: psycopg.AsyncConnection[DictRow]) -> None:
    fake = FakePlatforms()
    fake.add(DINGTALK_URL, DINGTALK_SECRET)
    await add_schedule(conn)
    await set_webhook(conn, "daily-report", url=DINGTALK_URL, secret=DINGTALK_SECRET, settings=settings())
    result = await notify_webhooks.test_send(conn, "daily-report", settings(), sender=fake.sender(), now=T0)
    assert result.ok, result.message
    assert set(fake.seen[0].query) == {"access_token", "timestamp", "sign"}


async def test_send_generic_to_a_real_local_server(
    conn: psycopg.AsyncConnection[DictRow], receiver: LocalReceiver
) -> None:
    allow = settings(webhook_allow_private=True)
    await add_schedule(conn)
    await set_webhook(conn, "daily-report", url=receiver.url, settings=allow)
    result = await notify_webhooks.test_send(conn, "daily-report", allow, sender=Sender(resolver=fake_dns))
    assert result.message == ("delivered (HTTP 200): 127.0.0.1 answered with success; check that the receiver got it")
    [seen] = receiver.requests
    assert seen.path == "/hooks/agentlab" and seen.headers["content-type"] == "application/json; charset=utf-8"
    assert seen.json["event"] == "test" and seen.json["schedule"] == "daily-report"
    receiver.answers.append((503, b"upstream down"))
    result = await notify_webhooks.test_send(conn, "daily-report", allow, sender=Sender(resolver=fake_dns))
    assert not result.ok and result.retryable
    assert result.message == (
        "not delivered: the receiver answered HTTP 503, a temporary failure "
        "Notifications retry this kind of failure with backoff."
    )
    receiver.hang = True
    result = await notify_webhooks.test_send(conn, "daily-report", allow, sender=Sender(timeout=0.3, resolver=fake_dns))
    assert result.retryable and result.message.startswith("not delivered: 127.0.0.1 did not answer within 0.3 seconds")
    # the same URL is refused at send time once private targets are no longer allowed
    with pytest.raises(ValidationError):
        await notify_webhooks.test_send(conn, "daily-report", settings(), sender=Sender(resolver=fake_dns))


async def test_send_needs_a_webhook(conn: psycopg.AsyncConnection[DictRow]) -> None:
    await add_schedule(conn)
    with pytest.raises(SchedError) as caught:
        await notify_webhooks.test_send(conn, "daily-report", settings())
    assert str(caught.value) == (
        "schedule daily-report has no webhook; set one with: "
        "agentlab-sched schedules edit daily-report --webhook-url URL"
    )


# ------------------------------------------------------------------------------------------- CLI


def cli_app() -> typer.Typer:
    from agentlab_sched.cli import common
    from agentlab_sched.cli.notify import register

    app = typer.Typer(cls=common.HandledGroup)

    @app.callback()
    def root() -> None:
        pass

    register(app)
    return app


def test_cli_notify_test(db_url: str, receiver: LocalReceiver, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTLAB_SCHED_DATABASE_URL", db_url)
    monkeypatch.setenv("AGENTLAB_SCHED_SECRET_KEY", KEY)
    monkeypatch.setenv("AGENTLAB_SCHED_WEBHOOK_ALLOW_PRIVATE", "1")
    monkeypatch.setenv("AGENTLAB_SCHED_LOCALE", "en")

    async def setup() -> None:
        async with await db.connect(db_url) as conn:
            await add_schedule(conn)
            await add_schedule(conn, "no-webhook")
            await set_webhook(conn, "daily-report", url=receiver.url, settings=settings(webhook_allow_private=True))

    asyncio.run(setup())
    runner = CliRunner()
    app = cli_app()
    ok = runner.invoke(app, ["notify", "test", "daily-report"])
    assert ok.exit_code == 0, ok.output
    assert "delivered (HTTP 200): 127.0.0.1 answered with success" in ok.stdout
    receiver.answers.append((404, b"no such hook"))
    failed = runner.invoke(app, ["notify", "test", "daily-report"])
    assert failed.exit_code == 1 and "not delivered: the receiver answered HTTP 404" in failed.output
    bad = runner.invoke(app, ["notify", "test", "no-webhook"])
    assert bad.exit_code == 2 and "schedule no-webhook has no webhook" in bad.output
    assert "Traceback" not in bad.output
    missing = runner.invoke(app, ["notify", "test", "nope"])
    assert missing.exit_code == 2 and "Traceback" not in missing.output
    monkeypatch.setenv("AGENTLAB_SCHED_SECRET_KEY", f"{Fernet.generate_key().decode()},{KEY}")
    for command in (["rotate-secrets"], ["notify", "rotate-secrets"]):
        rotated = runner.invoke(app, command)
        assert rotated.exit_code == 0 and "re-encrypted with the newest key: 1" in rotated.stdout
