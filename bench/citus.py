"""The claim that docs/scaling.md designs for Citus, measured on a coordinator and two workers against the
same on one PostgreSQL, in the same run.

    python -m bench.citus                      # N = 5000 due schedules; 1 and 4 claimers
    python -m bench.citus -n 20000 --claimers 8

Needs Debian's PostgreSQL 15 and Citus (scripts/install-citus). Three servers are started in temporary
directories (as the ``postgres`` user when root), on free ports of 127.0.0.1, fsync on; plus one plain
server. The table shapes are docs/scaling.md's: ``schedules`` distributed by id (32 shards), ``fires`` by
schedule_id, colocated. Measured:

- ``batch``: one PostgreSQL, today's claim: one statement claims up to 1000 due schedules with
  ``FOR UPDATE SKIP LOCKED``, records their fires and moves them on (what ``claim_due`` does);
- ``per_schedule``: the claim Citus can route: per due schedule one transaction of statements that name
  its id (lock it with ``SKIP LOCKED``, insert its fire, set its next due time as a value), the due ids
  read first by a multi-shard SELECT without locks. On one PostgreSQL and on Citus, with 1 and K claimers
  (threads, each its own connection);
- ``per_shard``: today's batch claim run on each shard group where it lives (Citus's
  ``run_command_on_colocated_placements``: plain single-node statements with SKIP LOCKED, every group at
  once), repeated until nothing is due: the claim a distributed schema would make;
- idle: CPU seconds per minute of the servers when nothing happens (Citus's maintenance daemons).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg

from . import common

CITUS_LIB = Path("/usr/lib/postgresql/15/lib/citus.so")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def _server(citus: bool) -> Iterator[tuple[str, int]]:
    """A PostgreSQL 15 on a free port; yields (URL of database ``bench``, postmaster pid)."""
    root = Path(tempfile.mkdtemp(prefix="agentlab-sched-bench-citus-"))
    prefix = common._as_user()
    if prefix:
        shutil.chown(root, prefix[1].split("=", 1)[1])
    data, port = root / "data", _free_port()
    run = [*prefix, str(common.PG15_BIN / "pg_ctl"), "-D", str(data)]
    try:
        subprocess.run([*prefix, str(common.PG15_BIN / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust",
                        "-E", "UTF8", "--locale=C.UTF-8"], check=True, stdout=subprocess.DEVNULL)  # fmt: skip
        settings = {
            "port": str(port), "listen_addresses": "'127.0.0.1'", "unix_socket_directories": f"'{root}'",
            "max_connections": "200", "shared_buffers": "128MB", "max_prepared_transactions": "100",
        }  # fmt: skip
        if citus:
            settings["shared_preload_libraries"] = "'citus'"
        with (data / "postgresql.auto.conf").open("a") as conf:
            conf.write("".join(f"{k} = {v}\n" for k, v in settings.items()))
        subprocess.run([*run, "-l", str(root / "log"), "-w", "start"], check=True, stdout=subprocess.DEVNULL)
        admin = f"postgresql://postgres@127.0.0.1:{port}/postgres"
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute("CREATE DATABASE bench")
        url = f"postgresql://postgres@127.0.0.1:{port}/bench"
        if citus:
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute("CREATE EXTENSION citus")
        pid = int((data / "postmaster.pid").read_text().splitlines()[0])
        yield url, pid
    finally:
        subprocess.run([*run, "-m", "immediate", "-w", "stop"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        shutil.rmtree(root, ignore_errors=True)


SHAPE = [
    "CREATE TABLE schedules (id bigint PRIMARY KEY, name text NOT NULL, next_run_at timestamptz)",
    """CREATE TABLE fires (schedule_id bigint NOT NULL, fire_at timestamptz NOT NULL,
                           PRIMARY KEY (schedule_id, fire_at))""",
]
DISTRIBUTE = [
    "SELECT create_distributed_table('schedules', 'id', shard_count := 32)",
    "SELECT create_distributed_table('fires', 'schedule_id', colocate_with := 'schedules')",
]


def _load(url: str, n: int, at: datetime) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("TRUNCATE fires, schedules")
        conn.execute(
            "INSERT INTO schedules SELECT g, 's' || g, %s FROM generate_series(1, %s) g", (at, n)
        )  # fmt: skip
        conn.execute("VACUUM ANALYZE schedules")


def _batch(url: str, at: datetime) -> int:
    """Today's claim on one PostgreSQL: batches of 1000, SKIP LOCKED."""
    claimed = 0
    with psycopg.connect(url) as conn:
        while True:
            rows = conn.execute(
                """WITH due AS (SELECT id, next_run_at FROM schedules WHERE next_run_at <= %(at)s
                                ORDER BY next_run_at LIMIT 1000 FOR UPDATE SKIP LOCKED),
                        fired AS (INSERT INTO fires (schedule_id, fire_at) SELECT id, next_run_at FROM due)
                   UPDATE schedules s SET next_run_at = %(next)s FROM due WHERE s.id = due.id RETURNING s.id""",
                {"at": at, "next": at + timedelta(hours=1)},
            ).fetchall()
            conn.commit()
            if not rows:
                return claimed
            claimed += len(rows)


def _per_schedule(url: str, ids: list[int], at: datetime) -> int:
    """The routable claim: one transaction per schedule, every statement naming its id."""
    claimed = 0
    nxt = at + timedelta(hours=1)
    with psycopg.connect(url) as conn:
        for sid in ids:
            got = conn.execute(
                "SELECT id FROM schedules WHERE id = %s AND next_run_at <= %s FOR UPDATE SKIP LOCKED", (sid, at)
            ).fetchone()
            if got:
                conn.execute("INSERT INTO fires (schedule_id, fire_at) VALUES (%s, %s)", (sid, at))
                conn.execute("UPDATE schedules SET next_run_at = %s WHERE id = %s", (nxt, sid))
                claimed += 1
            conn.commit()
    return claimed


#: Today's batch claim, on one shard group (a schedules shard and its colocated fires shard, %1$s and %2$s),
#: run on the node that holds it by run_command_on_colocated_placements.
SHARD_CLAIM = """WITH due AS (SELECT id, next_run_at FROM %1$s WHERE next_run_at <= '{at}'
                             ORDER BY next_run_at LIMIT 1000 FOR UPDATE SKIP LOCKED),
                  fired AS (INSERT INTO %2$s (schedule_id, fire_at) SELECT id, next_run_at FROM due),
                  moved AS (UPDATE %1$s s SET next_run_at = '{next}' FROM due WHERE s.id = due.id RETURNING 1)
             SELECT count(*) FROM moved"""


def _per_shard(url: str, at: datetime) -> int:
    """The batch claim per shard group, every group at once (Citus runs the command on each placement)."""
    command = SHARD_CLAIM.format(at=at.isoformat(), next=(at + timedelta(hours=1)).isoformat())
    claimed = 0
    with psycopg.connect(url, autocommit=True) as conn:
        while True:
            rows = conn.execute(
                "SELECT success, result FROM run_command_on_colocated_placements('schedules', 'fires', %s)",
                (command,),
            ).fetchall()
            failed = [r[1] for r in rows if not r[0]]
            if failed:
                raise RuntimeError(f"a shard's claim failed: {failed[0]}")
            got = sum(int(r[1]) for r in rows)
            if not got:
                return claimed
            claimed += got


def _claim(url: str, kind: str, claimers: int, at: datetime) -> dict[str, Any]:
    with psycopg.connect(url, autocommit=True) as conn:
        ids = [r[0] for r in conn.execute("SELECT id FROM schedules WHERE next_run_at <= %s", (at,)).fetchall()]
    counts = [0] * claimers

    def work(i: int) -> None:
        if kind == "batch":
            counts[i] = _batch(url, at)
        elif kind == "per_shard":
            counts[i] = _per_shard(url, at)
        else:  # each claimer starts at its own place in the list and goes round: they meet, SKIP LOCKED
            mine = ids[i * len(ids) // claimers :] + ids[: i * len(ids) // claimers]
            counts[i] = _per_schedule(url, mine, at)

    began = time.perf_counter()
    threads = [threading.Thread(target=work, args=(i,)) for i in range(claimers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    took = time.perf_counter() - began
    with psycopg.connect(url, autocommit=True) as conn:
        fires = conn.execute("SELECT count(*), count(DISTINCT (schedule_id, fire_at)) FROM fires").fetchone()
    assert fires is not None
    return {"claimers": claimers, "seconds": round(took, 2), "fires_per_s": round(len(ids) / took),
            "fires": int(fires[0]), "distinct": int(fires[1])}  # fmt: skip


def _idle(pids: list[int], seconds: float) -> float:
    before = sum(common.postgres_cpu(p) for p in pids)
    time.sleep(seconds)
    return round((sum(common.postgres_cpu(p) for p in pids) - before) / seconds * 60, 2)


def run(n: int, claimers: list[int], idle_seconds: float) -> dict[str, Any]:
    if not CITUS_LIB.exists():
        raise SystemExit(f"Citus is not installed ({CITUS_LIB}): scripts/install-citus SOURCE")
    at = datetime.now(UTC).replace(microsecond=0)
    result: dict[str, Any] = {"benchmark": "citus-claim", "schedules": n, "machine": common.machine(), "rows": []}
    with contextlib.ExitStack() as stack:
        plain_url, plain_pid = stack.enter_context(_server(citus=False))
        nodes = [stack.enter_context(_server(citus=True)) for _ in range(3)]
        (coord_url, _), workers = nodes[0], nodes[1:]
        with psycopg.connect(coord_url, autocommit=True) as conn:
            port = int(coord_url.rsplit(":", 1)[1].split("/")[0])
            conn.execute("SELECT citus_set_coordinator_host('127.0.0.1', %s)", (port,))
            for url, _ in workers:
                conn.execute("SELECT citus_add_node('127.0.0.1', %s)", (int(url.rsplit(":", 1)[1].split("/")[0]),))
        for url, distribute in ((plain_url, False), (coord_url, True)):
            with psycopg.connect(url, autocommit=True) as conn:
                for statement in SHAPE + (DISTRIBUTE if distribute else []):
                    conn.execute(statement)  # type: ignore[arg-type]
        result["idle_cpu_s_per_min"] = {
            "one_postgresql": _idle([plain_pid], idle_seconds),
            "citus_3_nodes": _idle([pid for _, pid in nodes], idle_seconds),
        }
        plans: list[tuple[str, str, str, int]] = [
            ("one PostgreSQL", plain_url, "batch", 1),
            ("Citus 3 nodes", coord_url, "per_shard", 1),
        ]
        for k in claimers:
            plans += [("one PostgreSQL", plain_url, "per_schedule", k), ("Citus 3 nodes", coord_url, "per_schedule", k)]
        for where, url, kind, k in plans:
            _load(url, n, at)
            row = {"where": where, "claim": kind, **_claim(url, kind, k, at)}
            print(row, flush=True)
            result["rows"].append(row)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=5000)
    parser.add_argument("--claimers", type=int, action="append", help="concurrent claimers (1 and 4)")
    parser.add_argument("--idle-seconds", type=float, default=20.0)
    parser.add_argument("--save")
    args = parser.parse_args()
    common.emit(run(args.n, args.claimers or [1, 4], args.idle_seconds), args.save)


if __name__ == "__main__":
    os.environ.setdefault("PGAPPNAME", "bench.citus")
    main()
