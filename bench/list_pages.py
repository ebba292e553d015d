"""Reading at scale: the CLI's lists, doctor and the SQL views with a million schedules and a large ledger.

    python -m bench.list_pages                                  # 1M schedules, 10M then 30M fires rows
    python -m bench.list_pages --fires 100000000                # the target size (disk: about 30 GB)
    python -m bench.list_pages --schedules 100000 --fires 1000000 --fires 3000000   # a quick look
    python -m bench.list_pages --fires 1000000 --registered no   # doctor naming a million schedules' task

Loaded set-based (generate_series, as the owner with session_replication_role = replica: the rows are
valid by construction, so neither the write triggers nor the foreign keys run per row): N schedules
(hourly, planned), then the fires rows spread over the days of the retention, each day into its own
partition (named as housekeeping names them; loaded while it is detached and without its secondary
indexes, which are built after, then attached), one in ten with a run. Each ``--fires`` size adds rows to
the same database (older days first), then VACUUM ANALYZE; at each size every reader is timed several
times (in-process: the library call the CLI makes, or the SQL statement; and the CLI command as a whole
process, start-up included) and each SQL form's plan is read with EXPLAIN (ANALYZE, BUFFERS): the buffers
a reader touches must not grow with the ledger. The database is dropped at the end; check the free disk
(``df -h``) before a large size.

Target (docs/benchmarks.md): every reader under 1 s at 1,000,000 schedules and 100,000,000 ledger rows.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import psycopg

from agentlab_sched import database as db
from agentlab_sched.runs import lifecycle
from agentlab_sched.schedules import admin

from . import common

DAYS = 20
ROUNDS = 5
CLI_ROUNDS = 3
#: A schedule among the names, and the name a second page starts after (set from --schedules).
PROBE = "tenant-0000001"
AFTER = "tenant-0000001"


def _load_schedules(url: str, count: int) -> float:
    began = time.monotonic()
    with psycopg.connect(url) as conn:
        conn.execute("SET session_replication_role = replica")
        conn.execute("SELECT agentlab_sched.register_tasks(ARRAY['demo.echo'])")
        conn.execute(
            """INSERT INTO agentlab_sched.schedules (name, cron, task, timezone, next_run_at, replan)
               SELECT 'tenant-' || lpad(g::text, 7, '0'), 'H * * * *', 'demo.echo', 'UTC',
                      date_trunc('hour', now()) + interval '1 hour' + (g %% 3600) * interval '1 second', NULL
               FROM generate_series(1, %s) g""",
            (count,),
        )
        conn.execute("SELECT agentlab_sched.set_retention('30 days')")
    return time.monotonic() - began


#: The rows of one day: runs (one fire in ten has one), then fires, into the partition table {part}.
RUNS_OF_A_DAY = """
    INSERT INTO agentlab_sched_history.{part} (id, schedule_id, task, status, started_by, created_at, started_at,
                                               finished_at)
    SELECT md5(%(have)s || ':' || %(day)s || ':' || g)::uuid, 1 + (g::bigint * 7919) %% %(s)s, 'demo.echo',
           CASE WHEN g %% 97 = 0 THEN 'failed' ELSE 'succeeded' END, 'schedule',
           %(start)s + (g + %(have)s %% 1000) * (interval '86400 seconds' / (%(n)s + 1000)),
           %(start)s + (g + %(have)s %% 1000) * (interval '86400 seconds' / (%(n)s + 1000)) + interval '10 ms',
           %(start)s + (g + %(have)s %% 1000) * (interval '86400 seconds' / (%(n)s + 1000)) + interval '1 s'
    FROM generate_series(1, %(n)s) g WHERE g %% 10 = 0"""
FIRES_OF_A_DAY = """
    INSERT INTO agentlab_sched_history.{part} (id, schedule_id, fire_at, kind, status, run_id, created_at)
    SELECT nextval(pg_get_serial_sequence('agentlab_sched.fires', 'id')), 1 + (g::bigint * 7919) %% %(s)s, t.at,
           'scheduled', CASE WHEN g %% 10 = 0 OR g %% 7 <> 0 THEN 'started' ELSE 'skipped_overlap' END,
           CASE WHEN g %% 10 = 0 THEN md5(%(have)s || ':' || %(day)s || ':' || g)::uuid END, t.at + interval '5 ms'
    FROM generate_series(1, %(n)s) g,
         LATERAL (SELECT %(start)s + (g + %(have)s %% 1000) * (interval '86400 seconds' / (%(n)s + 1000))
                         + (%(have)s / greatest(%(n)s, 1)) * interval '1 microsecond' AS at) t"""


def _load_partition(conn: psycopg.Connection[Any], tbl: str, key: str, start: Any, rows: str, params: Any) -> None:
    """Load one day of ``tbl`` into its partition while the partition is out of the table and has no
    secondary index, then build the indexes (named as create_partition() names them) and attach it: each
    index is built once from sorted rows instead of updated row by row. A partition there already (a second
    size) is detached first and keeps its primary and unique keys while it is loaded."""
    part = f"{tbl}_p{start:%Y%m%d}"
    found = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (f"agentlab_sched_history.{part}",)).fetchone()
    if found and found[0]:
        conn.execute(f"ALTER TABLE agentlab_sched.{tbl} DETACH PARTITION agentlab_sched_history.{part}")
        for (index,) in conn.execute(
            """SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
               WHERE i.indrelid = %s::regclass
                 AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = i.indexrelid)""",
            (f"agentlab_sched_history.{part}",),
        ).fetchall():
            conn.execute(f'DROP INDEX agentlab_sched_history."{index}"')
    else:
        conn.execute(
            f"CREATE TABLE agentlab_sched_history.{part} (LIKE agentlab_sched.{tbl} INCLUDING DEFAULTS "
            "INCLUDING CONSTRAINTS INCLUDING GENERATED)"
        )
    conn.execute(rows.format(part=part), params)
    for (definition,) in conn.execute(
        r"""SELECT regexp_replace(pg_get_indexdef(i.indexrelid), '^CREATE (UNIQUE )?INDEX \S+ ON ONLY \S+ ',
                                 'CREATE \1INDEX ' || quote_ident(%s || '_' || c.relname)
                                 || ' ON agentlab_sched_history.' || quote_ident(%s) || ' ')
           FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
           WHERE i.indrelid = %s::regclass
             AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = i.indexrelid)""",
        (part, part, f"agentlab_sched.{tbl}"),
    ).fetchall():
        conn.execute(definition)
    # The primary and unique keys: ATTACH builds those the partition lacks. A CHECK matching the bound
    # spares it the scan of the rows.
    lo, hi = start.isoformat(), (start + datetime.timedelta(days=1)).isoformat()
    conn.execute(
        f"ALTER TABLE agentlab_sched_history.{part} ADD CONSTRAINT {part}_bound "
        f"CHECK ({key} >= '{lo}' AND {key} < '{hi}')"
    )
    conn.execute(
        f"ALTER TABLE agentlab_sched.{tbl} ATTACH PARTITION agentlab_sched_history.{part} "
        f"FOR VALUES FROM ('{lo}') TO ('{hi}')"
    )
    conn.execute(f"ALTER TABLE agentlab_sched_history.{part} DROP CONSTRAINT {part}_bound")


def _load_fires(url: str, schedules: int, have: int, want: int) -> float:
    """Fires rows from ``have`` up to ``want``, over DAYS days before today (the oldest first), one in ten
    started with a run; each day loaded into its partition before its indexes are built."""
    began = time.monotonic()
    per_day = max((want - have) // DAYS, 1)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SET session_replication_role = replica")
        conn.execute("SET maintenance_work_mem = '512MB'")
        for day in range(DAYS, 0, -1):
            row = conn.execute("SELECT date_trunc('day', now() AT TIME ZONE 'UTC') - %s * interval '1 day'", (day,))
            naive = row.fetchone()
            assert naive is not None
            start = naive[0].replace(tzinfo=datetime.UTC)
            # The rows of this size have their own seconds of the day (offset by the size already there):
            # (schedule, fire_at, kind) stays unique.
            params = {"start": start, "n": per_day, "s": schedules, "have": have, "day": day}
            with conn.transaction():
                _load_partition(conn, "runs", "created_at", start, RUNS_OF_A_DAY, params)
                _load_partition(conn, "fires", "fire_at", start, FIRES_OF_A_DAY, params)
        conn.execute("VACUUM ANALYZE")
        conn.execute("CHECKPOINT")
    return time.monotonic() - began


def _stats(values: list[float]) -> dict[str, float]:
    return {"p50_ms": round(common.median(values) * 1000, 1), "max_ms": round(max(values) * 1000, 1)}


async def _timed(url: str, call: Callable[[psycopg.AsyncConnection[Any]], Awaitable[Any]]) -> dict[str, float]:
    conn = await db.connect(url, locale="en")
    try:
        spent = []
        for _ in range(ROUNDS):
            began = time.monotonic()
            await call(conn)
            spent.append(time.monotonic() - began)
    finally:
        await conn.close()
    return _stats(spent)


def _cli(url: str, *args: str) -> dict[str, float]:
    exe = str(Path(sys.executable).with_name("agentlab-sched"))
    env = {**common.worker_env(url)}
    spent = []
    for _ in range(CLI_ROUNDS):
        began = time.monotonic()
        subprocess.run([exe, *args], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        spent.append(time.monotonic() - began)
    return _stats(spent)


#: The SQL forms: (label, statement). Their plans are read too.
SQL = [
    ("schedule_status, a page", "SELECT * FROM agentlab_sched.schedule_status ORDER BY name LIMIT 50"),
    ("schedule_status, one", "SELECT * FROM agentlab_sched.schedule_status WHERE name = '{probe}'"),
    ("fire_history, newest", "SELECT * FROM agentlab_sched.fire_history LIMIT 50"),
    (
        "fire_history, one schedule",
        f"SELECT * FROM agentlab_sched.fire_history WHERE schedule_name = '{PROBE}' LIMIT 50",
    ),
    ("overdue", "SELECT * FROM agentlab_sched.overdue LIMIT 50"),
    ("cron_job, a page", "SELECT * FROM agentlab_sched.cron_job LIMIT 50"),
    ("cron_job_run_details, newest", "SELECT * FROM agentlab_sched.cron_job_run_details ORDER BY runid DESC LIMIT 50"),
    ("doctor_facts() (what doctor reads)", "SELECT agentlab_sched.doctor_facts()"),
]


def _sql_forms(url: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with psycopg.connect(url, autocommit=True) as conn:
        for label, form in SQL:
            statement = form.format(probe=PROBE)
            spent = []
            for _ in range(ROUNDS):
                began = time.monotonic()
                conn.execute(statement).fetchall()
                spent.append(time.monotonic() - began)
            plan = conn.execute(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {statement}").fetchone()
            assert plan is not None
            top = plan[0][0]["Plan"]
            buffers = int(top.get("Shared Hit Blocks", 0)) + int(top.get("Shared Read Blocks", 0))
            out[label] = {**_stats(spent), "buffers": buffers}
    return out


def _measure(url: str) -> dict[str, Any]:
    calls: dict[str, Callable[[psycopg.AsyncConnection[Any]], Awaitable[Any]]] = {
        "schedules list (page + count)": lambda c: _page(c, None),
        "schedules list --after": lambda c: _page(c, AFTER),
        "fires": lambda c: lifecycle.list_fires(c, None, limit=50),
        "fires NAME": lambda c: lifecycle.list_fires(c, PROBE, limit=50),
        "runs list": lambda c: lifecycle.list_runs(c, None, limit=50),
        "runs list --schedule NAME": lambda c: lifecycle.list_runs(c, PROBE, limit=50),
    }
    result: dict[str, Any] = {"in_process": {}, "cli": {}}
    for label, call in calls.items():
        result["in_process"][label] = asyncio.run(_timed(url, call))
    result["sql"] = _sql_forms(url)
    for label, args in {
        "schedules list": ("schedules", "list"),
        "fires": ("fires",),
        "fires NAME": ("fires", PROBE),
        "runs list": ("runs", "list"),
        "doctor": ("doctor",),
        "--version (the process alone)": ("--version",),
    }.items():
        result["cli"][label] = _cli(url, *args)
    return result


async def _page(conn: psycopg.AsyncConnection[Any], after: str | None) -> None:
    await admin.list_schedules(conn, after=after, limit=101)
    await admin.count_schedules(conn)


def _print(size: dict[str, Any]) -> None:
    print(f"--- {size['schedules']} schedules, {size['fires']} fires rows (load {size['load_seconds']} s)")
    for part in ("in_process", "sql", "cli"):
        for label, figures in size[part].items():
            print(f"  {part:10} {label:38} {figures}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--schedules", type=int, default=1_000_000)
    parser.add_argument("--fires", type=int, action="append", help="ledger sizes, growing (default 10M, 30M)")
    parser.add_argument("--server", choices=common.server_kinds(), default=None)
    parser.add_argument("--save", default=None, help="write the result as JSON to this file")
    parser.add_argument(
        "--registered",
        choices=["yes", "no"],
        default="yes",
        help="whether the schedules' task is registered when the readers run (no: doctor's worst case, a finding"
        " about every schedule; a load longer than the known-task window leaves it unregistered either way"
        " unless yes registers it again, which it does)",
    )
    args = parser.parse_args()
    global PROBE, AFTER
    PROBE, AFTER = f"tenant-{max(args.schedules * 123 // 1000, 1):07d}", f"tenant-{args.schedules // 2:07d}"
    sizes = sorted(args.fires or [10_000_000, 30_000_000])
    result: dict[str, Any] = {"benchmark": "list_pages", "machine": common.machine(), "sizes": []}
    result["disk_free_gb_before"] = round(shutil.disk_usage(os.environ.get("TMPDIR", "/tmp")).free / 2**30, 1)
    with common.server(args.server) as srv, srv.database() as url:
        loaded = _load_schedules(url, args.schedules)
        have = 0
        for want in sizes:
            loaded += _load_fires(url, args.schedules, have, want)
            with psycopg.connect(url) as conn:
                row = conn.execute("SELECT count(*) FROM agentlab_sched.fires").fetchone()
                disk = conn.execute("SELECT pg_database_size(current_database())").fetchone()
            have = int(row[0]) if row else want
            with psycopg.connect(url, autocommit=True) as conn:  # as a live worker (or none) leaves it
                if args.registered == "yes":
                    conn.execute("SELECT agentlab_sched.register_tasks(ARRAY['demo.echo'])")
                else:
                    conn.execute("DELETE FROM agentlab_sched.known_tasks")
            size = {
                "schedules": args.schedules,
                "fires": have,
                "load_seconds": round(loaded, 1),
                "registered": args.registered,
                "database_gb": round(int(disk[0]) / 2**30, 2) if disk else None,
                "loadavg": os.getloadavg(),
                **_measure(url),
            }
            result["sizes"].append(size)
            _print(size)
            loaded = 0.0
        srv.describe(result)
    result["machine"]["loadavg_end"] = os.getloadavg()
    common.emit(result, args.save)


if __name__ == "__main__":
    main()
