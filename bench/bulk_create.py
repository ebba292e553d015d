"""Bulk create: N schedules in one call of schedule_many() (admin.schedule_many), all validated.

    python -m bench.bulk_create                 # 1,000,000 hourly H schedules, one per tenant
    python -m bench.bulk_create --count 100000 --server pg15

Reported: the seconds from the call to its commit (the JSON sent, validated set-based, inserted with
their audit rows), the schedules per second, and the time per schedule of the per-row path
(``schedule()`` called for 2,000 more) beside it. Target (docs/benchmarks.md): 1,000,000 in at most 60 s.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

import psycopg
from psycopg import conninfo

from agentlab_sched import database as db
from agentlab_sched.schedules import admin

from . import common


async def _bulk(url: str, count: int) -> dict[str, Any]:
    conn = await db.connect(url, locale="en")
    try:
        await conn.execute("SELECT agentlab_sched.register_tasks(ARRAY['demo.echo'])")
        definitions = [{"name": f"tenant-{i}", "cron": "H * * * *", "task": "demo.echo"} for i in range(count)]
        start = time.monotonic()
        created = await admin.schedule_many(conn, definitions)
        bulk = time.monotonic() - start
        start = time.monotonic()
        per_row = 2000
        async with conn.transaction():
            await conn.execute(
                "SELECT agentlab_sched.schedule('row-' || g, 'H * * * *', 'demo.echo') FROM generate_series(1, %s) g",
                (per_row,),
            )
        row_s = (time.monotonic() - start) / per_row
    finally:
        await conn.close()
    return {
        "count": created,
        "seconds": round(bulk, 2),
        "per_second": round(created / bulk),
        "schedule_call_ms": round(row_s * 1000, 3),
        "schedule_calls_projected_s": round(row_s * count, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=1_000_000)
    parser.add_argument("--server", choices=common.server_kinds(), default=None)
    parser.add_argument("--save", default=None, help="write the result as JSON to this file")
    args = parser.parse_args()
    with common.server(args.server) as srv, srv.database() as url:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("SET statement_timeout = 0")
        if common.statements_profiled():  # BENCH_STATEMENTS=1: each statement of the call, nested ones too
            with psycopg.connect(srv.admin_url, autocommit=True) as admin:
                admin.execute("SELECT pg_stat_statements_reset()")
        result = {"benchmark": "bulk_create", "machine": common.machine(), **asyncio.run(_bulk(url, args.count))}
        if common.statements_profiled():
            with psycopg.connect(srv.admin_url, autocommit=True) as admin:
                result["statements"] = common.top_statements(admin, conninfo.conninfo_to_dict(url)["dbname"], 25)
            for row in result["statements"]:
                print(f"  {row['total_ms']:>10} ms {row['calls']:>8} calls {row['blocks']:>10} blocks  {row['query']}")
        srv.describe(result)
        common.emit(result, args.save)


if __name__ == "__main__":
    main()
