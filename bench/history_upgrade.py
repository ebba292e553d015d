"""Upgrading a database that has history: how long `migrate` makes firing wait, by the size of the history.

    python -m bench.history_upgrade                          # 1,000,000 ledger rows (and as many runs)
    python -m bench.history_upgrade --rows 1000000 --rows 5000000 --save bench/results/history_upgrade.json

For each size, on a fresh database of the benchmark server (Debian's PostgreSQL 15 by default, fsync on;
see bench/common.py): every migration but ``0005_partitioned_history.sql`` (the schema before history was
partitioned), S every-second schedules (``--schedules``, overlap ``allow_all``), then R rows of their past
in ``fires`` and as many finished ``runs`` (set-based, as the owner with ``session_replication_role =
replica``), VACUUM ANALYZE and a CHECKPOINT. A thread then fires the schedules every second as the precise
loop does (bench/retention.py's ``Firing``: ``fire_due`` on a scheduler's connection, with its lock
timeout); after ``--before`` quiet seconds, ``migrate`` runs to the end (0005, the later migrations, the
SQL). Reported: migrate's seconds, the longest time without a started fire while it ran, the ticks that met
a lock timeout, and, once firing stopped, whether every schedule has exactly one ledger row for every
second from the first fire to the last (0 duplicates, 0 missing).
"""

from __future__ import annotations

import argparse
import datetime
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg

from agentlab_sched.database import migrate as migrate_module

from . import common
from .retention import Firing, _window

PARTITIONING = "0005_partitioned_history.sql"


def migrate_before_partitioning(url: str) -> None:
    """The schema as a database that never ran 0005 has it: every migration but the partitioning one (the
    functions of sql/ are this version's, and read the columns the other migrations add)."""
    with tempfile.TemporaryDirectory() as tmp:
        for path in sorted(migrate_module.MIGRATIONS_DIR.glob("*.sql")):
            if path.name != PARTITIONING:
                shutil.copy(path, Path(tmp) / path.name)
        was = migrate_module.MIGRATIONS_DIR
        migrate_module.MIGRATIONS_DIR = Path(tmp)
        try:
            migrate_module.migrate(url, cron_schema=None)
        finally:
            migrate_module.MIGRATIONS_DIR = was


def _load(url: str, schedules: int, rows: int, now: datetime.datetime) -> float:
    """S every-second schedules due at ``now``, and R past fires with their finished runs; seconds taken."""
    began = time.monotonic()
    with psycopg.connect(url, autocommit=True) as conn:
        common.insert_schedules(
            conn, schedules, cron="* * * * * *", next_run_at=now, prefix="sec", overlap="allow_all", bulk=True
        )
        conn.execute("SET session_replication_role = replica")  # the owner's load: no triggers, no key checks
        params = {"s": schedules, "rows": rows, "now": now}
        conn.execute(
            """INSERT INTO agentlab_sched.runs (id, schedule_id, task, status, started_by, created_at, started_at,
                                                finished_at, updated_at, outcome)
               SELECT md5(g::text)::uuid, sid.min + g %% %(s)s, 'demo.echo', 'succeeded', 'schedule',
                      t, t, t + interval '1 second', t + interval '1 second', 'succeeded'
               FROM generate_series(0, %(rows)s - 1) g,
                    LATERAL (SELECT %(now)s::timestamptz - (g / %(s)s + 1) * interval '1 second' AS t) at_,
                    (SELECT min(id) FROM agentlab_sched.schedules) sid""",
            params,
        )
        conn.execute(
            """INSERT INTO agentlab_sched.fires (schedule_id, fire_at, kind, status, run_id, created_at)
               SELECT sid.min + g %% %(s)s, t, 'scheduled', 'started', md5(g::text)::uuid, t
               FROM generate_series(0, %(rows)s - 1) g,
                    LATERAL (SELECT %(now)s::timestamptz - (g / %(s)s + 1) * interval '1 second' AS t) at_,
                    (SELECT min(id) FROM agentlab_sched.schedules) sid""",
            params,
        )
    common.settle(url)
    return round(time.monotonic() - began, 1)


def _ledger_check(url: str, since: datetime.datetime) -> dict[str, int]:
    """Every schedule's ledger from its first fire at or after ``since`` to its last: rows, duplicates,
    and seconds without a row."""
    with psycopg.connect(url) as conn:
        row = conn.execute(
            """SELECT coalesce(sum(n), 0), coalesce(sum(n - distinct_at), 0), coalesce(sum(span - distinct_at), 0)
               FROM (SELECT count(*) AS n, count(DISTINCT fire_at) AS distinct_at,
                            extract(epoch FROM max(fire_at) - min(fire_at))::bigint + 1 AS span
                     FROM agentlab_sched.fires WHERE fire_at >= %s AND kind = 'scheduled'
                     GROUP BY schedule_id) per_schedule""",
            (since,),
        ).fetchone()
    assert row is not None
    # A second with no row of its own: firing waited past it, and the next tick recorded the missed seconds
    # as one skipped_misfire row (the misfire rule), not one row each.
    return {"fires": int(row[0]), "duplicates": int(row[1]), "seconds_without_a_row": int(row[2])}


def one(srv: common.Server, schedules: int, rows: int, before: float, after: float) -> dict[str, Any]:
    with srv.database(empty=True) as url:
        migrate_before_partitioning(url)
        now = datetime.datetime.now(datetime.UTC).replace(microsecond=0)
        load_s = _load(url, schedules, rows, now)
        firing = Firing(url, datetime.datetime.now(datetime.UTC).replace(microsecond=0))
        started_at = firing.now
        firing.start()
        time.sleep(before)
        t0 = time.monotonic()
        report = migrate_module.migrate(url, cron_schema=None)
        t1 = time.monotonic()
        time.sleep(after)
        firing.stopping.set()
        firing.join()
        if firing.failure:
            raise firing.failure
        during = _window(firing.ticks, t0, t1)
        ledger = _ledger_check(url, started_at)
        result: dict[str, Any] = {
            "rows": rows,
            "schedules": schedules,
            "load_s": load_s,
            "applied": report.applied,
            "migrate_s": round(t1 - t0, 2),
            "during_migrate": during,
            "before": _window(firing.ticks, t0 - before, t0),
            "ledger": ledger,
        }
    print(
        f"{rows:,} rows: migrate {result['migrate_s']} s; firing meanwhile: longest without a started fire "
        f"{during['longest_without_started_s']} s, {during['retries']} lock timeouts; ledger since firing "
        f"began: {ledger}",
        flush=True,
    )
    return result


def run(counts: list[int], schedules: int, before: float, after: float, server_kind: str | None) -> dict[str, Any]:
    results: dict[str, Any] = {"machine": common.machine(), "sizes": []}
    with common.server(server_kind) as srv:
        srv.describe(results)
        for rows in counts:
            results["sizes"].append(one(srv, schedules, rows, before, after))
    results["machine"]["loadavg_end"] = common.machine()["loadavg"]
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, action="append", help="ledger rows of history (repeatable)")
    parser.add_argument("--schedules", type=int, default=20, help="every-second schedules firing (default 20)")
    parser.add_argument("--before", type=float, default=5.0, help="seconds of firing before migrate")
    parser.add_argument("--after", type=float, default=5.0, help="seconds of firing after migrate")
    parser.add_argument("--server", choices=common.server_kinds(), help=f"default {common.default_server()}")
    parser.add_argument("--save", help="write the JSON result to this file too")
    args = parser.parse_args()
    common.emit(run(args.rows or [1_000_000], args.schedules, args.before, args.after, args.server), args.save)
