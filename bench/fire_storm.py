"""Fire storm: N schedules due at the same instant; how long until all are recorded and queued.

    python -m bench.fire_storm                    # N = 1000 and 10000, two rounds each
    python -m bench.fire_storm -n 100000 --rounds 1
    python -m bench.fire_storm -n 10000 --profile # where the time goes, inside PostgreSQL too
    python -m bench.fire_storm --auto-plans       # the firing session with plan_cache_mode = auto
    python -m bench.fire_storm --patch my_change.diff   # measure a proposed change of an SQL file

One `fire_due` call (what the tick and the precise loop run) on a fresh database holding N schedules whose
next_run_at is the same instant T, at now = T + 0.2 s: every schedule gets its ledger row, its run and
its Procrastinate job. Reported: seconds, fires per second, round trips per tick (TickReport.round_trips,
and the real count from libpq's protocol trace) and per batch, and where the time went (claim, planning
in Python, apply, commit). In the same run, on fresh databases, the same N
jobs deferred through Procrastinate one by one (`defer_async`, one transaction each: the naive
baseline) and all at once (`batch_defer_async`), as ratios.

Our connections set plan_cache_mode = force_custom_plan (agentlab_sched.database.connect_kwargs, against a bad
cached plan of Procrastinate's fetch query); that makes every statement inside our plpgsql functions be
planned again on every call. ``--auto-plans`` sets it back to ``auto`` on the firing session only.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg

from agentlab_sched import database as db
from agentlab_sched.demo import make_app
from agentlab_sched.firing import tick
from agentlab_sched.settings import Settings

from . import common

#: The shared due instant (a minute boundary: the schedules are every-minute).
T = datetime(2030, 1, 1, tzinfo=UTC)
NOW = T + timedelta(milliseconds=200)


@dataclass(frozen=True)
class Options:
    template: bool = True
    profile: bool = False
    auto_plans: bool = False
    batch_size: int = 1000
    #: A proposed change of an SQL file (a unified diff): the file, patched, is applied to each benchmark
    #: database before measuring.
    patch: str | None = None


def _inputs(template: bool) -> dict[str, Any]:
    return {"report": "daily", "day": "{{ schedule.date }}"} if template else {"report": "daily", "day": "2030-01-01"}


def _timed_key(query: Any) -> str:
    text = str(query)
    return "claim" if "claim_due" in text else "apply" if "apply_plans" in text else "other"


class _TimedCursor:
    """A cursor of `_TimedConnection`: its statements are timed by kind."""

    def __init__(self, cur: Any, spent: dict[str, float]) -> None:
        self._cur = cur
        self._spent = spent

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cur, name)

    async def __aenter__(self) -> _TimedCursor:
        await self._cur.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self._cur.__aexit__(*exc)

    async def execute(self, query: Any, params: Any = None) -> Any:
        began = time.perf_counter()
        try:
            return await self._cur.execute(query, params)
        finally:
            key = _timed_key(query)
            self._spent[key] = self._spent.get(key, 0.0) + time.perf_counter() - began


class _TimedConnection:
    """The connection `fire_due` uses, timing its statements (claim, apply) on the way."""

    def __init__(self, conn: psycopg.AsyncConnection[Any], spent: dict[str, float]) -> None:
        self._conn = conn
        self._spent = spent

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)

    def cursor(self, *args: Any, **kwargs: Any) -> _TimedCursor:
        return _TimedCursor(self._conn.cursor(*args, **kwargs), self._spent)

    async def execute(self, query: Any, params: Any = None) -> Any:
        began = time.perf_counter()
        try:
            return await self._conn.execute(query, params)
        finally:
            key = _timed_key(query)
            self._spent[key] = self._spent.get(key, 0.0) + time.perf_counter() - began


def _patched_sql(diff: str) -> str:
    """The SQL file a diff changes (named on its ``+++ b/...`` line), with the diff applied (patch(1))."""
    text = Path(diff).read_text()
    target = next(line[6:].strip() for line in text.splitlines() if line.startswith("+++ b/"))
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "patched.sql"
        subprocess.run(["patch", "--quiet", "-o", str(out), str(common.ROOT / target), diff], check=True)
        return out.read_text()


def _load(url: str, n: int, opts: Options) -> None:
    """N schedules due at T (and the proposed SQL, if any), vacuumed and analysed."""
    with psycopg.connect(url, autocommit=True) as setup:
        if opts.patch:
            setup.execute(_patched_sql(opts.patch))  # type: ignore[arg-type]
        common.insert_schedules(
            setup, n, cron="* * * * *", next_run_at=T, prefix="storm", inputs=_inputs(opts.template)
        )
    common.settle(url)


async def _fire_storm(url: str, n: int, opts: Options) -> dict[str, Any]:
    conn = await db.connect(url, locale="en")
    spent: dict[str, float] = {}
    plan_one = tick._plan_one

    def timed_plan(*args: Any, **kwargs: Any) -> dict[str, Any]:  # planning is pure, hence not async
        began = time.perf_counter()
        try:
            return plan_one(*args, **kwargs)
        finally:
            spent["plan"] = spent.get("plan", 0.0) + time.perf_counter() - began

    try:
        if opts.profile:
            await conn.execute("SET track_functions = 'pl'")
        if opts.auto_plans:
            await conn.execute("SET plan_cache_mode = auto")
        await conn.execute("SELECT agentlab_sched.register_tasks(ARRAY['demo.echo'])")
        tick._plan_one = timed_plan  # type: ignore[assignment]
        began = time.perf_counter()
        settings = Settings(locale="en", batch_size=opts.batch_size)
        with tempfile.TemporaryFile("w+") as trace:
            conn.pgconn.trace(trace.fileno())  # libpq's protocol trace: counts the real round trips
            report = await tick.fire_due(_TimedConnection(conn, spent), NOW, settings=settings)  # type: ignore[arg-type]
            seconds = time.perf_counter() - began
            conn.pgconn.untrace()
            trace.seek(0)
            round_trips = _round_trips(trace.read())
        tick._plan_one = plan_one  # type: ignore[assignment]
        cur = await conn.execute(
            """SELECT (SELECT count(*) FROM agentlab_sched.fires WHERE status = 'started') AS fires,
                      (SELECT count(*) FROM agentlab_sched.runs WHERE job_id IS NOT NULL) AS runs,
                      (SELECT count(*) FROM procrastinate_jobs WHERE status = 'todo') AS jobs"""
        )
        counts = await cur.fetchone()
        functions = await _function_times(conn) if opts.profile else None
    finally:
        tick._plan_one = plan_one  # type: ignore[assignment]
        await conn.close()
    assert counts == {"fires": n, "runs": n, "jobs": n}, counts
    split = {k: round(v, 3) for k, v in spent.items()}
    split["commit_and_python"] = round(seconds - sum(spent.values()), 3)
    result = {
        "n": n,
        "seconds": round(seconds, 3),
        "fires_per_s": round(n / seconds),
        "round_trips": report.round_trips,
        "round_trips_traced": round_trips,
        "batches": report.batches,
        "round_trips_traced_per_batch": round(round_trips / max(report.batches, 1), 2),
        "split_seconds": split,
    }
    if functions is not None:
        result["plpgsql_ms"] = functions
    return result


def _round_trips(trace: str) -> int:
    """Round trips in a libpq trace: each ends with a Sync (extended protocol) or is one Query (simple)."""
    return sum(1 for line in trace.splitlines() if "\tF\t" in line and line.split("\t")[3] in ("Sync", "Query"))


async def _function_times(conn: psycopg.AsyncConnection[Any]) -> list[dict[str, Any]]:
    """Total and self time per plpgsql function (track_functions = 'pl'), biggest self time first."""
    await conn.execute("SELECT pg_stat_force_next_flush()")
    await asyncio.sleep(0.1)
    await conn.execute("SELECT pg_stat_clear_snapshot()")
    cur = await conn.execute(
        """SELECT schemaname || '.' || funcname AS function, calls, round(total_time::numeric, 1) AS total_ms,
                  round(self_time::numeric, 1) AS self_ms
           FROM pg_stat_user_functions ORDER BY self_time DESC LIMIT 15"""
    )
    return [{k: (float(v) if k.endswith("_ms") else v) for k, v in row.items()} for row in await cur.fetchall()]


async def _defer_baseline(url: str, n: int, batch: bool) -> float:
    """Seconds to defer n demo.echo jobs through Procrastinate: one by one, or in one batch."""
    app = make_app(url)
    kwargs = {"report": "daily", "day": "2030-01-01"}
    async with app.open_async():
        task = app.tasks["demo.echo"]
        began = time.perf_counter()
        if batch:
            await task.batch_defer_async(*([kwargs] * n))
        else:
            for _ in range(n):
                await task.defer_async(**kwargs)
        return time.perf_counter() - began


def run(ns: list[int], rounds: int, opts: Options, baselines: bool, server_kind: str | None = None) -> dict[str, Any]:
    results: dict[str, Any] = {"machine": common.machine(), "rounds": rounds, "options": asdict(opts), "by_n": []}
    with common.server(server_kind) as srv:
        srv.describe(results)
        for n in ns:
            storms, naive, batch = [], [], []
            for _ in range(rounds):
                with srv.database() as url:
                    _load(url, n, opts)
                    storms.append(asyncio.run(_fire_storm(url, n, opts)))
                if baselines:
                    with srv.database() as url:
                        naive.append(asyncio.run(_defer_baseline(url, n, batch=False)))
                    with srv.database() as url:
                        batch.append(asyncio.run(_defer_baseline(url, n, batch=True)))
            seconds = common.median([s["seconds"] for s in storms])
            row: dict[str, Any] = {
                "n": n,
                "seconds_median": round(seconds, 3),
                "fires_per_s_median": round(n / seconds),
                "ms_per_1000_fires": round(seconds / n * 1e6, 1),
                "rounds": storms,
            }
            if baselines:
                row["naive_defer_seconds"] = [round(s, 3) for s in naive]
                row["naive_jobs_per_s_median"] = round(n / common.median(naive))
                row["batch_defer_seconds"] = [round(s, 3) for s in batch]
                row["batch_jobs_per_s_median"] = round(n / common.median(batch))
                row["speedup_vs_naive"] = round(common.median(naive) / seconds, 1)
                row["ratio_to_batch_defer"] = round(seconds / common.median(batch), 2)
            results["by_n"].append(row)
            print(
                f"N={n}: {seconds:.2f} s, {n / seconds:,.0f} fires/s"
                + (
                    f"; naive defer {common.median(naive):.2f} s, batch defer {common.median(batch):.2f} s"
                    if baselines
                    else ""
                ),
                flush=True,
            )
    results["machine"]["loadavg_end"] = common.machine()["loadavg"]
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, action="append", help="schedules due at once (repeatable)")
    parser.add_argument("--rounds", type=int, default=2, help="measurements per N (the median is reported)")
    parser.add_argument("--plain-inputs", action="store_true", help="inputs without placeholders (no rendering)")
    parser.add_argument("--profile", action="store_true", help="also time each plpgsql function (track_functions)")
    parser.add_argument("--auto-plans", action="store_true", help="plan_cache_mode = auto on the firing session")
    parser.add_argument("--batch-size", type=int, default=1000, help="schedules claimed per transaction")
    parser.add_argument("--patch", help="a proposed SQL change (unified diff): measured with it applied")
    parser.add_argument("--no-baselines", action="store_true", help="skip the procrastinate defer baselines")
    parser.add_argument("--server", choices=common.server_kinds(), help=f"default {common.default_server()}")
    parser.add_argument("--save", help="write the JSON result to this file too")
    args = parser.parse_args()
    opts = Options(not args.plain_inputs, args.profile, args.auto_plans, args.batch_size, args.patch)
    common.emit(run(args.n or [1000, 10000], args.rounds, opts, not args.no_baselines, args.server), args.save)
