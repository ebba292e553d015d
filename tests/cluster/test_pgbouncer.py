"""A real PgBouncer in transaction pooling mode between the worker and PostgreSQL.

Through it go the worker's pool (jobs, runs, approvals, notifications) and every command; its LISTENs go
to a direct connection (``listen_url``). A worker told to LISTEN through the pooler says so at start.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import psycopg
import pytest
from cryptography.fernet import Fernet
from typer.testing import CliRunner

from agentlab_sched import database as db
from agentlab_sched.cli import app as cli_app
from agentlab_sched.database.connections import listen_delivers
from agentlab_sched.demo import make_app
from agentlab_sched.errors import SchedError
from agentlab_sched.firing import requests
from agentlab_sched.notify.webhooks import set_webhook
from agentlab_sched.runs import lifecycle
from agentlab_sched.schedules import admin
from agentlab_sched.settings import Settings
from agentlab_sched.worker.process import run_worker
from tests.support.rows import Conn

KEY = Fernet.generate_key().decode()
SETTINGS = Settings(locale="en", secret_keys=(KEY,), webhook_allow_private=True)


@pytest.fixture
def received() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """A webhook receiver on 127.0.0.1: its URL and the JSON bodies it got."""
    bodies: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            bodies.append(json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0")))))
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook", bodies
    finally:
        server.shutdown()
        server.server_close()


async def _wait_for(predicate: Any, limit: float = 20.0) -> Any:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        value = await predicate()
        if value:
            return value
        await asyncio.sleep(0.05)
    raise AssertionError("condition not met in time")


def _pooled_transactions(pgbouncer: Any, dbname: str) -> int:
    """Transactions PgBouncer has pooled for database ``dbname`` (its admin console's SHOW STATS)."""
    with psycopg.connect(pgbouncer.url("pgbouncer"), autocommit=True, prepare_threshold=None) as admin_conn:
        cur = admin_conn.execute("SHOW STATS")
        names = [c.name for c in cur.description or []]
        for row in cur.fetchall():
            stats = dict(zip(names, row, strict=True))
            if stats["database"] == dbname:
                return int(stats["total_xact_count"])
    return 0


async def _runs(conn: Conn, schedule: str) -> list[dict[str, Any]]:
    cur = await conn.execute(
        """SELECT r.id, r.status FROM agentlab_sched.runs r JOIN agentlab_sched.schedules s ON s.id = r.schedule_id
           WHERE s.name = %s ORDER BY r.created_at""",
        (schedule,),
    )
    return await cur.fetchall()


async def test_worker_through_pgbouncer_fires_runs_approvals_and_notifications(
    pgbouncer: Any, pg15_url: str, pg15_db: str, received: tuple[str, list[dict[str, Any]]]
) -> None:
    pooled = pgbouncer.url(pg15_db)
    hook, bodies = received
    conn = await db.connect(pooled, locale="en")  # the commands' side goes through the pooler too
    try:
        await admin.schedule(conn, "echo", "* * * * * *", "demo.echo", {"n": 1})
        await admin.schedule(conn, "gate", "0 0 1 1 *", "demo.ask", {})
        await set_webhook(conn, "echo", url=hook, events=["finished"], settings=SETTINGS)
        before = _pooled_transactions(pgbouncer, pg15_db)
        stop = asyncio.Event()
        worker = asyncio.create_task(
            run_worker(
                make_app(pooled), pooled, listen_url=pg15_url, stop=stop, install_signal_handlers=False,
                settings=SETTINGS,
            )
        )  # fmt: skip
        try:

            async def echo_succeeded() -> bool:
                return any(r["status"] == "succeeded" for r in await _runs(conn, "echo"))

            await _wait_for(echo_succeeded)
            await requests.trigger(conn, "gate")

            async def gate_waits() -> list[dict[str, Any]]:
                return [r for r in await _runs(conn, "gate") if r["status"] == "awaiting_approval"]

            [waiting] = await _wait_for(gate_waits)
            await lifecycle.approve(conn, waiting["id"], by="tester")

            async def gate_done() -> list[str]:
                return [r["status"] for r in await _runs(conn, "gate") if r["status"] == "succeeded"]

            assert await _wait_for(gate_done) == ["succeeded"]

            async def notified() -> list[dict[str, Any]]:
                return list(bodies)

            [first, *_] = await _wait_for(notified)
        finally:
            stop.set()
            await asyncio.wait_for(worker, timeout=10)
        assert (first["schedule"], first["event"], first["status"]) == ("echo", "finished", "succeeded")
        assert _pooled_transactions(pgbouncer, pg15_db) > before + 10  # the worker's work went through it
    finally:
        await conn.close()


async def test_listen_through_a_transaction_pooler_hears_nothing(pgbouncer: Any, pg15_url: str, pg15_db: str) -> None:
    assert await listen_delivers(pg15_url) is True
    assert await listen_delivers(pgbouncer.url(pg15_db), within=1.0) is False


async def test_worker_listening_through_pgbouncer_says_so_at_start(pgbouncer: Any, pg15_db: str) -> None:
    pooled = pgbouncer.url(pg15_db)
    began = time.monotonic()
    with pytest.raises(SchedError) as raised:
        await asyncio.wait_for(
            run_worker(make_app(pooled), pooled, install_signal_handlers=False, settings=SETTINGS), timeout=20
        )
    assert time.monotonic() - began < 10
    shown = pooled.replace("host=127.0.0.1", "").strip()
    assert raised.value.code == "worker.listen_pooled"
    message = raised.value.message("en")
    assert message.startswith("the worker's LISTEN connection (postgresql://postgres@127.0.0.1:")
    assert "hears no NOTIFY: it goes through a transaction pooler" in message and shown
    assert "AGENTLAB_SCHED_LISTEN_URL or --listen-url" in message
    assert "收不到 NOTIFY" in raised.value.message("zh-CN")


def test_worker_command_through_pgbouncer_without_listen_url_exits_2_saying_so(pgbouncer: Any, pg15_db: str) -> None:
    env = {"AGENTLAB_SCHED_LOCALE": "en", "AGENTLAB_SCHED_DATABASE_URL": pgbouncer.url(pg15_db)}
    result = CliRunner(env=env).invoke(cli_app, ["worker", "--quiet"])
    assert result.exit_code == 2  # a setting to change, like any refused input
    assert "hears no NOTIFY: it goes through a transaction pooler" in result.stderr
    assert "Traceback" not in result.stderr


def test_reading_commands_work_through_pgbouncer(pgbouncer: Any, pg15_db: str) -> None:
    env = {"AGENTLAB_SCHED_LOCALE": "en", "AGENTLAB_SCHED_DATABASE_URL": pgbouncer.url(pg15_db)}
    runner = CliRunner(env=env)
    for args in (["fires"], ["runs", "list"], ["schedules", "list"]):
        result = runner.invoke(cli_app, args)
        assert result.exit_code == 0, (args, result.stderr)
