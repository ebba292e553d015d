"""Each setting is written once, as a field of agentlab_sched.settings.Settings: from_env() reads it and
docs/settings.md's table is made from it."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import pytest

from agentlab_sched import settings

DOC = Path(__file__).resolve().parents[2] / "docs" / "settings.md"


def test_the_docs_table_is_the_one_the_settings_make() -> None:
    table = settings.markdown_table()
    assert table in DOC.read_text(encoding="utf-8"), (
        "docs/settings.md's table differs from agentlab_sched/settings.py; paste settings.markdown_table():\n" + table
    )


def test_every_field_has_its_variable_and_its_meaning() -> None:
    for f in fields(settings.Settings):
        assert f.metadata["env"].startswith("AGENTLAB_SCHED_") and f.metadata["meaning"], f.name


def test_from_env_reads_each_variable_and_defaults_when_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    for f in fields(settings.Settings):
        monkeypatch.delenv(f.metadata["env"], raising=False)
    defaults = settings.Settings.from_env()
    assert defaults == settings.Settings()
    monkeypatch.setenv("AGENTLAB_SCHED_SECRET_KEY", " k1, k2 ,")
    monkeypatch.setenv("AGENTLAB_SCHED_SCHEDULER", "0")
    monkeypatch.setenv("AGENTLAB_SCHED_BATCH_SIZE", "250")
    monkeypatch.setenv("AGENTLAB_SCHED_CRON_SCHEMA", "off")
    monkeypatch.setenv("AGENTLAB_SCHED_LOCALE", "zh_CN")
    monkeypatch.setenv("AGENTLAB_SCHED_SCHEDULER_QUEUE", "  ")
    read = settings.Settings.from_env()
    assert (read.secret_keys, read.scheduler, read.batch_size, read.cron_schema, read.locale) == (
        ("k1", "k2"),
        False,
        250,
        None,
        "zh-CN",
    )
    assert read.scheduler_queue == "default"
    assert "k1" not in repr(read)  # keys never in a repr
