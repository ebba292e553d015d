"""`agentlab-sched migrate` and `agentlab-sched db ...` (the embedded PostgreSQL)."""

from __future__ import annotations

import os
from typing import Annotated

import typer

from agentlab_sched.cli import common
from agentlab_sched.database import embedded
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
