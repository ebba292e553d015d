"""The `agentlab-sched` command line: the root app, its global options, and where sub-apps mount.

The sub-apps, each in a module of its own:

- ``agentlab_sched.cli.notify:notify_app`` as ``notify``;
- ``agentlab_sched.cli.history:fires_cmd`` as ``fires``, ``:runs_app`` as ``runs``, ``:prune_cmd`` as ``prune``;
- ``agentlab_sched.cli.worker:register(app)`` (``worker``, ``dev``, ``doctor``);
- ``agentlab_sched.cli.firing:register(schedules_app)`` (``schedules trigger``, ``schedules backfill``).
"""

from __future__ import annotations

from typing import Annotated

import typer

from agentlab_sched.cli import common, firing, history, imports, notify, web, worker
from agentlab_sched.cli.database import db_app, migrate_cmd, roles_app
from agentlab_sched.cli.schedules import schedules_app

__all__ = ["app", "main", "schedules_app"]

app = typer.Typer(
    name="agentlab-sched",
    help="A Postgres-native scheduler: cron schedules that launch Procrastinate tasks.",
    cls=common.HandledGroup,
    no_args_is_help=True,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    add_completion=False,
)


@app.callback()
def root(
    ctx: typer.Context,
    database_url: Annotated[
        str | None,
        typer.Option(
            "--database-url",
            help="PostgreSQL URL (default: AGENTLAB_SCHED_DATABASE_URL, else the embedded server).",
            show_default=False,
        ),
    ] = None,
    data_dir: Annotated[
        str | None,
        typer.Option(
            "--data-dir",
            help="Data directory of the embedded server (AGENTLAB_SCHED_DATA_DIR).",
            show_default=False,
        ),
    ] = None,
    locale: Annotated[
        str | None,
        typer.Option("--locale", help="en or zh-CN (default: AGENTLAB_SCHED_LOCALE, else en).", show_default=False),
    ] = None,
    version: Annotated[
        bool,
        typer.Option("--version", help="Print the version and exit.", is_eager=True, callback=common.print_version),
    ] = False,
) -> None:
    """Administer schedules with SQL, Python or this command line."""
    ctx.obj = common.State(
        database_url=database_url,
        data_dir=data_dir,
        locale=common.choose_locale(locale),
        locale_given=locale is not None,
    )


app.command("migrate")(migrate_cmd)
app.add_typer(schedules_app, name="schedules")
app.add_typer(db_app, name="db")
app.add_typer(roles_app, name="roles")


notify.register(app)  # notify test|rotate-secrets
app.command("fires")(history.fires_cmd)
app.add_typer(history.runs_app, name="runs")
app.command("prune")(history.prune_cmd)
worker.register(app)
firing.register(schedules_app)
imports.register(app)  # import pg-cron|procrastinate
web.register(app)  # the dashboard


def main() -> None:
    """The console script ``agentlab-sched``."""
    app(prog_name="agentlab-sched")
