"""Bulk create: N schedules in one call of schedule_many(), all validated, by each of its three doors.

    python -m bench.bulk_create                              # 1,000,000 hourly H schedules, one per tenant
    python -m bench.bulk_create --via sql --via import       # SQL schedule_many(), `schedules import FILE`
    BENCH_STATEMENTS=1 python -m bench.bulk_create --count 200000   # with each statement's server time

``--via python``: ``admin.schedule_many()`` from the Python call to its commit (the JSON built and sent,
validated set-based, inserted with their audit rows); ``sql``: one ``SELECT schedule_many(...)`` whose
definitions the server builds (``jsonb_agg`` over ``generate_series``); ``import``: the ``agentlab-sched
schedules import FILE`` command on a JSON-lines file written beforehand (the process's whole run: start,
reading the file, the call). Each door gets a fresh database. Also reported, once: the time per schedule
of the per-row path (``schedule()`` called for 2,000 more). Target (docs/benchmarks.md): 1,000,000 in at
most 60 s by each door.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg
from psycopg import conninfo

from agentlab_sched import database as db
from agentlab_sched.schedules import admin

from . import common

DOORS = ("python", "sql", "import")


def _definition(i: int) -> dict[str, Any]:
    return {"name": f"tenant-{i}", "cron": "H * * * *", "task": "demo.echo"}


async def _python(url: str, count: int) -> float:
    conn = await db.connect(url, locale="en")
    try:
        definitions = [_definition(i) for i in range(count)]
        start = time.monotonic()
        created = await admin.schedule_many(conn, definitions)
        spent = time.monotonic() - start
    finally:
        await conn.close()
    assert created == count, created
    return spent


def _sql(url: str, count: int) -> float:
    with psycopg.connect(url) as conn:
        start = time.monotonic()
        row = conn.execute(
            """SELECT agentlab_sched.schedule_many(jsonb_agg(jsonb_build_object(
                          'name', 'tenant-' || g, 'cron', 'H * * * *', 'task', 'demo.echo') ORDER BY g))
               FROM generate_series(0, %s - 1) g""",
            (count,),
        ).fetchone()
        conn.commit()
        spent = time.monotonic() - start
    assert row is not None and row[0] == count, row
    return spent


def _import(url: str, count: int) -> float:
    with tempfile.TemporaryDirectory(prefix="agentlab-sched-bulk-") as tmp:
        path = Path(tmp) / "schedules.jsonl"
        with path.open("w") as f:
            for i in range(count):
                f.write(json.dumps(_definition(i)) + "\n")
        env = {**common.worker_env(url)}
        start = time.monotonic()
        subprocess.run(
            [str(Path(sys.executable).with_name("agentlab-sched")), "schedules", "import", str(path)],
            check=True,
            env=env,
            stdout=subprocess.DEVNULL,
        )
        return time.monotonic() - start


def _per_row(url: str) -> float:
    per_row = 2000
    with psycopg.connect(url) as conn:
        start = time.monotonic()
        conn.execute(
            "SELECT agentlab_sched.schedule('row-' || g, 'H * * * *', 'demo.echo') FROM generate_series(1, %s) g",
            (per_row,),
        )
        conn.commit()
        return (time.monotonic() - start) / per_row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=1_000_000)
    parser.add_argument("--via", action="append", choices=DOORS, help="the door(s) to measure (default: python)")
    parser.add_argument("--server", choices=common.server_kinds(), default=None)
    parser.add_argument("--save", default=None, help="write the result as JSON to this file")
    args = parser.parse_args()
    result: dict[str, Any] = {"benchmark": "bulk_create", "machine": common.machine(), "count": args.count}
    with common.server(args.server) as srv:
        for via in args.via or ["python"]:
            with srv.database() as url:
                with psycopg.connect(url, autocommit=True) as conn:
                    conn.execute("SELECT agentlab_sched.register_tasks(ARRAY['demo.echo'])")
                if common.statements_profiled():  # BENCH_STATEMENTS=1: each statement, nested ones too
                    with psycopg.connect(srv.admin_url, autocommit=True) as admin_conn:
                        admin_conn.execute("SELECT pg_stat_statements_reset()")
                load_before = os.getloadavg()[0]
                spent = {"python": lambda: asyncio.run(_python(url, args.count)), "sql": lambda: _sql(url, args.count),
                         "import": lambda: _import(url, args.count)}[via]()  # fmt: skip
                entry: dict[str, Any] = {"seconds": round(spent, 2), "per_second": round(args.count / spent),
                                         "loadavg_before": load_before}  # fmt: skip
                if common.statements_profiled():
                    with psycopg.connect(srv.admin_url, autocommit=True) as admin_conn:
                        dbname = conninfo.conninfo_to_dict(url)["dbname"]
                        entry["statements"] = common.top_statements(admin_conn, dbname, 25)
                    for r in entry["statements"]:
                        print(f"  {r['total_ms']:>10} ms {r['calls']:>8} calls {r['blocks']:>10} blocks  {r['query']}")
                if via == (args.via or ["python"])[0]:
                    row_s = _per_row(url)
                    result["schedule_call_ms"] = round(row_s * 1000, 3)
                    result["schedule_calls_projected_s"] = round(row_s * args.count, 1)
                result[via] = entry
        srv.describe(result)
    result["machine"]["loadavg_end"] = os.getloadavg()
    common.emit(result, args.save)


if __name__ == "__main__":
    main()
