"""Retention of per-second history: prune() dropping days of partitions, against a bulk DELETE of a day.

    python -m bench.retention                                   # 100 every-second schedules, 30 days, keep 7
    python -m bench.retention --days 2 --schedules 100          # a quick look: keep 1, prune 1 day
    python -m bench.retention --days 4 --keep 1 --save bench/results/retention_4d.json

One run, on one database of the benchmark server (Debian's PostgreSQL 15 by default, fsync on; see
bench/common.py):

- **Load.** S schedules ``* * * * * *`` (every second, overlap ``allow_all``, planned at now), then D days
  of their history ending at an injected ``now`` (today's midnight, UTC): one ``fires`` row per schedule
  per second (``started``) and its finished run (``succeeded``), 2 x 86,400 x S rows a day. Every
  partition of those days, of every history table, is made by the product's ``create_partition()`` (as
  housekeeping would have made them); the ``fires`` and ``runs`` ones are then loaded as
  bench/list_pages.py loads its days: detached, without their indexes, set-based (generate_series, as
  the owner with ``session_replication_role = replica``), their indexes built after and the partition
  attached again (a CHECK matching the bound spares the ATTACH its scan). Then VACUUM ANALYZE and a
  CHECKPOINT. Reported: rows, seconds, rows a second, and the size of one day on disk.
- **The DELETE baseline.** One day's rows of ``fires`` and of ``runs`` (the oldest day, before prune drops
  it) copied into two plain tables with the same indexes as the partitions; after a CHECKPOINT,
  ``DELETE ... WHERE fire_at < end of the day`` (``created_at`` for runs) is timed, then a plain VACUUM,
  with the tables' size before, after the DELETE and after the VACUUM and the WAL each wrote. What a
  retention by DELETE pays per day, per row; the copies are dropped after.
- **Prune.** After a CHECKPOINT, ``SELECT agentlab_sched.prune(older_than, now)`` with the same injected
  ``now`` and ``older_than`` keeping K days (default 7, or 1 when D < 14): it drops the D - K oldest days
  of partitions of every daily history table (``fires`` and ``runs`` full, ``outbox`` and ``deliveries``
  empty here). Reported: partitions dropped, rows removed (prune's own counts), seconds, ms per partition,
  seconds per day of history and the WAL written; then the ratio prune per day / DELETE per day. Before
  it, what prune reads of a day before it drops it is measured on a day it keeps (its live-work checks and
  its count of the rows, each statement with EXPLAIN ANALYZE: milliseconds and GB of buffers): where a
  drop's time goes.
- **Firing meanwhile.** From before the DELETE baseline until after prune, a second connection (a thread)
  fires the S schedules every second as the precise loop does: ``tick.fire_due`` with the injected clock
  (``now`` + the seconds elapsed), on a connection opened as the scheduler opens its own (lock_timeout
  ``precise.TICK_LOCK_TIMEOUT``); each tick records S fires, S runs and S Procrastinate jobs in today's
  partitions. Each tick's duration and delay (its commit after the due second) is reported per window: a
  quiet window before (``--before`` seconds), during the DELETE, during its VACUUM, during prune (every tick
  that overlapped it) and after. A tick whose batch met a lock timeout counts as a retry (its schedules are
  fired by the next tick, as in the worker).

Printed: a short summary, then the JSON (``--save``, by default bench/results/retention.json,
git-ignored). The database is dropped at the end; at 100 schedules a day is about 17M rows and several
GB on disk: check the free disk (``df -h``) before a month.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import itertools
import os
import shutil
import threading
import time
from typing import Any

import psycopg

from agentlab_sched import database as db
from agentlab_sched.firing import tick
from agentlab_sched.settings import Settings
from agentlab_sched.worker import precise

from . import common

SECONDS_A_DAY = 86_400
#: The tables loaded with history, their partition key, and the rows of one day ({part}: the partition).
FIRES_OF_A_DAY = """
    INSERT INTO agentlab_sched_history.{part} (id, schedule_id, fire_at, kind, status, run_id, created_at)
    SELECT b.id, %(first)s + s, b.at, 'scheduled', 'started', lpad(to_hex(b.id), 32, '0')::uuid,
           b.at + interval '10 ms'
    FROM generate_series(0, 86399) sec, generate_series(0, %(n)s - 1) s,
         LATERAL (SELECT %(base)s + sec::bigint * %(n)s + s + 1 AS id, %(start)s + sec * interval '1 second' AS at) b"""
RUNS_OF_A_DAY = """
    INSERT INTO agentlab_sched_history.{part} (id, schedule_id, fire_id, task, status, started_by, outcome,
                                               created_at, started_at, finished_at, updated_at)
    SELECT lpad(to_hex(b.id), 32, '0')::uuid, %(first)s + s, b.id, 'demo.echo', 'succeeded', 'schedule',
           'succeeded', b.at + interval '20 ms', b.at + interval '60 ms', b.at + interval '1 s',
           b.at + interval '1 s'
    FROM generate_series(0, 86399) sec, generate_series(0, %(n)s - 1) s,
         LATERAL (SELECT %(base)s + sec::bigint * %(n)s + s + 1 AS id, %(start)s + sec * interval '1 second' AS at) b"""
LOADED = {"fires": ("fire_at", FIRES_OF_A_DAY), "runs": ("created_at", RUNS_OF_A_DAY)}


def _connect(url: str) -> psycopg.Connection[Any]:
    conn = psycopg.connect(url, autocommit=True)
    conn.execute("SET TimeZone = 'UTC'")
    return conn


def _one(conn: psycopg.Connection[Any], sql: str, params: Any = None) -> Any:
    row = conn.execute(sql, params).fetchone()
    assert row is not None
    return row[0]


def _wal(conn: psycopg.Connection[Any]) -> str:
    return str(_one(conn, "SELECT pg_current_wal_lsn()::text"))


def _wal_since(conn: psycopg.Connection[Any], lsn: str) -> int:
    return int(_one(conn, "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), %s::pg_lsn)::bigint", (lsn,)))


def _gb(size: int) -> float:
    return round(size / 2**30, 3)


# --- the load ------------------------------------------------------------------------------------------


def _load_schedules(url: str, count: int, now: datetime.datetime) -> int:
    """S every-second schedules due at ``now``; returns the first one's id (their ids are consecutive)."""
    with _connect(url) as conn:
        common.insert_schedules(conn, count, cron="* * * * * *", next_run_at=now, prefix="sec", overlap="allow_all")
        first, last = conn.execute("SELECT min(id), max(id) FROM agentlab_sched.schedules").fetchone() or (0, 0)
    assert last - first + 1 == count, (first, last, count)
    return int(first)


def _load_day(conn: psycopg.Connection[Any], tbl: str, start: datetime.datetime, params: dict[str, Any]) -> None:
    """One day of ``tbl`` into the partition create_partition() made: detached, its indexes and keys
    dropped, the rows inserted, its indexes built again as they were (create_partition's names), the
    keys built by the ATTACH (as they are when create_partition attaches), a CHECK matching the bound
    sparing the ATTACH its scan. The foreign keys stay (the ATTACH adopts them without a check)."""
    key, rows = LOADED[tbl]
    part = f"{tbl}_p{start:%Y%m%d}"
    qualified = f"agentlab_sched_history.{part}"
    lo, hi = start.isoformat(), (start + datetime.timedelta(days=1)).isoformat()
    with conn.transaction():
        conn.execute(f"ALTER TABLE agentlab_sched.{tbl} DETACH PARTITION {qualified}")
        indexes = conn.execute(
            """SELECT c.relname, pg_get_indexdef(i.indexrelid) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
               WHERE i.indrelid = %s::regclass
                 AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = i.indexrelid)""",
            (qualified,),
        ).fetchall()
        for name, _ in indexes:
            conn.execute(f'DROP INDEX agentlab_sched_history."{name}"')
        for (name,) in conn.execute(
            "SELECT conname FROM pg_constraint WHERE conrelid = %s::regclass AND contype IN ('p', 'u')", (qualified,)
        ).fetchall():
            conn.execute(f'ALTER TABLE {qualified} DROP CONSTRAINT "{name}"')
        conn.execute(rows.format(part=part), params)
        for _, definition in indexes:
            conn.execute(definition)
        conn.execute(f"ALTER TABLE {qualified} ADD CONSTRAINT {part}_bound CHECK ({key} >= '{lo}' AND {key} < '{hi}')")
        conn.execute(
            f"ALTER TABLE agentlab_sched.{tbl} ATTACH PARTITION {qualified} FOR VALUES FROM ('{lo}') TO ('{hi}')"
        )
        conn.execute(f"ALTER TABLE {qualified} DROP CONSTRAINT {part}_bound")


def _load_history(url: str, schedules: int, first: int, days: int, now: datetime.datetime) -> dict[str, Any]:
    """D days of per-second history ending at ``now``, oldest first."""
    began = time.monotonic()
    oldest = now - datetime.timedelta(days=days)
    per_day: list[float] = []
    with _connect(url) as conn:
        conn.execute("SET session_replication_role = replica")
        conn.execute("SET maintenance_work_mem = '512MB'")
        made = int(
            _one(
                conn,
                """SELECT count(agentlab_sched.create_partition(h.name, h.key, h.period, p))
                   FROM agentlab_sched.history_tables() h,
                        generate_series(date_trunc(h.period, %(oldest)s::timestamptz, 'UTC'),
                                        %(now)s::timestamptz - interval '1 microsecond',
                                        ('1 ' || h.period)::interval) p""",
                {"oldest": oldest, "now": now},
            )
        )
        for day in range(days):
            start = oldest + datetime.timedelta(days=day)
            day_began = time.monotonic()
            params = {"first": first, "n": schedules, "base": day * SECONDS_A_DAY * schedules, "start": start}
            for tbl in LOADED:
                _load_day(conn, tbl, start, params)
            per_day.append(round(time.monotonic() - day_began, 1))
            print(f"  loaded {start:%Y-%m-%d} in {per_day[-1]} s", flush=True)
        conn.execute(
            "SELECT setval(pg_get_serial_sequence('agentlab_sched.fires', 'id'), %s)",
            (days * SECONDS_A_DAY * schedules,),
        )
        loaded = time.monotonic() - began
        settle_began = time.monotonic()
        conn.execute("VACUUM ANALYZE agentlab_sched.fires, agentlab_sched.runs")
        conn.execute("ANALYZE")
        conn.execute("CHECKPOINT")
        settled = time.monotonic() - settle_began
        rows = {tbl: days * SECONDS_A_DAY * schedules for tbl in LOADED}
        one_day = {
            tbl: int(
                _one(
                    conn,
                    "SELECT pg_total_relation_size(%s::regclass)",
                    (f"agentlab_sched_history.{tbl}_p{oldest:%Y%m%d}",),
                )
            )
            for tbl in LOADED
        }
        database = int(_one(conn, "SELECT pg_database_size(current_database())"))
    total = sum(rows.values())
    return {
        "rows": rows,
        "rows_total": total,
        "partitions_made": made,
        "load_seconds": round(loaded, 1),
        "rows_per_s": round(total / loaded),
        "seconds_per_day": per_day,
        "vacuum_analyze_checkpoint_seconds": round(settled, 1),
        "one_day": {
            "rows": 2 * SECONDS_A_DAY * schedules,
            "gb": {tbl: _gb(size) for tbl, size in one_day.items()},
            "gb_total": _gb(sum(one_day.values())),
        },
        "database_gb": _gb(database),
    }


# --- the DELETE baseline -------------------------------------------------------------------------------


def _copy_day(conn: psycopg.Connection[Any], day: datetime.datetime) -> dict[str, str]:
    """The rows of ``day``'s fires and runs partitions in plain tables with the partitions' indexes
    (built after the copy); returns table -> copy."""
    copies = {}
    for tbl in LOADED:
        part = f"agentlab_sched_history.{tbl}_p{day:%Y%m%d}"
        copy = f"bench_delete_{tbl}"
        conn.execute(f"DROP TABLE IF EXISTS public.{copy}")
        conn.execute(f"CREATE TABLE public.{copy} (LIKE {part} INCLUDING DEFAULTS INCLUDING CONSTRAINTS)")
        conn.execute(f"INSERT INTO public.{copy} SELECT * FROM {part}")
        for (definition,) in conn.execute(
            r"""SELECT regexp_replace(pg_get_indexdef(i.indexrelid), '^CREATE (UNIQUE )?INDEX \S+ ON \S+ ',
                                     'CREATE \1INDEX ' || quote_ident(%s || '_' || c.relname) || ' ON public.'
                                     || quote_ident(%s) || ' ')
               FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE i.indrelid = %s::regclass""",
            (copy, copy, part),
        ).fetchall():
            conn.execute(definition)
        conn.execute(f"VACUUM ANALYZE public.{copy}")
        copies[tbl] = copy
    return copies


def _delete_baseline(
    conn: psycopg.Connection[Any], copies: dict[str, str], day: datetime.datetime, mark: Any
) -> dict[str, Any]:
    """DELETE every row of the day from each copy (timed), then a plain VACUUM of each (timed)."""
    end = day + datetime.timedelta(days=1)

    def size() -> int:
        return sum(
            int(_one(conn, "SELECT pg_total_relation_size(%s::regclass)", (f"public.{c}",))) for c in copies.values()
        )

    out: dict[str, Any] = {"gb_before": _gb(size()), "delete_seconds": {}, "deleted_rows": {}}
    mark("delete")
    lsn = _wal(conn)
    for tbl, copy in copies.items():
        key = LOADED[tbl][0]
        began = time.monotonic()
        cur = conn.execute(f"DELETE FROM public.{copy} WHERE {key} < %s", (end,))
        out["delete_seconds"][tbl] = round(time.monotonic() - began, 2)
        out["deleted_rows"][tbl] = cur.rowcount
    out["delete_wal_gb"] = _gb(_wal_since(conn, lsn))
    out["gb_after_delete"] = _gb(size())
    mark("vacuum")
    lsn = _wal(conn)
    began = time.monotonic()
    for copy in copies.values():
        conn.execute(f"VACUUM public.{copy}")
    out["vacuum_seconds"] = round(time.monotonic() - began, 2)
    out["vacuum_wal_gb"] = _gb(_wal_since(conn, lsn))
    out["gb_after_vacuum"] = _gb(size())
    mark("between")
    out["delete_seconds_per_day"] = round(sum(out["delete_seconds"].values()), 2)
    out["delete_and_vacuum_seconds_per_day"] = round(out["delete_seconds_per_day"] + out["vacuum_seconds"], 2)
    rows = sum(out["deleted_rows"].values())
    out["delete_us_per_row"] = round(out["delete_seconds_per_day"] / max(rows, 1) * 1e6, 2)
    return out


# --- prune -------------------------------------------------------------------------------------------------


#: What prune reads of a day's partitions before it drops them (80_housekeeping.sql): its live-work checks
#: (the same statements, the bounds given) and its count of the rows.
PRUNE_READS = {
    "fires_check": """SELECT EXISTS (SELECT 1 FROM agentlab_sched.runs r JOIN agentlab_sched.fires f ON f.run_id = r.id
                                     WHERE NOT agentlab_sched.run_is_final(r.status)
                                       AND f.fire_at >= %(lo)s AND f.fire_at < %(hi)s)""",
    "fires_count": "SELECT count(*) FROM agentlab_sched_history.fires_p{day}",
    "runs_check": """SELECT EXISTS (SELECT 1 FROM agentlab_sched.runs r WHERE NOT agentlab_sched.run_is_final(r.status)
                                      AND r.created_at >= %(lo)s AND r.created_at < %(hi)s)""",
    "runs_count": "SELECT count(*) FROM agentlab_sched_history.runs_p{day}",
}


def _prune_reads(conn: psycopg.Connection[Any], day: datetime.datetime) -> dict[str, Any]:
    """Each statement prune runs on a day before dropping it, on ``day`` (a day it keeps, so that the
    measured prune finds nothing of it in memory because of this): milliseconds and GB of buffers read
    (EXPLAIN ANALYZE, BUFFERS, timing off)."""
    out: dict[str, Any] = {}
    params = {"lo": day, "hi": day + datetime.timedelta(days=1)}
    for name, statement in PRUNE_READS.items():
        explain = "EXPLAIN (ANALYZE, BUFFERS, TIMING OFF, FORMAT JSON) " + statement.format(day=f"{day:%Y%m%d}")
        plan = _one(conn, explain, params if "%(" in statement else None)
        top = plan[0]["Plan"]
        blocks = int(top.get("Shared Hit Blocks", 0)) + int(top.get("Shared Read Blocks", 0))
        out[name] = {"ms": round(float(plan[0]["Execution Time"]), 1), "gb_read": _gb(blocks * 8192)}
    out["ms_total"] = round(sum(v["ms"] for v in out.values()), 1)
    return out


def _prune(conn: psycopg.Connection[Any], keep: int, now: datetime.datetime, mark: Any) -> dict[str, Any]:
    parts = "SELECT count(*) FROM agentlab_sched.history_partitions() WHERE NOT is_default"
    before = int(_one(conn, parts))
    conn.execute("CHECKPOINT")
    lsn = _wal(conn)
    mark("prune")
    began = time.monotonic()
    result = _one(conn, "SELECT agentlab_sched.prune(%s::interval, %s)", (f"{keep} days", now))
    seconds = time.monotonic() - began
    mark("after")
    wal = _wal_since(conn, lsn)
    after = int(_one(conn, parts))
    dropped = int(result["partitions"])
    return {
        "older_than": f"{keep} days",
        "returned": result,
        "partitions_before": before,
        "partitions_after": after,
        "partitions_dropped": dropped,
        "rows_removed": int(result["fires"]) + int(result["runs"]),
        "seconds": round(seconds, 3),
        "ms_per_partition": round(seconds / max(dropped, 1) * 1000, 1),
        "wal_mb": round(wal / 2**20, 2),
    }


# --- firing meanwhile --------------------------------------------------------------------------------------


class Firing(threading.Thread):
    """The precise loop's work on a connection of its own: every second, ``fire_due`` at the injected clock."""

    def __init__(self, url: str, now: datetime.datetime) -> None:
        super().__init__(name="bench-firing", daemon=True)
        self.url, self.now = url, now
        self.stopping = threading.Event()
        self.ticks: list[dict[str, Any]] = []
        self.failure: BaseException | None = None

    def run(self) -> None:
        try:
            asyncio.run(self._loop())
        except BaseException as exc:  # reported by the main thread
            self.failure = exc

    async def _loop(self) -> None:
        conn = await db.connect(self.url, locale="en", purpose="scheduler", lock_timeout=precise.TICK_LOCK_TIMEOUT)
        settings = Settings(locale="en")
        try:
            await conn.execute("SELECT agentlab_sched.register_tasks(ARRAY['demo.echo'])")
            began = time.monotonic()
            second = 0
            while not self.stopping.is_set():
                wait = began + second + 0.05 - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                start = time.monotonic()
                entry: dict[str, Any] = {"due": began + second, "start": start}
                try:
                    report = await tick.fire_due(
                        conn, self.now + datetime.timedelta(seconds=start - began), settings=settings
                    )
                    entry |= {"fires": dict(report.fires), "retries": report.retries, "errors": report.errors}
                except psycopg.Error as exc:
                    entry |= {"fires": {}, "retries": 0, "errors": 1, "error": f"{exc.sqlstate}: {exc}"}
                entry["end"] = time.monotonic()
                self.ticks.append(entry)
                second = max(second + 1, int(entry["end"] - began))
        finally:
            await conn.close()


def _window(ticks: list[dict[str, Any]], t0: float, t1: float) -> dict[str, Any]:
    """The ticks that overlapped [t0, t1]: how long each took, how late its commit was after its due second,
    the fires they recorded by status, and the longest time between two commits that started runs (a tick
    that met a lock timeout starts none; the next one launches the latest due time and records the missed
    ones as one ``skipped_misfire`` row per schedule)."""
    chosen = [t for t in ticks if t["start"] < t1 and t["end"] > t0]
    took = [(t["end"] - t["start"]) * 1000 for t in chosen]
    late = [(t["end"] - t["due"]) * 1000 for t in chosen]
    by_status: dict[str, int] = {}
    for t in chosen:
        for status, n in t["fires"].items():
            by_status[status] = by_status.get(status, 0) + n
    launched = [t["end"] for t in ticks if t["fires"].get("started")]
    gaps = [b - a for a, b in itertools.pairwise(launched) if b > t0 and a < t1]
    return {
        "seconds": round(t1 - t0, 1),
        "ticks": len(chosen),
        "tick_ms": {
            "p50": round(common.percentile(took, 50), 1) if took else None,
            "p99": round(common.percentile(took, 99), 1) if took else None,
            "max": round(max(took), 1) if took else None,
        },
        "commit_after_due_ms_max": round(max(late), 1) if late else None,
        "fires": sum(sum(t["fires"].values()) for t in chosen),
        "started": sum(t["fires"].get("started", 0) for t in chosen),
        "by_status": by_status,
        "longest_without_started_s": round(max(gaps), 2) if gaps else None,
        "retries": sum(t["retries"] for t in chosen),
        "errors": sum(t["errors"] for t in chosen),
        "error_samples": sorted({t["error"] for t in chosen if "error" in t})[:3],
    }


# --- the whole run -----------------------------------------------------------------------------------------


def _print(result: dict[str, Any]) -> None:
    load, delete, prune = result["load"], result["delete_baseline"], result["prune"]
    print(
        f"--- {result['schedules']} every-second schedules, {result['days']} days, keep {result['keep']}: "
        f"{load['rows_total']:,} rows loaded in {load['load_seconds']} s ({load['rows_per_s']:,}/s; "
        f"+{load['vacuum_analyze_checkpoint_seconds']} s VACUUM ANALYZE), a day {load['one_day']['gb_total']} GB"
    )
    print(
        f"  DELETE of one day ({sum(delete['deleted_rows'].values()):,} rows): {delete['delete_seconds_per_day']} s "
        f"(+ VACUUM {delete['vacuum_seconds']} s), WAL {delete['delete_wal_gb']} GB; size {delete['gb_before']} -> "
        f"{delete['gb_after_delete']} -> {delete['gb_after_vacuum']} GB"
    )
    print(
        f"  prune: {prune['partitions_dropped']} partitions, {prune['rows_removed']:,} rows, {prune['seconds']} s "
        f"({prune['ms_per_partition']} ms a partition, {prune['seconds_per_day']} s a day; WAL {prune['wal_mb']} MB); "
        f"prune / DELETE per day = {result['ratio_prune_to_delete_per_day']}"
    )
    reads = result["prune_reads_of_a_kept_day"]
    print(
        "  what prune reads of a day before dropping it (measured on a kept day): "
        + ", ".join(f"{name} {v['ms']} ms / {v['gb_read']} GB" for name, v in reads.items() if name != "ms_total")
    )
    for name, window in result["firing"].items():
        print(
            f"  firing {name:8} {window['ticks']:3} ticks: tick p50 {window['tick_ms']['p50']} ms, "
            f"p99 {window['tick_ms']['p99']} ms, max {window['tick_ms']['max']} ms; "
            f"{window['started']} started, {window['retries']} retries, {window['errors']} errors; "
            f"longest without a launch {window['longest_without_started_s']} s"
        )


def run(schedules: int, days: int, keep: int, before: float, after: float, server_kind: str | None) -> dict[str, Any]:
    result: dict[str, Any] = {
        "benchmark": "retention",
        "machine": common.machine(),
        "schedules": schedules,
        "days": days,
        "keep": keep,
        "disk_free_gb_before": round(shutil.disk_usage(os.environ.get("TMPDIR", "/tmp")).free / 2**30, 1),
    }
    with common.server(server_kind) as srv, srv.database() as url:
        with _connect(url) as conn:
            now = _one(conn, "SELECT date_trunc('day', now(), 'UTC')")
        result["now"] = now.isoformat()
        first = _load_schedules(url, schedules, now)
        result["load"] = _load_history(url, schedules, first, days, now)
        result["loadavg_after_load"] = os.getloadavg()
        oldest = now - datetime.timedelta(days=days)
        marks: list[tuple[str, float]] = []

        def mark(name: str) -> None:
            marks.append((name, time.monotonic()))

        with _connect(url) as conn:
            result["prune_reads_of_a_kept_day"] = _prune_reads(conn, now - datetime.timedelta(days=1))
            copies = _copy_day(conn, oldest)
            conn.execute("CHECKPOINT")
            firing = Firing(url, now)
            firing.start()
            mark("before")
            time.sleep(before)
            try:
                result["delete_baseline"] = _delete_baseline(conn, copies, oldest, mark)
                for copy in copies.values():
                    conn.execute(f"DROP TABLE public.{copy}")
                time.sleep(3)
                result["prune"] = _prune(conn, keep, now, mark)
                time.sleep(after)
                mark("end")
            finally:
                firing.stopping.set()
                firing.join(30)
        if firing.failure is not None:
            raise firing.failure
        result["firing"] = {
            name: _window(firing.ticks, t0, t1)
            for (name, t0), (_, t1) in itertools.pairwise(marks)
            if name != "between"
        }
        pruned_days = days - keep
        prune = result["prune"]
        prune["days_pruned"] = pruned_days
        prune["seconds_per_day"] = round(prune["seconds"] / pruned_days, 3)
        delete = result["delete_baseline"]
        result["ratio_prune_to_delete_per_day"] = round(prune["seconds_per_day"] / delete["delete_seconds_per_day"], 4)
        result["extrapolated_month"] = {
            "note": "30 days of history pruned at once, from this run's per-day figures (not measured)",
            "prune_seconds": round(30 * prune["seconds_per_day"], 1),
            "delete_seconds": round(30 * delete["delete_seconds_per_day"], 1),
            "delete_and_vacuum_seconds": round(30 * delete["delete_and_vacuum_seconds_per_day"], 1),
            "gb": round(30 * result["load"]["one_day"]["gb_total"], 1),
            "rows": 30 * result["load"]["one_day"]["rows"],
        }
        srv.describe(result)
    result["machine"]["loadavg_end"] = os.getloadavg()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--schedules", type=int, default=100, help="every-second schedules (default 100)")
    parser.add_argument("--days", type=int, default=30, help="days of history ending now (default 30, a month)")
    parser.add_argument("--keep", type=int, default=None, help="days prune keeps (default 7, or 1 when --days < 14)")
    parser.add_argument("--before", type=float, default=30.0, help="seconds of firing measured before (default 30)")
    parser.add_argument("--after", type=float, default=10.0, help="seconds of firing measured after prune")
    parser.add_argument("--server", choices=common.server_kinds(), default=None)
    parser.add_argument("--save", default=str(common.ROOT / "bench" / "results" / "retention.json"))
    args = parser.parse_args()
    keep = args.keep if args.keep is not None else (7 if args.days >= 14 else 1)
    if not 1 <= keep < args.days:
        parser.error(f"--keep must be at least 1 and less than --days ({args.days})")
    result = run(args.schedules, args.days, keep, args.before, args.after, args.server)
    _print(result)
    common.emit(result, args.save)


if __name__ == "__main__":
    main()
