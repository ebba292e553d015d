"""What every command shares: the database in use, the locale, output helpers, the one error handler.

For the authors of sub-apps (notify, history, worker, firing): take ``ctx: typer.Context`` in a command
and use

- ``common.state(ctx)``: the global options (``database_url``, ``data_dir``, ``locale``), ``.database()``
  (resolves the database, printing which one to stderr, once), ``.settings()``;
- ``common.run(ctx, fn)``: runs ``async fn(conn)`` on a fresh connection (dict rows, autocommit, the
  CLI's locale) and returns its result;
- ``common.out()`` / ``common.err()``: rich consoles on stdout / stderr; ``common.print_json(data)``;
  ``common.say(code, **params)``: one localised line;
- raise :class:`~agentlab_sched.errors.SchedError` for bad input: the root handler prints its message in
  the CLI's locale to stderr and exits 2 (connection problems exit 1); never print a traceback for
  input.

Parsers for option values that raise such errors: :func:`parse_json_object`, :func:`parse_duration`,
:func:`parse_time`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import json
import re
import warnings
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar
from zoneinfo import ZoneInfo

import psycopg
import typer
from psycopg import conninfo
from rich.console import Console
from rich.text import Text
from typer.core import TyperGroup

from agentlab_sched import database as db
from agentlab_sched import messages
from agentlab_sched.demo import make_app
from agentlab_sched.errors import SchedError, ValidationError
from agentlab_sched.settings import Settings

T = TypeVar("T")

#: Exit status for input the command refuses (bad value, unknown name, stale version).
EXIT_INPUT = 2
#: Exit status when the database cannot be used (unreachable, not migrated).
EXIT_DATABASE = 1
#: Exit status of `schedules trigger` / `backfill` when a fire failed to start (failed_to_start).
EXIT_NOT_STARTED = 3


@dataclass
class State:
    """The global options of one invocation, and the database they lead to."""

    database_url: str | None = None
    data_dir: str | None = None
    locale: str = field(default_factory=messages.current_locale)
    #: Whether --locale was given (migrate then records it as the deployment's locale).
    locale_given: bool = False
    _database: db.Database | None = field(default=None, repr=False)

    def settings(self) -> Settings:
        """The environment's settings with the global options applied."""
        base = Settings.from_env()
        return dataclasses.replace(
            base,
            database_url=self.database_url or base.database_url,
            data_dir=self.data_dir or base.data_dir,
            locale=self.locale,
        )

    def database(self) -> db.Database:
        """The database to use (starting the embedded server if none is configured); says which on stderr."""
        if self._database is None:
            if self.database_url:
                database = db.Database(self.database_url, "--database-url")
            else:
                with quiet_embedded():
                    database = db.resolve(self.settings(), data_dir=self.data_dir)
            err().print(Text(f"database: {display_url(database.url)} ({database.origin})", style="dim"))
            self._database = database
        return self._database

    async def connect(self) -> psycopg.AsyncConnection[Any]:
        """A new async connection (dict rows, autocommit) whose SQL messages use the CLI's locale."""
        return await db.connect(self.database().url, locale=self.locale)


@contextmanager
def quiet_embedded() -> Iterator[None]:
    """Silence the embedded server's platformdirs warning (no XDG_RUNTIME_DIR on servers and containers):
    the one line a command prints about its database is enough."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
        yield


def state(ctx: typer.Context) -> State:
    """The :class:`State` of this invocation (set by the root callback)."""
    root = ctx.find_root()
    if not isinstance(root.obj, State):
        root.obj = State()
    return root.obj


def run(ctx: typer.Context, fn: Callable[[psycopg.AsyncConnection[Any]], Awaitable[T]]) -> T:
    """Run ``await fn(conn)`` on a fresh connection to the invocation's database and return its result."""
    st = state(ctx)

    async def main() -> T:
        conn = await st.connect()
        try:
            return await fn(conn)
        finally:
            await conn.close()

    return asyncio.run(main())


def display_url(url: str) -> str:
    """A database URL fit to print: no password, just user, host, port and database."""
    try:
        parts = conninfo.conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "(unparsable database URL)"
    user = str(parts.get("user") or "")
    host = str(parts.get("host") or "")
    port = parts.get("port")
    where = host if not port else f"{host}:{port}"
    if host.startswith("/"):
        where = f"[{where}]"
    return f"postgresql://{user + '@' if user else ''}{where}/{parts.get('dbname') or ''}"


#: Characters a terminal may act on rather than show: C0 and C1 controls (ESC starts sequences that set
#: the window title or write the clipboard), DEL, zero-width and bidi controls. Line breaks and tabs stay.
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]")


def safe(value: object) -> str:
    """Text from the database (names, reasons, errors) fit for a terminal: every control character shown
    as an escape (``\\x1b``), never sent to the terminal."""
    text_value = "" if value is None else str(value)
    return _CONTROLS.sub(lambda m: m.group(0).encode("unicode_escape").decode("ascii"), text_value)


def cell(value: object, style: str = "") -> Text:
    """User data as a table cell or a line: control characters escaped, never read as rich markup."""
    return Text(safe(value), style=style)


def out() -> Console:
    """A console on stdout (created per call, so test runners that swap stdout see the output).

    Piped into another program, tables are not squeezed into 80 columns (scripts should use --json).
    """
    console = Console(highlight=False, soft_wrap=False)
    if not console.is_terminal:
        console = Console(highlight=False, soft_wrap=False, width=200)
    return console


def err() -> Console:
    """A console on stderr."""
    return Console(stderr=True, highlight=False, soft_wrap=True)


def text(code: str, locale: str, **params: object) -> str:
    """Message ``code`` in ``locale``."""
    return messages.render(code, locale, **params)


def say(ctx: typer.Context, code: str, **params: object) -> None:
    """Print message ``code`` (in the CLI's locale) as one line on stdout."""
    out().print(cell(text(code, state(ctx).locale, **params)))


def print_json(data: Any) -> None:
    """Print ``data`` as JSON on stdout (UTF-8 as is, times in ISO 8601; control characters escaped, C1
    and bidi controls too, which JSON would otherwise leave raw)."""
    dumped = json.dumps(data, ensure_ascii=False, indent=2, default=_json_default)
    typer.echo(_CONTROLS.sub(lambda m: f"\\u{ord(m.group(0)):04x}", dumped))


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    return str(value)


def _report(ctx: typer.Context, message: str, code: int) -> typer.Exit:
    err().print(cell(message, style="red"))
    return typer.Exit(code)


class HandledGroup(TyperGroup):
    """The root command group: the one place where refusals become a message and an exit status."""

    def invoke(self, ctx: typer.Context) -> Any:  # type: ignore[override]
        try:
            return super().invoke(ctx)
        except SchedError as exc:
            raise _report(ctx, exc.message(_locale(ctx)), EXIT_INPUT) from None
        except (
            psycopg.errors.UndefinedTable,
            psycopg.errors.UndefinedFunction,
            psycopg.errors.InvalidSchemaName,
        ) as exc:
            if "agentlab_sched" not in str(exc):
                raise
            raise _report(ctx, text("cli.not_migrated", _locale(ctx)), EXIT_DATABASE) from None
        except psycopg.OperationalError as exc:
            detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise _report(ctx, text("cli.cannot_connect", _locale(ctx), error=detail), EXIT_DATABASE) from None


def _locale(ctx: typer.Context) -> str:
    obj = ctx.find_root().obj
    return obj.locale if isinstance(obj, State) else messages.current_locale()


def _term(field_name: str) -> dict[str, object]:
    return messages.term(f"schedule.field.{field_name}")


def parse_json_object(value: str, field_name: str = "inputs") -> Any:
    """JSON from an option (``@path`` reads a file); a syntax error is a ValidationError naming the field.

    Anything that parses is returned, objects or not: the database says what kind of value it needs.
    """
    source = value
    if value.startswith("@"):
        source = Path(value[1:]).expanduser().read_text(encoding="utf-8")
    try:
        return json.loads(source)
    except json.JSONDecodeError as exc:
        raise ValidationError(
            "schedule.bad_json", field_name, field=_term(field_name), line=exc.lineno, column=exc.colno
        ) from None


_DURATION_UNITS = {
    "s": 1, "sec": 1, "secs": 1, "second": 1, "seconds": 1,
    "m": 60, "min": 60, "mins": 60, "minute": 60, "minutes": 60,
    "h": 3600, "hr": 3600, "hrs": 3600, "hour": 3600, "hours": 3600,
    "d": 86400, "day": 86400, "days": 86400,
    "w": 604800, "week": 604800, "weeks": 604800,
}  # fmt: skip
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)\s*([a-z]+)[\s,]*")


def parse_duration(value: str, field_name: str) -> timedelta:
    """``90s``, ``10m``, ``1h30m``, ``2d``, ``10 minutes``, ``0`` or plain seconds; a leading ``-`` is kept
    (the database refuses negative durations with its own message)."""
    raw = value.strip().lower()
    sign = -1 if raw.startswith("-") else 1
    raw = raw.lstrip("-").strip()
    if re.fullmatch(r"\d+(?:\.\d+)?", raw):
        return timedelta(seconds=sign * float(raw))
    total = 0.0
    pos = 0
    while pos < len(raw):
        m = _DURATION_PART.match(raw, pos)
        if not m or m.group(2) not in _DURATION_UNITS:
            break
        total += float(m.group(1)) * _DURATION_UNITS[m.group(2)]
        pos = m.end()
    if pos == 0 or pos < len(raw):
        raise ValidationError("schedule.bad_duration", field_name, field=_term(field_name), value=value)
    return timedelta(seconds=sign * total)


def parse_time(value: str, field_name: str, timezone: str) -> datetime:
    """An ISO 8601 date and time; without an offset it is read in ``timezone`` (the schedule's)."""
    try:
        parsed = datetime.fromisoformat(value.strip())
    except ValueError:
        raise ValidationError("schedule.bad_time", field_name, field=_term(field_name), value=value) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=ZoneInfo(timezone))
    return parsed


def load_app(path: str, url: str) -> Any:
    """The Procrastinate app at ``module.attr`` (``--app``); the demo app is built on ``url``."""
    if path == "agentlab_sched.demo.app":
        return make_app(url)
    module, _, attr = path.rpartition(".")
    return getattr(importlib.import_module(module), attr)
