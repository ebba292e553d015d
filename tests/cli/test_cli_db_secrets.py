"""`db psql` and `db url` never show a password: psql gets it through its environment (its command line is
readable by any local user), and `db url` leaves it out of every form libpq reads."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agentlab_sched.cli import app
from agentlab_sched.cli.database import without_password
from tests.support.cli import ENV


def test_db_psql_passes_the_password_in_the_environment_not_argv(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = tmp_path / "psql"
    fake.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {tmp_path}/argv\nprintf "%s" "$PGPASSWORD" > {tmp_path}/pw\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("PGPASSWORD", raising=False)
    url = "postgresql://app:s3cr%23t@db.internal:5432/sched?sslmode=require"
    result = CliRunner(env=ENV).invoke(app, ["--database-url", url, "db", "psql", "-c", "SELECT 1"])
    assert result.exit_code == 0, result.output
    argv = (tmp_path / "argv").read_text().splitlines()
    assert argv == ["user=app dbname=sched host=db.internal port=5432 sslmode=require", "-c", "SELECT 1"]
    assert (tmp_path / "pw").read_text() == "s3cr#t"


@pytest.mark.parametrize(
    ("given", "shown"),
    [
        ("postgresql://app:s3#cret@db:5432/x", "postgresql://app@db:5432/x"),
        ("postgresql://app:s3?cret@db/x", "postgresql://app@db/x"),
        ("postgres://app:pw@db/x?password=other&sslmode=require", "postgres://app@db/x?sslmode=require"),
        ("postgresql://db/x?sslmode=require&password=s3cret", "postgresql://db/x?sslmode=require"),
        ("host=db password = s3cret user=app", "host=db user=app"),
        ("host=db password='s3 cr\\'et' user=app", "host=db user=app"),
    ],
)
def test_db_url_leaves_every_form_of_the_password_out(given: str, shown: str) -> None:
    assert without_password(given) == shown
    assert "s3" not in without_password(given) and "other" not in without_password(given)
