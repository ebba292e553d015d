"""Citus 13 on this machine: a coordinator and two workers (PostgreSQL 15 each).

- `migrate` on the coordinator works as on one PostgreSQL: every table stays local to the coordinator
  (nothing of Citus is needed, nothing is distributed by itself), and a worker fires there;
- what docs/scaling.md's distribution rests on, checked against the real Citus: the tables of one
  schedule distributed by schedule id and colocated, the catalogues as reference tables, a claim of
  one schedule's row with FOR UPDATE SKIP LOCKED routed to its node, and what Citus refuses: a claim
  over many shards with FOR UPDATE, a unique name without the distribution column, a foreign key from a
  distributed table to a table of the coordinator's (Procrastinate's jobs).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from agentlab_sched.database.migrate import migrate
from agentlab_sched.demo import make_app
from agentlab_sched.settings import Settings
from agentlab_sched.worker.process import run_worker


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


def test_migrate_on_the_coordinator_keeps_every_table_local_and_a_worker_fires(cluster: Any) -> None:
    coordinator = cluster.coordinator
    coordinator.execute("CREATE DATABASE plain_on_citus")
    coordinator.execute("CREATE EXTENSION citus", dbname="plain_on_citus")
    url = coordinator.url("plain_on_citus")
    migrate(url)
    assert coordinator.rows("SELECT count(*) FROM citus_tables", dbname="plain_on_citus") == [(0,)]

    async def fire_once() -> list[tuple[Any, ...]]:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(
                """INSERT INTO agentlab_sched.schedules (name, cron, task, inputs, timezone)
                   VALUES ('every-second', '* * * * * *', 'demo.echo', %s::jsonb, 'UTC')""",
                (json.dumps({"n": 1}),),
            )
        stop = asyncio.Event()
        worker = asyncio.create_task(
            run_worker(make_app(url), url, stop=stop, install_signal_handlers=False, settings=Settings(locale="en"))
        )
        try:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                rows = coordinator.rows(
                    "SELECT status FROM agentlab_sched.runs WHERE status = 'succeeded'", dbname="plain_on_citus"
                )
                if rows:
                    return rows
                await asyncio.sleep(0.1)
            raise AssertionError("no run succeeded on the Citus coordinator")
        finally:
            stop.set()
            await asyncio.wait_for(worker, timeout=10)

    assert asyncio.run(fire_once())[0] == ("succeeded",)


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
