"""`agentlab-sched notify test NAME` and `notify rotate-secrets`.

Mount ``notify_app`` as ``notify``, or call `register(app)`, which also adds ``rotate-secrets`` at the
top level (`agentlab-sched rotate-secrets`). Refusals (unknown schedule, no webhook, no key, a URL that no longer
validates) are `SchedError`s: the root handler prints them and exits 2. A test message that was not
delivered prints why and what to fix, and exits 1.
"""

from __future__ import annotations

from typing import Annotated

import typer

from agentlab_sched.cli import common

notify_app = typer.Typer(
    name="notify",
    help="Notifications: send a test message through a schedule's webhook; re-encrypt webhook secrets.",
    no_args_is_help=True,
)


@notify_app.command("test")
def test_command(ctx: typer.Context, name: Annotated[str, typer.Argument(help="The schedule's name.")]) -> None:
    """Send one test message through the schedule's webhook and say exactly what it proved."""
    from agentlab_sched.notify import test_send

    settings = common.state(ctx).settings()
    result = common.run(ctx, lambda conn: test_send(conn, name, settings))
    if result.ok:
        common.out().print(common.cell(result.message))
        return
    common.err().print(common.cell(result.message, style="red"))
    raise typer.Exit(1)


@notify_app.command("rotate-secrets")
def rotate_secrets_command(ctx: typer.Context) -> None:
    """Re-encrypt every webhook URL and secret with the newest key of AGENTLAB_SCHED_SECRET_KEY."""
    from agentlab_sched.notify import rotate_secrets

    settings = common.state(ctx).settings()
    count = common.run(ctx, lambda conn: rotate_secrets(conn, settings))
    common.say(ctx, "notify.rotate.done", count=count)


def register(app: typer.Typer) -> None:
    """Mount ``notify`` (``test``, ``rotate-secrets``) and a top-level ``rotate-secrets`` on the root app."""
    app.add_typer(notify_app, name="notify")
    # Kept working at the top level, listed once in --help (under notify).
    app.command("rotate-secrets", hidden=True)(rotate_secrets_command)
