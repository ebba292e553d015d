"""`agentlab-sched web`: the dashboard (docs/web.md), and the part of `dev` that starts it."""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING, Annotated

import typer

from agentlab_sched.cli import common
from agentlab_sched.errors import ValidationError
from agentlab_sched.settings import Settings

if TYPE_CHECKING:
    from agentlab_sched.web import WebConfig

__all__ = ["dev_dashboard", "register", "web_cmd"]


def register(app: typer.Typer) -> None:
    """Add ``web`` to the root CLI."""
    app.command("web")(web_cmd)


def _base_path(value: str) -> str:
    value = value.strip() or "/"
    if not value.startswith("/") or "//" in value or any(c in value for c in "?#\\ "):
        raise ValidationError("web.bad_base_path", "base_path", value=value)
    return value.rstrip("/") or "/"


def web_cmd(
    ctx: typer.Context,
    host: Annotated[
        str, typer.Option("--host", help="Address to listen on (127.0.0.1: this machine only).")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="Port to listen on (0: any free one).")] = 8765,
    read_only: Annotated[
        bool, typer.Option("--read-only", help="Show everything, change nothing, whatever the role.")
    ] = False,
    base_path: Annotated[
        str, typer.Option("--base-path", help="Serve under this path (behind a proxy), e.g. /sched.")
    ] = "/",
    local: Annotated[
        bool, typer.Option("--local", help="Sign visitors in as the configured role without a password (single user).")
    ] = False,
) -> None:
    """Serve the dashboard: schedules, fires, runs, health and load, signed in as PostgreSQL roles."""
    import asyncio

    from agentlab_sched.database.connections import display_url
    from agentlab_sched.web import WebConfig, serve
    from agentlab_sched.web.server import address, bind

    st = common.state(ctx)
    prefix = _base_path(base_path)  # refused before any database is looked at
    config = WebConfig(
        database_url=st.database().url, settings=st.settings(), read_only=read_only, base_path=prefix, local=local
    )
    sock = bind(host, port)
    mode = (common.text("web.mode_read_only", st.locale) if read_only else "") + (
        common.text("web.mode_local", st.locale) if local else ""
    )
    common.say(ctx, "web.serving", url=address(sock, config), database=display_url(config.database_url), mode=mode)
    asyncio.run(serve(config, sock))


def dev_dashboard(url: str, settings: Settings) -> tuple[WebConfig, socket.socket, str]:
    """The dashboard `dev` starts beside its worker: local sign-in on 127.0.0.1:8765 (any free port when that
    one is taken); its config, its socket and its address."""
    from agentlab_sched.web import WebConfig
    from agentlab_sched.web.server import address, bind

    config = WebConfig(database_url=url, settings=settings, local=True)
    sock = bind("127.0.0.1", 8765, fallback=True)
    return config, sock, address(sock, config)
