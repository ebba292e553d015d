"""The dispatcher: delivers outbox rows, records every attempt, retries with capped backoff.

One attempt of one row, in three short steps (no transaction is held while the HTTP request runs):

1. claim: the oldest due pending row, ``FOR UPDATE SKIP LOCKED``; rows whose schedule lost its webhook
   or its subscription are dropped, rows whose bot is over its rate limit are postponed to the instant
   a slot frees (limits are counted in ``bot_sends`` under a per-bot advisory lock, so they hold across
   workers); otherwise a send slot is taken and the row leased (``next_attempt_at`` = now + lease), all
   in one transaction;
2. send, with httpx (timeout, no redirects), judged by the host's rules;
3. record: a ``deliveries`` row, and the outbox row ``sent``, ``failed`` (configuration errors are never
   retried; retryable ones give up after `MAX_ATTEMPTS`) or pending again at now + backoff.

A worker that dies between 1 and 3 leaves a leased row, retried when the lease ends. `Dispatcher.stop`
cancels sends still in flight after the grace and puts their rows back, pending and due at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import psycopg

from agentlab_sched import database as db
from agentlab_sched.database import queries
from agentlab_sched.database.connections import wait_for_notifies
from agentlab_sched.database.reconnect import Backoff, idle_wait, is_transient
from agentlab_sched.database.reconnect import describe as describe_error
from agentlab_sched.errors import SchedError, ValidationError
from agentlab_sched.messages import duration, render, term
from agentlab_sched.notify.content import EventInfo, event_message
from agentlab_sched.notify.platforms import RATE_LIMITS, Verdict, describe, prepare
from agentlab_sched.notify.secrets import SecretBox, Unreadable
from agentlab_sched.notify.sender import Sender, hide_urls
from agentlab_sched.notify.urls import normalise
from agentlab_sched.settings import Settings
from agentlab_sched.waiting import wait_at_most

log = logging.getLogger("agentlab_sched.notify")

#: The channel the outbox trigger NOTIFYs (payload: the schedule id; the listen_outbox query LISTENs).
CHANNEL = "agentlab_sched_outbox"
#: Attempts of a retryable failure before the row is given up (``failed``).
MAX_ATTEMPTS = 8
#: Backoff after the n-th failed delivery: DELIVERY_BACKOFF_BASE * 2 ** (n - 1) seconds, at most
#: DELIVERY_BACKOFF_CAP (the receiver's pause, not a reconnection's: that is database.reconnect's).
DELIVERY_BACKOFF_BASE = 10.0
DELIVERY_BACKOFF_CAP = 1800.0
#: How long a dispatcher's statement waits for a lock (seconds): a locked table holds up delivery, never
#: the worker's stop.
DISPATCH_LOCK_TIMEOUT = 2.0
#: How long a claimed row is hidden from other workers beyond the send timeout.
SEND_LEASE_MARGIN = 20.0
#: Sends one delivery loop keeps in flight at once: a slow receiver holds one of them (for at most the
#: sender's deadline), never the notifications of other receivers.
MAX_IN_FLIGHT = 16
#: How long a row this worker cannot decrypt is left for a worker that has the key.
KEY_WAIT = timedelta(minutes=5)


def backoff(attempt: int) -> float:
    """Seconds to wait after the ``attempt``-th failed attempt (1-based): capped exponential."""
    return min(DELIVERY_BACKOFF_CAP, DELIVERY_BACKOFF_BASE * 2 ** max(0, attempt - 1))


def log_safe(text: str | None, limit: int = 500) -> str:
    """Text from elsewhere (a receiver's reply, an error) fit for one log line: control characters and
    line breaks escaped, URLs masked, at most ``limit`` characters."""
    if not text:
        return ""
    escaped = "".join(
        c if c.isprintable() and c not in "\u2028\u2029" else c.encode("unicode_escape").decode("ascii") for c in text
    )
    escaped = hide_urls(escaped)
    return escaped if len(escaped) <= limit else escaped[:limit] + "…"


@dataclass
class Claim:
    """A leased outbox row, with everything needed to send it."""

    id: int
    attempts: int
    now: datetime
    fmt: str
    platform: str
    url: str
    secret: str | None
    info: EventInfo


def _dt(value: object) -> datetime | None:
    if isinstance(value, datetime):
        return value
    if isinstance(value, str) and value:
        return datetime.fromisoformat(value)
    return None


def event_info(row: dict) -> EventInfo:
    """The snapshot a notification speaks of: status and error as of the change, times as known now."""
    payload = row["payload"] or {}
    return EventInfo(
        event=row["event"],
        schedule=row["schedule"],
        timezone=row["timezone"] or "UTC",
        run_id=row["run_id"],
        status=payload.get("status") or row["run_status"] or row["event"],
        segment=row["segment"],
        error=row["event_error"] or row["run_error"],
        started_at=_dt(payload.get("started_at")) or row["started_at"],
        finished_at=_dt(payload.get("finished_at")) or row["finished_at"],
        kind=row["kind"],
        fire_at=row["fire_at"],
        timeout=row["run_timeout"] or row["schedule_timeout"],
        step=row["step"],
    )


class Outbox:
    """Claim, send and record outbox rows on one connection (autocommit)."""

    def __init__(
        self, conn: psycopg.AsyncConnection[Any], settings: Settings, sender: Sender, box: SecretBox | None = None
    ) -> None:
        self.conn = conn
        self.settings = settings
        self.sender = sender
        self.box = box or SecretBox.from_settings(settings)
        self.lease = timedelta(seconds=sender.timeout + SEND_LEASE_MARGIN)
        self._warned: set[int] = set()

    async def _now(self, now: datetime | None) -> datetime:
        if now is not None:
            return now
        at: datetime = await queries.value(self.conn, "db_now")
        return at

    async def _close_row(self, row_id: int, status: str, now: datetime, detail: str) -> None:
        """End a row without sending it (``dropped`` or ``failed``), recording why."""
        params = {"id": row_id, "status": status, "now": now, "detail": detail}
        await queries.execute(self.conn, "close_outbox_row", params)

    async def claim(self, now: datetime | None = None) -> Claim | None:
        """Lease the next due row that can be sent now; None when there is none."""
        loc = self.settings.locale
        while True:
            at = await self._now(now)
            async with self.conn.transaction():
                row = await queries.one(self.conn, "claim_outbox", {"now": at})
                if row is None:
                    return None
                if row["schedule"] is None or row["webhook_url_enc"] is None:
                    await self._close_row(row["id"], "dropped", at, render("notify.dropped.no_webhook", loc))
                    continue
                if row["event"] not in (row["webhook_events"] or []):
                    detail = render("notify.dropped.unsubscribed", loc, event=term(f"notify.event.{row['event']}"))
                    await self._close_row(row["id"], "dropped", at, detail)
                    continue
                field = "webhook_url"
                try:
                    url = self.box.open(row["webhook_url_enc"], schedule_id=row["schedule_id"], field=field)
                    secret = None
                    if row["webhook_secret_enc"]:
                        field = "webhook_secret"
                        secret = self.box.open(row["webhook_secret_enc"], schedule_id=row["schedule_id"], field=field)
                    normal = normalise(url)
                except Unreadable as exc:
                    if exc.bound_elsewhere:  # copied from another schedule: no key will ever make it usable
                        where = term(f"notify.field.{field}")
                        detail = render("notify.bound_elsewhere", loc, schedule=row["schedule"], field=where)
                        await self._close_row(row["id"], "failed", at, detail)
                        continue
                    # Saved with a key this worker lacks: leave it for a worker that has it (doctor says so).
                    detail = render("notify.waiting_for_key", loc, schedule=row["schedule"])
                    await queries.execute(
                        self.conn, "outbox_wait_for_key", {"at": at + KEY_WAIT, "detail": detail, "id": row["id"]}
                    )
                    if row["id"] not in self._warned:
                        self._warned.add(row["id"])
                        log.warning("notification %s: %s", row["id"], log_safe(detail))
                    continue
                except ValidationError as exc:
                    await self._close_row(row["id"], "failed", at, exc.message(loc))
                    continue
                platform = normal.platform
                url = normal.url
                # Bodies and verdicts follow the host: a platform host gets its platform's body whatever
                # the stored format says.
                fmt = platform if platform != "generic" else (row["webhook_format"] or "generic")
                wait_until = await self._take_slot(normal.bot, platform, at)
                if wait_until is not None:
                    await queries.execute(self.conn, "outbox_next_attempt", {"at": wait_until, "id": row["id"]})
                    continue
                await queries.execute(self.conn, "outbox_next_attempt", {"at": at + self.lease, "id": row["id"]})
                return Claim(
                    id=row["id"],
                    attempts=row["attempts"],
                    now=at,
                    fmt=fmt,
                    platform=platform,
                    url=url,
                    secret=secret,
                    info=event_info(row),
                )

    async def _take_slot(self, bot: str, platform: str, now: datetime) -> datetime | None:
        """Take a send slot for ``bot`` at ``now``; or the instant the next slot frees, when it is full."""
        limits = RATE_LIMITS.get(platform, ())
        if not limits:
            return None
        await queries.execute(self.conn, "lock_bot", {"bot": bot})
        free_at: datetime | None = None
        for count, seconds in limits:
            window = timedelta(seconds=seconds)
            params = {"bot": bot, "since": now - window, "now": now, "count": count}
            full = await queries.one(self.conn, "bot_window_full", params)
            if full is not None:
                frees = full["sent_at"] + window
                free_at = frees if free_at is None else max(free_at, frees)
        if free_at is not None:
            return free_at
        longest = timedelta(seconds=max(seconds for _, seconds in limits))
        await queries.execute(self.conn, "take_bot_slot", {"bot": bot, "now": now, "before": now - 2 * longest})
        return None

    async def send(self, claim: Claim) -> Verdict:
        """One HTTP attempt for a claimed row."""
        message = event_message(claim.info, self.settings.locale, self.settings.public_url)
        request = prepare(claim.fmt, claim.url, claim.secret, message, claim.now)
        return await self.sender.send(request, claim.platform, allow_private=self.settings.webhook_allow_private)

    async def record(self, claim: Claim, verdict: Verdict, now: datetime | None = None) -> str:
        """Record the attempt; the outbox row becomes ``sent``, ``failed`` or pending for a retry."""
        loc = self.settings.locale
        at = now if now is not None else await self._now(None)
        attempt = claim.attempts + 1
        detail = describe(verdict, loc) or None
        outcome = verdict.outcome
        next_at = None
        if outcome == "retry":
            if attempt >= MAX_ATTEMPTS:
                outcome, detail = "failed", render("notify.gave_up", loc, attempts=attempt, problem=detail)
            else:
                delay = max(backoff(attempt), verdict.min_delay)
                next_at = at + timedelta(seconds=delay)
                detail = render("notify.retry", loc, problem=detail, attempt=attempt, delay=duration(delay, loc))
        status = {"sent": "sent", "failed": "failed", "retry": "pending"}[outcome]
        await queries.execute(
            self.conn,
            "record_delivery",
            {
                "id": claim.id,
                "at": at,
                "http_status": verdict.http_status,
                "platform_code": verdict.platform_code,
                "platform_text": verdict.platform_text,
                "outcome": outcome,
                "detail": detail,
                "status": status,
                "attempts": attempt,
                "last_error": None if outcome == "sent" else detail,
                "next_at": next_at,
            },
        )
        if outcome != "sent":
            log.warning("notification %s of schedule %s: %s", claim.id, log_safe(claim.info.schedule), log_safe(detail))
        return outcome

    async def release(self, claim: Claim) -> None:
        """Put back a row whose send was cancelled: pending, due at once, the attempt recorded."""
        detail = render("notify.interrupted", self.settings.locale)
        await queries.execute(self.conn, "release_outbox_row", {"id": claim.id, "at": claim.now, "detail": detail})

    async def process_one(self, now: datetime | None = None) -> str | None:
        """Claim, send and record one row: its outcome, or None when nothing is due."""
        claim = await self.claim(now)
        if claim is None:
            return None
        verdict = await self.send(claim)
        return await self.record(claim, verdict, now)

    async def seconds_to_next(self) -> float | None:
        """Seconds until the earliest pending row is due (0 when overdue), None when there is none."""
        value = await queries.value(self.conn, "outbox_next_due")
        return None if value is None else max(0.0, float(value))


async def deliver_due(
    conn: psycopg.AsyncConnection[Any], settings: Settings, *, sender: Sender, now: datetime | None = None
) -> dict[str, int]:
    """Deliver every row due at ``now`` (the database clock by default), one after another.

    Returns how many attempts ended ``sent``, ``retry`` and ``failed``. For tests and for hosts that
    drive delivery themselves; workers use `Dispatcher`.
    """
    outbox = Outbox(conn, settings, sender)
    counts = {"sent": 0, "retry": 0, "failed": 0}
    while (outcome := await outbox.process_one(now)) is not None:
        counts[outcome] += 1
    return counts


class Dispatcher:
    """Delivers notifications beside a worker: woken by NOTIFY, polling as a fallback.

    ``start()`` delivers what is pending at once, then waits for NOTIFY on `CHANNEL`, for the next
    retry, or ``poll_interval``; ``stop(grace)`` lets sends in flight finish within the grace, cancels
    the rest and leaves their rows pending for the next worker. A stopped dispatcher stays stopped
    (even when its ``start()`` was scheduled but had not run yet); make a new one to deliver again.
    """

    def __init__(
        self,
        url: str,
        settings: Settings,
        *,
        sender: Sender | None = None,
        concurrency: int = 2,
        poll_interval: float = 30.0,
        listen_url: str | None = None,
    ) -> None:
        self.url = url
        #: Where it LISTENs: ``url``, or a direct connection when ``url`` goes through a transaction pooler.
        self.listen_url = listen_url or url
        self.settings = settings
        self.concurrency = max(1, concurrency)
        self.poll_interval = poll_interval
        self._own_sender = sender is None
        self._sender = sender
        self._workers: list[asyncio.Task[None]] = []
        self._listener: asyncio.Task[None] | None = None
        self._wakes: list[asyncio.Event] = []
        self._sends: set[asyncio.Task[Verdict]] = set()
        self._stopping = False
        self._cancel_sends = False

    @property
    def running(self) -> bool:
        """Whether the dispatcher has tasks alive."""
        return any(not t.done() for t in [*self._workers, *([self._listener] if self._listener else [])])

    async def run_once(self, now: datetime | None = None) -> dict[str, int]:
        """Deliver every row due at ``now`` on a connection of its own (see `deliver_due`)."""
        conn = await db.connect(self.url, locale=self.settings.locale)
        sender = self._sender or Sender()
        try:
            return await deliver_due(conn, self.settings, sender=sender, now=now)
        finally:
            await conn.close()
            if self._sender is None:
                await sender.aclose()

    async def start(self) -> None:
        """Start delivering in the background; without a secret key it logs why and does nothing."""
        if self.running or self._stopping:
            return
        if not self.settings.secret_keys:
            log.warning(render("notify.no_key_dispatch", self.settings.locale))
            return
        try:
            SecretBox.from_settings(self.settings)  # a malformed key fails here, not in every worker
        except SchedError as exc:
            log.error("%s", exc.message(self.settings.locale))
            return
        if self._sender is None:
            self._sender = Sender()
        self._wakes = [asyncio.Event() for _ in range(self.concurrency)]
        self._listener = asyncio.create_task(self._listen(), name="agentlab-sched-notify-listen")
        self._workers = [
            asyncio.create_task(self._work(wake), name=f"agentlab-sched-notify-{i}")
            for i, wake in enumerate(self._wakes)
        ]

    def wake(self) -> None:
        """Look for due rows now (NOTIFY does this; so can a host that knows better)."""
        for event in self._wakes:
            event.set()

    async def stop(self, grace: float = 1.5) -> None:
        """Stop within ``grace`` seconds: sends in flight get most of it, then are cancelled."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace
        self._stopping = True
        self.wake()
        tasks = list(self._workers)
        if self._listener is not None:
            self._listener.cancel()
            tasks.append(self._listener)
        if tasks:
            # Sends may finish until 2/3 of the grace; the rest is for putting cancelled rows back.
            await asyncio.wait(tasks, timeout=max(0.0, grace * 2 / 3))
            self._cancel_sends = True
            for send in list(self._sends):
                send.cancel()
            _, pending = await asyncio.wait(tasks, timeout=max(0.0, deadline - loop.time()))
            for task in pending:  # stuck in the database: give up on putting rows back
                task.cancel()
            if pending:
                await asyncio.wait(pending, timeout=0.1)
        self._workers, self._listener = [], None
        if self._own_sender and self._sender is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._sender.aclose(), timeout=0.1)
            self._sender = None

    async def _listen(self) -> None:
        """Wake the workers on every NOTIFY of the outbox trigger; reconnect after a lost connection."""
        backoff = Backoff()
        while not self._stopping:
            try:
                conn = await self._connect(self.listen_url)
                try:
                    await queries.execute(conn, "listen_outbox")
                    backoff.reset()
                    self.wake()  # anything written while we were not listening
                    while True:
                        if await wait_for_notifies(conn, None):
                            self.wake()
                finally:
                    with contextlib.suppress(Exception):
                        await asyncio.wait_for(conn.close(), 1.0)
            except psycopg.Error as exc:
                wait = backoff.next()
                log.warning(
                    "notification listener: %s; reconnecting in %.1f s (attempt %d)",
                    describe_error(exc),
                    wait,
                    backoff.attempts,
                )
                await asyncio.sleep(wait)

    async def _connect(self, url: str | None = None) -> psycopg.AsyncConnection[Any]:
        return await db.connect(
            url or self.url, locale=self.settings.locale, purpose="notify", lock_timeout=DISPATCH_LOCK_TIMEOUT
        )

    async def _work(self, wake: asyncio.Event) -> None:
        """One delivery loop with its own connection: it claims and records rows on it, and keeps up to
        :data:`MAX_IN_FLIGHT` sends going at once (each to whatever receiver its row names)."""
        assert self._sender is not None
        backoff = Backoff()
        while not self._stopping:
            conn = None
            inflight: dict[asyncio.Task[Verdict], Claim] = {}
            try:
                conn = await self._connect()
                outbox = Outbox(conn, self.settings, self._sender)
                while not self._stopping:
                    wake.clear()
                    for send in [t for t in inflight if t.done()]:
                        await self._settle(outbox, send, inflight.pop(send))
                    if len(inflight) < MAX_IN_FLIGHT and await self._start_one(outbox, inflight):
                        backoff.reset()
                        continue
                    backoff.reset()
                    wait = await outbox.seconds_to_next()
                    wait = self.poll_interval if wait is None else min(self.poll_interval, max(wait, 0.05))
                    if inflight:  # woken by a send ending too
                        woken = asyncio.ensure_future(wake.wait())
                        try:
                            await asyncio.wait({*inflight, woken}, timeout=wait, return_when=asyncio.FIRST_COMPLETED)
                        finally:
                            woken.cancel()
                    else:
                        await idle_wait(conn, wake, wait)  # a connection cut while idle is noticed at once
                if inflight:  # stopping: the sends end (stop() cancels them); their rows are put back
                    await asyncio.wait(set(inflight))
                    for send in list(inflight):
                        await self._settle(outbox, send, inflight.pop(send))
            except Exception as exc:
                pause = backoff.next()
                log.warning(
                    "notification dispatcher: %s; retrying in %.1f s (attempt %d)",
                    hide_urls(describe_error(exc)),
                    pause,
                    backoff.attempts,
                    exc_info=not is_transient(exc),
                )
                await wait_at_most(wake, pause)
            finally:
                for send in inflight:  # left behind (the connection broke): their leases end, they are retried
                    send.cancel()
                    self._sends.discard(send)
                if conn is not None:
                    with contextlib.suppress(Exception):
                        await asyncio.wait_for(conn.close(), 1.0)

    async def _start_one(self, outbox: Outbox, inflight: dict[asyncio.Task[Verdict], Claim]) -> bool:
        """Claim one row and start its send; False when nothing is due."""
        if self._stopping:
            return False
        claim = await outbox.claim()
        if claim is None:
            return False
        send = asyncio.create_task(outbox.send(claim), name="agentlab-sched-notify-send")
        self._sends.add(send)
        if self._cancel_sends:
            send.cancel()
        inflight[send] = claim
        return True

    async def _settle(self, outbox: Outbox, send: asyncio.Task[Verdict], claim: Claim) -> None:
        """Record a finished send; a cancelled one is put back for the next worker."""
        self._sends.discard(send)
        if send.cancelled():
            await outbox.release(claim)
            return
        await outbox.record(claim, send.result())
