from __future__ import annotations

import threading
from pathlib import Path

import psycopg
import pytest

from agentlab_sched.database import migrate as migrate_module
from agentlab_sched.database.migrate import migrate
from agentlab_sched.errors import SchedError


def _tables(url: str) -> list[str]:
    with psycopg.connect(url) as conn:
        return [
            r[0]
            for r in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'agentlab_sched' ORDER BY 1"
            ).fetchall()
        ]


def test_migrate_creates_everything_and_twice_changes_nothing(empty_db_url: str) -> None:
    first = migrate(empty_db_url)
    assert first.procrastinate == ["schema.sql"]
    assert first.citus == []  # plain PostgreSQL: the Citus step does not run
    assert first.applied == sorted(p.name for p in migrate_module.MIGRATIONS_DIR.glob("*.sql"))
    assert "schedules" in _tables(empty_db_url) and "fires" in _tables(empty_db_url)
    second = migrate(empty_db_url)
    assert (second.procrastinate, second.applied, second.changed) == ([], [], False)


def test_two_migrates_at_once_are_safe(empty_db_url: str) -> None:
    reports: list[migrate_module.MigrateReport] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            reports.append(migrate(empty_db_url))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    every = sorted(p.name for p in migrate_module.MIGRATIONS_DIR.glob("*.sql"))
    assert sorted(r.applied for r in reports) == [[], every]


def test_a_changed_applied_migration_is_refused(
    empty_db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    migrate(empty_db_url)
    changed = tmp_path / "migrations"
    changed.mkdir()
    original = (migrate_module.MIGRATIONS_DIR / "0001_schema.sql").read_text()
    (changed / "0001_schema.sql").write_text(original + "\n-- edited\n")
    monkeypatch.setattr(migrate_module, "MIGRATIONS_DIR", changed)
    with pytest.raises(SchedError) as err:
        migrate(empty_db_url)
    assert err.value.code == "migrate.changed"
    assert err.value.message("en") == (
        "migration 0001_schema.sql was changed after it was applied; restore it and add a new migration instead"
    )
    assert err.value.message("zh-CN") == "迁移文件 0001_schema.sql 在执行后被改动过;请恢复原样,改动请写成新的迁移文件"


def test_a_new_migration_is_applied_once(empty_db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    migrate(empty_db_url)
    extended = tmp_path / "migrations"
    extended.mkdir()
    for path in migrate_module.MIGRATIONS_DIR.glob("*.sql"):
        (extended / path.name).write_text(path.read_text())
    (extended / "9999_extra.sql").write_text("CREATE TABLE agentlab_sched.extra (id int);")
    monkeypatch.setattr(migrate_module, "MIGRATIONS_DIR", extended)
    assert migrate(empty_db_url).applied == ["9999_extra.sql"]
    assert migrate(empty_db_url).applied == []
    assert "extra" in _tables(empty_db_url)


def test_a_migration_numbered_below_the_latest_applied_is_applied(
    empty_db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Migrations are applied by name, not by the highest number: one that lands after later-numbered
    ones were applied (each range of numbers has its own author) is still applied, in file order."""
    extended = tmp_path / "migrations"
    extended.mkdir()
    for path in migrate_module.MIGRATIONS_DIR.glob("*.sql"):
        (extended / path.name).write_text(path.read_text())
    (extended / "0030_later.sql").write_text("CREATE TABLE agentlab_sched.later_one (id int);")
    monkeypatch.setattr(migrate_module, "MIGRATIONS_DIR", extended)
    assert migrate(empty_db_url).applied[-1] == "0030_later.sql"
    (extended / "0019_between.sql").write_text("CREATE TABLE agentlab_sched.between_ones (id int);")
    assert "0019_between.sql" < max(p.name for p in extended.glob("*.sql"))
    assert migrate(empty_db_url).applied == ["0019_between.sql"]
    assert migrate(empty_db_url).applied == []
    assert {"between_ones", "later_one"} <= set(_tables(empty_db_url))
