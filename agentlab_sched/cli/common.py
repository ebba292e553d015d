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

import contextlib
import dataclasses
import importlib
import json
import os
import re
import sys
import types
import warnings
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from zoneinfo import ZoneInfo

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text
from typer.core import TyperGroup

from agentlab_sched import messages
from agentlab_sched.cli._click import exceptions as click_exceptions
from agentlab_sched.errors import SchedError, UnknownTaskWarning, ValidationError
from agentlab_sched.settings import Settings
from agentlab_sched.settings import given as given_by_environment

if TYPE_CHECKING:
    import psycopg

    from agentlab_sched import database as db

T = TypeVar("T")

#: The app `worker` runs without --app.
DEMO_APP = "agentlab_sched.demo.app"

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

    def database(self, *, dev: bool = False) -> db.Database:
        """The database to use (starting the embedded server if none is configured); says which on stderr.

        With ``dev``: the demo's own database on the embedded server (`agentlab-sched dev`), whatever
        AGENTLAB_SCHED_DATABASE_URL says; only an explicit ``--database-url`` replaces it.
        """
        from agentlab_sched import database as db
        from agentlab_sched.database.connections import display_url

        if self._database is None:
            if self.database_url:
                database = db.Database(self.database_url, "--database-url")
            else:
                with quiet_embedded():
                    if dev:
                        database = db.embedded_database(self.settings(), data_dir=self.data_dir, dev=True)
                    else:
                        database = db.resolve(self.settings(), data_dir=self.data_dir)
            origin = (
                messages.term("cli.origin_embedded", dir=database.embedded_dir)
                if database.embedded_dir
                else database.origin
            )
            line = text("cli.database_line", self.locale, url=display_url(database.url), origin=origin)
            err().print(Text(line, style="dim"))
            self._database = database
        return self._database

    def data_directory(self) -> str:
        """The embedded server's data directory: --data-dir, AGENTLAB_SCHED_DATA_DIR, else the default."""
        from agentlab_sched.database import embedded

        return self.data_dir or given_by_environment("data_dir") or str(embedded.default_data_dir())

    async def connect(self) -> psycopg.AsyncConnection[Any]:
        """A new async connection (dict rows, autocommit) whose SQL messages use the CLI's locale."""
        from agentlab_sched import database as db

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
    import asyncio

    st = state(ctx)

    async def main() -> T:
        conn = await st.connect()
        try:
            return await fn(conn)
        finally:
            await conn.close()

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UnknownTaskWarning)
        try:
            return asyncio.run(main())
        finally:
            for w in caught:  # ours as one line in the locale on stderr; others as usual
                if isinstance(w.message, UnknownTaskWarning):
                    err().print(cell(w.message.message(st.locale), style="yellow"))
                else:
                    warnings.showwarning(w.message, w.category, w.filename, w.lineno)


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
    out().print(cell(text(code, state(ctx).locale, **params)), soft_wrap=True)


def say_to_stderr(locale: str, code: str, **params: object) -> None:
    """Print message ``code`` as one line on stderr (what was not done, a warning)."""
    err().print(cell(text(code, locale, **params), style="yellow"), soft_wrap=True)


def label(name: str, locale: str, **params: object) -> str:
    """A table header or a label of `show` (``cli.col.<name>``) in ``locale``."""
    return text(f"cli.col.{name}", locale, **params)


def table(locale: str, *columns: str | tuple[str, dict[str, object]], **options: Any) -> Table:
    """A table for people whose headers are the labels of ``columns`` in ``locale`` (a column given as
    ``(name, params)`` fills its label's placeholders)."""
    grid = Table(box=None, pad_edge=False, header_style="bold", **options)
    for column in columns:
        name, params = (column, {}) if isinstance(column, str) else column
        grid.add_column(label(name, locale, **params), justify="right" if name == "number" else "left", overflow="fold")
    return grid


def print_fields(locale: str, rows: list[tuple[str, object]]) -> None:
    """``show``: one labelled line per field that has a value (labels in ``locale``)."""
    grid = Table(box=None, show_header=False, pad_edge=False)
    grid.add_column(style="bold")
    grid.add_column(overflow="fold")
    for name, value in rows:
        if value not in (None, ""):
            grid.add_row(label(name, locale), cell(value))
    out().print(grid)


def term(prefix: str, value: str | None, locale: str) -> str:
    """A status or kind word (``fire.status.started``, ``run.status.failed``...) in ``locale``; empty for none."""
    if not value:
        return ""
    code = f"{prefix}.{value}"
    return text(code, locale) if code in messages.CATALOG else value


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


def _report(ctx: typer.Context | None, message: str, code: int) -> typer.Exit:
    err().print(cell(message, style="red"))
    return typer.Exit(code)


#: The root's options, accepted after the command too (``agentlab-sched migrate --locale zh-CN``).
GLOBAL_OPTIONS = ("--database-url", "--data-dir", "--locale")


def globals_first(args: list[str]) -> list[str]:
    """``args`` with the root's options (and their values) moved before the command, wherever they were
    typed; nothing after ``--`` is moved."""
    front: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            rest += args[i:]
            break
        if arg in GLOBAL_OPTIONS and i + 1 < len(args):
            front += args[i : i + 2]
            i += 2
            continue
        if any(arg.startswith(f"{name}=") for name in GLOBAL_OPTIONS):
            front.append(arg)
        else:
            rest.append(arg)
        i += 1
    return front + rest


def _plain_metavars(command: Any) -> None:
    """--help names a repeatable option's value as a word (``--queue QUEUE``), never as a Python type
    (``<list[str]>``): such an option without a metavar of its own gets its name in capitals."""
    for param in getattr(command, "params", []):
        if getattr(param, "metavar", None) is None and not getattr(param, "is_flag", False):
            kind = getattr(getattr(param, "type_descriptor", None), "annotation", None)
            if param.param_type_name == "option" and kind in (list[str], list[str] | None):
                param.metavar = str(param.name or "value").upper()
    for sub in getattr(command, "commands", {}).values():
        _plain_metavars(sub)


class HandledGroup(TyperGroup):
    """The root command group: the one place where refusals become a message and an exit status."""

    def make_context(self, info_name: str | None, args: list[str], parent: Any = None, **extra: Any) -> Any:
        if parent is None:
            args = globals_first(list(args))
            _plain_metavars(self)
        self._args = list(args)
        try:
            return super().make_context(info_name, args, parent, **extra)
        except click_exceptions.UsageError as exc:  # the root's own options (--locale without a value, ...)
            if isinstance(exc, click_exceptions.NoArgsIsHelpError):
                raise
            raise _usage_exit(exc, self._args) from None

    def invoke(self, ctx: typer.Context) -> Any:  # type: ignore[override]
        import psycopg

        try:
            return super().invoke(ctx)
        except click_exceptions.UsageError as exc:
            if isinstance(exc, click_exceptions.NoArgsIsHelpError):
                raise
            raise _usage_exit(exc, getattr(self, "_args", []), _locale(ctx)) from None
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
        except psycopg.errors.InsufficientPrivilege as exc:
            url = ctx.find_root().obj.database_url if isinstance(ctx.find_root().obj, State) else None
            database = getattr(ctx.find_root().obj, "_database", None)
            url = database.url if database is not None else url
            raise _report(ctx, privilege_message(exc, _locale(ctx), url), EXIT_INPUT) from None
        except psycopg.errors.ReadOnlySqlTransaction:  # SQLSTATE 25006: a standby, or a read-only session
            url = ctx.find_root().obj.database_url if isinstance(ctx.find_root().obj, State) else None
            database = getattr(ctx.find_root().obj, "_database", None)
            url = database.url if database is not None else url
            code = "cli.standby" if in_recovery(url) is not False else "cli.read_only"
            raise _report(ctx, text(code, _locale(ctx)), EXIT_DATABASE) from None
        except psycopg.errors.NumericValueOutOfRange as exc:
            # A number too large for its column (--priority 99999999999): refused, as a value is.
            detail = (exc.diag.message_primary or "").strip() or type(exc).__name__
            raise _report(ctx, text("cli.number_out_of_range", _locale(ctx), detail=detail), EXIT_INPUT) from None
        except psycopg.errors.UndefinedColumn:
            # A schema migrated by an older version: the columns this one reads are not there yet.
            raise _report(ctx, text("cli.schema_outdated", _locale(ctx)), EXIT_DATABASE) from None
        except psycopg.OperationalError as exc:
            detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise _report(ctx, text("cli.cannot_connect", _locale(ctx), error=detail), EXIT_DATABASE) from None


#: "permission denied for function pause", "... for table schedules", "... for database x", "... for schema x".
_DENIED = re.compile(r"permission denied for (function|procedure|table|view|sequence|relation|schema|database) (\S+)")


def privilege_message(exc: psycopg.Error, locale: str, url: str | None) -> str:
    """A missing privilege (SQLSTATE 42501) as one line: what was refused, the role that asked, and the role or
    grant that has it (docs/security.md); who holds what is read from the database when it can be."""
    primary = (exc.diag.message_primary or str(exc)).strip().splitlines()[0] if str(exc).strip() else "42501"
    holders = _privilege_holders(url)
    who = holders.get("role") or _url_user(url) or "?"
    found = _DENIED.search(primary)
    kind, name = (found.group(1), found.group(2).strip('"')) if found else ("", "")
    short = name.rpartition(".")[2]
    role = {k: holders.get(k) or f"agentlab_sched_{k}" for k in ("reader", "admin", "worker")}
    needs: dict[str, object]
    if kind in ("function", "procedure"):
        what = messages.term("cli.denied.function", name=short)
        if short == "schedule_sql":
            needs = messages.term("cli.needs.schedule_sql")
        elif short == "trigger_now":
            needs = messages.term("cli.needs.trigger_now", role=role["admin"])
        elif short in (holders.get("admin_functions") or ()):
            needs = messages.term("cli.needs.role", kind="admin", role=role["admin"])
        elif short in (holders.get("worker_functions") or ()):
            needs = messages.term("cli.needs.role", kind="worker", role=role["worker"])
        else:
            needs = messages.term("cli.needs.owner")
    elif short in ("schema_migrations", "migrate_lock"):  # migrate's own bookkeeping: the owner's
        what = messages.term("cli.denied.migrate")
        needs = messages.term("cli.needs.owner")
    elif kind in ("table", "view", "sequence", "relation"):
        what = messages.term("cli.denied.table", name=short)
        if short.startswith("procrastinate_") and short not in ("procrastinate_jobs", "procrastinate_workers"):
            needs = messages.term("cli.needs.role", kind="worker", role=role["worker"])
        elif short == "schedules":
            needs = messages.term("cli.needs.role", kind="admin", role=role["admin"])
        elif short in ("bot_sends", "bookkeeping_marks"):
            needs = messages.term("cli.needs.role", kind="worker", role=role["worker"])
        else:
            needs = messages.term("cli.needs.role", kind="reader", role=role["reader"])
    elif kind in ("schema", "database"):
        what = messages.term(f"cli.denied.{kind}", name=name)
        needs = messages.term("cli.needs.owner")
    elif "create role" in primary:
        what = messages.term("cli.denied.create_role")
        needs = messages.term("cli.needs.createrole")
    else:
        what = messages.term("cli.denied.other", detail=primary)
        needs = messages.term("cli.needs.grant")
    return text("cli.denied", locale, role=who, what=what, needs=needs)


def _url_user(url: str | None) -> str | None:
    import psycopg

    if not url:
        return None
    try:
        user = psycopg.conninfo.conninfo_to_dict(url).get("user")
        return str(user) if user else os.environ.get("PGUSER") or None
    except psycopg.Error:
        return None


def in_recovery(url: str | None) -> bool | None:
    """Whether the server of ``url`` is a standby in recovery (None: it could not be asked)."""
    import psycopg

    from agentlab_sched.database import queries

    if not url:
        return None
    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
            return bool(queries.value_sync(conn, "in_recovery"))
    except psycopg.Error:
        return None


def _privilege_holders(url: str | None) -> dict[str, Any]:
    """The admin and worker roles' functions, the recorded roles and the current role; what cannot be read
    (no schema, no USAGE, no server) is left out."""
    import psycopg

    from agentlab_sched.database import queries

    if not url:
        return {}
    found: dict[str, Any] = {}
    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
            found["role"] = conn.info.parameter_status("session_authorization") or None
            with contextlib.suppress(psycopg.Error):
                found.update(queries.one_sync(conn, "privilege_holders") or {})
    except psycopg.Error:
        pass
    return found


def print_version(value: bool) -> None:
    """``--version``: this package's version and those of what it runs on, then exit 0."""
    if not value:
        return
    from importlib import metadata

    def of(name: str) -> str:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return "?"

    typer.echo(f"agentlab-sched {of('agentlab-sched')} (Procrastinate {of('procrastinate')}, psycopg {of('psycopg')})")
    raise typer.Exit(0)


def choose_locale(given: str | None) -> str:
    """The locale of this invocation: ``--locale``, else ``AGENTLAB_SCHED_LOCALE``, else en; a language
    without a catalogue is refused (naming where it came from), not answered in English."""
    allowed = list(messages.LOCALES)
    if given is not None:
        chosen = messages.known_locale(given)
        if chosen is None:
            raise ValidationError("cli.bad_locale", "locale", value=given, allowed=allowed)
        return chosen
    env = given_by_environment("locale")
    if env and messages.known_locale(env) is None:
        raise ValidationError("cli.bad_locale_env", "locale", value=env, allowed=allowed)
    return messages.current_locale()


def _args_locale(args: list[str]) -> str:
    """The locale asked for on a command line that could not be parsed (``--locale X`` or ``--locale=X``)."""
    for i, arg in enumerate(args):
        value = None
        if arg == "--locale" and i + 1 < len(args):
            value = args[i + 1]
        elif arg.startswith("--locale="):
            value = arg.split("=", 1)[1]
        if value is not None:
            return messages.known_locale(value) or messages.current_locale()
    return messages.current_locale()


def _typed_value(param: Any, args: list[str]) -> str | None:
    """What was typed for option ``param`` (``--priority high`` or ``--priority=high``), the last one given."""
    found = None
    names = list(getattr(param, "opts", []) or []) + list(getattr(param, "secondary_opts", []) or [])
    for i, arg in enumerate(args):
        for name in names:
            if arg == name and i + 1 < len(args):
                found = args[i + 1]
            elif arg.startswith(name + "=") and name.startswith("--"):
                found = arg.split("=", 1)[1]
    return found


def _option_name(param: Any, args: list[str]) -> str:
    names = list(getattr(param, "opts", []) or [])
    used = [n for n in names if n in args or any(a.startswith(n + "=") for a in args)]
    if used:
        return used[0]
    longest = sorted(names, key=len, reverse=True)
    return longest[0] if longest else str(getattr(param, "name", "") or "")


def _argument_term(param: Any) -> dict[str, object]:
    name = str(getattr(param, "name", "") or "")
    if name in ("name", "run"):
        return messages.term(f"cli.usage.argument.{name}")
    return messages.term("cli.usage.argument.other", name=name.upper())


def _param_kind(param: Any) -> tuple[type | None, Any, Any, tuple[Any, ...] | None]:
    """(int, float or None; minimum; maximum; choices) of an option, from typer's description of it (or
    from click's parameter type, for a typer that still uses click)."""
    desc = getattr(param, "type_descriptor", None)
    if desc is not None:
        info = desc.parameter_info
        annotation = desc.annotation if desc.annotation in (int, float) else None
        return annotation, getattr(info, "min", None), getattr(info, "max", None), desc.choices
    ptype = getattr(param, "type", None)
    name = type(ptype).__name__
    kind = int if name in ("IntParamType", "IntRange") else float if name in ("FloatParamType", "FloatRange") else None
    return kind, getattr(ptype, "min", None), getattr(ptype, "max", None), getattr(ptype, "choices", None)


def usage_message(exc: Any, args: list[str], locale: str) -> str:
    """A usage error as one line in ``locale`` (never the command-line library's English usage block)."""
    ctx = getattr(exc, "ctx", None)
    command = ctx.command_path if ctx is not None else "agentlab-sched"
    param = getattr(exc, "param", None)
    message = str(getattr(exc, "message", "") or "")
    if isinstance(exc, click_exceptions.NoSuchOption):
        similar = sorted(exc.possibilities or [])
        if similar:
            return text("cli.usage.unknown_option_like", locale, command=command, option=exc.option_name,
                        similar=similar)  # fmt: skip
        return text("cli.usage.unknown_option", locale, command=command, option=exc.option_name)
    if isinstance(exc, click_exceptions.MissingParameter):
        if getattr(param, "param_type_name", "") == "argument":
            return text("cli.usage.missing_argument", locale, command=command, argument=_argument_term(param))
        return text("cli.usage.missing_option", locale, command=command, option=_option_name(param, args))
    if isinstance(exc, click_exceptions.BadParameter) and param is not None:
        option = _option_name(param, args)
        value = _typed_value(param, args)
        kind, low, high, choices = _param_kind(param)
        if kind in (int, float) and value is not None:
            try:
                number = kind(value)
            except ValueError:
                code = "cli.usage.not_integer" if kind is int else "cli.usage.not_number"
                return text(code, locale, option=option, value=value)
            if low is not None and high is not None:
                return text("schedule.out_of_range", locale, field=option, value=number, min=low, max=high)
            if low is not None:
                return text("schedule.too_small", locale, field=option, value=number, min=low)
        if choices and value is not None:
            return text("schedule.unknown_value", locale, field=option, value=value, allowed=list(choices))
        return text("cli.usage.bad_value", locale, option=option, value=value, command=command)
    if isinstance(exc, click_exceptions.BadOptionUsage):
        code = "cli.usage.takes_no_value" if "does not take a value" in message else "cli.usage.needs_value"
        return text(code, locale, option=exc.option_name)
    unknown = re.match(r"No such command '([^']*)'", message)
    if unknown and ctx is not None:
        commands = [c for c in ctx.command.list_commands(ctx) if not ctx.command.get_command(ctx, c).hidden]
        return text("cli.usage.unknown_command", locale, name=unknown.group(1), command=command, commands=commands)
    extra = re.match(r"Got unexpected extra argument(?:s|\(s\))? \((.*)\)", message)
    if extra:
        return text("cli.usage.extra_argument", locale, command=command, value=extra.group(1))
    return text("cli.usage.other", locale, command=command)


def _usage_exit(exc: Any, args: list[str], locale: str | None = None) -> typer.Exit:
    return _report(None, usage_message(exc, args, locale or _args_locale(args)), EXIT_INPUT)


def _locale(ctx: typer.Context) -> str:
    obj = ctx.find_root().obj
    return obj.locale if isinstance(obj, State) else messages.current_locale()


def _term(field_name: str) -> dict[str, object]:
    return messages.term(f"schedule.field.{field_name}")


def parse_json_object(value: str, field_name: str = "inputs") -> Any:
    """JSON from an option (``@path`` reads a file); a syntax error is a ValidationError naming the field.

    Anything that parses is returned, objects or not: the database says what kind of value it needs.
    """
    source = read_file(value[1:], field_name) if value.startswith("@") else value
    try:
        return json.loads(source)
    except json.JSONDecodeError as exc:
        raise ValidationError(
            "schedule.bad_json", field_name, field=_term(field_name), line=exc.lineno, column=exc.colno
        ) from None


def read_file(path: str, field_name: str) -> str:
    """The text of the file an option names (``--inputs @file.json``); a file that is not there, not a file or
    not readable is a ValidationError naming the field and the path."""
    where = Path(path).expanduser()
    params: dict[str, object] = {"field": _term(field_name), "path": path}
    try:
        return where.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ValidationError("cli.file_missing", field_name, **params) from None
    except IsADirectoryError:
        raise ValidationError("cli.file_is_directory", field_name, **params) from None
    except PermissionError:
        raise ValidationError("cli.file_unreadable", field_name, **params) from None
    except (UnicodeDecodeError, OSError):
        raise ValidationError("cli.file_not_text", field_name, **params) from None


def parse_duration(value: str, field_name: str) -> timedelta:
    """``90s``, ``10m``, ``1h30m``, ``2d``, ``10 minutes``, ``0`` or plain seconds (``core.durations``); a
    leading ``-`` is kept (the database refuses negative durations with its own message)."""
    from agentlab_sched.core import durations

    return durations.parse(value, field_name, _term(field_name), negative=True)


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
    """The Procrastinate app at ``module.attr`` (``--app``); the demo app is built on ``url``.

    The current directory is searched first (as ``python -m`` would), so ``--app myproject.app`` works from
    the project's directory. Anything that is not an app there is a ValidationError naming ``--app``.
    """
    import procrastinate

    from agentlab_sched.demo import make_app

    if path == DEMO_APP:
        return make_app(url)
    module, _, attr = path.strip().rpartition(".")
    if not module or not attr or not all(part.isidentifier() for part in path.strip().split(".")):
        raise ValidationError("cli.app_bad_path", "app", path=path)
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        loaded = importlib.import_module(module)
    except Exception as exc:  # not there, or the user's module raised while being imported
        missing = isinstance(exc, ModuleNotFoundError) and exc.name
        if missing and (module == missing or module.startswith(f"{missing}.")):
            raise ValidationError("cli.app_no_module", "app", path=path, module=missing) from None
        # A declaration's own refusal (@agentlab_sched.schedule with a bad value) is said in the reader's
        # language, naming its field and value; anything else as the exception's type and text.
        error = messages.term(exc.code, **exc.params) if isinstance(exc, SchedError) else _error_text(exc)
        raise ValidationError("cli.app_import_failed", "app", path=path, module=module, error=error) from None
    found = getattr(loaded, attr, None)
    if found is None or isinstance(found, types.ModuleType):
        # ``--app myproject.app`` naming the module myproject/app.py: its one App, or a hint.
        try:
            found = importlib.import_module(path.strip()) if found is None else found
        except ImportError:
            raise ValidationError("cli.app_no_attribute", "app", path=path, module=module, attribute=attr) from None
        apps = sorted(name for name, value in vars(found).items() if isinstance(value, procrastinate.App))
        if len(apps) == 1:
            return getattr(found, apps[0])
        if apps:
            raise ValidationError("cli.app_module_many", "app", path=path, names=[f"{path}.{a}" for a in apps])
        raise ValidationError("cli.app_module_none", "app", path=path, example=f"{path}.app")
    if not isinstance(found, procrastinate.App):
        raise ValidationError("cli.app_not_app", "app", path=path, kind=type(found).__name__)
    return found


def _error_text(exc: BaseException) -> str:
    """An exception as ``Type: message``, on one line."""
    message = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__
