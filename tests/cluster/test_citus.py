"""Citus 13 on this machine: a coordinator and two workers (PostgreSQL 15 each).

- `migrate` on a coordinator creates the distributed schema of docs/scaling.md once (the catalogues,
  the known tasks and the code deployments reference tables, the audit distributed by schedule id),
  refuses a database whose coordinator is not a node of its own, and a worker fires on the distributed
  schema; workers register tasks and code syncs run on it, pg_cron's cron.job reads the distributed
  audit, and doctor's schema fingerprint includes the Citus step;
- what blocks distributing the hot tables of the real schema, each as Citus refuses it;
- what docs/scaling.md's distribution rests on, checked against the real Citus: the tables of one
  schedule distributed by schedule id and colocated, the catalogues as reference tables, a claim of
  one schedule's row with FOR UPDATE SKIP LOCKED routed to its node, and what Citus refuses: a claim
  over many shards with FOR UPDATE, a unique name without the distribution column, a foreign key from a
  distributed table to a table of the coordinator's (Procrastinate's jobs);
- once-only on the distributed schema: worker processes killed with SIGKILL while firing, 0 duplicates,
  0 lost.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import procrastinate
import psycopg
import pytest
from procrastinate.testing import InMemoryConnector
from psycopg.rows import TupleRow, dict_row

import agentlab_sched
from agentlab_sched.database import citus_step, queries
from agentlab_sched.database.migrate import MigrateReport, migrate, pending
from agentlab_sched.demo import make_app
from agentlab_sched.errors import SchedError
from agentlab_sched.schedules import code
from agentlab_sched.settings import Settings
from agentlab_sched.worker.process import run_worker
from tests.support.rows import fetched


@pytest.fixture(scope="module")
def cluster(cluster_tools: Any) -> Iterator[Any]:
    with cluster_tools.citus_cluster() as citus:
        yield citus


def test_a_coordinator_and_two_workers(cluster: Any) -> None:
    coordinator = cluster.coordinator
    nodes = coordinator.rows(
        "SELECT node_name, node_port FROM citus_get_active_worker_nodes() ORDER BY 2", dbname="sched"
    )
    assert sorted(port for _, port in nodes) == sorted(w.port for w in cluster.workers)
    (version,) = coordinator.rows("SELECT extversion FROM pg_extension WHERE extname = 'citus'", dbname="sched")[0]
    assert version.startswith("13.")


def test_migrate_refuses_a_citus_database_whose_coordinator_is_not_a_node_and_writes_nothing(cluster: Any) -> None:
    coordinator = cluster.coordinator
    coordinator.execute("CREATE DATABASE citus_no_nodes")
    coordinator.execute("CREATE EXTENSION citus", dbname="citus_no_nodes")
    with pytest.raises(SchedError) as no:
        migrate(coordinator.url("citus_no_nodes"), locale="en")
    assert no.value.code == "migrate.citus_coordinator"
    assert str(no.value) == (
        "migrate did not change the database: the citus extension is installed but the coordinator is not in "
        "Citus's node list; run SELECT citus_set_coordinator_host('<host>', <port>) and migrate again"
    )
    assert coordinator.rows(
        "SELECT to_regnamespace('agentlab_sched'), to_regclass('procrastinate_jobs')", dbname="citus_no_nodes"
    ) == [(None, None)]


#: What migrate makes of the tables on Citus (docs/scaling.md).
PLACEMENTS = [
    ("agentlab_sched.code_deployments", "reference", "<none>"),
    ("agentlab_sched.config", "reference", "<none>"),
    ("agentlab_sched.error_codes", "reference", "<none>"),
    ("agentlab_sched.known_tasks", "reference", "<none>"),
    ("agentlab_sched.messages", "reference", "<none>"),
    ("agentlab_sched.schedule_changes", "distributed", "schedule_id"),
    ("agentlab_sched.schedule_options", "reference", "<none>"),
    ("agentlab_sched.statuses", "reference", "<none>"),
]


def citus_database(cluster: Any, name: str) -> str:
    """A new database ``name`` on every node of ``cluster`` with the extension, the coordinator and the
    workers in its node list; the coordinator's URL of it."""
    for server in [cluster.coordinator, *cluster.workers]:
        server.execute(f'CREATE DATABASE "{name}"')
        server.execute("CREATE EXTENSION citus", dbname=name)
    cluster.coordinator.execute(
        f"SELECT citus_set_coordinator_host('127.0.0.1', {cluster.coordinator.port})",
        *[f"SELECT citus_add_node('127.0.0.1', {w.port})" for w in cluster.workers],
        dbname=name,
    )
    return str(cluster.coordinator.url(name))


@pytest.fixture(scope="module")
def citus_db(cluster: Any) -> tuple[str, MigrateReport]:
    """(URL, report of its first migrate): a database on the cluster migrated once."""
    url = citus_database(cluster, "sched_citus")
    return url, migrate(url, locale="en")


def test_migrate_on_citus_creates_the_distributed_schema_once(citus_db: tuple[str, MigrateReport]) -> None:
    url, first = citus_db
    assert sorted(first.citus) == [f"{t}: {kind}" if kind == "reference" else f"{t}: distributed by {key}"
                                   for t, kind, key in PLACEMENTS]  # fmt: skip
    with psycopg.connect(url, autocommit=True) as conn:
        placed = conn.execute(
            """SELECT table_name::text, citus_table_type, distribution_column FROM citus_tables
               WHERE table_name::text LIKE 'agentlab_sched.%' ORDER BY 1"""
        ).fetchall()
        assert placed == PLACEMENTS
        # Citus enforces a key within a shard: the audit's primary key includes the schedule id (and the
        # month it is partitioned by).
        (key,) = conn.execute(
            "SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conname = 'schedule_changes_pkey'"
        ).fetchone() or (None,)
        assert key == "PRIMARY KEY (schedule_id, id, changed_at)"
        (shards,) = conn.execute(
            """SELECT count(DISTINCT nodeport) FROM citus_shards
               WHERE table_name = 'agentlab_sched.schedule_changes'::regclass"""
        ).fetchone() or (0,)
        assert shards == 2  # on both workers
    again = migrate(url, locale="en")
    assert (again.citus, again.applied, again.procrastinate, again.changed) == ([], [], [], False)


def test_a_worker_fires_on_the_distributed_schema(citus_db: tuple[str, MigrateReport]) -> None:
    url, _ = citus_db
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "SELECT agentlab_sched.schedule('every-second', '* * * * * *', 'demo.echo', %s::jsonb)",
            (json.dumps({"n": 1}),),
        )

    async def fire() -> None:
        stop = asyncio.Event()
        worker = asyncio.create_task(
            run_worker(make_app(url), url, stop=stop, install_signal_handlers=False, settings=Settings(locale="en"))
        )
        try:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                with psycopg.connect(url, autocommit=True) as conn:
                    (done,) = conn.execute(
                        "SELECT count(*) FROM agentlab_sched.runs WHERE status = 'succeeded'"
                    ).fetchone() or (0,)
                if done >= 2:
                    return
                await asyncio.sleep(0.2)
            raise AssertionError("no two runs succeeded on the distributed schema")
        finally:
            stop.set()
            await asyncio.wait_for(worker, timeout=10)

    asyncio.run(fire())
    with psycopg.connect(url, autocommit=True) as conn:
        fires = conn.execute(
            """SELECT f.status, r.status, r.result FROM agentlab_sched.fires f
               JOIN agentlab_sched.runs r ON r.fire_id = f.id ORDER BY f.fire_at LIMIT 2"""
        ).fetchall()
        assert fires == [("started", "succeeded", {"n": 1}), ("started", "succeeded", {"n": 1})]
        # The audit row of the schedule's creation, in the shard of its schedule id.
        assert conn.execute(
            """SELECT c.operation, c.schedule_name FROM agentlab_sched.schedule_changes c
               JOIN agentlab_sched.schedules s ON s.id = c.schedule_id"""
        ).fetchall() == [("insert", "every-second")]
        # The dashboard's schedules page: its page of schedules, and who changed each (the audit) apart.
        page = queries.rows_sync(
            conn, "web_schedules", {"status": None, "task": None, "text": None, "after": None, "limit": 10}
        )
        assert [row["name"] for row in page] == ["every-second"]
        assert queries.rows_sync(conn, "web_changed_by", {"ids": [page[0]["id"]]}) == [
            {"id": page[0]["id"], "changed_by": "postgres"}
        ]


def test_the_pg_cron_job_view_reads_the_distributed_audit(citus_db: tuple[str, MigrateReport]) -> None:
    """pg_cron's cron.job names each schedule's creator from the audit, distributed on Citus: one derived
    table joined by schedule id, which Citus plans (a subquery per schedule it refuses)."""
    url, _ = citus_db
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT agentlab_sched.schedule('cron-view', '0 9 * * *', 'demo.echo', '{}'::jsonb)")
        assert conn.execute(
            "SELECT username, jobname, schedule, active FROM cron.job WHERE jobname = 'cron-view'"
        ).fetchall() == [("postgres", "cron-view", "0 9 * * *", True)]
        with pytest.raises(psycopg.errors.FeatureNotSupported) as no:  # what the view used to do
            conn.execute(
                """SELECT (SELECT c.db_role FROM agentlab_sched.schedule_changes c
                           WHERE c.schedule_id = s.id ORDER BY c.id LIMIT 1) FROM agentlab_sched.schedules s"""
            )
        assert str(no.value).startswith("direct joins between distributed and local tables are not supported")


def test_known_tasks_and_code_deployments_are_reference_tables_written_at_run_time(
    citus_db: tuple[str, MigrateReport],
) -> None:
    """Workers register their tasks and code syncs record their deployment in reference tables: PL/pgSQL
    with the time a value (Citus cannot plan a SQL-language function's parameters, nor a volatile function
    in ON CONFLICT DO UPDATE); the copies on every node agree."""
    url, _ = citus_db
    app = procrastinate.App(connector=InMemoryConnector())

    @agentlab_sched.schedule("0 3 * * *", name="citus-code")
    @app.task(name="citus.nightly")
    def nightly() -> None:
        return None

    async def sync() -> code.SyncReport:
        async with await psycopg.AsyncConnection.connect(url, row_factory=dict_row) as conn:
            return await code.sync(conn, app)

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT agentlab_sched.register_tasks(ARRAY['citus.a', 'citus.b', 'citus.a'])")
        conn.execute("SELECT agentlab_sched.register_tasks(ARRAY['citus.a'])")  # seen again
        assert conn.execute(
            "SELECT task FROM agentlab_sched.known_tasks WHERE task LIKE 'citus.%' ORDER BY 1"
        ).fetchall() == [("citus.a",), ("citus.b",)]
        assert conn.execute("SELECT agentlab_sched.task_registered('citus.b')").fetchone() == (True,)
        first = asyncio.run(sync())
        assert (first.created, asyncio.run(sync()).unchanged) == (["citus-code"], ["citus-code"])
        # (Procrastinate's builtin task is named anew by every App made in this process: not compared.)
        assert conn.execute(
            """SELECT fingerprint, ARRAY(SELECT t FROM unnest(tasks) t WHERE t NOT LIKE 'builtin:%'), schedules
               FROM agentlab_sched.code_deployments"""
        ).fetchall() == [(first.fingerprint, ["citus.nightly"], ["citus-code"])]
        # The sync stamped what it wrote (defined_here found its own audit row on the audit's shard).
        assert conn.execute(
            "SELECT code_version, defined_in IS NOT NULL FROM agentlab_sched.schedules WHERE name = 'citus-code'"
        ).fetchall() == [(first.fingerprint, True)]
        copies = conn.execute(
            """SELECT result FROM run_command_on_all_nodes(
                   $$SELECT count(*) FROM agentlab_sched.known_tasks WHERE task LIKE 'citus.%'$$)"""
        ).fetchall()
        assert copies == [("2",), ("2",), ("2",)]  # the coordinator and both workers


def test_doctor_sees_a_citus_step_older_than_the_code(
    citus_db: tuple[str, MigrateReport], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The schema fingerprint migrate records includes the Citus step's SQL: a newer step (another table
    to distribute) makes doctor ask for migrate, and migrate applies it."""
    url, _ = citus_db
    with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
        facts = queries.value_sync(conn, "doctor_facts")
    assert pending(set(facts["migrations"]), facts["fingerprint"]) == []
    newer = tmp_path / "citus"
    newer.mkdir()
    for path in citus_step.scripts():
        (newer / path.name).write_text(path.read_text(encoding="utf-8") + "\n-- a newer step\n", encoding="utf-8")
    monkeypatch.setattr(citus_step, "CITUS_DIR", newer)
    assert pending(set(facts["migrations"]), facts["fingerprint"]) == ["sql/"]
    assert migrate(url, locale="en").citus == []  # nothing new to distribute; the fingerprint recorded
    with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
        facts = queries.value_sync(conn, "doctor_facts")
    assert pending(set(facts["migrations"]), facts["fingerprint"]) == []


def test_what_blocks_distributing_the_hot_tables_of_the_real_schema(cluster: Any) -> None:
    """Why schedules, fires and runs stay on the coordinator, each refusal as Citus words it, on the
    schema migrate makes (docs/scaling.md, "What does not work on Citus, and why")."""
    url = citus_database(cluster, "sched_hot")
    migrate(url, locale="en")

    def refused(conn: psycopg.Connection[TupleRow], statement: str) -> str:
        with pytest.raises(psycopg.Error) as no:
            conn.execute(statement)
        return str(no.value)

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SET client_min_messages = error")
        for table, key in (("schedules", "id"), ("fires", "schedule_id"), ("runs", "schedule_id")):
            assert refused(conn, f"SELECT create_distributed_table('agentlab_sched.{table}', '{key}')").startswith(
                f'cannot distribute relation "{table}" because it has triggers'
            )
        # Past the trigger check (Citus then runs the row triggers on the node of each shard): the keys
        # without the distribution column (runs has no foreign key to procrastinate_jobs to refuse), the
        # foreign keys to tables of the coordinator, the unique name (dropped here); then schedules
        # distributes, but its triggers, run on the shard's node, call functions of the coordinator's table
        # type on the shard's row and read the coordinator's own tables, which no worker has.
        conn.execute("SET citus.enable_unsafe_triggers = on")
        assert refused(conn, "SELECT create_distributed_table('agentlab_sched.runs', 'schedule_id')").startswith(
            'cannot create constraint on "runs"'
        )
        assert refused(conn, "SELECT create_distributed_table('agentlab_sched.fires', 'schedule_id')").startswith(
            'referenced table "schedules" must be a distributed table or a reference table'
        )
        assert refused(conn, "SELECT create_distributed_table('agentlab_sched.schedules', 'id')").startswith(
            'cannot create constraint on "schedules"'
        )
        conn.execute("ALTER TABLE agentlab_sched.schedules DROP CONSTRAINT schedules_name_key")
        conn.execute("SELECT create_distributed_table('agentlab_sched.schedules', 'id')")
        no = refused(conn, "INSERT INTO agentlab_sched.schedules (name, cron, task) VALUES ('s', '* * * * *', 'a.b')")
        assert no.startswith("function agentlab_sched.validate_schedule(agentlab_sched.schedules_"), no
        assert no.split("\n")[0].endswith("does not exist"), no
        assert "while executing command on 127.0.0.1:" in no
        # The claim: a SQL-language function (its parameters cannot be planned), and its batch lock over
        # many shards.
        assert refused(conn, "SELECT * FROM agentlab_sched.claim_due(now(), 10)").startswith(
            "could not create distributed plan"
        )
        assert refused(
            conn,
            """SELECT id FROM agentlab_sched.schedules WHERE next_run_at <= now() ORDER BY next_run_at LIMIT 10
               FOR NO KEY UPDATE SKIP LOCKED""",
        ).startswith("could not run distributed query with FOR UPDATE/SHARE commands")


@pytest.fixture(scope="module")
def distributed(cluster: Any) -> Any:
    """The shape docs/scaling.md designs, on the cluster: schedules, fires and runs distributed by the
    schedule id and colocated; messages a reference table; a jobs table local to the coordinator."""
    coordinator = cluster.coordinator
    coordinator.execute(
        "CREATE TABLE messages (code text, locale text, text text, PRIMARY KEY (code, locale))",
        "SELECT create_reference_table('messages')",
        """CREATE TABLE schedules (id bigint PRIMARY KEY, name text NOT NULL, next_run_at timestamptz,
                                   UNIQUE (id, name))""",
        "SELECT create_distributed_table('schedules', 'id', shard_count := 8)",
        """CREATE TABLE fires (schedule_id bigint NOT NULL, id bigint NOT NULL, fire_at timestamptz NOT NULL,
                               PRIMARY KEY (schedule_id, id), UNIQUE (schedule_id, fire_at),
                               FOREIGN KEY (schedule_id) REFERENCES schedules (id))""",
        "SELECT create_distributed_table('fires', 'schedule_id', colocate_with := 'schedules')",
        "CREATE TABLE jobs (id bigint PRIMARY KEY, status text)",
        "INSERT INTO schedules SELECT g, 's' || g, now() - interval '1 second' FROM generate_series(1, 100) g",
        dbname="sched",
    )
    return coordinator


def test_the_shards_are_spread_over_both_workers_and_colocated(distributed: Any, cluster: Any) -> None:
    placements = distributed.rows(
        """SELECT table_name::text, nodeport, count(*) FROM citus_shards
           WHERE table_name::text IN ('schedules', 'fires') GROUP BY 1, 2 ORDER BY 1, 2""",
        dbname="sched",
    )
    ports = sorted(w.port for w in cluster.workers)
    assert [(t, p) for t, p, _ in placements] == [("fires", ports[0]), ("fires", ports[1]),
                                                  ("schedules", ports[0]), ("schedules", ports[1])]  # fmt: skip
    colocated = distributed.rows(
        "SELECT count(DISTINCT colocation_id) FROM citus_tables WHERE table_name::text IN ('schedules', 'fires')",
        dbname="sched",
    )
    assert colocated == [(1,)]
    assert distributed.rows(
        "SELECT citus_table_type FROM citus_tables WHERE table_name::text = 'messages'", dbname="sched"
    ) == [("reference",)]


def test_a_claim_of_one_schedule_is_routed_with_skip_locked(distributed: Any) -> None:
    with psycopg.connect(distributed.url("sched")) as conn:
        rows = conn.execute(
            "SELECT id FROM schedules WHERE id = 42 AND next_run_at <= now() FOR UPDATE SKIP LOCKED"
        ).fetchall()
        conn.execute("INSERT INTO fires VALUES (42, 1, now())")  # the fire beside its schedule, same shard
        # The next due time comes from the worker (Python computes cron), as a value: see the next test.
        conn.execute("UPDATE schedules SET next_run_at = %s WHERE id = 42", (datetime.now(UTC) + timedelta(hours=1),))
        conn.commit()
    assert rows == [(42,)]
    assert distributed.rows("SELECT count(*) FROM fires WHERE schedule_id = 42", dbname="sched") == [(1,)]


def test_citus_refuses_a_stable_function_of_a_column_in_an_update(distributed: Any) -> None:
    with (
        psycopg.connect(distributed.url("sched"), autocommit=True) as conn,
        pytest.raises(psycopg.errors.FeatureNotSupported) as no,
    ):  # timestamptz + interval depends on the TimeZone setting: STABLE
        conn.execute("UPDATE schedules SET next_run_at = next_run_at + interval '1 hour' WHERE id = 43")
    assert "STABLE functions used in UPDATE queries cannot be called with column references" in str(no.value)


def test_citus_refuses_a_claim_over_many_shards_with_for_update(distributed: Any) -> None:
    with psycopg.connect(distributed.url("sched")) as conn, pytest.raises(psycopg.errors.FeatureNotSupported) as no:
        conn.execute(
            "SELECT id FROM schedules WHERE next_run_at <= now() ORDER BY next_run_at LIMIT 10 FOR UPDATE SKIP LOCKED"
        )
    assert "FOR UPDATE" in str(no.value) or "distributed" in str(no.value)


def test_citus_refuses_a_unique_name_without_the_distribution_column(distributed: Any) -> None:
    with psycopg.connect(distributed.url("sched"), autocommit=True) as conn, pytest.raises(psycopg.Error) as no:
        conn.execute("CREATE UNIQUE INDEX schedules_name ON schedules (name)")
    assert "distribution column" in str(no.value) or "partition column" in str(no.value)


def test_citus_refuses_a_foreign_key_to_a_table_of_the_coordinator(distributed: Any) -> None:
    with psycopg.connect(distributed.url("sched"), autocommit=True) as conn, pytest.raises(psycopg.Error) as no:
        conn.execute("ALTER TABLE fires ADD COLUMN job_id bigint REFERENCES jobs (id)")
    assert "foreign key" in str(no.value).lower()


def test_a_batch_claim_per_shard_group_runs_where_the_shards_live(distributed: Any) -> None:
    """The claim a distributed schema would make: today's batch claim, SKIP LOCKED, run on each shard
    group (a schedules shard and its colocated fires shard) by the node holding it; each due schedule
    fires once, however many rounds."""
    distributed.execute(
        "UPDATE schedules SET next_run_at = '2026-01-01 00:00+00' WHERE id BETWEEN 50 AND 99", dbname="sched"
    )
    claim = """WITH due AS (SELECT id, next_run_at FROM %1$s WHERE next_run_at = '2026-01-01 00:00+00'
                            ORDER BY id LIMIT 7 FOR UPDATE SKIP LOCKED),
                    fired AS (INSERT INTO %2$s (schedule_id, id, fire_at) SELECT id, 1000 + id, next_run_at FROM due),
                    moved AS (UPDATE %1$s s SET next_run_at = '2026-01-01 01:00+00' FROM due WHERE s.id = due.id
                              RETURNING 1)
               SELECT count(*) FROM moved"""
    claimed: list[int] = []
    while True:
        rows = distributed.rows(
            "SELECT success, result FROM run_command_on_colocated_placements('schedules', 'fires', %s)",
            claim,
            dbname="sched",
        )
        assert all(ok for ok, _ in rows), rows
        got = sum(int(result) for _, result in rows)
        if not got:
            break
        claimed.append(got)
    assert sum(claimed) == 50 and len(claimed) >= 2  # at most 7 a shard a round: more than one round
    assert distributed.rows(
        "SELECT count(*), count(DISTINCT schedule_id) FROM fires WHERE fire_at = '2026-01-01 00:00+00'",
        dbname="sched",
    ) == [(50, 50)]


CHAOS_SCHEDULES = 20
CHAOS_WORKERS = 2
CHAOS_KILLS = 3
ROOT = Path(__file__).resolve().parents[2]
WORKER = [sys.executable, "-c", "from agentlab_sched.cli import main; main()", "worker", "--quiet"]


def _start_worker(url: str) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "AGENTLAB_SCHED_DATABASE_URL": url,
        "AGENTLAB_SCHED_LOCALE": "en",
        "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p),
    }
    return subprocess.Popen(WORKER, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)


def test_once_only_on_the_distributed_schema_through_kill_9(cluster: Any) -> None:
    """Worker processes on the cluster killed with SIGKILL while firing, one at a time, each replaced:
    every due time of every schedule has exactly one ledger row (0 duplicates), none is missing between a
    schedule's first fire and its next_run_at (0 lost), and every started fire has exactly one run."""
    from bench.common import insert_schedules

    url = citus_database(cluster, "sched_chaos")
    migrate(url, locale="en")
    conn = psycopg.connect(url, autocommit=True, row_factory=dict_row)
    workers: list[subprocess.Popen[bytes]] = []
    try:
        insert_schedules(conn, CHAOS_SCHEDULES, cron="* * * * * *", next_run_at=None, prefix="echo", task="demo.echo")

        def started(worker: subprocess.Popen[bytes]) -> subprocess.Popen[bytes]:
            """``worker`` once it has reported in the registry (its signal handlers are set by then)."""
            deadline = time.monotonic() + 60
            while not conn.execute("SELECT 1 FROM agentlab_sched.workers WHERE pid = %s", (worker.pid,)).fetchall():
                assert time.monotonic() < deadline and worker.poll() is None, "a worker did not start"
                time.sleep(0.2)
            return worker

        workers = [started(_start_worker(url)) for _ in range(CHAOS_WORKERS)]

        def fired() -> int:
            (n,) = fetched(conn.execute("SELECT count(*) FROM agentlab_sched.fires").fetchone()).values()
            return int(n)

        for kill in range(CHAOS_KILLS):
            start = fired()
            deadline = time.monotonic() + 60
            while fired() < start + CHAOS_SCHEDULES * 2 and time.monotonic() < deadline:
                time.sleep(0.2)  # firing: two more seconds' worth of ledger rows
            assert fired() >= start + CHAOS_SCHEDULES * 2, "the workers stopped firing"
            victim = workers[kill % CHAOS_WORKERS]
            victim.send_signal(signal.SIGKILL)
            victim.wait(10)
            workers[kill % CHAOS_WORKERS] = started(_start_worker(url))
        for worker in workers:
            worker.send_signal(signal.SIGTERM)
        for worker in workers:
            assert worker.wait(30) == 0

        duplicates = conn.execute(
            "SELECT schedule_id, fire_at, count(*) FROM agentlab_sched.fires GROUP BY 1, 2 HAVING count(*) > 1"
        ).fetchall()
        assert duplicates == []
        rows = conn.execute(
            """SELECT s.id, s.next_run_at, f.fire_at, f.status FROM agentlab_sched.schedules s
               JOIN agentlab_sched.fires f ON f.schedule_id = s.id WHERE f.kind IN ('scheduled', 'misfire')
               ORDER BY s.id, f.fire_at"""
        ).fetchall()
        by_schedule: dict[int, list[dict[str, Any]]] = {}
        for row in rows:
            by_schedule.setdefault(row["id"], []).append(row)
        assert len(by_schedule) == CHAOS_SCHEDULES
        second = timedelta(seconds=1)
        for sid, fires in by_schedule.items():
            # Due times one second apart (a skipped_misfire row stands for its backlog), and the pending
            # one right after the last: nothing lost.
            for before, after in itertools.pairwise(fires):
                assert after["fire_at"] - before["fire_at"] == second or before["status"] == "skipped_misfire", (
                    sid, before, after,
                )  # fmt: skip
            assert fires[-1]["next_run_at"] == fires[-1]["fire_at"] + second, (sid, fires[-1])
        runs_per_fire = conn.execute(
            """SELECT f.id, f.status, count(r.id) AS runs FROM agentlab_sched.fires f
               LEFT JOIN agentlab_sched.runs r ON r.fire_id = f.id GROUP BY f.id, f.status
               HAVING count(r.id) <> CASE WHEN f.status = 'started' THEN 1 ELSE 0 END"""
        ).fetchall()
        assert runs_per_fire == []
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
                worker.wait(10)
        conn.close()


def test_the_citus_step_follows_a_table_partitioned_by_time(cluster: Any) -> None:
    """The step works on the shape it finds: an audit partitioned by time (its primary key includes the
    partition column) is distributed with its partitions, its keys given the schedule id in front."""
    url = citus_database(cluster, "sched_partitioned")
    with psycopg.connect(url) as conn:
        conn.execute(
            """CREATE SCHEMA agentlab_sched;
               CREATE TABLE agentlab_sched.schedule_changes (
                   id bigint GENERATED ALWAYS AS IDENTITY, schedule_id bigint NOT NULL,
                   changed_at timestamptz NOT NULL, PRIMARY KEY (id, changed_at)) PARTITION BY RANGE (changed_at);
               CREATE TABLE agentlab_sched.schedule_changes_2026_01 PARTITION OF agentlab_sched.schedule_changes
                   FOR VALUES FROM ('2026-01-01') TO ('2026-02-01');
               INSERT INTO agentlab_sched.schedule_changes (schedule_id, changed_at) VALUES (7, '2026-01-02')"""
        )
        assert citus_step.distribute(conn) == ["agentlab_sched.schedule_changes: distributed by schedule_id"]
        assert citus_step.distribute(conn) == []
        conn.commit()
        keys = conn.execute(
            """SELECT conrelid::regclass::text, pg_get_constraintdef(oid) FROM pg_constraint
               WHERE contype = 'p' AND connamespace = 'agentlab_sched'::regnamespace ORDER BY 1"""
        ).fetchall()
        assert keys == [
            ("agentlab_sched.schedule_changes", "PRIMARY KEY (schedule_id, id, changed_at)"),
            ("agentlab_sched.schedule_changes_2026_01", "PRIMARY KEY (schedule_id, id, changed_at)"),
        ]
        placed = conn.execute(
            """SELECT table_name::text, citus_table_type, distribution_column FROM citus_tables
               WHERE table_name::text LIKE 'agentlab_sched.%' ORDER BY 1"""
        ).fetchall()
        assert placed == [
            ("agentlab_sched.schedule_changes", "distributed", "schedule_id"),
            ("agentlab_sched.schedule_changes_2026_01", "distributed", "schedule_id"),
        ]
        assert conn.execute("SELECT schedule_id FROM agentlab_sched.schedule_changes").fetchall() == [(7,)]
