"""`agentlab-sched migrate` and `agentlab-sched db ...` (the embedded PostgreSQL)."""

from __future__ import annotations

import os
from typing import Annotated

import psycopg
import typer

from agentlab_sched import messages
from agentlab_sched.cli import common
from agentlab_sched.database import embedded, roles
from agentlab_sched.database.migrate import migrate

db_app = typer.Typer(
    name="db",
    help="The embedded PostgreSQL used when no database URL is configured.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


def migrate_cmd(ctx: typer.Context) -> None:
    """Create or upgrade the schema (Procrastinate's and ours); running it twice changes nothing."""
    st = common.state(ctx)
    database = st.database()
    # The deployment's locale is recorded only when one was chosen (--locale or AGENTLAB_SCHED_LOCALE).
    chosen = st.locale if (st.locale_given or os.environ.get("AGENTLAB_SCHED_LOCALE")) else None
    report = migrate(database.url, locale=chosen)
    names = [f"procrastinate/{n}" for n in report.procrastinate] + report.applied
    if names:
        common.say(ctx, "cli.migrated", applied=", ".join(names))
    else:
        common.say(ctx, "cli.up_to_date")
    if report.cron_blocker:
        common.err().print(
            common.text("cli.cron_compat_skipped", st.locale, schema=report.cron_schema, owner=report.cron_blocker)
        )


@db_app.command("stop")
def stop_cmd(
    ctx: typer.Context,
    remove: Annotated[bool, typer.Option("--remove", help="Also delete its data directory (all its data).")] = False,
) -> None:
    """Stop the embedded PostgreSQL (and with --remove, delete its data)."""
    st = common.state(ctx)
    where = st.data_dir or os.environ.get("AGENTLAB_SCHED_DATA_DIR") or str(embedded.default_data_dir())
    with common.quiet_embedded():
        stopped = embedded.stop(where, remove=remove)
    if not stopped:
        common.say(ctx, "cli.db_none", dir=where)
        return
    common.say(ctx, "cli.db_removed" if remove else "cli.db_stopped", dir=where)


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
    ] = roles.DEFAULT_PREFIX,
    reader: Annotated[str | None, typer.Option("--reader", help="The reader role's name.")] = None,
    admin: Annotated[str | None, typer.Option("--admin", help="The admin role's name.")] = None,
    worker: Annotated[str | None, typer.Option("--worker", help="The worker role's name.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON (for scripts).")] = False,
) -> None:
    """Create the reader, admin and worker roles (NOLOGIN) and grant them; running it again changes nothing.

    Run it as the owner of the schema (the role that runs migrate), with the right to create roles.
    """
    st = common.state(ctx)
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
        common.err().print(common.cell(common.text(warning.code, st.locale, **warning.params), style="yellow"))
