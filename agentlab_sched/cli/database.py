"""`agentlab-sched migrate` and `agentlab-sched db ...`: reach the database (url, psql), stop the embedded one."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from typing import TYPE_CHECKING, Annotated

import typer
from rich.text import Text

from agentlab_sched import messages
from agentlab_sched.cli import common
from agentlab_sched.errors import SchedError
from agentlab_sched.settings import given

if TYPE_CHECKING:
    from agentlab_sched.database.migrate import MigratePlan

#: ``roles create``'s default --prefix: ``agentlab_sched.database.roles.DEFAULT_PREFIX`` (a test holds them equal),
#: written here so that building the command line does not import psycopg.
ROLES_PREFIX = "agentlab_sched"

db_app = typer.Typer(
    name="db",
    help="The database: its URL, a psql on it, and the embedded PostgreSQL used when no URL is configured.",
    no_args_is_help=True,
    rich_markup_mode=None,
)

Dev = Annotated[bool, typer.Option("--dev", help="The demo's own database (agentlab_sched_dev), the one `dev` uses.")]


def migrate_cmd(
    ctx: typer.Context,
    plan: Annotated[
        bool, typer.Option("--plan", help="Say what migrate would do and how long firing would wait; change nothing.")
    ] = False,
    max_hold: Annotated[
        float | None,
        typer.Option(
            "--max-hold",
            min=0,
            metavar="SECONDS",
            help="Refuse, changing nothing, when partitioning the history would hold firing longer than this.",
        ),
    ] = None,
) -> None:
    """Create or upgrade the schema (Procrastinate's and ours); running it twice changes nothing."""
    from agentlab_sched.database import migrate as migrating

    st = common.state(ctx)
    database = st.database()
    todo = migrating.plan(database.url)
    if plan:
        if todo.pending:
            common.say(ctx, "migrate.plan_pending", pending=", ".join(todo.pending))
        else:
            common.say(ctx, "cli.up_to_date")
        if todo.history_rows:
            common.say(ctx, "migrate.plan_hold", **_hold_params(todo))
        return
    if todo.history_rows and (max_hold is None or todo.hold_seconds <= max_hold):
        common.say_to_stderr(st.locale, "migrate.plan_hold", **_hold_params(todo))
    # The deployment's locale is recorded only when one was chosen (--locale or AGENTLAB_SCHED_LOCALE).
    chosen = st.locale if (st.locale_given or given("locale")) else None
    report = migrating.migrate(database.url, locale=chosen, max_hold=max_hold)
    names = [f"procrastinate/{n}" for n in report.procrastinate] + report.applied
    if names:
        common.say(ctx, "cli.migrated", applied=", ".join(names))
    else:
        common.say(ctx, "cli.up_to_date")
    if report.cron_blocker:
        common.err().print(
            common.text("cli.cron_compat_skipped", st.locale, schema=report.cron_schema, owner=report.cron_blocker)
        )


def _hold_params(todo: MigratePlan) -> dict[str, object]:
    from agentlab_sched.database import migrate as migrating

    return {
        "rows": sum(todo.history_rows.values()),
        "tables": ", ".join(f"{name} {rows}" for name, rows in todo.history_rows.items()),
        "seconds": migrating.hold_text(todo.hold_seconds),
        "per_million": migrating.HOLD_SECONDS_PER_MILLION_ROWS,
    }


_URL = re.compile(r"^postgres(?:ql)?://", re.IGNORECASE)


def without_password(url: str) -> str:
    """The URL to print: its password left out, in every form libpq reads (``user:secret@`` up to the
    ``@``, whatever it holds; ``?password=``; ``password = 'a b'`` in a key=value string)."""
    import psycopg
    from psycopg import conninfo

    if _URL.match(url):
        # libpq's userinfo ends at the first @ or /: a password may hold # or ? unencoded
        url = re.sub(r"^([a-z]+://[^:/@]*):[^@/]*@", r"\1@", url, flags=re.IGNORECASE)
        url = re.sub(r"([?&])password=[^&#]*(&|$)", r"\1", url, flags=re.IGNORECASE)
        return url.rstrip("?&")
    try:
        conninfo.conninfo_to_dict(url)
    except psycopg.ProgrammingError:  # not a connection string libpq reads: show none of it
        return "?"
    # key=value: a value is a word or a quoted string with \' and \\ escapes; spaces may surround the =
    url = re.sub(r"(^|\s)password\s*=\s*(?:'(?:[^'\\]|\\.)*'|[^\s']\S*)", r"\1", url)
    return re.sub(r"\s+", " ", url).strip()


def _password_apart(url: str) -> tuple[str, str | None]:
    """``url`` as a conninfo without its password, and the password (None when it has none)."""
    from psycopg import conninfo

    params = conninfo.conninfo_to_dict(url)
    password = params.pop("password", None)
    return conninfo.make_conninfo("", **params), (str(password) if password is not None else None)


@db_app.command("url")
def url_cmd(ctx: typer.Context, dev: Dev = False) -> None:
    """Print the URL of the database in use (for psql or your own code); the password is left out."""
    typer.echo(without_password(common.state(ctx).database(dev=dev).url))


@db_app.command("psql", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def psql_cmd(ctx: typer.Context, dev: Dev = False) -> None:
    """Open psql on the database in use; arguments after it go to psql (db psql -c "SELECT 1")."""
    from agentlab_sched.database import embedded

    st = common.state(ctx)
    database = st.database(dev=dev)
    shipped = embedded.psql()
    configured = st.database_url or (not dev and st.settings().database_url)
    found = [str(p) for p in ((shutil.which("psql"), shipped) if configured else (shipped, shutil.which("psql"))) if p]
    if not found:
        typer.echo(without_password(database.url))
        common.err().print(Text(common.text("cli.psql_missing", st.locale), style="red"))
        raise typer.Exit(1)
    # The password goes through psql's environment, never its command line (any local user reads argv).
    target, password = _password_apart(database.url)
    env = {**os.environ, **({"PGPASSWORD": password} if password is not None else {})}
    completed = subprocess.run([found[0], target, *ctx.args], check=False, env=env)
    raise typer.Exit(completed.returncode)


@db_app.command("stop")
def stop_cmd(
    ctx: typer.Context,
    remove: Annotated[bool, typer.Option("--remove", help="Also delete its data directory (all its data).")] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="With --remove: do not ask.")] = False,
) -> None:
    """Stop the embedded PostgreSQL (and with --remove, delete its data: it asks first, unless --yes)."""
    from agentlab_sched.database import embedded

    st = common.state(ctx)
    where = st.data_directory()
    with common.quiet_embedded():
        found = embedded.state(where)
        if found == embedded.MISSING:
            common.say(ctx, "cli.db_none", dir=where)
            return
        if remove and not yes:
            _confirm_removal(st.locale, where)
        found = embedded.stop(where, remove=remove)
    if remove:
        common.say(ctx, "cli.db_removed" if found == embedded.RUNNING else "cli.db_removed_not_running", dir=where)
    else:
        common.say(ctx, "cli.db_stopped" if found == embedded.RUNNING else "cli.db_not_running", dir=where)


#: A role name roles create accepts: what PostgreSQL takes unquoted (letters, digits, _ and $; not first a
#: digit or $), at most 63 bytes with the suffix.
_ROLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_$]{0,54}")


def _confirm_removal(locale: str, where: str) -> None:
    """Ask before deleting the data (the answer may also be piped in); no answer at all is a refusal."""
    interactive = sys.stdin is not None and sys.stdin.isatty()
    if interactive:
        common.err().print(Text(common.text("cli.db_remove_confirm", locale, dir=where)), end="")
    answer = sys.stdin.readline() if sys.stdin is not None else ""
    if not answer:
        if interactive:
            common.err().print()
        raise SchedError("cli.db_remove_needs_yes", "yes", dir=where)
    if answer.strip().lower() not in ("y", "yes", "是", "是的", "确定"):
        common.say_to_stderr(locale, "cli.db_remove_declined", dir=where)
        raise typer.Exit(1)


roles_app = typer.Typer(
    name="roles",
    help="The database roles: reader (views), admin (the SQL API), worker (firing and running jobs).",
    no_args_is_help=True,
    rich_markup_mode=None,
)


@roles_app.command("create")
def roles_create_cmd(
    ctx: typer.Context,
    prefix: Annotated[
        str, typer.Option("--prefix", help="Name the roles <prefix>_reader, <prefix>_admin, <prefix>_worker.")
    ] = ROLES_PREFIX,
    reader: Annotated[str | None, typer.Option("--reader", help="The reader role's name.")] = None,
    admin: Annotated[str | None, typer.Option("--admin", help="The admin role's name.")] = None,
    worker: Annotated[str | None, typer.Option("--worker", help="The worker role's name.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON (for scripts).")] = False,
) -> None:
    """Create the reader, admin and worker roles (NOLOGIN) and grant them; running it again changes nothing.

    Run it as the owner of the schema (the role that runs migrate), with the right to create roles.
    """
    import psycopg

    from agentlab_sched.database import roles

    st = common.state(ctx)
    for option, value in (("prefix", prefix), ("reader", reader), ("admin", admin), ("worker", worker)):
        if value is not None and not _ROLE_NAME.fullmatch(value):  # said as a role name, before connecting
            raise SchedError("roles.bad_name", option, option=f"--{option}", value=value)
    database = st.database()
    base = roles.RoleNames.with_prefix(prefix)
    names = roles.RoleNames(reader or base.reader, admin or base.admin, worker or base.worker)
    with psycopg.connect(database.url, autocommit=True) as conn:
        report = roles.create_roles(conn, names)
        found = roles.warnings(conn)
    if as_json:
        common.print_json(
            {
                "reader": names.reader,
                "admin": names.admin,
                "worker": names.worker,
                "created": list(report.created),
                "existing": list(report.existing),
                "warnings": [common.text(w.code, st.locale, **w.params) for w in found],
            }
        )
        return
    nothing = messages.term("roles.nothing")
    common.say(
        ctx,
        "roles.done",
        created=list(report.created) or nothing,
        existing=list(report.existing) or nothing,
        admin=names.admin,
    )
    for warning in found:
        if database.embedded_dir and warning.code == "roles.superuser_owner":  # the embedded server's default
            line = common.text("doctor.embedded_superuser_owner", st.locale, **warning.params)
            common.err().print(common.cell(line, style="dim"))
            continue
        common.err().print(common.cell(common.text(warning.code, st.locale, **warning.params), style="yellow"))
