"""`migrate --plan` and `--max-hold`: what migrate would do to a database, how long partitioning its history
would hold firing, and a migrate that refuses (changing nothing) when that is longer than allowed, so the
upgrade can run at a quiet hour instead."""

from __future__ import annotations

import datetime

import psycopg
import pytest
from typer.testing import CliRunner

from agentlab_sched.cli import app
from agentlab_sched.database import migrate as migrate_module
from agentlab_sched.errors import Conflict, ValidationError
from bench.history_upgrade import PARTITIONING, _load, migrate_before_partitioning

ENV = {"AGENTLAB_SCHED_LOCALE": None, "AGENTLAB_SCHED_DATABASE_URL": None}
NOW = datetime.datetime(2026, 11, 2, 8, 0, tzinfo=datetime.UTC)


def _kind(url: str, table: str) -> str:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT relkind::text FROM pg_class WHERE oid = %s::regclass", (table,)).fetchone()
    assert row is not None
    return str(row[0])


def _applied(url: str) -> set[str]:
    with psycopg.connect(url) as conn:
        return {r[0] for r in conn.execute("SELECT name FROM agentlab_sched.schema_migrations")}


def test_the_plan_of_a_new_and_of_an_up_to_date_database(empty_db_url: str) -> None:
    fresh = migrate_module.plan(empty_db_url)
    assert fresh.pending[0].startswith("procrastinate/")
    assert PARTITIONING in fresh.pending and fresh.pending[-1] == "sql/"
    assert (fresh.history_rows, fresh.hold_seconds) == ({}, 0.0)

    migrate_module.migrate(empty_db_url, cron_schema=None, max_hold=0)  # nothing to partition: no hold
    done = migrate_module.plan(empty_db_url)
    assert (done.pending, done.history_rows) == ([], {})
    result = CliRunner(env=ENV).invoke(app, ["--database-url", empty_db_url, "migrate", "--plan"])
    assert (result.exit_code, result.stdout) == (0, "the database is up to date\n")


def test_a_database_with_history_is_told_how_long_firing_waits_and_max_hold_refuses_it(empty_db_url: str) -> None:
    migrate_before_partitioning(empty_db_url)
    # 3,000 fires and as many finished runs of 3 schedules, written as their owner (no audit rows)
    _load(empty_db_url, 3, 3000, NOW)

    plan = migrate_module.plan(empty_db_url)
    assert plan.pending == [PARTITIONING]
    assert plan.history_rows == {"deliveries": 0, "fires": 3000, "outbox": 0, "runs": 3000, "schedule_changes": 0}
    assert plan.hold_seconds == pytest.approx(6000 / 1_000_000 * 0.5)

    runner = CliRunner(env=ENV)
    said = runner.invoke(app, ["--database-url", empty_db_url, "migrate", "--plan"])
    assert said.exit_code == 0
    assert said.stdout.splitlines() == [
        f"migrate would apply: {PARTITIONING}",
        "partitioning the history (6000 rows: deliveries 0, fires 3000, outbox 0, runs 3000, schedule_changes 0)"
        " holds firing for about 0.1 s while migrate runs (about 0.5 s a million rows). To run it later, keep"
        " this database on the version it runs until a quiet hour, then run agentlab-sched migrate; --max-hold"
        " SECONDS makes migrate refuse, changing nothing, when firing would wait longer",
    ]
    zh = runner.invoke(app, ["--database-url", empty_db_url, "--locale", "zh-CN", "migrate", "--plan"])
    assert zh.stdout.splitlines()[0] == f"migrate 将执行:{PARTITIONING}"
    assert "会在 migrate 运行期间让触发暂停约 0.1 秒" in zh.stdout
    assert _kind(empty_db_url, "agentlab_sched.fires") == "r"  # --plan changed nothing

    with pytest.raises(Conflict) as refused:
        migrate_module.migrate(empty_db_url, cron_schema=None, max_hold=0.001)
    assert (refused.value.code, refused.value.field) == ("migrate.hold_too_long", "max_hold")
    assert refused.value.params == {"rows": 6000, "seconds": "0.1", "max_hold": "0.001"}
    cli = runner.invoke(app, ["--database-url", empty_db_url, "migrate", "--max-hold", "0"])
    assert cli.exit_code != 0 and cli.stdout == ""
    assert "migrate did not change the database: partitioning its history (6000 rows) would hold firing for" in (
        " ".join(cli.stderr.split())
    )
    assert "longer than --max-hold 0 s; run migrate at a quiet hour" in " ".join(cli.stderr.split())
    assert "Traceback" not in cli.stderr
    assert _kind(empty_db_url, "agentlab_sched.fires") == "r" and PARTITIONING not in _applied(empty_db_url)

    with pytest.raises(ValidationError) as bad:
        migrate_module.migrate(empty_db_url, cron_schema=None, max_hold=-1)
    assert (bad.value.code, bad.value.field, str(bad.value)) == (
        "migrate.max_hold", "max_hold", "max_hold: -1 is not a number of seconds of at least 0")  # fmt: skip

    done = runner.invoke(app, ["--database-url", empty_db_url, "migrate", "--max-hold", "1"])
    assert (done.exit_code, done.stdout) == (0, f"migrated: {PARTITIONING}\n")
    assert "holds firing for about 0.1 s" in " ".join(done.stderr.split())  # said before it ran
    assert _kind(empty_db_url, "agentlab_sched.fires") == "p" and PARTITIONING in _applied(empty_db_url)
    assert migrate_module.plan(empty_db_url).history_rows == {}


def test_a_large_table_is_estimated_from_its_pages_not_counted(empty_db_url: str) -> None:
    migrate_before_partitioning(empty_db_url)
    _load(empty_db_url, 5, 120_000, NOW)
    with psycopg.connect(empty_db_url) as conn:
        size = conn.execute("SELECT pg_relation_size('agentlab_sched.fires')").fetchone()
        assert size is not None and size[0] > 8 * 1024 * 1024  # past the size counted exactly
        # Rows added after the last ANALYZE count too: the estimate scales by the pages the table has now.
        conn.execute("SET session_replication_role = replica")
        conn.execute(
            """INSERT INTO agentlab_sched.fires (schedule_id, fire_at, kind, status, created_at)
               SELECT s.id, %s::timestamptz - g * interval '1 day', 'scheduled', 'skipped_overlap', now()
               FROM generate_series(1, 60000) g, (SELECT min(id) AS id FROM agentlab_sched.schedules) s""",
            (NOW,),
        )
    rows = migrate_module.plan(empty_db_url).history_rows
    assert rows["fires"] == pytest.approx(180_000, rel=0.1)
    assert rows["runs"] == pytest.approx(120_000, rel=0.1)
