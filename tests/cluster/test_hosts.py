"""Four worker hosts against one PostgreSQL 15: network namespaces made here with ``ip netns`` (each with
its address on a veth pair to a bridge where the database listens, and a host name of its own), or plain
processes on 127.0.0.1 where namespaces cannot be made (the vanished-host part then skips, saying so).

One host vanishes (its link is deleted first: no FIN, no RST reaches the database, then its processes
are killed and its namespace deleted), another is killed with SIGKILL; the others are stopped. Every due
time has at most one ledger row and none is lost between a schedule's first fire and its next_run_at;
every started fire has one run; the runs the vanished host was running are suspended once its
heartbeat is older than the stated 30 s (time injected), not before. The worker registry and `doctor`
name each host and pid.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import sys
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row
from typer.testing import CliRunner

from agentlab_sched.cli import app as cli_app
from agentlab_sched.database.migrate import migrate
from agentlab_sched.runs import lifecycle
from tests.support.rows import SyncConn, fetched

HOSTS = 4
ECHO_SCHEDULES = 60
SLEEP_SCHEDULES = 16
ROOT = Path(__file__).resolve().parents[2]
#: The server notices a vanished client within about 5 + 2 * 3 s (keepalives) or 10 s of unacknowledged
#: data (tcp_user_timeout): its open transaction, and the locks it holds, end then.
SERVER_KEEPALIVES = {
    "tcp_keepalives_idle": "5",
    "tcp_keepalives_interval": "2",
    "tcp_keepalives_count": "3",
    "tcp_user_timeout": "10000",
    "max_connections": "300",
}


@pytest.fixture(scope="module")
def hosts_db(cluster_tools: Any) -> Iterator[tuple[Any, Any, str]]:
    """(hosts, server, database name): the hosts made, the server listening where they reach it."""
    try:
        from bench.netns import SERVER_ADDRESS, Hosts
    except ImportError:
        pytest.skip("the repository's bench package is not importable")
    with Hosts(HOSTS) as hosts:
        listen = "127.0.0.1" + (f",{SERVER_ADDRESS}" if hosts.namespaced else "")
        with cluster_tools.pg15_server("agentlab-sched-hosts-", listen=listen, **SERVER_KEEPALIVES) as server:
            name = cluster_tools.new_database(server)
            migrate(server.url(name))
            yield hosts, server, name


def _worker_env(url: str) -> dict[str, str]:
    return {
        **os.environ,
        "AGENTLAB_SCHED_DATABASE_URL": url,
        "AGENTLAB_SCHED_LOCALE": "en",
        "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p),
    }


WORKER = [sys.executable, "-c", "from agentlab_sched.cli import main; main()", "worker", "--quiet"]


def _wait(what: str, check: Any, limit: float) -> Any:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out after {limit:.0f} s waiting for {what}")


def _running_runs_of(conn: SyncConn, worker_name: str) -> set[str]:
    """The sleep runs (30 s: still running when the host goes) running now on the Procrastinate worker of
    agentlab-sched worker ``worker_name``."""
    rows = conn.execute(
        """SELECT r.id::text FROM agentlab_sched.runs r
           JOIN procrastinate_jobs j ON j.id = r.job_id
           JOIN agentlab_sched.workers w ON w.procrastinate_worker_id = j.worker_id
           WHERE r.status = 'running' AND r.task = 'demo.sleep' AND w.name = %s""",
        (worker_name,),
    ).fetchall()
    return {r["id"] for r in rows}


def test_hosts_fire_once_through_a_vanished_and_a_killed_host(hosts_db: tuple[Any, Any, str]) -> None:
    from bench.common import insert_schedules

    hosts, server, name = hosts_db
    url_for_hosts = server.url(name, host=hosts.server_address)
    admin_url = server.url(name)
    conn = psycopg.connect(admin_url, autocommit=True, row_factory=dict_row)
    try:
        insert_schedules(conn, ECHO_SCHEDULES, cron="* * * * * *", next_run_at=None, prefix="echo", task="demo.echo")
        insert_schedules(
            conn, SLEEP_SCHEDULES, cron="* * * * * *", next_run_at=None, prefix="sleep", task="demo.sleep",
            inputs={"seconds": 30},
        )  # fmt: skip
        procs = {
            h.name: hosts.start(h, WORKER, cwd=ROOT, env=_worker_env(url_for_hosts), stdin=None) for h in hosts.hosts
        }

        def reported() -> list[dict[str, Any]] | None:
            rows = conn.execute(
                "SELECT name, host, pid, procrastinate_worker_id FROM agentlab_sched.workers"
            ).fetchall()
            ready = [r for r in rows if r["procrastinate_worker_id"] is not None]
            return rows if len(ready) == HOSTS else None

        registry = _wait("every host's worker to report", reported, 60)
        by_host = {r["host"]: r for r in registry}
        if hosts.namespaced:  # each namespace has a host name of its own; the pid is the worker's
            assert {h: r["pid"] for h, r in by_host.items()} == {n: p.pid for n, p in procs.items()}
        doctor = CliRunner(env={"AGENTLAB_SCHED_LOCALE": "en", "AGENTLAB_SCHED_DATABASE_URL": admin_url}).invoke(
            cli_app, ["doctor"]
        )
        assert "Traceback" not in doctor.stderr
        for row in registry:
            assert row["name"] in doctor.stdout  # host:pid:start
        assert f"workers: {HOSTS} alive" in doctor.stdout

        # A host running sleep runs vanishes, and another host is killed.
        def busy() -> list[tuple[dict[str, Any], set[str]]]:
            return [(row, runs) for row in registry if (runs := _running_runs_of(conn, row["name"]))]

        [(vanished_row, cut_off), *_] = _wait("sleep runs on a host", busy, 30)
        vanished = next(h for h in hosts.hosts if any(p.pid == vanished_row["pid"] for p in h.processes))
        killed = next(h for h in hosts.hosts if h is not vanished)
        vanished_worker = vanished_row["name"]
        (heartbeat,) = fetched(
            conn.execute(
                """SELECT p.last_heartbeat FROM procrastinate_workers p JOIN agentlab_sched.workers w
               ON w.procrastinate_worker_id = p.id WHERE w.name = %s""",
                (vanished_worker,),
            ).fetchone()
        ).values()
        if hosts.namespaced:
            hosts.vanish(vanished)
        else:
            procs[vanished.name].kill()
        procs[killed.name].kill()
        time.sleep(3)  # the two hosts left fire on through the holes
        for host in hosts.hosts:
            if host not in (vanished, killed):
                assert max(hosts.stop(host)) < 5.0
        procs[killed.name].wait(5)
        if hosts.namespaced:  # the server lets the vanished host's sessions go (keepalives), and its locks
            _wait(
                "the server to drop the vanished host's connections",
                lambda: (
                    not conn.execute(
                        "SELECT 1 FROM pg_stat_activity WHERE client_addr = %s::inet", (vanished.address,)
                    ).fetchall()
                ),
                40,
            )

        duplicates = conn.execute(
            "SELECT schedule_id, fire_at, count(*) FROM agentlab_sched.fires GROUP BY 1, 2 HAVING count(*) > 1"
        ).fetchall()
        assert duplicates == []
        rows = conn.execute(
            """SELECT s.id, s.next_run_at, f.fire_at, f.status FROM agentlab_sched.schedules s
               JOIN agentlab_sched.fires f ON f.schedule_id = s.id WHERE f.kind IN ('scheduled', 'misfire')
               ORDER BY s.id, f.fire_at"""
        ).fetchall()
        by_schedule: dict[int, list[dict[str, Any]]] = {}
        for row in rows:
            by_schedule.setdefault(row["id"], []).append(row)
        assert len(by_schedule) == ECHO_SCHEDULES + SLEEP_SCHEDULES
        second = timedelta(seconds=1)
        for sid, fires in by_schedule.items():
            # Due times one second apart (a skipped_misfire row stands for its backlog), and the pending
            # one right after the last: nothing lost.
            for before, after in itertools.pairwise(fires):
                assert after["fire_at"] - before["fire_at"] == second or before["status"] == "skipped_misfire", (
                    sid, before, after,
                )  # fmt: skip
            assert fires[-1]["next_run_at"] == fires[-1]["fire_at"] + second, (sid, fires[-1])
        runs_per_fire = conn.execute(
            """SELECT f.status, count(r.id) AS runs, count(*) AS fires FROM agentlab_sched.fires f
               LEFT JOIN agentlab_sched.runs r ON r.fire_id = f.id GROUP BY f.id, f.status
               HAVING count(r.id) <> CASE WHEN f.status = 'started' THEN 1 ELSE 0 END"""
        ).fetchall()
        assert runs_per_fire == []

        # The vanished host's runs: still running 29 s after its last heartbeat, suspended after 31 s.
        async def suspend_at(seconds: float) -> int:
            aconn = await psycopg.AsyncConnection.connect(admin_url, autocommit=True)
            try:
                return await lifecycle.detect_suspended(aconn, now=heartbeat + timedelta(seconds=seconds))
            finally:
                await aconn.close()

        def statuses() -> set[str]:
            rows = conn.execute(
                "SELECT status FROM agentlab_sched.runs WHERE id::text = ANY(%s)", (sorted(cut_off),)
            ).fetchall()
            return {r["status"] for r in rows}

        asyncio.run(suspend_at(29))
        assert statuses() == {"running"}
        assert asyncio.run(suspend_at(31)) >= len(cut_off)
        assert statuses() == {"suspended"}
    finally:
        conn.close()


def test_hosts_say_whether_they_are_namespaces(hosts_db: tuple[Any, Any, str]) -> None:
    hosts, _, _ = hosts_db
    if not hosts.namespaced:
        pytest.skip(f"no network namespaces here ({hosts.why_not}): the hosts are plain processes")
    assert [h.address for h in hosts.hosts] == [f"198.18.1.{i}" for i in range(1, HOSTS + 1)]
