"""The storm and the idle cost on the distributed schema `migrate` makes on Citus (a coordinator and two
workers), against the same on one PostgreSQL, in the same run.

    python -m bench.citus_storm -n 2000                 # N = 2000 due at once; 1 worker process
    python -m bench.citus_storm -n 2000 --idle-seconds 30 --processes 1,2

Needs Debian's PostgreSQL 15 and Citus (scripts/install-citus). Four servers are started in temporary
directories (as the ``postgres`` user when root) on free ports of 127.0.0.1, fsync on: one plain, and a
coordinator with two workers in its node list. Each database is migrated by ``migrate`` (on Citus: the
catalogues become reference tables, the audit of schedule changes is distributed by schedule id; see
docs/scaling.md). Then, on each:

- idle: ``--idle-seconds`` with one ``agentlab-sched worker`` running and N schedules none of which is due
  within the hour; CPU seconds a minute of every server and of the worker;
- the storm: N schedules due at one instant T, one ``bench.hit`` job each (one INSERT), one
  ``agentlab-sched worker --concurrency 10`` process (or P of them, ``--processes``, each storm on new
  schedules); fires/s is N over the time from T to the last ledger row,
  jobs/s N over the time to the last job's end; ms per fire: the CPU of every server and of the worker
  over the storm, per fire; duplicates: due times with more than one ledger row.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

from agentlab_sched.database.migrate import migrate

from . import apps, common
from .citus import CITUS_LIB, _server

WORKER = [sys.executable, "-c", "from agentlab_sched.cli import main; main()", "worker", "--app", "bench.apps.app",
          "--quiet", "--concurrency", "10"]  # fmt: skip


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1].split("/")[0])


def _count(conn: psycopg.Connection[Any], query: str, *params: Any) -> int:
    row = conn.execute(query, params or None).fetchone()  # type: ignore[call-overload]
    return int(row[0]) if row else 0


def _cpu(pids: list[int], worker: subprocess.Popen[bytes]) -> tuple[float, float]:
    return sum(common.postgres_cpu(p) for p in pids), common.process_cpu(worker.pid, children=True)


def _start(url: str) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(WORKER, cwd=common.ROOT, env=common.worker_env(url), stdin=subprocess.DEVNULL)
    with psycopg.connect(url, autocommit=True) as conn:
        deadline = time.monotonic() + 120
        while not _count(conn, "SELECT count(*) FROM agentlab_sched.workers WHERE pid = %s", proc.pid):
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError("the worker did not start")
            time.sleep(0.2)
    return proc


def _cpus(pids: list[int], workers: list[subprocess.Popen[bytes]]) -> tuple[float, float]:
    cpus = [_cpu(pids, w) for w in workers]
    return cpus[0][0], sum(w for _, w in cpus)


def measure(
    where: str, url: str, pids: list[int], n: int, idle_seconds: float, processes: int = 1, idle: bool = True
) -> dict[str, Any]:
    """Idle (unless not ``idle``), then the storm with ``processes`` workers, on the migrated database at
    ``url`` (servers ``pids``); each call's storm fires N schedules of its own."""
    with psycopg.connect(url, autocommit=True) as conn:
        apps.create_hits(conn)
        before = _count(conn, "SELECT count(*) FROM agentlab_sched.fires")
        jobs_before = _count(conn, "SELECT count(*) FROM procrastinate_jobs WHERE task_name = %s", apps.TASK)
        idle_cpu: dict[str, float] | None = None
        if idle:
            later = datetime.now(UTC) + timedelta(hours=2)
            common.insert_schedules(conn, n, cron="0 0 1 1 *", next_run_at=later, prefix="idle", task=apps.TASK)
        common.settle(url)
        workers = [_start(url) for _ in range(processes)]
        try:
            if idle:
                s0, w0 = _cpus(pids, workers)
                time.sleep(idle_seconds)
                s1, w1 = _cpus(pids, workers)
                idle_cpu = {
                    "server": round((s1 - s0) / idle_seconds * 60, 2),
                    "worker": round((w1 - w0) / idle_seconds * 60, 2),
                }
            at = datetime.now(UTC) + timedelta(seconds=4 + n / 2000)
            common.insert_schedules(conn, n, cron="0 0 1 1 *", next_run_at=at, prefix=f"storm{processes}-",
                                    task=apps.TASK, inputs={"k": 1})  # fmt: skip
            time.sleep(max(0.0, (at - datetime.now(UTC)).total_seconds() - 0.5))
            s0, w0 = _cpus(pids, workers)
            limit = time.monotonic() + 120 + n / 20
            done = "SELECT count(*) FROM procrastinate_jobs WHERE task_name = %s AND status = 'succeeded'"
            while _count(conn, done, apps.TASK) < jobs_before + n:
                if time.monotonic() > limit or any(w.poll() is not None for w in workers):
                    raise RuntimeError("the storm did not finish in time")
                time.sleep(0.2)
            s1, w1 = _cpus(pids, workers)
        finally:
            for worker in workers:
                common.stop_worker(worker)
        fired = conn.execute(
            "SELECT extract(epoch FROM max(created_at) - %s)::float, count(*) - %s FROM agentlab_sched.fires",
            (at, before),
        ).fetchone()
        ended = conn.execute(
            "SELECT extract(epoch FROM max(at) - %s)::float FROM procrastinate_events WHERE type = 'succeeded'", (at,)
        ).fetchone()
        duplicates = _count(
            conn,
            "SELECT count(*) FROM (SELECT 1 FROM agentlab_sched.fires GROUP BY schedule_id, fire_at, kind "
            "HAVING count(*) > 1) d",
        )
    assert fired is not None and ended is not None
    return {
        "where": where,
        "processes": processes,
        "schedules": n,
        "fires": int(fired[1]),
        "duplicates": duplicates,
        "fires_per_s": round(n / float(fired[0])),
        "jobs_per_s": round(n / float(ended[0])),
        "cpu_ms_per_fire": {"server": round((s1 - s0) / n * 1000, 2), "worker": round((w1 - w0) / n * 1000, 2)},
        "idle_cpu_s_per_min": idle_cpu,
        "loadavg": os.getloadavg(),
    }


def run(n: int, idle_seconds: float, processes: list[int]) -> dict[str, Any]:
    if not CITUS_LIB.exists():
        raise SystemExit(f"Citus is not installed ({CITUS_LIB}): scripts/install-citus SOURCE")
    result: dict[str, Any] = {"benchmark": "citus-storm", "machine": common.machine(), "rows": []}
    with contextlib.ExitStack() as stack:
        plain_url, plain_pid = stack.enter_context(_server(citus=False))
        nodes = [stack.enter_context(_server(citus=True)) for _ in range(3)]
        coord_url = nodes[0][0]
        with psycopg.connect(coord_url, autocommit=True) as conn:
            conn.execute("SELECT citus_set_coordinator_host('127.0.0.1', %s)", (_port(coord_url),))
            for url, _ in nodes[1:]:
                conn.execute("SELECT citus_add_node('127.0.0.1', %s)", (_port(url),))
        migrate(plain_url, locale="en")
        placed = migrate(coord_url, locale="en").citus
        result["citus_tables"] = placed
        for where, url, pids in (
            ("one PostgreSQL", plain_url, [plain_pid]),
            ("Citus, 3 nodes", coord_url, [pid for _, pid in nodes]),
        ):
            for i, count in enumerate(processes):
                row = measure(where, url, pids, n, idle_seconds, count, idle=i == 0)
                print(row, flush=True)
                result["rows"].append(row)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=2000, help="schedules due at once")
    parser.add_argument("--idle-seconds", type=float, default=30.0)
    parser.add_argument("--processes", default="1", help="worker process counts, one storm each: 1,2")
    parser.add_argument("--save")
    args = parser.parse_args()
    common.emit(run(args.n, args.idle_seconds, [int(p) for p in args.processes.split(",")]), args.save)


if __name__ == "__main__":
    os.environ.setdefault("PGAPPNAME", "bench.citus_storm")
    main()
