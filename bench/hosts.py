"""Many worker hosts on one PostgreSQL: a storm of N schedules due at one instant, fired and run by K hosts.

    sudo python -m bench.hosts                          # N = 5000; K = 1, 2, 4, 8
    python -m bench.hosts -n 10000 --hosts 2 --hosts 4  # the counts to measure
    python -m bench.hosts --save hosts.json
    python -m bench.hosts --citus --hosts 1 --hosts 2    # the same on a Citus coordinator, tables local
    python -m bench.hosts --pgbouncer                     # the workers' pools through PgBouncer

Each host is a network namespace made with ``ip netns`` (bench/netns.py: its own address on a veth pair
to a bridge where the database listens, its own host name), running one ``agentlab-sched worker --app
bench.apps.app``; where namespaces cannot be made (not root), the hosts are plain processes on
127.0.0.1, and the result says so (``hosts_are``). The server is Debian's PostgreSQL 15 (fsync on,
pg_stat_statements loaded), listening on the bridge.

For each K, on a fresh database: the K hosts start and report; N schedules ``bench.hit`` (one INSERT),
due at T a few seconds ahead (their next due time a year later: one fire each), are inserted; then:

- ``fires_per_s``: N / (the last ledger row's time - T); ``jobs_per_s``: N / (the last job's end - T);
- the claim: the precise loop's ``claim_due`` and the workers' ``fetch_jobs`` statements (pg_stat_
  statements): calls, rows, total and mean time, and fetch calls per job (more hosts: more calls that
  find little, as the others took the jobs first; SKIP LOCKED skips rows without counting them);
- what the server's backends waited on, sampled every 20 ms during the storm (pg_stat_activity
  ``wait_event_type:wait_event``: Lock = row or table locks, LWLock = shared memory (WALWrite: waiting
  for another backend's WAL flush), IO:WALSync = flushing the WAL, ``cpu`` = running), as shares;
- CPU seconds of the server (every backend) and of the workers, and the machine's load.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
from psycopg import conninfo

from . import apps, common, netns

WORKER = [
    sys.executable,
    "-c",
    "from agentlab_sched.cli import main; main()",
    "worker",
    "--app",
    "bench.apps.app",
    "--quiet",
]
SAMPLE_EVERY = 0.02


@contextlib.contextmanager
def _server(listen: str, citus: bool = False) -> Iterator[common.Server]:
    os.environ["BENCH_STATEMENTS"] = "1"  # pg_stat_statements on the server (bench/common.py)
    extra = {"listen_addresses": f"'{listen}'", "max_connections": "400"}
    if citus:
        extra["shared_preload_libraries"] = "'citus'"
    with common._pg15(extra) as (admin, missing):
        with psycopg.connect(admin, autocommit=True) as conn:  # the hosts connect over TCP: let them in
            hba = Path(str(conn.execute("SHOW hba_file").fetchone()[0]))  # type: ignore[index]
            with hba.open("a") as f:
                f.write(f"host all all {netns.NETWORK} trust\nhost all all 127.0.0.1/32 trust\n")
            conn.execute("SELECT pg_reload_conf()")
        srv = common.Server(admin, common._postmaster_pid(admin), pg_cron=missing)
        try:
            yield srv
        finally:
            srv.drop_template()


def _tcp(url: str, host: str) -> str:
    """``url`` over TCP to ``host`` (the hosts reach the server there, not on its unix socket)."""
    return conninfo.make_conninfo(url, host=host, port=5432)


def _sample_waits(admin_url: str, dbname: str, stop: threading.Event, into: Counter[str]) -> None:
    with psycopg.connect(admin_url, autocommit=True) as conn:
        while not stop.is_set():
            for (kind,) in conn.execute(
                """SELECT coalesce(wait_event_type || ':' || wait_event, 'cpu')
                   FROM pg_stat_activity WHERE datname = %s AND state = 'active' AND backend_type = 'client backend'
                     AND pid <> pg_backend_pid()""",
                (dbname,),
            ).fetchall():
                into[kind] += 1
            into["_samples"] += 1
            time.sleep(SAMPLE_EVERY)


def _statements(conn: psycopg.Connection[Any], dbname: str) -> dict[str, dict[str, float]]:
    rows = conn.execute(
        """SELECT CASE WHEN query ILIKE '%%claim_due%%' THEN 'claim_due'
                       WHEN query ILIKE '%%fetch_jobs%%' THEN 'fetch_jobs'
                       WHEN query ILIKE '%%finish_jobs%%' THEN 'finish_jobs' END AS what,
                  sum(calls)::bigint AS calls, sum(rows)::bigint AS rows, sum(total_exec_time) AS ms
           FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
           WHERE d.datname = %s AND s.toplevel AND (query ILIKE '%%claim_due%%' OR query ILIKE '%%fetch_jobs%%'
                 OR query ILIKE '%%finish_jobs%%')
           GROUP BY 1""",
        (dbname,),
    ).fetchall()
    return {
        r[0]: {"calls": int(r[1]), "rows": int(r[2]), "total_ms": round(float(r[3]), 1),
               "mean_ms": round(float(r[3]) / max(1, int(r[1])), 3)}
        for r in rows if r[0]
    }  # fmt: skip


def _count(conn: psycopg.Connection[Any], query: str, *params: Any) -> int:
    row = conn.execute(query.encode(), params or None).fetchone()
    return int(row[0]) if row else 0


PGBOUNCER_PORT = 6432


@contextlib.contextmanager
def _pgbouncer(srv: common.Server, listen: str) -> Iterator[None]:
    """PgBouncer (transaction pooling, docs/operations.md's settings) on ``listen``:6432 in front of ``srv``."""
    import shutil
    import subprocess
    import tempfile

    parts = conninfo.conninfo_to_dict(srv.admin_url)
    root = Path(tempfile.mkdtemp(prefix="agentlab-sched-bench-pgbouncer-"))
    prefix = common._as_user()
    (root / "users.txt").write_text('"postgres" ""\n')
    (root / "pgbouncer.ini").write_text(
        f"""[databases]
* = host={parts["host"]} port={parts.get("port") or 5432} connect_query='SET plan_cache_mode = force_custom_plan'
[pgbouncer]
listen_addr = {listen}
listen_port = {PGBOUNCER_PORT}
unix_socket_dir = {root}
auth_type = trust
auth_file = {root}/users.txt
pool_mode = transaction
max_client_conn = 1000
default_pool_size = 20
ignore_startup_parameters = options
logfile = {root}/pgbouncer.log
"""
    )
    if prefix:
        user = prefix[1].split("=", 1)[1]
        for path in (root, root / "users.txt", root / "pgbouncer.ini"):
            shutil.chown(path, user)
    proc = subprocess.Popen([*prefix, "/usr/sbin/pgbouncer", str(root / "pgbouncer.ini")])
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                with psycopg.connect(f"postgresql://postgres@{listen}:{PGBOUNCER_PORT}/postgres", connect_timeout=2):
                    break
            except psycopg.OperationalError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("pgbouncer did not start") from None
                time.sleep(0.1)
        yield
    finally:
        proc.terminate()
        proc.wait(10)
        shutil.rmtree(root, ignore_errors=True)


def storm(
    srv: common.Server,
    hosts: netns.Hosts,
    k: int,
    n: int,
    concurrency: int,
    citus: bool = False,
    pooled: bool = False,
) -> dict[str, Any]:
    """One storm: N schedules due at T, K hosts; see the module doc."""
    with srv.database() as url:
        dbname = str(conninfo.conninfo_to_dict(url)["dbname"])
        bench = psycopg.connect(url, autocommit=True)
        admin = psycopg.connect(srv.admin_url, autocommit=True)
        try:
            if citus:  # Citus in the database, every table local (what migrate leaves on a coordinator)
                bench.execute("CREATE EXTENSION citus")
            apps.create_hits(bench)
            env = {**common.worker_env(_tcp(url, hosts.server_address))}
            if pooled:  # the workers' pool through PgBouncer, their LISTENs straight to the server
                env["AGENTLAB_SCHED_LISTEN_URL"] = env["AGENTLAB_SCHED_DATABASE_URL"]
                env["AGENTLAB_SCHED_DATABASE_URL"] = conninfo.make_conninfo(
                    url, host=hosts.server_address, port=PGBOUNCER_PORT
                )
            chosen = hosts.hosts[:k]
            procs = [
                hosts.start(h, [*WORKER, "--concurrency", str(concurrency)], cwd=common.ROOT, env=env) for h in chosen
            ]
            try:
                deadline = time.monotonic() + 120
                while _count(bench, "SELECT count(*) FROM agentlab_sched.workers") < k:
                    if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                        raise RuntimeError("the hosts' workers did not all start")
                    time.sleep(0.2)
                registry = bench.execute("SELECT host, pid FROM agentlab_sched.workers ORDER BY host").fetchall()
                at = datetime.now(UTC) + timedelta(seconds=4 + n / 3000)
                common.insert_schedules(
                    bench, n, cron="0 0 1 1 *", next_run_at=at, prefix="storm", task=apps.TASK, inputs={"k": 1}
                )
                common.settle(url)
                admin.execute("SELECT pg_stat_statements_reset()")
                pg0 = common.postgres_cpu(srv.postmaster_pid or 0)
                w0 = sum(common.process_cpu(p.pid, children=True) for p in procs)
                waits: Counter[str] = Counter()
                stop = threading.Event()
                sampler = threading.Thread(target=_sample_waits, args=(srv.admin_url, dbname, stop, waits))
                time.sleep(max(0.0, (at - datetime.now(UTC)).total_seconds() - 0.5))
                sampler.start()
                limit = time.monotonic() + 120 + n / 50
                done = "SELECT count(*) FROM procrastinate_jobs WHERE task_name = %s AND status = 'succeeded'"
                while _count(bench, done, apps.TASK) < n:
                    if time.monotonic() > limit:
                        raise RuntimeError("the storm did not finish in time")
                    time.sleep(0.2)
                stop.set()
                sampler.join(10)
                w1 = sum(common.process_cpu(p.pid, children=True) for p in procs)
                pg1 = common.postgres_cpu(srv.postmaster_pid or 0)
                fired = bench.execute(
                    "SELECT extract(epoch FROM max(created_at) - %s)::float, count(*) FROM agentlab_sched.fires",
                    (at,),
                ).fetchone()
                ended = bench.execute(
                    "SELECT extract(epoch FROM max(at) - %s)::float FROM procrastinate_events WHERE type = 'succeeded'",
                    (at,),
                ).fetchone()
                duplicates = bench.execute(
                    "SELECT count(*) FROM (SELECT 1 FROM agentlab_sched.fires GROUP BY schedule_id, fire_at "
                    "HAVING count(*) > 1) d"
                ).fetchone()
                statements = _statements(admin, dbname)
            finally:
                for host in chosen:
                    hosts.stop(host)
                    host.processes.clear()
            assert fired is not None and ended is not None and duplicates is not None
            samples = max(1, waits.pop("_samples", 0))
            fires_s, jobs_s = float(fired[0]), float(ended[0])
            return {
                "hosts": k,
                "schedules": n,
                "fires": int(fired[1]),
                "duplicates": int(duplicates[0]),
                "fires_seconds": round(fires_s, 2),
                "jobs_seconds": round(jobs_s, 2),
                "fires_per_s": round(n / fires_s),
                "jobs_per_s": round(n / jobs_s),
                "claims": statements,
                "fetch_calls_per_job": round(statements.get("fetch_jobs", {}).get("calls", 0) / n, 3),
                "backends_active_avg": round(sum(waits.values()) / samples, 2),
                "waits_share": {kind: round(c / sum(waits.values()), 3) for kind, c in waits.most_common(6)},
                "cpu_s": {"server": round(pg1 - pg0, 1), "workers": round(w1 - w0, 1)},
                "registry": [f"{h}:{p}" for h, p in registry],
                "loadavg": os.getloadavg(),
            }
        finally:
            bench.close()
            admin.close()


def run(
    counts: list[int], n: int, concurrency: int, namespaces: bool, citus: bool = False, pooled: bool = False
) -> dict[str, Any]:
    with netns.Hosts(max(counts), namespaces=namespaces) as hosts:
        listen = netns.SERVER_ADDRESS if hosts.namespaced else "127.0.0.1"
        with _server(listen, citus) as srv, _pgbouncer(srv, listen) if pooled else contextlib.nullcontext():
            result: dict[str, Any] = {
                "benchmark": "hosts",
                "hosts_are": "network namespaces (ip netns, veth, bridge)" if hosts.namespaced
                else f"plain processes on 127.0.0.1 ({hosts.why_not})",
                "machine": common.machine(),
                "concurrency": concurrency,
                "citus": citus,
                "pgbouncer": pooled,
                "rows": [],
            }  # fmt: skip
            srv.describe(result)
            for k in counts:
                row = storm(srv, hosts, k, n, concurrency, citus, pooled)
                print(
                    f"{k} hosts: {row['fires_per_s']} fires/s, {row['jobs_per_s']} jobs/s, "
                    f"waits {row['waits_share']}, cpu {row['cpu_s']}",
                    flush=True,
                )
                result["rows"].append(row)
            return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=5000, help="schedules due at once")
    parser.add_argument("--hosts", type=int, action="append", help="host counts (repeatable; 1 2 4 8)")
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--processes", action="store_true", help="plain processes, no namespaces")
    parser.add_argument("--citus", action="store_true", help="Citus loaded and in the database, tables local")
    parser.add_argument("--pgbouncer", action="store_true", help="the workers' pool through PgBouncer (transaction)")
    parser.add_argument("--save", help="write the JSON result here too")
    args = parser.parse_args()
    result = run(args.hosts or [1, 2, 4, 8], args.n, args.concurrency, not args.processes, args.citus, args.pgbouncer)
    common.emit(result, args.save)


if __name__ == "__main__":
    main()
