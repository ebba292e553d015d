"""The ASGI application: routes, sign-in, and the pages (server-rendered, Jinja2 with autoescape).

Every page is a plain HTML document that works without JavaScript: lists are tables, actions are
``<form method="post">`` with a submit button ``name="action"``. The small script the pages load
(``static/pages.js``) only makes them update as things happen (Server-Sent Events) and previews an edited
cron as you type.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode
from zoneinfo import ZoneInfo

import jinja2
import psycopg
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.sessions import SessionMiddleware
from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from agentlab_sched import errors, messages
from agentlab_sched.core import cron as cronlib
from agentlab_sched.core import planner
from agentlab_sched.database import connect, queries
from agentlab_sched.errors import SchedError
from agentlab_sched.firing import requests as fire_requests
from agentlab_sched.notify import test_send
from agentlab_sched.observe import health
from agentlab_sched.runs import lifecycle
from agentlab_sched.schedules import admin
from agentlab_sched.web import words
from agentlab_sched.web.config import WebConfig
from agentlab_sched.web.live import Hub
from agentlab_sched.web.load import LoadMap
from agentlab_sched.web.people import People, Person, Refused
from agentlab_sched.web.security import SecurityHeaders, csrf_token, same_origin, valid_csrf

__all__ = ["create_app"]

logger = logging.getLogger(__name__)

HERE = Path(__file__).parent
PAGE_SIZE = 50
#: Seconds the health page keeps doctor's findings for a role.
DOCTOR_TTL = 30.0
#: The most schedules one bulk pause or resume changes.
BULK_LIMIT = 1000
SCHEDULE_FILTERS = ("active", "paused", "failing", "overdue", "stopped", "code")
OVERLAPS = ("skip", "buffer_one", "buffer_all", "allow_all", "cancel_other")
#: The fields the edit form changes, and how a posted value becomes an argument of admin.alter.
EDIT_FIELDS = ("cron", "timezone", "task", "inputs", "overlap", "queue", "priority")


#: The status of each refusal the pages make themselves (the others: 403).
_REFUSAL_STATUS = {"web.refused.signed_out": 401, "web.refused.unknown_action": 400}


def _refuse(code: str) -> errors.NotAllowed:
    """A request the pages refuse before the database sees it (a missing token, read-only mode)."""
    return errors.NotAllowed(f"web.refused.{code}")


def _status_of(exc: BaseException) -> int:
    """The HTTP status of a refusal: 404 for what does not exist, 403 for what the role or the server may not
    do, 400 for bad input, 409 for a request the state does not allow."""
    if isinstance(exc, SchedError) and exc.code in _REFUSAL_STATUS:
        return _REFUSAL_STATUS[exc.code]
    err = exc if isinstance(exc, SchedError) else errors.from_database(exc)
    if isinstance(err, errors.NotFound):
        return 404
    if isinstance(err, errors.NotAllowed) or getattr(exc, "sqlstate", None) == "42501":
        return 403
    if isinstance(err, errors.ValidationError):
        return 400
    return 409


# ------------------------------------------------------------------------------------------ helpers


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"),
        autoescape=True,  # every value: names, reasons, errors and inputs are anybody's text
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.globals["when"] = words.when
    env.globals["zone_abbrev"] = words.zone_abbrev
    env.globals["plain_value"] = words.plain_value
    env.globals["value_words"] = words.value
    return env


def _locale(request: Request) -> str:
    return words.choose_locale(request.session.get("lang"), request.headers.get("accept-language"))


def _problem_text(exc: BaseException, locale: str) -> tuple[str, str | None]:
    """The database's refusal in the reader's language, and the field it names: our own errors from their
    catalogue, anything else PostgreSQL said (a privilege it lacks) in its own words. Never a traceback."""
    if isinstance(exc, SchedError):
        return exc.message(locale), exc.field
    err = errors.from_database(exc)
    if err is not None:
        return err.message(locale), err.field
    if isinstance(exc, psycopg.Error):
        diag = getattr(exc, "diag", None)
        primary = (diag.message_primary if diag is not None else None) or str(exc).splitlines()[0]
        code = "refused.privilege" if getattr(exc, "sqlstate", None) == "42501" else "refused.database"
        return words.label(code, locale, message=primary), None
    return words.label("refused.unexpected", locale), None


def _parse_local(value: str, tz: str, field: str) -> datetime:
    """A ``datetime-local`` input (``2026-03-08T02:30``) in zone ``tz``; ValidationError naming ``field``."""
    try:
        parsed = datetime.fromisoformat(value.strip())
    except ValueError:
        raise errors.ValidationError("web.bad_time", field, field=field, value=value) from None
    return parsed.replace(tzinfo=ZoneInfo(tz)) if parsed.tzinfo is None else parsed


def _key_after(value: str | None) -> tuple[datetime, str] | None:
    """A keyset cursor ``<iso time>|<id>`` from the URL (None when absent or malformed)."""
    if not value or "|" not in value:
        return None
    at, _, key = value.partition("|")
    try:
        return datetime.fromisoformat(at), key
    except ValueError:
        return None


# --------------------------------------------------------------------------------------- the app


class Dashboard:
    """One server's state: its configuration, its signed-in people, its live hub, its templates."""

    def __init__(self, config: WebConfig) -> None:
        self.config = config
        self.people = People(config)
        self.hub = Hub(config.database_url)
        self.env = _environment()
        self.load = LoadMap(config.database_url)
        self.hub.watchers.append(self.load.heard)
        self.doctor_cache: dict[str, tuple[float, datetime, list[health.Finding]]] = {}

    # ------------------------------------------------------------------------------ rendering

    def url(self, path: str, **query: object) -> str:
        """A link to ``path`` under the base path, with ``query`` (None values left out)."""
        params = {k: v for k, v in query.items() if v not in (None, "")}
        return self.config.prefix + path + (("?" + urlencode(params, doseq=True)) if params else "")

    def render(self, request: Request, template: str, status_code: int = 200, **context: Any) -> HTMLResponse:
        locale = _locale(request)
        person = self._person(request)

        def t(code: str, **params: object) -> str:
            return words.label(code, locale, **params)

        def may(action: str) -> bool:
            return person is not None and not self.config.read_only and person.may.get(action, False)

        def status_word(kind: str, status: str | None) -> str:
            if status is None:
                return ""
            code = f"{kind}.status.{status}"
            return messages.render(code, locale) if code in messages.CATALOG else status

        lang_links = {
            loc: self.url(request.url.path[len(self.config.prefix) :] or "/", **{**request.query_params, "lang": loc})
            for loc in messages.LOCALES
        }
        flash = request.session.pop("flash", None)
        html = self.env.get_template(template).render(
            t=t, may=may, status_word=status_word, locale=locale, person=person, config=self.config,
            url=self.url, csrf=csrf_token(request.session), lang_links=lang_links, flash=flash,
            path=request.url.path, **context,
        )  # fmt: skip
        return HTMLResponse(html, status_code=status_code, headers={"cache-control": "no-store"})

    def _person(self, request: Request) -> Person | None:
        return self.people.get(request.session.get("person"))

    async def person(self, request: Request) -> Person | None:
        """The signed-in person; with ``--local``, the configured role, signed in on first visit."""
        person = self._person(request)
        if person is None and self.config.local:
            signed = await self.people.sign_in(None, None)
            if isinstance(signed, Refused):  # the configured role itself is refused: the login form remains
                logger.warning("web --local: the database refused the configured role: %s", signed.words)
                return None
            request.session["person"] = signed.id
            return signed
        return person

    @contextlib.asynccontextmanager
    async def conn(self, request: Request, person: Person) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        async with person.connection(_locale(request)) as conn:
            yield conn

    def flash(self, request: Request, code: str, **params: object) -> None:
        """A line for the next page (after the redirect of a post): its words in the reader's language."""
        request.session["flash"] = {"text": words.label(code, _locale(request), **params), "level": "ok"}

    # ------------------------------------------------------------------------------ checks

    async def check_post(self, request: Request, action: str | None = None) -> tuple[Person, dict[str, Any]]:
        """The signed-in person and the posted form, once the origin, the token and the mode allow it."""
        form = await request.form()
        data: dict[str, Any] = {k: form.getlist(k) if k == "names" else form.get(k) for k in form}
        if not same_origin(request):
            raise _refuse("origin")
        if not valid_csrf(request.session, data.get("csrf")):
            raise _refuse("csrf")
        person = await self.person(request)
        if person is None:
            raise _refuse("signed_out")
        if self.config.read_only:
            raise _refuse("read_only")
        return person, data

    # ------------------------------------------------------------------------------ lifecycle

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        await self.people.start()
        await self.hub.start()
        keeper = asyncio.get_running_loop().create_task(self.load.run())
        try:
            yield
        finally:
            keeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await keeper
            await self.hub.close()
            await self.people.close()


def _guard(
    page: Callable[[Dashboard, Request, Person], Awaitable[Response]],
) -> Callable[[Dashboard, Request], Awaitable[Response]]:
    """A page for signed-in people: the others are sent to /login (and back here after)."""

    async def guarded(dash: Dashboard, request: Request) -> Response:
        if "lang" in request.query_params:
            chosen = messages.known_locale(request.query_params["lang"])
            if chosen:
                request.session["lang"] = chosen
        person = await dash.person(request)
        if person is None:
            target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
            return RedirectResponse(dash.url("/login", next=target), status_code=303)
        try:
            return await page(dash, request, person)
        except (SchedError, psycopg.Error) as exc:
            message, _ = _problem_text(exc, _locale(request))
            return dash.render(request, "refused.html", status_code=_status_of(exc), message=message)

    return guarded


# ------------------------------------------------------------------------------------------ sign-in


async def login_page(dash: Dashboard, request: Request) -> Response:
    if "lang" in request.query_params:
        chosen = messages.known_locale(request.query_params["lang"])
        if chosen:
            request.session["lang"] = chosen
    next_url = request.query_params.get("next") or ""
    if request.method == "GET":
        return dash.render(request, "login.html", next_url=next_url, error=None, username="")
    form = await request.form()
    next_url = str(form.get("next") or "")
    username = str(form.get("username") or "").strip()
    if not same_origin(request) or not valid_csrf(request.session, form.get("csrf")):
        code = "refused.origin" if not same_origin(request) else "refused.csrf"
        return dash.render(request, "login.html", status_code=403, next_url=next_url, username=username,
                           error=words.label(code, _locale(request)))  # fmt: skip
    if not username:
        return dash.render(request, "login.html", status_code=400, next_url=next_url, username=username,
                           error=words.label("login.need_username", _locale(request)))  # fmt: skip
    person = await dash.people.sign_in(username, str(form.get("password") or ""))
    if isinstance(person, Refused):
        return dash.render(request, "login.html", status_code=401, next_url=next_url, username=username,
                           error=words.label("login.refused", _locale(request), message=person.words))  # fmt: skip
    await dash.people.sign_out(request.session.get("person"))
    lang = request.session.get("lang")
    request.session.clear()
    if lang:
        request.session["lang"] = lang
    request.session["person"] = person.id
    csrf_token(request.session)  # a new token for the new session
    # Only a path of ours: never a redirect elsewhere.
    target = next_url if next_url.startswith(dash.config.prefix + "/") and not next_url.startswith("//") else ""
    return RedirectResponse(target or dash.url("/schedules"), status_code=303)


async def logout(dash: Dashboard, request: Request) -> Response:
    # A GET is enough: the cookie is SameSite=Strict, so no other site can sign a person out.
    await dash.people.sign_out(request.session.get("person"))
    lang = request.session.get("lang")
    request.session.clear()
    if lang:
        request.session["lang"] = lang
    if dash.config.local:
        return dash.render(request, "signed_out.html")
    return RedirectResponse(dash.url("/login"), status_code=303)


async def healthz(dash: Dashboard, request: Request) -> Response:
    try:
        conn = await connect(dash.config.database_url, purpose="web healthz")
        try:
            await queries.value(conn, "web_ping")
        finally:
            await conn.close()
    except (psycopg.Error, OSError):
        return PlainTextResponse("database unreachable\n", status_code=503)
    return PlainTextResponse("ok\n")


async def events(dash: Dashboard, request: Request) -> Response:
    if await dash.person(request) is None:
        return PlainTextResponse("sign in first\n", status_code=401)
    return StreamingResponse(
        dash.hub.subscribe(),
        media_type="text/event-stream",
        headers={"cache-control": "no-store", "x-accel-buffering": "no"},
    )


async def home(dash: Dashboard, request: Request) -> Response:
    return RedirectResponse(dash.url("/schedules"), status_code=303)


# ---------------------------------------------------------------------------------------- schedules


def _schedule_filters(source: Mapping[str, Any]) -> dict[str, str | None]:
    status = source.get("status") or None
    return {
        "status": status if status in SCHEDULE_FILTERS else None,
        "task": (source.get("task") or None),
        "text": (str(source.get("q") or "").strip() or None),
    }


@_guard
async def schedules_page(dash: Dashboard, request: Request, person: Person) -> Response:
    if request.method == "POST":
        return await _bulk(dash, request)
    filters = _schedule_filters(request.query_params)
    after = request.query_params.get("after") or None
    locale = _locale(request)
    status_words = {st: messages.render(f"fire.status.{st}", locale) for st in lifecycle.FIRE_STATUSES}
    async with dash.conn(request, person) as conn:
        rows = await queries.rows(conn, "web_schedules", {**filters, "after": after, "limit": PAGE_SIZE + 1})
        more = len(rows) > PAGE_SIZE
        rows = rows[:PAGE_SIZE]
        changed = await queries.rows(conn, "web_changed_by", {"ids": [row["id"] for row in rows]}) if rows else []
    changed_by = {c["id"]: c["changed_by"] for c in changed}
    for row in rows:
        row["changed_by"] = changed_by.get(row["id"])
        row["words"] = words.cron_words(row["cron"], row["timezone"], locale)
        row["dst"] = _dst_mark(row)
        for fire in row["strip"]:
            # Said once, in Python: the strip is 1,500 cells a page (its title and its screen-reader text).
            reason = words.reason(fire["reason_code"], fire["reason_params"], fire["reason"], locale)
            said = f"{words.when(fire['fire_at'], row['timezone'])} {status_words[fire['status']]}"
            fire["label"] = f"{said}: {reason}" if reason else said
    next_url = (
        dash.url(
            "/schedules", status=filters["status"], task=filters["task"], q=filters["text"], after=rows[-1]["name"]
        )
        if more
        else None
    )
    return dash.render(request, "schedules.html", rows=rows, filters=filters, next_url=next_url,
                       statuses=SCHEDULE_FILTERS, after=after)  # fmt: skip


def _dst_mark(row: Mapping[str, Any]) -> str | None:
    """The DST note of a schedule's next fire (moved by a gap, in a repeated hour), or None."""
    if row["next_run_at"] is None:
        return None
    try:
        expr = planner.cron_of(row)
        coming = expr.upcoming(row["next_run_at"] - timedelta(microseconds=1), row["timezone"], 1)
    except (SchedError, ValueError, KeyError):
        return None
    return coming[0].note if coming and coming[0].note else None


async def _bulk(dash: Dashboard, request: Request) -> Response:
    person, form = await dash.check_post(request)
    action = form.get("action")
    if action not in ("pause", "resume"):
        raise _refuse("unknown_action")
    if not person.may.get(action):
        # The database says no itself: try the first, show its words.
        pass
    filters = _schedule_filters(form)
    locale = _locale(request)
    names: list[str] = [n for n in form.get("names") or [] if isinstance(n, str) and n]
    async with dash.conn(request, person) as conn:
        if not names:
            names = [
                r["name"] for r in await queries.rows(conn, "web_schedule_names", {**filters, "limit": BULK_LIMIT})
            ]
        confirmed = form.get("confirm")
        if confirmed != str(len(names)):
            return dash.render(request, "bulk_confirm.html", action=action, names=names, filters=filters,
                               reason=form.get("reason") or "")  # fmt: skip
        done, refused = 0, []
        for name in names:
            try:
                if action == "pause":
                    await admin.pause(conn, name, str(form.get("reason") or "") or None)
                else:
                    await admin.resume(conn, name)
                done += 1
            except (SchedError, psycopg.Error) as exc:
                refused.append((name, _problem_text(exc, locale)[0]))
    if refused and not done:
        return dash.render(request, "refused.html", status_code=403, message=refused[0][1], refused=refused)
    dash.flash(request, f"done.bulk_{action}", count=done)
    return RedirectResponse(
        dash.url("/schedules", status=filters["status"], task=filters["task"], q=filters["text"]), status_code=303
    )


@_guard
async def schedule_page(dash: Dashboard, request: Request, person: Person) -> Response:
    name = request.path_params["name"]
    if request.method == "POST":
        return await _schedule_action(dash, request, name)
    return await _schedule_view(dash, request, person, name)


async def _schedule_view(
    dash: Dashboard,
    request: Request,
    person: Person,
    name: str,
    *,
    status: int = 200,
    error: str | None = None,
    field_errors: Mapping[str, str] | None = None,
    edit: Mapping[str, Any] | None = None,
    backfill: Mapping[str, Any] | None = None,
    notice: str | None = None,
) -> Response:
    locale = _locale(request)
    before = _key_after(request.query_params.get("before"))
    async with dash.conn(request, person) as conn:
        s = await admin.get(conn, name)
        st = await admin.status(conn, name)
        try:
            coming = await admin.upcoming(conn, name, 20, skipped=True)
        except SchedError:
            coming = []
        ledger = await queries.rows(conn, "web_ledger", {
            "id": s.id, "before_at": before[0] if before else None, "before_id": int(before[1]) if before else None,
            "limit": PAGE_SIZE + 1,
        })  # fmt: skip
        runs = await lifecycle.list_runs(conn, name, limit=20)
        changes = await queries.rows(conn, "web_changes", {"id": s.id, "limit": 20})
    expr = planner.cron_of(vars(s))
    upcoming = [
        {
            "n": i,
            "at": t.at,
            "local": t.local,
            "note": words.dst_note(expr, t, locale),
            "skipped": t.note == "dst_skipped",
        }
        for i, t in enumerate(coming, 1)
    ]
    more = len(ledger) > PAGE_SIZE
    ledger = ledger[:PAGE_SIZE]
    older = (
        dash.url(f"/schedules/{name}", before=f"{ledger[-1]['fire_at'].isoformat()}|{ledger[-1]['fire_id']}")
        if more
        else None
    )
    definition = s.as_dict()
    for hidden in ("webhook_url", "webhook_secret"):
        definition.pop(hidden, None)
    return dash.render(
        request, "schedule.html", status_code=status, s=s, st=st, upcoming=upcoming, ledger=ledger, runs=runs,
        changes=[_change(c) for c in changes], older=older, error=error, field_errors=field_errors or {},
        edit=edit or {k: _form_value(getattr(s, k)) for k in EDIT_FIELDS}, backfill=backfill, notice=notice,
        words_=words.cron_words(s.cron, s.timezone, locale), overlaps=OVERLAPS,
        definition=definition,
    )  # fmt: skip


def _form_value(value: Any) -> str:
    if isinstance(value, Mapping):
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    return "" if value is None else str(value)


#: Keys of the audit that never reach a page (the webhook's ciphertext; the audit masks it already).
_HIDDEN_AUDIT = ("webhook_url_enc", "webhook_secret_enc", "webhook_url", "webhook_secret")


def _change(row: Mapping[str, Any]) -> dict[str, Any]:
    old = {k: v for k, v in (row["old_values"] or {}).items() if k not in _HIDDEN_AUDIT}
    new = {k: v for k, v in (row["new_values"] or {}).items() if k not in _HIDDEN_AUDIT}
    keys = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k) and k not in ("version", "updated_at"))
    return {**row, "fields": [(k, old.get(k), new.get(k)) for k in keys]}


def _edit_arguments(form: Mapping[str, Any], locale: str) -> dict[str, Any]:
    """admin.alter's arguments from the edit form: only the fields given; ValidationError naming a bad one."""
    args: dict[str, Any] = {}
    for key in EDIT_FIELDS:
        raw = form.get(key)
        if raw is None or str(raw).strip() == "":
            continue
        text = str(raw).strip()
        if key == "inputs":
            try:
                args[key] = json.loads(text)
            except ValueError:
                raise errors.ValidationError(
                    "web.bad_json", "inputs", field=words.label("field.inputs", locale)
                ) from None
        elif key == "priority":
            try:
                args[key] = int(text)
            except ValueError:
                raise errors.ValidationError(
                    "web.bad_number", "priority", field=words.label("field.priority", locale), value=text
                ) from None
        else:
            args[key] = text
    version = form.get("version")
    if version and str(version).isdigit():
        args["expected_version"] = int(str(version))
    return args


async def _schedule_action(dash: Dashboard, request: Request, name: str) -> Response:
    person, form = await dash.check_post(request)
    action = form.get("action")
    locale = _locale(request)
    settings = replace(dash.config.settings, locale=locale)
    here = dash.url(f"/schedules/{name}")
    async with dash.conn(request, person) as conn:
        try:
            if action == "pause":
                await admin.pause(conn, name, str(form.get("reason") or "").strip() or None)
                dash.flash(request, "done.pause")
            elif action == "resume":
                await admin.resume(conn, name)
                dash.flash(request, "done.resume")
            elif action == "trigger":
                notice = await _trigger(conn, person, name, bool(form.get("even_if_paused")), settings, locale)
                request.session["flash"] = {"text": notice, "level": "ok"}
            elif action == "edit":
                try:
                    await admin.alter(conn, name, **_edit_arguments(form, locale))
                except SchedError as exc:
                    message, field = _problem_text(exc, locale)
                    return await _schedule_view(
                        dash, request, person, name, status=400, error=message,
                        field_errors={field or "": message}, edit={k: str(form.get(k) or "") for k in EDIT_FIELDS},
                    )  # fmt: skip
                dash.flash(request, "done.edit")
            elif action == "delete":
                await admin.unschedule(conn, name)
                dash.flash(request, "done.delete", name=name)
                return RedirectResponse(dash.url("/schedules"), status_code=303)
            elif action == "backfill":
                return await _backfill(dash, request, person, conn, name, form, settings)
            elif action == "test-send":
                result = await test_send(conn, name, settings)
                request.session["flash"] = {"text": result.message, "level": "ok" if result.ok else "problem"}
            else:
                raise _refuse("unknown_action")
        except (SchedError, psycopg.Error) as exc:
            message, _ = _problem_text(exc, locale)
            status = _status_of(exc)
            return await _refused_view(dash, request, person, name, status, message)
    return RedirectResponse(here, status_code=303)


async def _refused_view(
    dash: Dashboard, request: Request, person: Person, name: str, status: int, message: str
) -> Response:
    try:
        return await _schedule_view(dash, request, person, name, status=status, error=message)
    except (SchedError, psycopg.Error):
        return dash.render(request, "refused.html", status_code=status, message=message)


async def _trigger(
    conn: psycopg.AsyncConnection[Any], person: Person, name: str, even_if_paused: bool, settings: Any, locale: str
) -> str:
    """Fire now, as the CLI does; a role that may only ask (``trigger_now``) gets its request's number: a
    worker carries it out within a tick."""
    if not await queries.value(conn, "may_carry_out"):
        with errors.translated():
            rid = await queries.value(conn, "request_trigger_now", {"name": name, "even_if_paused": even_if_paused})
        return words.label("done.trigger_requested", locale, request=rid)
    outcome = await fire_requests.trigger(conn, name, None, even_if_paused=even_if_paused, settings=settings)
    if outcome.started:
        return words.label("done.trigger", locale, run=(outcome.run_id or "")[:6])
    status = messages.render(f"fire.status.{outcome.status}", locale)
    return words.label("done.trigger_not_started", locale, status=status, reason=outcome.reason or "")


async def _backfill(
    dash: Dashboard,
    request: Request,
    person: Person,
    conn: psycopg.AsyncConnection[Any],
    name: str,
    form: Mapping[str, Any],
    settings: Any,
) -> Response:
    """Two steps: the range's count first (nothing written), then, confirmed with that count, the backfill."""
    locale = _locale(request)
    s = await admin.get(conn, name)
    overlap = str(form.get("overlap") or "buffer_all")
    values = {"from": str(form.get("from") or ""), "to": str(form.get("to") or ""), "overlap": overlap}
    try:
        start = _parse_local(values["from"], s.timezone, "from")
        end = _parse_local(values["to"], s.timezone, "to")
        times = fire_requests.backfill_times(vars(s), start, end)
    except SchedError as exc:
        message, _ = _problem_text(exc, locale)
        return await _schedule_view(dash, request, person, name, status=400, error=message,
                                    backfill={**values, "count": None})  # fmt: skip
    if form.get("confirm") != str(len(times)):
        return await _schedule_view(dash, request, person, name, backfill={**values, "count": len(times)})
    result = await fire_requests.backfill(conn, name, start, end, overlap=overlap, settings=settings)
    dash.flash(request, "done.backfill", launched=result.launched, not_launched=result.not_launched)
    return RedirectResponse(dash.url(f"/schedules/{name}"), status_code=303)


@_guard
async def preview(dash: Dashboard, request: Request, person: Person) -> Response:
    """The next fires of an edited cron and zone (the edit form's preview), or the field the error names."""
    locale = _locale(request)
    cron_text = request.query_params.get("cron", "")
    tz = request.query_params.get("timezone", "") or "UTC"
    try:
        expr = cronlib.parse(cron_text)
        cronlib.check_timezone(tz)
        times = expr.upcoming(datetime.now(UTC), tz, 5, skipped=True)
    except SchedError as exc:
        return JSONResponse({"ok": False, "field": exc.field, "error": exc.message(locale)})
    return JSONResponse({
        "ok": True,
        "words": words.cron_words(cron_text, tz, locale),
        "times": [{"utc": words.utc(t.at), "local": words.when(t.local, tz), "note": words.dst_note(expr, t, locale)}
                  for t in times],
    })  # fmt: skip


# --------------------------------------------------------------------------------------------- runs


@_guard
async def runs_page(dash: Dashboard, request: Request, person: Person) -> Response:
    if request.method == "POST":
        return await _runs_bulk(dash, request)
    q = request.query_params
    status = q.get("status") if q.get("status") in lifecycle.RUN_STATUSES else None
    schedule = q.get("schedule") or None
    locale = _locale(request)
    try:
        since = _parse_local(q["since"], "UTC", "since") if q.get("since") else None
        until = _parse_local(q["until"], "UTC", "until") if q.get("until") else None
    except SchedError as exc:
        return dash.render(request, "refused.html", status_code=400, message=exc.message(locale))
    before = _key_after(q.get("before"))
    try:
        before_id = uuid.UUID(before[1]) if before else None
    except ValueError:
        before, before_id = None, None
    async with dash.conn(request, person) as conn:
        try:
            runs = await lifecycle.list_runs(
                conn, schedule, status=status, since=since, until=until,
                before=(before[0], before_id) if before and before_id else None, limit=PAGE_SIZE + 1,
            )  # fmt: skip
        except SchedError as exc:  # no schedule of that name
            return dash.render(request, "refused.html", status_code=404, message=exc.message(locale))
    more = len(runs) > PAGE_SIZE
    runs = runs[:PAGE_SIZE]
    older = (
        dash.url("/runs", status=status, schedule=schedule, since=q.get("since"), until=q.get("until"),
                 before=f"{runs[-1].created_at.isoformat()}|{runs[-1].id}")
        if more
        else None
    )  # fmt: skip
    return dash.render(
        request, "runs.html", runs=runs, status=status, schedule=schedule or "", older=older,
        statuses=lifecycle.RUN_STATUSES, since=q.get("since") or "", until=q.get("until") or "",
    )  # fmt: skip


async def _runs_bulk(dash: Dashboard, request: Request) -> Response:
    person, form = await dash.check_post(request)
    action = form.get("action")
    schedule = str(form.get("schedule") or "") or None
    async with dash.conn(request, person) as conn:
        if action == "resume-run":
            count = await lifecycle.resume_suspended(conn, schedule, person.username)
        elif action == "abandon-run":
            count = await lifecycle.abandon_suspended(conn, schedule, person.username)
        else:
            raise _refuse("unknown_action")
    dash.flash(request, f"done.bulk_{action.replace('-', '_')}", count=count)
    return RedirectResponse(dash.url("/runs", status="suspended", schedule=schedule), status_code=303)


@_guard
async def run_page(dash: Dashboard, request: Request, person: Person) -> Response:
    ref = request.path_params["id"]
    if request.method == "POST":
        return await _run_action(dash, request, ref)
    return await _run_view(dash, request, person, ref)


async def _run_view(
    dash: Dashboard, request: Request, person: Person, ref: str, *, status: int = 200, error: str | None = None
) -> Response:
    async with dash.conn(request, person) as conn:
        run = await lifecycle.get_run(conn, ref)
        approvals = await lifecycle.approvals(conn, run.id)
        job = await queries.one(conn, "web_job", {"id": run.job_id}) if run.job_id is not None else None
        fire = None
        if run.fire_id is not None and run.schedule_name is not None:
            fires = await lifecycle.list_fires(conn, run.schedule_name, limit=200)
            fire = next((f for f in fires if f.fire_id == run.fire_id), None)
    timeline: list[tuple[datetime, str, dict[str, object]]] = []
    if fire is not None:
        timeline.append((fire.fire_at, "timeline.due", {}))
        timeline.append(
            (fire.created_at, "timeline.fired", {"kind": messages.render(f"fire.kind.{fire.kind}", _locale(request))})
        )
    timeline.append((run.created_at, "timeline.queued", {}))
    if run.started_at:
        timeline.append((run.started_at, "timeline.started", {}))
    for a in approvals:
        timeline.append((a.created_at, "timeline.approval_asked", {"segment": a.segment, "title": a.title or ""}))
        if a.decided_at:
            timeline.append(
                (a.decided_at, f"timeline.approval_{a.status}", {"who": a.decided_by or "", "comment": a.comment or ""})
            )
    if run.suspended_at:
        timeline.append((run.suspended_at, "timeline.suspended", {}))
    if run.finished_at:
        timeline.append(
            (
                run.finished_at,
                "timeline.ended",
                {"status": messages.render(f"run.status.{run.status}", _locale(request))},
            )
        )
    timeline.sort(key=lambda e: e[0])
    return dash.render(
        request, "run.html", status_code=status, run=run, approvals=approvals, job=job, timeline=timeline,
        error=error, fire=fire,
    )  # fmt: skip


async def _run_action(dash: Dashboard, request: Request, ref: str) -> Response:
    person, form = await dash.check_post(request)
    action = form.get("action")
    comment = str(form.get("comment") or "").strip() or None
    locale = _locale(request)
    async with dash.conn(request, person) as conn:
        try:
            if action == "approve":
                await lifecycle.approve(conn, ref, comment=comment)
            elif action == "reject":
                await lifecycle.reject(conn, ref, comment=comment)
            elif action == "resume-run":
                await lifecycle.resume(conn, ref, by=person.username)
            elif action == "abandon-run":
                await lifecycle.abandon(conn, ref, by=person.username)
            elif action == "cancel-run":
                await lifecycle.cancel(conn, ref, by=person.username)
            else:
                raise _refuse("unknown_action")
        except (SchedError, psycopg.Error) as exc:
            message, _ = _problem_text(exc, locale)
            status = _status_of(exc)
            try:
                return await _run_view(dash, request, person, ref, status=status, error=message)
            except (SchedError, psycopg.Error):
                return dash.render(request, "refused.html", status_code=status, message=message)
    dash.flash(request, f"done.{action.replace('-', '_')}")
    return RedirectResponse(dash.url(f"/runs/{ref}"), status_code=303)


# -------------------------------------------------------------------------------- health and load


@_guard
async def health_page(dash: Dashboard, request: Request, person: Person) -> Response:
    locale = _locale(request)
    async with dash.conn(request, person) as conn:
        # doctor's checks read the whole database (seconds with 100,000 schedules): kept for a while per role,
        # whose privileges decide what they can read.
        cached = dash.doctor_cache.get(person.username)
        problem = None
        if cached is not None and time.monotonic() - cached[0] < DOCTOR_TTL:
            checked, findings = cached[1], cached[2]
        else:
            checked = datetime.now(UTC)
            try:
                findings = await health.examine(conn, dash.config.settings)
                dash.doctor_cache[person.username] = (time.monotonic(), checked, findings)
            except psycopg.Error as exc:  # a reader may lack what one check reads: say so, show the rest
                findings, problem = [], _problem_text(exc, locale)[0]
        workers = await queries.rows(conn, "web_workers")
        overdue = await queries.rows(conn, "web_overdue")
        outbox = await queries.one(conn, "web_outbox")
    return dash.render(request, "health.html", findings=[(f.level, f.check, f.message(locale)) for f in findings],
                       workers=workers, overdue=overdue, outbox=outbox, problem=problem, checked=checked)  # fmt: skip


@_guard
async def load_page(dash: Dashboard, request: Request, person: Person) -> Response:
    # Kept by the server in the background (web/load.py): the same for everyone, what the schedules, which
    # every role may read, say.
    grid = await dash.load.grid()
    async with dash.conn(request, person) as conn:
        lateness = await queries.rows(conn, "web_lateness", {"now": datetime.now(UTC)})
    return dash.render(request, "load.html", lateness=lateness, **grid)


# ----------------------------------------------------------------------------------------- assembly


def create_app(config: WebConfig) -> Starlette:
    """The dashboard as an ASGI app (``uvicorn``, or ``TestClient`` in tests)."""
    dash = Dashboard(config)

    def bind(handler: Callable[[Dashboard, Request], Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            return await handler(dash, request)

        return endpoint

    routes = [
        Route("/", bind(home)),
        Route("/login", bind(login_page), methods=["GET", "POST"]),
        Route("/logout", bind(logout), methods=["GET", "POST"]),
        Route("/healthz", bind(healthz)),
        Route("/events", bind(events)),
        Route("/schedules", bind(schedules_page), methods=["GET", "POST"]),
        Route("/schedules/{name:path}/preview", bind(preview)),
        Route("/schedules/{name:path}", bind(schedule_page), methods=["GET", "POST"]),
        Route("/runs", bind(runs_page), methods=["GET", "POST"]),
        Route("/runs/{id}", bind(run_page), methods=["GET", "POST"]),
        Route("/health", bind(health_page)),
        Route("/load", bind(load_page)),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    if config.prefix:
        routes = [Mount(config.prefix, routes=routes)]
    middleware = [
        Middleware(SecurityHeaders),
        Middleware(
            SessionMiddleware,
            secret_key=config.secret,
            session_cookie="agentlab_sched_session",
            max_age=int(config.session_ttl.total_seconds()),
            path=config.base_path if config.prefix else "/",
            same_site="strict",
            https_only=config.secure_cookies,
        ),
    ]
    app = Starlette(routes=routes, middleware=middleware, lifespan=dash.lifespan)
    app.state.dashboard = dash
    return app
