"""Setting a schedule's webhook, re-encrypting secrets, and the test message.

The database never holds the key, so the webhook URL and secret are set here (in Python), encrypted;
the SQL API refuses plaintext (``sql/60_notify.sql``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import psycopg

from agentlab_sched import errors
from agentlab_sched.database import queries
from agentlab_sched.errors import NotFound, SchedError, ValidationError
from agentlab_sched.messages import render, term
from agentlab_sched.notify.content import test_message as _test_message
from agentlab_sched.notify.platforms import describe, prepare
from agentlab_sched.notify.secrets import SecretBox, Unreadable, mask_secret, mask_url
from agentlab_sched.notify.sender import Sender
from agentlab_sched.notify.urls import check_text, normalise, validate_url
from agentlab_sched.settings import Settings

EVENTS = ("finished", "failed", "awaiting_approval")
#: Formats whose bots sign requests with a secret (generic signs an ``X-Agentlab-Signature`` header).
SIGNED_FORMATS = ("feishu", "dingtalk", "generic")


class _Keep:
    def __repr__(self) -> str:
        return "KEEP"


#: Leave a setting as it is.
KEEP = _Keep()


@dataclass(frozen=True)
class WebhookInfo:
    """A schedule's webhook as it may be shown: URL and secret masked."""

    schedule: str
    format: str | None
    url_hint: str | None
    secret: str | None
    events: tuple[str, ...]
    #: whether this call validated the URL (it does only when the URL or the format changed)
    validated: bool = False


@dataclass(frozen=True)
class TestResult:
    """What a test message proved: ``message`` says it in words, the rest in fields."""

    __test__ = False  # not a pytest test class

    ok: bool
    message: str
    http_status: int | None = None
    platform_code: str | None = None
    platform_text: str | None = None
    #: a failure that notifications would retry (network, HTTP 5xx/429, platform throttling)
    retryable: bool = False


def _events(events: Iterable[str] | str) -> list[str]:
    items = events.split(",") if isinstance(events, str) else list(events)
    chosen: list[str] = []
    for item in items:
        value = str(item).strip()
        if value not in EVENTS:
            raise ValidationError("notify.events.unknown", "webhook_events", value=value or None, choices=list(EVENTS))
        if value not in chosen:
            chosen.append(value)
    return chosen


def _open(
    box: SecretBox, token: str, schedule_id: int, field: str, name: str, *, refusal: str = "notify.undecryptable"
) -> str:
    """The value of a stored ciphertext of schedule ``name``; a `SchedError` saying why it cannot be used."""
    try:
        return box.open(token, schedule_id=schedule_id, field=field)
    except Unreadable as exc:
        code = "notify.bound_elsewhere" if exc.bound_elsewhere else refusal
        raise SchedError(code, field, schedule=name, field=term(f"notify.field.{field}")) from None


async def _schedule_row(conn: psycopg.AsyncConnection[Any], name: str) -> dict:
    row = await queries.one(conn, "schedule_webhook", {"name": name})
    if row is None:
        raise NotFound("schedule.not_found", "name", name=name)
    return row


async def set_webhook(
    conn: psycopg.AsyncConnection[Any],
    name: str,
    *,
    url: str | _Keep | None = KEEP,
    format: str | None = None,
    secret: str | None = None,
    events: Iterable[str] | str | None = None,
    settings: Settings,
) -> WebhookInfo:
    """Set the webhook of schedule ``name``; returns it masked.

    - ``url``: the new URL; ``None`` or ``""`` removes the webhook (format, URL and secret); `KEEP`
      (the default) leaves it.
    - ``format``: ``generic``, ``feishu``, ``wecom`` or ``dingtalk``; None keeps the current one, or
      takes it from the host when the URL changes.
    - ``secret``: the signing secret (Feishu, DingTalk; generic signs a header); None keeps it, ``""``
      removes it.
    - ``events``: any of ``finished``, ``failed``, ``awaiting_approval`` (a list or ``"a,b"``); None
      keeps them.

    The URL is validated only when it or the format actually changes, so an old setting never blocks
    other edits. Raises `ValidationError` (naming the field), `NotFound`, or `SchedError`
    ``notify.no_key`` when a URL or secret must be encrypted and no key is set.
    """
    chosen_events = _events(events) if events is not None else None
    async with conn.transaction():
        row = await _schedule_row(conn, name)
        sid = row["id"]
        fmt, url_enc, secret_enc, hint = (
            row["webhook_format"],
            row["webhook_url_enc"],
            row["webhook_secret_enc"],
            row["webhook_url_hint"],
        )
        validated = url_changed = False
        box: SecretBox | None = None
        if url is None or url == "":
            fmt = url_enc = secret_enc = hint = None
        elif url is not KEEP or (format is not None and format != fmt):
            box = SecretBox.from_settings(settings)
            if url is KEEP:
                if url_enc is None:
                    raise ValidationError("notify.url.required", "webhook_url")
                current: str | None = _open(box, url_enc, sid, "webhook_url", name)
                new_url = current
            else:
                current = box.try_open(url_enc, schedule_id=sid, field="webhook_url")
                new_url = str(url).strip()
            assert new_url is not None
            url_changed = current is None or normalise(new_url).url != current
            wanted = format if format is not None else (None if url_changed else fmt)
            if url_changed or wanted != fmt:
                checked = validate_url(new_url, wanted, allow_private=settings.webhook_allow_private)
                fmt, validated = checked.format, True
                if url_changed:
                    url_enc, hint = box.seal(checked.url, schedule_id=sid, field="webhook_url"), mask_url(checked.url)
        if secret:
            if url_enc is None:
                raise ValidationError("notify.url.required", "webhook_url")
            check_text(secret, "webhook_secret")
            box = box or SecretBox.from_settings(settings)
            if not url_changed:  # the stored URL stays: it must open with the key the secret is saved with
                _open(box, url_enc, sid, "webhook_url", name, refusal="notify.keys_differ")
            secret_enc = box.seal(secret, schedule_id=sid, field="webhook_secret")
        elif secret == "":
            secret_enc = None
        elif url_changed and secret_enc is not None:  # the stored secret stays: it must open with this key
            assert box is not None
            _open(box, secret_enc, sid, "webhook_secret", name, refusal="notify.keys_differ")
        if secret_enc is not None and fmt not in SIGNED_FORMATS and (validated or secret):
            raise ValidationError("notify.secret.not_signed", "webhook_secret", platform=term(f"notify.platform.{fmt}"))
        new_events = chosen_events if chosen_events is not None else list(row["webhook_events"])
        async with errors.translated():
            await queries.execute(
                conn,
                "set_webhook",
                {
                    "name": name,
                    "version": row["version"],
                    "format": fmt,
                    "url_enc": url_enc,
                    "secret_enc": secret_enc,
                    "hint": hint,
                    "events": new_events,
                },
            )
    return WebhookInfo(
        schedule=name,
        format=fmt,
        url_hint=hint,
        secret=mask_secret(secret_enc),
        events=tuple(new_events),
        validated=validated,
    )


async def get_webhook(conn: psycopg.AsyncConnection[Any], name: str) -> WebhookInfo:
    """The webhook of schedule ``name``, masked (no key needed)."""
    row = await _schedule_row(conn, name)
    return WebhookInfo(
        schedule=name,
        format=row["webhook_format"],
        url_hint=row["webhook_url_hint"],
        secret=mask_secret(row["webhook_secret_enc"]),
        events=tuple(row["webhook_events"]),
    )


async def rotate_secrets(conn: psycopg.AsyncConnection[Any], settings: Settings) -> int:
    """Re-encrypt every webhook URL and secret with the newest key; returns how many schedules.

    All or nothing: when some ciphertext opens with no key, nothing changes and the error names those
    schedules.
    """
    box = SecretBox.from_settings(settings)
    async with conn.transaction():
        rows = await queries.rows(conn, "webhook_ciphertexts")
        updates, bad = [], []
        for row in rows:
            new_url = box.rotate(row["webhook_url_enc"]) if row["webhook_url_enc"] else None
            new_secret = box.rotate(row["webhook_secret_enc"]) if row["webhook_secret_enc"] else None
            if (row["webhook_url_enc"] and new_url is None) or (row["webhook_secret_enc"] and new_secret is None):
                bad.append(row["name"])
            updates.append(
                {
                    "id": row["id"],
                    "old_url_enc": row["webhook_url_enc"],
                    "url_enc": new_url,
                    "old_secret_enc": row["webhook_secret_enc"],
                    "secret_enc": new_secret,
                }
            )
        if bad:
            raise SchedError("notify.rotate.undecryptable", "AGENTLAB_SCHED_SECRET_KEY", schedules=bad)
        # Bookkeeping, not a change of the schedules: no version bump, one audit row each ('rotate').
        async with errors.translated():
            await queries.execute_many(conn, "rotate_webhook", updates)
    return len(updates)


@dataclass(frozen=True)
class KeyProblem:
    """Pending notifications of one schedule that the keys here cannot open (`key_problems`)."""

    schedule: str
    pending: int
    #: ``notify.doctor.key_missing``, ``notify.doctor.bound_elsewhere`` or ``notify.doctor.no_key``
    code: str

    def message(self, locale: str) -> str:
        return render(self.code, locale, schedule=self.schedule, count=self.pending)


async def key_problems(conn: psycopg.AsyncConnection[Any], settings: Settings) -> list[KeyProblem]:
    """Schedules with pending notifications whose webhook the keys of ``settings`` cannot open, and why:
    saved with a key these settings lack (workers with only these keys leave them for one that has it),
    bound to another schedule (never sent), or no key set here at all."""
    rows = await queries.rows(conn, "pending_webhooks")
    if not rows:
        return []
    if not settings.secret_keys:
        return [KeyProblem(r["name"], r["pending"], "notify.doctor.no_key") for r in rows]
    box = SecretBox.from_settings(settings)
    problems = []
    for row in rows:
        try:
            box.open(row["webhook_url_enc"], schedule_id=row["id"], field="webhook_url")
            if row["webhook_secret_enc"]:
                box.open(row["webhook_secret_enc"], schedule_id=row["id"], field="webhook_secret")
        except Unreadable as exc:
            code = "notify.doctor.bound_elsewhere" if exc.bound_elsewhere else "notify.doctor.key_missing"
            problems.append(KeyProblem(row["name"], row["pending"], code))
    return problems


async def test_send(
    conn: psycopg.AsyncConnection[Any],
    name: str,
    settings: Settings,
    *,
    sender: Sender | None = None,
    now: datetime | None = None,
) -> TestResult:
    """Send one test message through the webhook of schedule ``name`` and say exactly what it proved.

    A delivery failure is a `TestResult` with ``ok`` False (the platform's code and text, and what to
    fix); a schedule without a webhook, a missing key or a URL that no longer validates raise
    `SchedError`.
    """
    loc = settings.locale
    row = await _schedule_row(conn, name)
    if not row["webhook_url_enc"]:
        raise SchedError("notify.no_webhook", "webhook_url", schedule=name)
    box = SecretBox.from_settings(settings)
    url = _open(box, row["webhook_url_enc"], row["id"], "webhook_url", name)
    secret = None
    if row["webhook_secret_enc"]:
        secret = _open(box, row["webhook_secret_enc"], row["id"], "webhook_secret", name)
    checked = validate_url(url, row["webhook_format"], allow_private=settings.webhook_allow_private)
    at = now or datetime.now(UTC)
    signed = bool(secret) and checked.format in ("feishu", "dingtalk")
    message = _test_message(name, row["timezone"], at, loc, signed=signed, public_url=settings.public_url)
    request = prepare(checked.format, checked.url, secret, message, at)
    own = sender is None
    sender = sender or Sender()
    try:
        verdict = await sender.send(request, checked.platform, allow_private=settings.webhook_allow_private)
    finally:
        if own:
            await sender.aclose()
    platform = term(f"notify.platform.{checked.platform}")
    if verdict.ok:
        if checked.platform == "generic":
            text = render(
                "notify.test.delivered_generic",
                loc,
                status=verdict.http_status,
                host=checked.host,
                signed=term("notify.test.signature_generic") if secret else "",
            )
        else:
            text = render(
                "notify.test.delivered",
                loc,
                status=verdict.http_status,
                platform=platform,
                signed=term("notify.test.signature_ok") if signed else "",
            )
    else:
        text = render("notify.test.failed", loc, problem=describe(verdict, loc))
        if verdict.outcome == "retry":
            text += " " + render("notify.test.would_retry", loc)
    return TestResult(
        ok=verdict.ok,
        message=text,
        http_status=verdict.http_status,
        platform_code=verdict.platform_code,
        platform_text=verdict.platform_text,
        retryable=verdict.outcome == "retry",
    )


test_send.__test__ = False  # type: ignore[attr-defined]  # not a pytest test
