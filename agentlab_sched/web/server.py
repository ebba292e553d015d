"""Serving the dashboard with uvicorn, in the caller's event loop (``web`` alone, or beside ``dev``'s worker)."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import socket

import uvicorn

from agentlab_sched.web.config import WebConfig
from agentlab_sched.web.dashboard import create_app

__all__ = ["bind", "serve"]


def bind(host: str, port: int, *, fallback: bool = False) -> socket.socket:
    """A listening socket on ``host:port``; with ``fallback``, any free port when that one is taken (dev)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        if not fallback or exc.errno != errno.EADDRINUSE:
            sock.close()
            raise
        sock.bind((host, 0))
    sock.listen(128)
    sock.setblocking(False)
    return sock


def address(sock: socket.socket, config: WebConfig) -> str:
    """``http://127.0.0.1:8765/``: where the pages are."""
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}{config.prefix}/"


async def serve(config: WebConfig, sock: socket.socket, stop: asyncio.Event | None = None) -> None:
    """Serve until ``stop`` is set (or the server is told to exit by a signal, when it owns them)."""
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(config),
            log_level="warning",
            lifespan="on",
            access_log=False,
            proxy_headers=False,
            timeout_graceful_shutdown=2,  # open event streams never end by themselves
        )
    )
    if stop is None:
        await server.serve(sockets=[sock])
        return
    # Beside a worker: the worker owns the signals; this stops when told to.
    server.capture_signals = contextlib.nullcontext  # type: ignore[assignment,method-assign]
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        await stop.wait()
    finally:
        server.should_exit = True
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(task, 5)
