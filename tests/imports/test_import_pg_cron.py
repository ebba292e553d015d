"""`agentlab-sched import pg-cron` against a real pg_cron: Debian's postgresql-15-cron on the system
PostgreSQL 15, started here in a temporary directory (as a non-root user when we are root), with
shared_preload_libraries = pg_cron. Skipped, saying why, where those are not installed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import conninfo, sql
from psycopg.rows import dict_row
from typer.testing import CliRunner, Result

from agentlab_sched.cli import app
from agentlab_sched.database.migrate import migrate
from agentlab_sched.tasks.sql import SQL_TASK


def _missing() -> str | None:
    try:
        from bench.common import PG15_BIN, PG_CRON_LIB
    except ImportError:
        return "the repository's bench package is not importable"
    if not (PG15_BIN / "postgres").exists():
        return f"PostgreSQL 15 is not installed in {PG15_BIN} (apt-get install postgresql-15)"
    if not PG_CRON_LIB.exists():
        return f"pg_cron is not installed ({PG_CRON_LIB} is missing: apt-get install postgresql-15-cron)"
    return None


@pytest.fixture(scope="module")
def pg_cron_server() -> Iterator[str]:
    """The admin URL (database postgres, where pg_cron is) of a PostgreSQL 15 with pg_cron loaded."""
    missing = _missing()
    if missing:
        pytest.skip(f"no real pg_cron here: {missing}")
    from bench.common import _pg15

    try:
        with _pg15() as (admin, why_not):
            if why_not:
                pytest.skip(f"no real pg_cron here: {why_not}")
            yield admin
    except SystemExit as exc:  # no user to run PostgreSQL as
        pytest.skip(f"cannot start PostgreSQL 15 here: {exc}")


def cli(url: str, *args: str) -> Result:
    return CliRunner(env={"AGENTLAB_SCHED_LOCALE": "en"}).invoke(app, ["--database-url", url, *args])


def ok(url: str, *args: str) -> Result:
    result = cli(url, *args)
    assert result.exit_code == 0, result.output
    return result


def rows(url: str, query: str, *params: Any) -> list[dict[str, Any]]:
    with psycopg.connect(url, autocommit=True, row_factory=dict_row) as c:
        return c.execute(query, params).fetchall()


def execute(url: str, *statements: str) -> None:
    with psycopg.connect(url, autocommit=True) as c:
        for statement in statements:
            c.execute(statement)


@pytest.fixture(scope="module")
def jobs(pg_cron_server: str) -> dict[str, int]:
    """pg_cron jobs of every kind the import meets, and a schedule that takes one's name."""
    admin = pg_cron_server
    execute(admin, "CREATE ROLE maintenance LOGIN", "CREATE DATABASE app")  # pg_cron wants LOGIN
    execute(conninfo.make_conninfo(admin, dbname="app"), "GRANT CREATE ON SCHEMA public TO maintenance")
    report = migrate(admin)
    assert (report.cron_schema, report.cron_blocker) == ("cron", "extension pg_cron")  # pg_cron's own schema
    made: dict[str, int] = {}
    with psycopg.connect(admin, autocommit=True) as c:

        def one(query: str, *params: Any) -> int:
            row = c.execute(query, params).fetchone()
            assert row is not None
            return int(row[0])

        made["vacuum"] = one("SELECT cron.schedule('nightly-vacuum', '0 3 * * *', 'VACUUM')")  # as postgres
        made["purge"] = one(
            "SELECT cron.schedule_in_database('purge-app', '30 4 * * *', 'DELETE FROM events', 'app', 'maintenance')"
        )
        made["boot"] = one("SELECT cron.schedule('boot', '@reboot', 'SELECT 1')")
        made["monthly"] = one(
            "SELECT cron.schedule_in_database('monthly', '0 0 1 * *', 'SELECT 2', 'postgres', 'maintenance')"
        )
        c.execute("SELECT cron.alter_job(%s, active => false)", (made["monthly"],))
        made["unnamed"] = one("SELECT cron.schedule_in_database('x', '15 10 * * 1-5', 'ANALYZE', 'app', 'maintenance')")
        c.execute("UPDATE cron.job SET jobname = NULL WHERE jobid = %s", (made["unnamed"],))
        made["taken"] = one("SELECT cron.schedule_in_database('taken', '0 5 * * *', 'SELECT 3', 'app', 'maintenance')")
        made["remote"] = one(
            "SELECT cron.schedule_in_database('remote', '0 6 * * *', 'SELECT 4', 'app', 'maintenance')"
        )
        c.execute("UPDATE cron.job SET nodename = 'db2.internal' WHERE jobid = %s", (made["remote"],))
        c.execute("SELECT agentlab_sched.schedule('taken', '0 9 * * *', 'demo.echo')")
    return made


def schedules(url: str) -> dict[str, dict[str, Any]]:
    found = rows(
        url,
        "SELECT name, cron, timezone, task, inputs, enabled, overlap, imported_from,"
        " agentlab_sched.paused_reason_text(paused_reason, paused_reason_code, paused_reason_params) AS paused_reason"
        " FROM agentlab_sched.schedules WHERE imported_from IS NOT NULL",
    )
    return {r["name"]: r for r in found}


def test_import_pg_cron_paused_then_enabled_and_unscheduled_at_once(pg_cron_server: str, jobs: dict[str, int]) -> None:
    url = pg_cron_server
    # a dry run writes nothing
    dry = ok(url, "import", "pg-cron", "--dry-run").stdout
    assert "dry run: nothing was written" in dry and schedules(url) == {}
    zoned = json.loads(ok(url, "import", "pg-cron", "--dry-run", "--timezone", "Asia/Shanghai", "--json").stdout)
    assert (zoned["timezone"], zoned["dry_run"], schedules(url)) == ("Asia/Shanghai", True, {})
    bad_zone = cli(url, "import", "pg-cron", "--timezone", "PST")
    assert (
        bad_zone.exit_code == 2
        and "timezone: PST (from --timezone, or pg_cron's cron.timezone) is not a time zone" in bad_zone.stderr
    )

    result = ok(url, "import", "pg-cron").stdout
    made = schedules(url)
    assert set(made) == {"purge-app", "monthly", f"pg_cron-{jobs['unnamed']}"}
    purge = made["purge-app"]
    assert (purge["task"], purge["cron"], purge["timezone"], purge["enabled"], purge["overlap"]) == (
        SQL_TASK,
        "30 4 * * *",
        "UTC",  # pg_cron 1.4 has no cron.timezone: it reads schedules in GMT
        False,
        "buffer_one",
    )
    assert purge["inputs"] == {
        "command": "DELETE FROM events",
        "database": "app",
        "username": "maintenance",
        "statement_timeout": "1 day",
    }
    assert purge["imported_from"] == f"pg_cron job {jobs['purge']} in database postgres"
    assert purge["paused_reason"] == (
        f"imported from pg_cron job {jobs['purge']}; resume it (or import again with --enable) once pg_cron no"
        " longer runs the job"
    )
    # what could not be translated, and why
    assert (
        f"pg_cron job {jobs['vacuum']} (nightly-vacuum) not imported: username: postgres may not schedule SQL to"
        " run as postgres" in result
    )
    assert f"pg_cron job {jobs['boot']} (boot) not imported: cron: unknown macro @reboot" in result
    assert (
        f"pg_cron job {jobs['taken']} (taken) not imported: a schedule named taken exists and was not imported"
        " from this job" in result
    )
    assert f"pg_cron job {jobs['remote']} (remote) not imported: it runs on another host (db2.internal:5432)" in result
    assert (
        "(or, in pg_cron's database: SELECT cron.unschedule(" in result
        and f"cron.unschedule({jobs['purge']})" in result
    )
    # again: nothing new, nothing twice
    again = json.loads(ok(url, "import", "pg-cron", "--json").stdout)
    assert sorted((i["name"], i["outcome"]) for i in again["imported"]) == sorted((name, "already") for name in made)
    # jobs that run as a superuser: as another role
    with_role = json.loads(ok(url, "import", "pg-cron", "--run-as", "maintenance", "--json").stdout)
    assert [i["name"] for i in with_role["imported"] if i["outcome"] == "created"] == ["nightly-vacuum"]
    # --unschedule without --enable, or a dry run of both, changes nothing
    refused = cli(url, "import", "pg-cron", "--unschedule")
    assert refused.exit_code == 2 and "--unschedule removes pg_cron's jobs, so it needs --enable" in refused.stderr
    ok(url, "import", "pg-cron", "--enable", "--unschedule", "--dry-run")
    assert len(rows(url, "SELECT jobid FROM cron.job")) == len(jobs)
    assert not any(s["enabled"] for s in schedules(url).values())

    done = json.loads(ok(url, "import", "pg-cron", "--enable", "--unschedule", "--json").stdout)
    outcome = {i["name"]: (i["enabled"], i["unscheduled"]) for i in done["imported"]}
    assert outcome == {
        "purge-app": (True, True),
        "nightly-vacuum": (True, True),
        f"pg_cron-{jobs['unnamed']}": (True, True),
        "monthly": (False, False),  # inactive in pg_cron: stays paused, and stays there
    }
    left = {r["jobid"] for r in rows(url, "SELECT jobid FROM cron.job")}
    assert left == {jobs["boot"], jobs["monthly"], jobs["taken"], jobs["remote"]}
    enabled = {n: s["enabled"] for n, s in schedules(url).items()}
    assert enabled == {"purge-app": True, "nightly-vacuum": True, f"pg_cron-{jobs['unnamed']}": True, "monthly": False}
    assert (
        schedules(url)["monthly"]["paused_reason"]
        == f"imported from pg_cron job {jobs['monthly']}, which is inactive there"
    )


def test_import_from_another_database(pg_cron_server: str, jobs: dict[str, int]) -> None:
    other = conninfo.make_conninfo(pg_cron_server, dbname="sched")
    execute(pg_cron_server, "DROP DATABASE IF EXISTS sched", "CREATE DATABASE sched")
    report = migrate(other)
    assert report.cron_blocker is None  # no pg_cron here: the compatibility views are made
    assert rows(other, "SELECT count(*) AS n FROM cron.job") == [{"n": 0}]
    refused = cli(other, "import", "pg-cron")
    assert refused.exit_code == 2 and "pg_cron is not installed in this database" in refused.stderr
    result = json.loads(ok(other, "import", "pg-cron", "--from", pg_cron_server, "--json").stdout)
    assert result["source_database"] == "postgres"
    names = {i["name"] for i in result["imported"]}
    assert "monthly" in names and "taken" in names  # no schedule named taken in this database
    [taken] = rows(other, "SELECT imported_from, cron FROM cron.job c JOIN agentlab_sched.schedules s"
                          " ON s.name = c.jobname WHERE c.jobname = 'taken'")  # fmt: skip
    assert taken == {"imported_from": f"pg_cron job {jobs['taken']} in database postgres", "cron": "0 5 * * *"}
    across = cli(other, "import", "pg-cron", "--from", pg_cron_server, "--enable", "--unschedule")
    assert across.exit_code == 2 and "--unschedule works only with pg_cron in this database" in across.stderr
    with psycopg.connect(pg_cron_server, autocommit=True) as c:
        c.execute(sql.SQL("DROP DATABASE sched WITH (FORCE)"))
