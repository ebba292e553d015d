"""`agentlab-sched import pg-cron` and `agentlab-sched import procrastinate` (docs/coming-from.md)."""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.text import Text

from agentlab_sched.cli import common
from agentlab_sched.errors import ValidationError

if TYPE_CHECKING:
    import psycopg

    from agentlab_sched.imports import pg_cron

import_app = typer.Typer(
    name="import",
    help="Make schedules from where you come from: pg_cron's jobs, Procrastinate's periodic tasks.",
    no_args_is_help=True,
    rich_markup_mode=None,
)

JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON.")]


@import_app.command("pg-cron")
def pg_cron_cmd(
    ctx: typer.Context,
    from_url: Annotated[
        str | None, typer.Option("--from", help="The database pg_cron is in (default: this one).")
    ] = None,
    from_env: Annotated[
        str | None,
        typer.Option(
            "--from-env",
            metavar="VAR",
            help="Read --from's URL from environment variable VAR (no password on the command line).",
        ),
    ] = None,
    enable: Annotated[
        bool, typer.Option("--enable", help="Enable the schedules (pg_cron's inactive jobs stay paused).")
    ] = False,
    unschedule: Annotated[
        bool, typer.Option("--unschedule", help="With --enable: remove the jobs from pg_cron in the same transaction.")
    ] = False,
    run_as: Annotated[
        str | None, typer.Option("--run-as", help="Run every job as this role instead of the job's own.")
    ] = None,
    timezone: Annotated[
        str | None, typer.Option("--timezone", "--tz", help="Read the schedules in this zone (default: cron.timezone).")
    ] = None,
    statement_timeout: Annotated[
        str, typer.Option("--statement-timeout", help="Cancel a command after this long (pg_cron has no limit).")
    ] = "24h",
    map_database: Annotated[
        list[str] | None,
        typer.Option(
            "--map-database",
            metavar="SOURCE=TARGET",
            help="With --from another server: run the jobs of its database SOURCE in this server's TARGET.",
            show_default=False,
        ),
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Say what it would do; write nothing.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Make sql schedules of pg_cron's jobs (paused unless --enable) and say what could not be translated."""

    from agentlab_sched.imports import pg_cron

    limit = common.parse_duration(statement_timeout, "statement_timeout")
    locale = common.state(ctx).locale
    from_url = _source_url(from_url, from_env)
    if from_url is not None:
        _check_from(from_url)
    mapping = _mapping(map_database or [])

    async def run(conn: psycopg.AsyncConnection[Any]) -> pg_cron.ImportReport:
        source = await _connect_from(from_url) if from_url else None
        try:
            return await pg_cron.import_jobs(
                conn, source, enable=enable, unschedule=unschedule, run_as=run_as, timezone=timezone,
                statement_timeout=limit, dry_run=dry_run, locale=locale, database_map=mapping,
            )  # fmt: skip
        finally:
            if source is not None:
                await source.close()

    report = common.run(ctx, run)
    if as_json:
        common.print_json(report.as_dict())
        return
    _print_report(report, locale)


def _mapping(values: list[str]) -> dict[str, str]:
    """``--map-database SOURCE=TARGET`` options as a dict."""
    found = {}
    for value in values:
        source, sep, target = value.partition("=")
        if not sep or not source.strip() or not target.strip():
            raise ValidationError("import.bad_map", "map_database", value=value)
        found[source.strip()] = target.strip()
    return found


def _status(outcome: str, enabled: bool, dry_run: bool) -> str:
    """The status word of one imported job (or periodic task): what was done, or in a dry run would be."""
    if dry_run:
        return {
            "created": "cli.import.would_create_enabled" if enabled else "cli.import.would_create_paused",
            "already": "cli.import.already",
            "enabled": "cli.import.would_enable",
        }[outcome]
    return {
        "created": "cli.import.created_enabled" if enabled else "cli.import.created_paused",
        "already": "cli.import.already",
        "enabled": "cli.import.enabled",
    }[outcome]


def _unschedule_calls(items: list[pg_cron.Imported], say: Any) -> str:
    """The calls (to copy) that remove these jobs from pg_cron, in pg_cron's database."""
    return ", ".join(str(say("cli.import.unschedule_call", jobid=i.jobid)) for i in items)


def _source_url(from_url: str | None, from_env: str | None) -> str | None:
    """The URL of pg_cron's database: ``--from``'s, or the value of the environment variable ``--from-env``
    names (a password in argv is readable by every local user in ``/proc``)."""
    if from_env is None:
        return from_url
    if from_url is not None:
        raise ValidationError("import.from_both", "from_env")
    value = os.environ.get(from_env, "").strip()
    if not value:
        raise ValidationError("import.from_env_unset", "from_env", name=from_env)
    return value


def _check_from(url: str) -> None:
    """--from must be a PostgreSQL URL or connection string: anything else is refused naming the option."""
    import psycopg
    from psycopg import conninfo

    try:
        conninfo.conninfo_to_dict(url)
    except (psycopg.ProgrammingError, ValueError):  # a bad % escape: not UTF-8 once decoded
        raise ValidationError("import.bad_from", "from", value=_masked(url)) from None


def _masked(url: str) -> str:
    """``url`` as it may be shown though it does not parse: its password (``user:secret@`` up to the ``@``,
    ``password=...``) replaced by ``***``."""
    url = re.sub(r"^([a-z][a-z0-9+.-]*://[^:/@]*):[^@/]*@", r"\1:***@", url, flags=re.IGNORECASE)
    return re.sub(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'?|[^\s&]*)", r"\1***", url, flags=re.IGNORECASE)


async def _connect_from(url: str) -> psycopg.AsyncConnection[Any]:
    """The connection to pg_cron's database; one that cannot be made is refused naming --from."""
    import psycopg
    from psycopg.rows import dict_row

    from agentlab_sched.database.connections import display_url

    try:
        return await psycopg.AsyncConnection.connect(url, autocommit=True, row_factory=dict_row)
    except psycopg.OperationalError as exc:
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ValidationError("import.from_unreachable", "from", url=display_url(url), error=detail) from None


def _print_report(report: pg_cron.ImportReport, locale: str) -> None:
    out = common.out()

    def say(code: str, **params: object) -> str:
        return common.text(code, locale, **params)

    out.print(Text(say("cli.import.header", database=report.source_database, timezone=report.timezone)))
    if not report.imported and not report.refused:
        out.print(Text(say("cli.import.none")))
    if report.imported:
        table = common.table(locale, "jobid", "schedule", "cron", "database", "run_as", "status")
        for item in report.imported:
            status = _status(item.outcome, item.enabled, report.dry_run)
            separator = "; " if locale == "en" else ";"
            removed = "cli.import.would_unschedule" if report.dry_run else "cli.import.unscheduled"
            words = say(status) + (separator + say(removed) if item.unscheduled else "")
            table.add_row(
                str(item.jobid), Text(item.name), Text(item.cron), Text(item.database), Text(item.username), words
            )
        out.print(table)
    for refused in report.refused:
        out.print(Text(say("cli.import.refused", jobid=refused.jobid, name=refused.name, reason=refused.reason)))
    still = [i for i in report.imported if not i.unscheduled]
    running = [i for i in still if i.enabled]
    if running and not report.same_database and not report.dry_run:
        # Both schedulers run these jobs now: the exact statement that stops pg_cron's copies, to copy.
        calls = _unschedule_calls(running, say)
        out.print(Text(say("cli.import.unschedule_there", database=report.source_database, calls=calls)))
    elif still and not report.same_database and not report.dry_run:
        calls = _unschedule_calls(still, say)
        out.print(Text(say("cli.import.unschedule_later", database=report.source_database, calls=calls)))
    elif still and not report.unschedule and report.same_database:
        calls = ", ".join(say("cli.import.unschedule_call", jobid=i.jobid) for i in still)
        out.print(Text(say("cli.import.next_steps", calls=calls)))
    if report.dry_run:
        out.print(Text(say("cli.import.dry_run"), style="yellow"))


@import_app.command("procrastinate")
def procrastinate_cmd(
    ctx: typer.Context,
    app_path: Annotated[str, typer.Option("--app", help="Dotted path of the Procrastinate app, e.g. host.app.")],
    enable: Annotated[
        bool, typer.Option("--enable", help="Enable the schedules (remove the decorators first).")
    ] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Say what it would do; write nothing.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Make schedules of an app's @app.periodic tasks (paused unless --enable), and say which decorators to remove."""

    from agentlab_sched.imports import periodic

    locale = common.state(ctx).locale
    procrastinate_app = common.load_app(app_path, common.state(ctx).database().url)

    async def run(conn: psycopg.AsyncConnection[Any]) -> periodic.ImportReport:
        return await periodic.import_periodic(conn, procrastinate_app, enable=enable, dry_run=dry_run, locale=locale)

    report = common.run(ctx, run)
    if as_json:
        common.print_json(report.as_dict())
        return
    out = common.out()

    def say(code: str, **params: object) -> str:
        return common.text(code, locale, **params)

    out.print(Text(say("cli.import_periodic.header", app=app_path)))
    if not report.imported and not report.refused:
        out.print(Text(say("cli.import_periodic.none")))
    if report.imported:
        table = common.table(locale, "task", "schedule", "cron", "overlap", "status")
        for item in report.imported:
            status = _status(item.outcome, item.enabled, report.dry_run)
            table.add_row(Text(item.task), Text(item.name), Text(item.cron), item.overlap, say(status))
        out.print(table)
        for item in report.imported:
            for note in item.notes:
                out.print(Text(f"{item.name}: {note}"))
    for refused in report.refused:
        out.print(Text(say("cli.import_periodic.refused", task=refused.task, cron=refused.cron, reason=refused.reason)))
    for item in report.imported:
        out.print(Text(say("cli.import_periodic.remove", where=item.defined_at), style="yellow"))
    if report.dry_run:
        out.print(Text(say("cli.import.dry_run"), style="yellow"))


def register(app: typer.Typer) -> None:
    """Add `import` to the root CLI."""
    app.add_typer(import_app, name="import")
