"""End-to-end storm: N schedules due at one minute boundary; how long until every job body has started.

    python -m bench.e2e_storm                                   # N = 10000, all systems, 1 worker process
    python -m bench.e2e_storm -n 1000 -n 10000 -n 100000        # growth with N
    python -m bench.e2e_storm -n 10000 --workers 1 --workers 2 --workers 4
    python -m bench.e2e_storm -n 1000 --system agentlab         # one system (repeatable)
    python -m bench.e2e_storm -n 10000 --drain                  # worker throughput alone (overhead of runs)

One run measures, one after the other on fresh databases of the same server (Debian's PostgreSQL 15
with pg_cron by default, fsync on; see bench/common.py), each system at a minute boundary T of its own:

- ``agentlab``: K ``agentlab-sched worker --app bench.apps.app --concurrency C`` processes; N schedules
  ``M * * * *`` (due at T, M being T's minute; their next due time is an hour later, so a slow system's
  tail never meets the next storm: at T the work is that of every-minute schedules), task ``bench.hit``,
  inputs with a placeholder, the default overlap (``skip``); the worker records the fires, runs and jobs
  and runs the jobs.
- ``bare``: K ``procrastinate --app bench.apps.bare_app worker --concurrency C`` processes on Procrastinate's
  schema alone (no runs, no triggers of ours); at T this benchmark defers the N ``bench.hit`` jobs in one
  statement: the cheapest possible scheduler in front of a bare Procrastinate worker.
- ``pg_cron``: N rows in ``cron.job``, schedule ``M * * * *``, command the same INSERT as ``bench.hit``'s
  body; pg_cron's defaults (at most 32 jobs at once, each on a connection of its own, runs logged in
  ``cron.job_run_details``). Skipped, saying why, when pg_cron is not installed.

Before measuring, each system has fired once (a warm-up schedule or job: pg_cron sometimes fires nothing
for the first boundaries after its start). The job body is one INSERT recording ``clock_timestamp()``:
*start* is that instant minus T. Reported per system: first / median / p99 / last start, when the last
job had finished, transactions per job (``pg_stat_database``, every database, the benchmark's own
readings taken out; and transaction ids, i.e. write transactions), CPU per job of the worker processes
(``/proc``) and of the whole server (``/proc``: postmaster and every backend, exited ones included),
from T - 2 s until the last job finished; the machine's calibration (``python_loop_ms``, ``commit_ms``,
load); and ratios between the systems of the same run.

``BENCH_STATEMENTS=1`` (PostgreSQL 15 server) reports the statements that took the server's time during
each storm (pg_stat_statements, nested statements included). ``BENCH_LOAD_RATE=500`` gives the loading
of the schedules before T more time (default 1500 a second). ``BENCH_PROFILE_DIR=dir`` also samples each
worker process with py-spy during the storm (``pip install py-spy``). ``--drain`` measures the workers
alone: N jobs already queued (agentlab: recorded by one ``fire_due``, with
their runs; ``agentlab-noruns``: plain ``bench.hit`` jobs in agentlab-sched's database, run by its worker;
bare: plain jobs), held back by ``scheduled_at`` until T, when one NOTIFY wakes the workers. Its ratio
agentlab / bare is the overhead of runs over a bare Procrastinate worker.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg

from . import apps, common

SYSTEMS = ("agentlab", "bare", "pg_cron")
DRAIN_SYSTEMS = ("agentlab", "agentlab-noruns", "bare")
INPUTS = {"day": "{{ schedule.date }}"}
#: CPU and transactions are counted from this long before T.
BEFORE = 2.0
POLL = 0.5
BIN = Path(sys.executable).parent


class Bench:
    """The benchmark's own connection to one database; counts its statements (they are transactions too)."""

    def __init__(self, url: str) -> None:
        self.conn = psycopg.connect(url, autocommit=True)
        self.statements = 0

    def one(self, sql: str, params: Any = None) -> Any:
        self.statements += 1
        row = self.conn.execute(sql, params).fetchone()  # type: ignore[arg-type]
        return row[0] if row else None

    def close(self) -> None:
        self.conn.close()


# --- the systems ------------------------------------------------------------------------------------


def _worker_command(system: str, concurrency: int) -> list[str]:
    if system.startswith("agentlab"):
        return [str(BIN / "agentlab-sched"), "worker", "--app", "bench.apps.app", "--concurrency", str(concurrency)]
    return [str(BIN / "procrastinate"), "--app", "bench.apps.bare_app", "worker", "--concurrency", str(concurrency)]


@contextlib.contextmanager
def _workers(system: str, url: str, count: int, concurrency: int) -> Iterator[list[Any]]:
    """``count`` worker processes of ``system`` on ``url``, stopped (SIGTERM) on exit; their output in a log."""
    env = common.worker_env(url)
    log = tempfile.NamedTemporaryFile("w+", prefix=f"bench-{system}-", suffix=".log", delete=False)

    procs = [
        subprocess.Popen(_worker_command(system, concurrency), cwd=common.ROOT, env=env, stdout=log, stderr=log)
        for _ in range(count)
    ]
    try:
        yield procs
    finally:
        for proc in procs:
            common.stop_worker(proc)
        log.seek(0)
        text = log.read()
        log.close()
        os.unlink(log.name)
        if any(p.returncode not in (0, -15) for p in procs) or "Traceback" in text:
            print(f"--- {system} worker output (exit codes {[p.returncode for p in procs]}) ---\n{text[-4000:]}")


def _boundary(lead: float) -> datetime:
    """The first minute boundary at least ``lead`` seconds from now."""
    at = datetime.now(UTC) + timedelta(seconds=lead)
    return at.replace(second=0, microsecond=0) + timedelta(minutes=1)


def _sleep_until(at: datetime) -> None:
    time.sleep(max(0.0, (at - datetime.now(UTC)).total_seconds()))


def _wait(what: str, check: Any, limit: float) -> None:
    deadline = time.monotonic() + limit
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {limit:.0f} s waiting for {what}")
        time.sleep(POLL)


def _lead(n: int) -> float:
    """Seconds needed before T to load N schedules and settle the database: at ``BENCH_LOAD_RATE``
    schedules a second (default 1500; 100k took 73 s on a loaded machine, 208 s while a test suite ran)."""
    return 12 + n / float(os.environ.get("BENCH_LOAD_RATE", "1500"))


def _lead_after_load(n: int) -> float:
    """Seconds needed before T, once loaded, to make N schedules due and vacuum them (at least 10,000 a
    second; 10 s more to settle)."""
    return 10 + n / 10_000


def _jobs_done(bench: Bench, *, warm_only: bool = False) -> bool:
    """No job waiting or running (``warm_only``: of the warm-up's, k = -1)."""
    return not bench.one(
        "SELECT EXISTS (SELECT 1 FROM procrastinate_jobs WHERE status IN ('todo', 'doing')"
        + (" AND args ->> 'k' = '-1')" if warm_only else ")")
    )


def _warm_agentlab(bench: Bench) -> None:
    """One every-second schedule that fires once; then it is switched off."""
    common.insert_schedules(
        bench.conn,
        1,
        cron="* * * * * *",
        next_run_at=None,
        prefix="warm",
        task=apps.TASK,
        overlap="allow_all",
        inputs={"k": -1},
    )
    _wait("the warm-up fire", lambda: bench.one("SELECT count(*) FROM bench_hits WHERE k = -1") > 0, 90)
    bench.one("UPDATE agentlab_sched.schedules SET enabled = false WHERE name LIKE 'warm-%' RETURNING 1")
    time.sleep(1.5)
    _wait("the warm-up jobs", lambda: _jobs_done(bench), 30)


def _warm_bare(bench: Bench) -> None:
    bench.one(
        "SELECT procrastinate_defer_jobs_v1(ARRAY[ROW('default', %s, 0, NULL, NULL, '{\"k\": -1}'::jsonb, NULL)"
        "::procrastinate_job_to_defer_v1])",
        (apps.TASK,),
    )
    _wait("the warm-up job", lambda: bench.one("SELECT count(*) FROM bench_hits WHERE k = -1") > 0, 60)
    _wait("the warm-up job to finish", lambda: _jobs_done(bench, warm_only=True), 30)


def _cron_jobs(admin: Bench, db: str, schedule: str, count: int, name: str, k: int | None = None) -> None:
    """``count`` pg_cron jobs on database ``db`` running the body's INSERT (k = their number, or ``k``),
    inserted in one statement (pg_cron reloads its job list when cron.job changes)."""
    command = apps.HIT.replace("%(job)s", "NULL").replace("%(k)s", "{k}").replace("%(began)s", "clock_timestamp()")
    admin.one(
        """WITH ins AS (
               INSERT INTO cron.job (schedule, command, nodename, nodeport, database, username, jobname)
               SELECT %(schedule)s, replace(%(command)s, '{k}', coalesce(%(k)s::int, g)::text),
                      current_setting('cron.host'), current_setting('port')::int, %(db)s, current_user,
                      %(name)s || '-' || g
               FROM generate_series(1, %(count)s) g RETURNING 1)
           SELECT count(*) FROM ins""",
        {"schedule": schedule, "command": command, "db": db, "count": count, "name": name, "k": k},
    )


def storm(srv: common.Server, system: str, n: int, workers: int, concurrency: int) -> dict[str, Any]:
    """One storm of ``system``: N due at T; see the module doc."""
    bare = system == "bare"
    with srv.database(bare=bare, empty=system == "pg_cron") as url:
        bench, admin = Bench(url), Bench(srv.admin_url)
        try:
            apps.create_hits(bench.conn)
            dbname = bench.conn.info.dbname
            with _workers(system, url, workers if system != "pg_cron" else 0, concurrency) as procs:
                if system == "agentlab":
                    _warm_agentlab(bench)
                elif bare:
                    _warm_bare(bench)
                else:
                    _cron_jobs(admin, dbname, "* * * * *", 1, "warm", k=-1)
                    _wait("pg_cron's warm-up fire", lambda: bench.one("SELECT count(*) FROM bench_hits") > 0, 200)
                    admin.one("DELETE FROM cron.job WHERE jobname LIKE 'warm-%' RETURNING 1")
                loaded = time.monotonic()
                if system == "agentlab":
                    # Loaded first, due tomorrow (so that nothing fires while a million load), then all made
                    # due at the boundary chosen after loading by one bookkeeping UPDATE (no audit, no
                    # validation). The minute of the hour is the one before loading began: the next fire of
                    # each is almost an hour after the boundary, never within a storm's tail.
                    minute = (datetime.now(UTC) - timedelta(minutes=1)).minute
                    common.insert_schedules(
                        bench.conn,
                        n,
                        cron=f"{minute} * * * *",
                        next_run_at=datetime.now(UTC) + timedelta(days=1),
                        prefix="storm",
                        task=apps.TASK,
                        inputs=INPUTS,
                        bulk=True,
                    )
                    common.settle(url)
                    at = _boundary(_lead_after_load(n))
                    bench.one(
                        "WITH due AS (UPDATE agentlab_sched.schedules SET next_run_at = %s"
                        " WHERE name LIKE 'storm-%%' RETURNING id)"
                        " SELECT pg_notify('agentlab_sched_schedules', min(id)::text) IS NULL FROM due",
                        (at,),
                    )
                    with psycopg.connect(url, autocommit=True) as conn:
                        conn.execute("VACUUM ANALYZE agentlab_sched.schedules")
                else:
                    at = _boundary(_lead(n))
                    if system == "pg_cron":
                        _cron_jobs(admin, dbname, f"{at.minute} * * * *", n, "storm")
                    common.settle(url)
                load_seconds = time.monotonic() - loaded
                if datetime.now(UTC) > at - timedelta(seconds=BEFORE):
                    raise RuntimeError(f"loading took {load_seconds:.1f} s: past the boundary; lower BENCH_LOAD_RATE")
                _sleep_until(at - timedelta(seconds=BEFORE))
                if common.statements_profiled():
                    admin.one("SELECT pg_stat_statements_reset() IS NULL")
                # pg_cron keeps its jobs and their runs in the database it is installed in: those count too.
                watched = [url, srv.admin_url] if system == "pg_cron" else [url]
                tuples0 = [common.tuples_read(u) for u in watched]
                result = _measure(srv, system, bench, admin, procs, n, at)
                result["load_seconds"] = round(load_seconds, 1)
                if common.statements_profiled():
                    result["statements"] = common.top_statements(admin.conn, dbname)
                    admin.statements += 1
                    for row in result["statements"]:
                        print(
                            f"  {row['total_ms']:>10} ms {row['calls']:>7} calls {row['blocks']:>10} blocks"
                            f" {row['plans']:>7} plans"
                            f"  {row['query']}",
                            flush=True,
                        )
        finally:
            ours = bench.statements + admin.statements
            bench.close()
            admin.close()
        # Workers stopped and our connections closed: every backend has reported its transactions.
        _per_job(result, common.settled_transactions(srv.admin_url), ours, n)
        spent = [common.tuples_between(t0, common.tuples_read(u)) for u, t0 in zip(watched, tuples0, strict=True)]
        result["tuples_read_per_job"] = round(sum(read for read, _ in spent) / n, 1)
        result["tuples_read_by_table"] = {rel: read for _, tables in spent for rel, read in tables.items()}
        if system == "pg_cron":
            with psycopg.connect(srv.admin_url, autocommit=True) as conn:
                conn.execute("DELETE FROM cron.job WHERE jobname LIKE 'storm-%'")
    result.update(system=system, n=n, workers=workers if system != "pg_cron" else None, concurrency=concurrency)
    return result


def _per_job(result: dict[str, Any], after: dict[str, int], statements: int, n: int) -> None:
    """Transactions per job from the reading taken at T - 2 s to ``after`` (our own statements taken out)."""
    spent = common.transactions_between(result.pop("_tx0"), after, statements - result.pop("_statements0"))
    result["transactions_per_job"] = round(spent["xacts"] / n, 2)
    result["write_transactions_per_job"] = round(spent["xids"] / n, 2)


def _measure(
    srv: common.Server, system: str, bench: Bench, admin: Bench, procs: list[Any], n: int, at: datetime
) -> dict[str, Any]:
    assert srv.postmaster_pid is not None
    tx0 = common.transactions(srv.admin_url)
    statements0 = bench.statements + admin.statements
    pg0 = common.postgres_cpu(srv.postmaster_pid)
    w0 = sum(common.process_cpu(p.pid, children=True) for p in procs)
    profilers = _profile(system, procs, n)
    _sleep_until(at)
    deferred = None
    if system == "bare":
        began = time.perf_counter()
        bench.one(
            """SELECT count(*) FROM unnest(procrastinate_defer_jobs_v1(ARRAY(
                   SELECT ROW('default', %s, 0, NULL, NULL, jsonb_build_object('k', g), NULL)
                          ::procrastinate_job_to_defer_v1
                   FROM generate_series(1, %s) g)))""",
            (apps.TASK, n),
        )
        deferred = round(time.perf_counter() - began, 3)
    limit = 120 + n / 40
    _wait("every job body to start", lambda: bench.one("SELECT count(*) FROM bench_hits WHERE k >= 0") >= n, limit)
    if system == "pg_cron":
        _wait(
            "pg_cron's jobs to finish",
            lambda: (
                not admin.one(
                    "SELECT EXISTS (SELECT 1 FROM cron.job_run_details d JOIN cron.job j USING (jobid) "
                    "WHERE j.jobname LIKE 'storm-%' AND d.status IN ('starting', 'running'))"
                )
            ),
            limit,
        )
    else:
        _wait("every job to finish", lambda: _jobs_done(bench), limit)
    w1 = sum(common.process_cpu(p.pid, children=True) for p in procs)
    pg1 = common.postgres_cpu(srv.postmaster_pid)
    window = (datetime.now(UTC) - at).total_seconds() + BEFORE
    for profiler in profilers:
        profiler.send_signal(signal.SIGINT)  # py-spy writes its profile on SIGINT
        profiler.wait(30)
    starts = [
        float(r[0])
        for r in bench.conn.execute(
            "SELECT extract(epoch FROM at - %s) FROM bench_hits WHERE k >= 0 ORDER BY at", (at,)
        ).fetchall()
    ]
    bench.statements += 1
    if system == "pg_cron":
        finished = admin.one(
            "SELECT extract(epoch FROM max(end_time) - %s) FROM cron.job_run_details d JOIN cron.job j USING (jobid) "
            "WHERE j.jobname LIKE 'storm-%%'",
            (at,),
        )
        failed = admin.one(
            "SELECT count(*) FROM cron.job_run_details d JOIN cron.job j USING (jobid) "
            "WHERE j.jobname LIKE 'storm-%' AND d.status <> 'succeeded'"
        )
    else:
        finished = bench.one(
            "SELECT extract(epoch FROM max(at) - %s) FROM procrastinate_events WHERE type IN ('succeeded', 'failed')",
            (at,),
        )
        failed = bench.one(
            "SELECT count(*) FROM procrastinate_jobs WHERE status <> 'succeeded' AND coalesce(args ->> 'k', '') <> '-1'"
        )
    recorded = None
    if system == "agentlab":
        recorded = bench.one(
            "SELECT extract(epoch FROM max(created_at) - %s) FROM agentlab_sched.fires WHERE fire_at = %s", (at, at)
        )
    worker_cpu, server_cpu = w1 - w0, pg1 - pg0
    return {
        "boundary": at.isoformat(),
        "started": len(starts),
        "not_succeeded": int(failed or 0),
        "first_s": round(starts[0], 3),
        "median_s": round(common.median(starts), 3),
        "p99_s": round(common.percentile(starts, 99), 3),
        "last_s": round(starts[-1], 3),
        "finished_s": round(float(finished), 3) if finished is not None else None,
        "recorded_s": round(float(recorded), 3) if recorded is not None else None,
        "bench_defer_s": deferred,
        "cpu_window_s": round(window, 1),
        "cpu_ms_per_job": {
            "worker": round(worker_cpu / n * 1000, 2),
            "server": round(server_cpu / n * 1000, 2),
            "total": round((worker_cpu + server_cpu) / n * 1000, 2),
        },
        "cpu_busy": round((worker_cpu + server_cpu) / window / (os.cpu_count() or 1), 2),
        "loadavg": os.getloadavg(),
        "_tx0": tx0,
        "_statements0": statements0,
    }


def _profile(system: str, procs: list[Any], n: int) -> list[subprocess.Popen[bytes]]:
    """With BENCH_PROFILE_DIR set, py-spy samples each worker process during the storm (collapsed stacks,
    ``<dir>/<system>-<n>-<pid>.txt``: one line per stack and its sample count)."""
    where = os.environ.get("BENCH_PROFILE_DIR")
    if not where:
        return []
    Path(where).mkdir(parents=True, exist_ok=True)
    return [
        subprocess.Popen(
            [
                str(BIN / "py-spy"),
                "record",
                "--pid",
                str(p.pid),
                "--format",
                "raw",
                "--rate",
                "200",
                "--nonblocking",
                "-o",
                str(Path(where) / f"{system}-{n}-{p.pid}.txt"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for p in procs
    ]


# --- drain: the workers alone ---------------------------------------------------------------------


def drain(srv: common.Server, system: str, n: int, workers: int, concurrency: int) -> dict[str, Any]:
    """N jobs queued beforehand, held back until T by scheduled_at; one NOTIFY at T. See the module doc."""
    import asyncio

    from agentlab_sched.firing import tick
    from agentlab_sched.settings import Settings

    with srv.database(bare=system == "bare") as url:
        bench = Bench(url)
        try:
            apps.create_hits(bench.conn)
            at = datetime.now(UTC) + timedelta(seconds=_lead(n) + 10)
            if system == "agentlab":
                past = datetime.now(UTC) - timedelta(seconds=1)
                common.insert_schedules(
                    bench.conn, n, cron="0 0 1 1 *", next_run_at=past, prefix="drain", task=apps.TASK, inputs=INPUTS
                )

                async def fire() -> None:
                    from agentlab_sched import database as db

                    conn = await db.connect(url, locale="en")
                    try:
                        await tick.fire_due(conn, settings=Settings(locale="en"))
                    finally:
                        await conn.close()

                asyncio.run(fire())
                bench.one("UPDATE procrastinate_jobs SET scheduled_at = %s WHERE status = 'todo' RETURNING 1", (at,))
            else:
                bench.one(
                    """SELECT count(*) FROM unnest(procrastinate_defer_jobs_v1(ARRAY(
                           SELECT ROW('default', %s, 0, NULL, NULL, jsonb_build_object('k', g), %s)
                                  ::procrastinate_job_to_defer_v1
                           FROM generate_series(1, %s) g)))""",
                    (apps.TASK, at, n),
                )
            common.settle(url)
            with _workers(system, url, workers, concurrency) as procs:
                _warm_bare(bench)
                if datetime.now(UTC) > at - timedelta(seconds=BEFORE):
                    raise RuntimeError("the workers took too long to start: past T; lower BENCH_LOAD_RATE")
                _sleep_until(at - timedelta(seconds=BEFORE))
                result = _measure_drain(srv, bench, procs, n, at)
        finally:
            ours = bench.statements
            bench.close()
        _per_job(result, common.settled_transactions(srv.admin_url), ours, n)
    result.update(system=system, n=n, workers=workers, concurrency=concurrency, mode="drain")
    return result


def _measure_drain(srv: common.Server, bench: Bench, procs: list[Any], n: int, at: datetime) -> dict[str, Any]:
    assert srv.postmaster_pid is not None
    tx0 = common.transactions(srv.admin_url)
    statements0 = bench.statements
    pg0 = common.postgres_cpu(srv.postmaster_pid)
    w0 = sum(common.process_cpu(p.pid, children=True) for p in procs)
    _sleep_until(at)  # the jobs are due; the NOTIFY a deferred job would send wakes the workers
    bench.one("""SELECT pg_notify('procrastinate_any_queue_v1', '{"type": "job_inserted", "job_id": 0}')""")
    limit = 120 + n / 40
    _wait("every job body to start", lambda: bench.one("SELECT count(*) FROM bench_hits WHERE k >= 0") >= n, limit)
    _wait("every job to finish", lambda: _jobs_done(bench), limit)
    w1 = sum(common.process_cpu(p.pid, children=True) for p in procs)
    pg1 = common.postgres_cpu(srv.postmaster_pid)
    starts = [
        float(r[0])
        for r in bench.conn.execute(
            "SELECT extract(epoch FROM at - %s) FROM bench_hits WHERE k >= 0 ORDER BY at", (at,)
        ).fetchall()
    ]
    bench.statements += 1
    finished = bench.one(
        "SELECT extract(epoch FROM max(at) - %s) FROM procrastinate_events WHERE type IN ('succeeded', 'failed')", (at,)
    )
    worker_cpu, server_cpu = w1 - w0, pg1 - pg0
    span = starts[-1] - starts[0]
    return {
        "first_s": round(starts[0], 3),
        "median_s": round(common.median(starts), 3),
        "last_s": round(starts[-1], 3),
        "finished_s": round(float(finished), 3),
        "jobs_per_s": round(n / span) if span > 0 else None,
        "cpu_ms_per_job": {
            "worker": round(worker_cpu / n * 1000, 2),
            "server": round(server_cpu / n * 1000, 2),
            "total": round((worker_cpu + server_cpu) / n * 1000, 2),
        },
        "loadavg": os.getloadavg(),
        "_tx0": tx0,
        "_statements0": statements0,
    }


# --- the run ----------------------------------------------------------------------------------------


def _ratios(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Ratios between the systems of one (N, workers) cell of the same run."""
    by = {r["system"]: r for r in rows}
    out: dict[str, Any] = {}
    for a, b in (("agentlab", "pg_cron"), ("agentlab", "bare"), ("bare", "pg_cron"), ("agentlab-noruns", "bare")):
        if a in by and b in by:
            out[f"{a}/{b}"] = {
                key: round(by[a][key] / by[b][key], 2) if by[b].get(key) else None
                for key in ("first_s", "median_s", "last_s", "finished_s")
            } | {"cpu_total": round(by[a]["cpu_ms_per_job"]["total"] / by[b]["cpu_ms_per_job"]["total"], 2)}
    return out


def run(
    ns: list[int], workers: list[int], systems: list[str], concurrency: int, server_kind: str | None, mode: str
) -> dict[str, Any]:
    results: dict[str, Any] = {"machine": common.machine(), "mode": mode, "concurrency": concurrency, "cells": []}
    with common.server(server_kind) as srv:
        srv.describe(results)
        if "pg_cron" in systems and srv.pg_cron_missing:
            print(f"pg_cron baseline skipped: {srv.pg_cron_missing}", flush=True)
            results["pg_cron_skipped"] = srv.pg_cron_missing
            systems = [s for s in systems if s != "pg_cron"]
        for n in ns:
            once: list[dict[str, Any]] = []  # pg_cron has no worker processes: measured once per N
            for k in workers:
                rows = []
                for system in systems:
                    if system == "pg_cron" and once:
                        continue
                    one = (storm if mode == "storm" else drain)(srv, system, n, k, concurrency)
                    (once if system == "pg_cron" else rows).append(one)
                    print(
                        f"{mode} N={n} workers={one['workers'] or '-'} {system}: first {one['first_s']} s, "
                        f"median {one['median_s']} s, last {one['last_s']} s, finished {one['finished_s']} s; "
                        f"{one['transactions_per_job']} transactions and {one['cpu_ms_per_job']['total']} ms CPU "
                        f"(worker {one['cpu_ms_per_job']['worker']}, server {one['cpu_ms_per_job']['server']}) "
                        f"per job; {one.get('tuples_read_per_job', '-')} rows read per job "
                        f"{one.get('tuples_read_by_table', {})}",
                        flush=True,
                    )
                cell = {"n": n, "workers": k, "systems": rows + once, "ratios": _ratios(rows + once)}
                results["cells"].append(cell)
                print(json.dumps({"n": n, "workers": k, "ratios": cell["ratios"]}), flush=True)
    results["machine"]["loadavg_end"] = os.getloadavg()
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, action="append", help="schedules due at once (repeatable; default 10000)")
    parser.add_argument("--workers", type=int, action="append", help="worker processes (repeatable; default 1)")
    parser.add_argument("--system", choices=[*SYSTEMS, "agentlab-noruns"], action="append", help="default: all")
    parser.add_argument("--concurrency", type=int, default=10, help="each worker's (default 10)")
    parser.add_argument("--server", choices=common.server_kinds(), help=f"default {common.default_server()}")
    parser.add_argument("--drain", action="store_true", help="the workers alone, on jobs already queued")
    parser.add_argument("--save", help="write the JSON result to this file too")
    args = parser.parse_args()
    mode = "drain" if args.drain else "storm"
    default = list(DRAIN_SYSTEMS if args.drain else SYSTEMS)
    systems = args.system or default
    if args.drain:
        systems = [s for s in systems if s != "pg_cron"]
    elif "agentlab-noruns" in systems:
        parser.error("agentlab-noruns is a --drain system")
    common.emit(run(args.n or [10000], args.workers or [1], systems, args.concurrency, args.server, mode), args.save)
