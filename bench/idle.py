"""Idle cost: 100k schedules, none due for the next hour, plus one every-minute schedule.

    python -m bench.idle                                   # agentlab-sched's worker, 60 s
    python -m bench.idle --seconds 30 --mode none --mode bare --mode loop --mode tick --mode precise

Reported per mode: CPU seconds per minute of the worker process and of the whole PostgreSQL server
(postmaster and all its processes, from /proc/<pid>/stat), measured after a warm-up, with nothing else
touching the database; then how late the every-minute schedule's fires were recorded and started.
The server's CPU is also split by process (pg_stat_activity's pid and backend_type, read at the start
and the end of the window): the worker's own backends (client backends connected to the benchmark's
database), autovacuum, the other background processes, and backends that exited meanwhile. Before the
window the loaded table is vacuumed and analysed and the benchmark waits until no autovacuum worker runs,
so that a fresh million rows' autovacuum is not counted as the cost of idling.

    python -m bench.idle --schedules 1000 --schedules 1000000 --seconds 60   # with the ratios of the two
Modes (bench/worker.py): ``precise`` is ``agentlab-sched worker`` (the precise loop; before 73d3ed9 also
the per-second periodic tick), ``tick`` a plain procrastinate worker with the blueprint, ``bare`` a
procrastinate worker without the scheduler, ``loop`` the precise loop alone, ``none`` no worker at all
(the server's own floor).

Target (docs/benchmarks.md): scheduler and PostgreSQL together <= 0.05 CPU-s per minute; the every-minute fire
< 0.1 s late.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import psycopg
from psycopg import conninfo
from psycopg.rows import dict_row

from . import common

WARMUP = 10.0
#: How long to wait for autovacuum to finish on the loaded database before measuring.
AUTOVACUUM_WAIT = 300.0


def _backends(admin_url: str) -> dict[int, tuple[str, str | None]]:
    """The server's processes now: pid -> (backend_type, database)."""
    with psycopg.connect(admin_url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pid, backend_type, datname FROM pg_stat_activity WHERE pid <> pg_backend_pid()"
        ).fetchall()
    return {int(r[0]): (str(r[1]), r[2]) for r in rows}


def _wait_for_autovacuum(admin_url: str, limit: float = AUTOVACUUM_WAIT) -> float:
    """Seconds waited until no autovacuum worker runs (at most ``limit``)."""
    began = time.monotonic()
    while time.monotonic() - began < limit:
        if not any(kind == "autovacuum worker" for kind, _ in _backends(admin_url).values()):
            break
        time.sleep(1.0)
    return round(time.monotonic() - began, 1)


def _cpu_by_kind(
    before: dict[int, tuple[str, str | None]],
    cpu0: dict[int, float],
    after: dict[int, tuple[str, str | None]],
    dbname: str,
) -> dict[str, float]:
    """CPU seconds of the server's processes between two readings, by kind: the worker's backends (client
    backends of ``dbname``), autovacuum, the other processes. A process seen only at the end counts from
    0 (it started within the window); one seen only at the start is left to ``exited`` by the caller."""
    spent: dict[str, float] = {}
    for pid, (kind, datname) in after.items():
        now = common.process_cpu(pid)
        delta = now - cpu0.get(pid, 0.0) if pid in before else now
        if kind == "client backend":
            key = "worker_backends" if datname == dbname else "other_client_backends"
        elif kind == "autovacuum worker":
            key = "autovacuum"
        else:
            key = "background"
        spent[key] = spent.get(key, 0.0) + max(delta, 0.0)
    return spent


def _load(url: str, count: int) -> None:
    """``count`` daily schedules due 2 to 12 hours from now (planned), and one every-minute schedule."""
    with psycopg.connect(url) as conn:  # one transaction: the bulk mark holds for it only
        conn.execute("SELECT agentlab_sched.register_tasks(ARRAY['demo.echo'])")
        # The owner's bulk key (what schedule_many() sets): the rows are valid by construction, so the
        # write triggers' per-row validation and audit (about 2 ms a row) are skipped.
        conn.execute("SELECT agentlab_sched.bulk_insert_begin()")
        conn.execute(
            """INSERT INTO agentlab_sched.schedules (name, cron, task, timezone, next_run_at, replan)
               SELECT 'idle-' || g, extract(minute FROM at)::int || ' ' || extract(hour FROM at)::int || ' * * *',
                      'demo.echo', 'UTC', at, NULL
               FROM (SELECT g, date_trunc('minute', now()) + interval '2 hours' + (g %% 600) * interval '1 minute'
                            AS at
                     FROM generate_series(1, %s) g) t""",
            (count,),
        )
        conn.execute("SELECT agentlab_sched.bulk_insert_end()")
        conn.execute(
            """INSERT INTO agentlab_sched.schedules (name, cron, task, timezone, next_run_at, replan, overlap)
               VALUES ('every-minute', '* * * * *', 'demo.echo', 'UTC',
                       date_trunc('minute', now()) + interval '1 minute', NULL, 'allow_all')"""
        )
    common.settle(url)


def _autovacuum_counts(url: str) -> dict[str, int]:
    """Autovacuum and autoanalyze runs so far on each of this database's tables that had any."""
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            """SELECT schemaname || '.' || relname, autovacuum_count + autoanalyze_count FROM pg_stat_all_tables
               WHERE autovacuum_count + autoanalyze_count > 0"""
        ).fetchall()
    return {str(name): int(count) for name, count in rows}


def _autovacuum_between(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """The tables autovacuum (or autoanalyze) ran on between two readings, and how many times."""
    return {name: n - before.get(name, 0) for name, n in sorted(after.items()) if n > before.get(name, 0)}


def _measure(srv: common.Server, url: str, mode: str, seconds: float) -> dict[str, Any]:
    if srv.postmaster_pid is None:
        raise SystemExit("the PostgreSQL server is not on this machine: its CPU cannot be read")
    with psycopg.connect(url, autocommit=True) as conn:  # each mode starts clean, the next minute pending
        conn.execute("TRUNCATE agentlab_sched.fires, agentlab_sched.runs, procrastinate_jobs CASCADE")
        conn.execute(
            """UPDATE agentlab_sched.schedules SET next_run_at = date_trunc('minute', now()) + interval '1 minute'
               WHERE name = 'every-minute'"""
        )
    dbname = str(conninfo.conninfo_to_dict(url)["dbname"])
    worker = common.start_worker(url, mode) if mode != "none" else None
    try:
        time.sleep(WARMUP)
        autovacuum_waited = _wait_for_autovacuum(srv.admin_url)
        vacuumed0 = _autovacuum_counts(url)
        procs0 = _backends(srv.admin_url)
        if common.statements_profiled():  # BENCH_STATEMENTS=1: what the server ran while measured
            with psycopg.connect(srv.admin_url, autocommit=True) as admin:
                admin.execute("SELECT pg_stat_statements_reset()")
        began = time.monotonic()
        cpu0 = {pid: common.process_cpu(pid) for pid in procs0}
        pg0 = common.postgres_cpu(srv.postmaster_pid)
        w0 = common.process_cpu(worker.pid, children=True) if worker else 0.0
        x0 = common.transactions(srv.admin_url)
        time.sleep(seconds)
        pg1 = common.postgres_cpu(srv.postmaster_pid)
        w1 = common.process_cpu(worker.pid, children=True) if worker else 0.0
        procs1 = _backends(srv.admin_url)
        by_kind = _cpu_by_kind(procs0, cpu0, procs1, dbname)
        x1 = common.transactions(srv.admin_url)
        elapsed = time.monotonic() - began
        sent = None
        if common.statements_profiled():  # read before this benchmark's own statements on the database
            with psycopg.connect(srv.admin_url, autocommit=True) as admin:
                sent = common.queries_sent(admin, dbname)
        vacuumed = _autovacuum_between(vacuumed0, _autovacuum_counts(url))
    finally:
        if worker:
            common.stop_worker(worker)
    with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
        fires = conn.execute(
            """SELECT f.fire_at, f.status, extract(epoch FROM f.created_at - f.fire_at) AS recorded,
                      extract(epoch FROM r.started_at - f.fire_at) AS started
               FROM agentlab_sched.fires f LEFT JOIN agentlab_sched.runs r ON r.id = f.run_id
               ORDER BY f.fire_at"""
        ).fetchall()
    per_minute = 60.0 / elapsed
    statements: list[dict[str, Any]] = []
    if common.statements_profiled():
        with psycopg.connect(srv.admin_url, autocommit=True) as admin:
            statements = common.top_statements(admin, dbname)
        for row in statements:
            print(f"  {row['total_ms']:>10} ms {row['calls']:>7} calls {row['blocks']:>10} blocks  {row['query']}")
    worker_cpu, pg_cpu = (w1 - w0) * per_minute, (pg1 - pg0) * per_minute
    # What the live processes do not account for: backends (and the readings' own connections) that
    # exited within the window, and the postmaster itself.
    by_kind["exited_and_postmaster"] = max((pg1 - pg0) - sum(by_kind.values()), 0.0)
    return {
        "mode": mode,
        "seconds": round(elapsed, 1),
        "worker_cpu_s_per_min": round(worker_cpu, 3),
        "postgres_cpu_s_per_min": round(pg_cpu, 3),
        "total_cpu_s_per_min": round(worker_cpu + pg_cpu, 3),
        "postgres_cpu_s_per_min_by_kind": {k: round(v * per_minute, 3) for k, v in sorted(by_kind.items())},
        "autovacuum_waited_s": autovacuum_waited,
        # Within the window (the stats a backend reports late may move one to the next window).
        "autovacuum_runs": sum(vacuumed.values()),
        "autovacuumed": vacuumed,
        # The server's transactions a minute (each of the worker's statements is one, or part of one).
        "transactions_per_min": round(common.transactions_between(x0, x1)["xacts"] * per_minute, 1),
        # The statements the worker sent (BENCH_STATEMENTS=1 only): the transactions above also count
        # autovacuum's, which a loaded million brings to the catalogs whatever the worker does.
        "queries_per_min": None if sent is None else round(sent * per_minute, 1),
        "statements": statements,
        "fires": [
            {
                "fire_at": f["fire_at"].isoformat(),
                "status": f["status"],
                "recorded_late_ms": round(float(f["recorded"]) * 1000, 1),
                "started_late_ms": None if f["started"] is None else round(float(f["started"]) * 1000, 1),
            }
            for f in fires
        ],
    }


def _one_size(srv: common.Server, modes: list[str], seconds: float, count: int, rounds: int) -> dict[str, Any]:
    result: dict[str, Any] = {"schedules": count + 1, "modes": {}}
    with srv.database() as url:
        began = time.monotonic()
        _load(url, count)
        result["load_seconds"] = round(time.monotonic() - began, 1)
        for _ in range(rounds):
            for mode in modes:
                one = _measure(srv, url, mode, seconds)
                result["modes"].setdefault(mode, []).append(one)
                late = [f["started_late_ms"] for f in one["fires"]]
                print(
                    f"{count + 1} schedules, {mode}: worker {one['worker_cpu_s_per_min']} + postgres "
                    f"{one['postgres_cpu_s_per_min']} = {one['total_cpu_s_per_min']} CPU-s/min "
                    f"(postgres by kind {one['postgres_cpu_s_per_min_by_kind']}), "
                    f"{one['transactions_per_min']} transactions/min, {one['queries_per_min']} queries/min; "
                    f"every-minute fire started late (ms): {late}",
                    flush=True,
                )
    for mode, ones in result["modes"].items():
        result[f"{mode}_median_total_cpu_s_per_min"] = common.median([o["total_cpu_s_per_min"] for o in ones])
    return result


#: The figures compared between sizes (median over rounds), each a ratio to the first size's.
COMPARED = (
    "worker_cpu_s_per_min",
    "worker_backends",
    "postgres_cpu_s_per_min",
    "transactions_per_min",
    "queries_per_min",
)


def _figure(one: dict[str, Any], name: str) -> float:
    if name == "worker_backends":
        return float(one["postgres_cpu_s_per_min_by_kind"].get(name, 0.0))
    return float(one[name] or 0.0)  # queries_per_min: None without BENCH_STATEMENTS=1


def run(
    modes: list[str], seconds: float, counts: list[int], rounds: int, server_kind: str | None = None
) -> dict[str, Any]:
    results: dict[str, Any] = {"machine": common.machine(), "sizes": []}
    with common.server(server_kind) as srv:
        srv.describe(results)
        for count in counts:
            results["sizes"].append(_one_size(srv, modes, seconds, count, rounds))
    first = results["sizes"][0]
    for size in results["sizes"][1:]:
        for mode, ones in size["modes"].items():
            base = first["modes"].get(mode)
            if not base:
                continue
            ratios = {}
            for name in COMPARED:
                was = common.median([_figure(o, name) for o in base])
                now = common.median([_figure(o, name) for o in ones])
                ratios[name] = round(now / was, 2) if was else None
            size.setdefault("ratio_to_first", {})[mode] = ratios
            print(f"{size['schedules']} vs {first['schedules']} schedules, {mode}: {ratios}", flush=True)
    results["machine"]["loadavg_end"] = common.machine()["loadavg"]
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--mode", choices=["precise", "tick", "bare", "loop", "none"], action="append", help="default precise"
    )
    parser.add_argument("--seconds", type=float, default=60.0, help="measured seconds per mode (default 60)")
    parser.add_argument(
        "--schedules",
        type=int,
        action="append",
        help="idle schedules (default 100000); repeated: each size, "
        "on a database of its own, with the ratios of the figures to the first size's",
    )
    parser.add_argument("--rounds", type=int, default=1, help="measurements per mode (medians reported)")
    parser.add_argument("--server", choices=common.server_kinds(), help=f"default {common.default_server()}")
    parser.add_argument("--save", help="write the JSON result to this file too")
    args = parser.parse_args()
    counts = args.schedules or [100_000]
    common.emit(run(args.mode or ["precise"], args.seconds, counts, args.rounds, args.server), args.save)
