"""`import pg-cron` on-ramps that do what they say: --run-as and --statement-timeout refused once at the
start, a superuser job's refusal naming --run-as, a dry run that says "would import", jobs of another
server refused unless mapped to a database of this one, the exact cron.unschedule() to run there, and the
tables in the reader's language. Against a real pg_cron (Debian's postgresql-15-cron), skipped without."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import conninfo, sql
from typer.testing import CliRunner, Result

from agentlab_sched.cli import app
from agentlab_sched.database.migrate import migrate
from tests.support.cli import is_database_line
from tests.support.rows import fetched

ENV = {"AGENTLAB_SCHED_LOCALE": None, "AGENTLAB_SCHED_DATABASE_URL": None, "AGENTLAB_SCHED_SECRET_KEY": None}


def cli(url: str, *args: str, locale: str = "en") -> Result:
    result = CliRunner(env={**ENV, "AGENTLAB_SCHED_LOCALE": locale}).invoke(app, ["--database-url", url, *args])
    assert "Traceback" not in result.output, result.output
    return result


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["--run-as", "postgres"], "--run-as: postgres is a superuser or the owner of schema agentlab_sched, and a "
                                   "sql schedule may run as neither; give a role of its own (docs/security.md)"),
        (["--run-as", "nobody_here"], "--run-as: there is no role nobody_here"),
        (["--statement-timeout", "0"], "--statement-timeout: 0:00:00 is not longer than zero; give how long a "
                                       "command may run (such as 1h)"),
    ],
)  # fmt: skip
def test_run_as_and_statement_timeout_are_refused_once_at_the_start(db_url: str, args: list[str], line: str) -> None:
    with psycopg.connect(db_url) as conn:
        row = conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = 'postgres'").fetchone()
    if not row or not row[0]:
        pytest.skip("the test server has no superuser named postgres")
    result = cli(db_url, "import", "pg-cron", *args)
    assert result.exit_code == 2, result.output
    assert [x for x in result.stderr.splitlines() if not is_database_line(x)] == [line]


def _pg_cron_missing() -> str | None:
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
def pg_cron_url() -> Iterator[str]:
    """Database postgres of a PostgreSQL 15 with pg_cron loaded, with two jobs: one as the superuser
    postgres, one in database app as role maintenance."""
    missing = _pg_cron_missing()
    if missing:
        pytest.skip(f"no real pg_cron here: {missing}")
    from bench.common import _pg15

    try:
        with _pg15() as (admin, why_not):
            if why_not:
                pytest.skip(f"no real pg_cron here: {why_not}")
            with psycopg.connect(admin, autocommit=True) as c:
                c.execute("CREATE ROLE maintenance LOGIN")
                c.execute("CREATE DATABASE app")
                c.execute("SELECT cron.schedule('nightly-vacuum', '0 3 * * *', 'VACUUM')")
                c.execute(
                    "SELECT cron.schedule_in_database('purge-app', '30 4 * * *', 'SELECT 1', 'app', 'maintenance')"
                )
            yield admin
    except SystemExit as exc:
        pytest.skip(f"cannot start PostgreSQL 15 here: {exc}")


def jobids(url: str) -> dict[str, int]:
    with psycopg.connect(url) as c:
        return {name: jobid for jobid, name in c.execute("SELECT jobid, jobname FROM cron.job")}


def test_a_superuser_job_names_run_as_and_a_dry_run_says_would(pg_cron_url: str) -> None:
    migrate(pg_cron_url)
    ids = jobids(pg_cron_url)
    dry = cli(pg_cron_url, "import", "pg-cron", "--dry-run")
    assert dry.exit_code == 0, dry.output
    [purge] = [line for line in dry.stdout.splitlines() if line.startswith(str(ids["purge-app"]))]
    assert purge.split()[-3:] == ["would", "import,", "paused"]
    assert "imported, paused" not in dry.stdout
    assert (
        f"pg_cron job {ids['nightly-vacuum']} (nightly-vacuum) not imported: username: postgres may not schedule "
        "SQL to run as postgres"
    ) in dry.stdout
    assert "; import it to run as another role with --run-as ROLE" in dry.stdout
    zh = cli(pg_cron_url, "import", "pg-cron", "--dry-run", locale="zh-CN")
    header = zh.stdout.splitlines()[1]
    assert header.split() == ["pg_cron", "任务编号", "定时任务", "cron", "表达式", "数据库", "执行角色", "状态"]
    assert "将导入,暂停" in zh.stdout


def test_jobs_of_another_server_are_refused_unless_mapped(pg_cron_url: str, db_url: str) -> None:
    ids = jobids(pg_cron_url)
    here = str(conninfo.conninfo_to_dict(db_url)["dbname"])
    result = cli(db_url, "import", "pg-cron", "--from", pg_cron_url, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["imported"] == []
    assert {(r["jobid"], r["code"]) for r in report["refused"]} == {
        (ids["purge-app"], "import.other_server"),
        (ids["nightly-vacuum"], "import.other_server"),
    }
    [purge] = [r for r in report["refused"] if r["jobid"] == ids["purge-app"]]
    assert purge["reason"] == (
        "it runs in database app of the server pg_cron is on, not of this one; give --map-database app=NAME to run "
        "it in this server's database NAME"
    )
    runner = f"maint_{os.getpid()}"  # roles belong to the server: one of this test's own, dropped after
    with psycopg.connect(db_url, autocommit=True) as c:
        c.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(runner)))
    try:
        mapped = cli(db_url, "import", "pg-cron", "--from", pg_cron_url, "--map-database", f"app={here}", "--enable",
                     "--run-as", runner)  # fmt: skip
        assert mapped.exit_code == 0, mapped.output
        check_mapped(db_url, here, mapped.stdout, ids)
    finally:
        with psycopg.connect(db_url, autocommit=True) as c:
            c.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(runner)))
            c.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(runner)))
    bad = cli(db_url, "import", "pg-cron", "--from", pg_cron_url, "--map-database", "app")
    assert bad.exit_code == 2 and '--map-database: "app" is not SOURCE=TARGET' in bad.stderr


def check_mapped(db_url: str, here: str, stdout: str, ids: dict[str, int]) -> None:
    with psycopg.connect(db_url) as c:
        [(database,)] = c.execute(
            "SELECT inputs->>'database' FROM agentlab_sched.schedules WHERE name = 'purge-app'"
        ).fetchall()
    assert database == here
    lines = stdout.splitlines()
    assert lines[-1] == f"SELECT cron.unschedule({ids['purge-app']});"
    assert lines[-2] == (
        "pg_cron still runs these jobs in database postgres, so both schedulers run them: run this in pg_cron's "
        "database to stop pg_cron's copies:"
    )
    assert "--enable --unschedule" not in stdout


def test_doctor_warns_while_a_pg_cron_job_and_its_enabled_schedule_both_run(pg_cron_url: str) -> None:
    migrate(pg_cron_url)
    ids = jobids(pg_cron_url)
    with psycopg.connect(pg_cron_url, autocommit=True) as c:
        c.execute("CREATE ROLE doubled LOGIN") if not c.execute(
            "SELECT 1 FROM pg_roles WHERE rolname = 'doubled'").fetchone() else None  # fmt: skip
        c.execute("SELECT cron.schedule_in_database('twice', '0 7 * * *', 'SELECT 7', 'postgres', 'doubled')")
    twice = jobids(pg_cron_url)["twice"]
    try:
        result = cli(pg_cron_url, "import", "pg-cron", "--enable")
        assert result.exit_code == 0, result.output
        report = json.loads(cli(pg_cron_url, "doctor", "--json").stdout)
        doubles = [f for f in report["findings"] if f["code"] == "doctor.pg_cron_double"]

        def line(jobid: int, name: str) -> str:
            return (f"runs twice: pg_cron job {jobid} is still active and so is schedule {name} imported from it; "
                    f"run SELECT cron.unschedule({jobid}); (or pause the schedule)")  # fmt: skip

        assert [(f["level"], f["message"]) for f in doubles] == [
            ("warning", line(ids["purge-app"], "purge-app")),
            ("warning", line(twice, "twice")),
        ]
        with psycopg.connect(pg_cron_url, autocommit=True) as c:
            c.execute("SELECT cron.unschedule(%s), cron.unschedule(%s)", (twice, ids["purge-app"]))
        report = json.loads(cli(pg_cron_url, "doctor", "--json").stdout)
        assert [f for f in report["findings"] if f["code"] == "doctor.pg_cron_double"] == []
    finally:
        # The module's jobs as the fixture made them, for the tests that run after this one in any order:
        # nothing imported, purge-app scheduled again (under a new job id), twice gone.
        with psycopg.connect(pg_cron_url, autocommit=True) as c:
            c.execute("DELETE FROM agentlab_sched.schedules")
            c.execute("SELECT cron.unschedule(jobid) FROM cron.job WHERE jobname IN ('twice', 'purge-app')")
            c.execute("SELECT cron.schedule_in_database('purge-app', '30 4 * * *', 'SELECT 1', 'app', 'maintenance')")


def test_from_env_keeps_the_url_out_of_argv_and_braces_in_a_command_stay_text(pg_cron_url: str) -> None:
    migrate(pg_cron_url)
    command = "INSERT INTO notes VALUES ('{{ schedule.name }}', $x${{x}}$x$) -- {{ schedule.date }}"
    with psycopg.connect(pg_cron_url, autocommit=True) as c:
        jobid = fetched(
            c.execute(
                "SELECT cron.schedule_in_database('braces', '0 5 * * *', %s, 'postgres', 'maintenance')", (command,)
            ).fetchone()
        )[0]
    try:
        runner = CliRunner(env={**ENV, "AGENTLAB_SCHED_LOCALE": "en", "PG_CRON_SOURCE": pg_cron_url})
        result = runner.invoke(app, ["--database-url", pg_cron_url, "import", "pg-cron", "--from-env",
                                     "PG_CRON_SOURCE", "--json"])  # fmt: skip
        assert result.exit_code == 0, result.output
        assert "braces" in [i["name"] for i in json.loads(result.stdout)["imported"]]
        with psycopg.connect(pg_cron_url) as c:
            rendered = fetched(
                c.execute(
                    "SELECT agentlab_sched.render_task_inputs(task, inputs, now(), timezone, name, 'scheduled')"
                    " ->> 'command' FROM agentlab_sched.schedules WHERE name = 'braces'"
                ).fetchone()
            )[0]
        assert rendered == command
    finally:
        with psycopg.connect(pg_cron_url, autocommit=True) as c:
            c.execute("SELECT cron.unschedule(%s)", (jobid,))
            c.execute("SELECT agentlab_sched.unschedule('braces')")


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["--from", "postgresql://u:s%E9cret@h/db"],
         '--from: "postgresql://u:***@h/db" is not a PostgreSQL URL or connection string (such as '
         "postgresql://user@host/db)"),
        (["--from-env", "NO_SUCH_VARIABLE_HERE"],
         "--from-env: the environment variable NO_SUCH_VARIABLE_HERE is not set or empty; put the URL of pg_cron's "
         "database in it"),
        (["--from", "postgresql://h/db", "--from-env", "HOME"],
         "--from and --from-env: give one of them (--from-env keeps a password out of the command line)"),
    ],
)  # fmt: skip
def test_a_bad_source_is_refused_naming_the_option_and_never_its_password(
    db_url: str, args: list[str], line: str
) -> None:
    result = cli(db_url, "import", "pg-cron", *args)
    assert result.exit_code == 2, result.output
    assert [x for x in result.stderr.splitlines() if not x.startswith("database:")] == [line]
    assert "s%E9cret" not in result.output and "\\xe9" not in result.output
