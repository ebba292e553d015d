"""`schedules sync --app` on code whose declaration has a bad value: one line naming the field and the
value, in the reader's language, exit 2 (never a Python exception's type and repr)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from tests.support.cli import refused

APP = """
import procrastinate
import agentlab_sched

app = procrastinate.App(connector=procrastinate.testing.InMemoryConnector())


@agentlab_sched.schedule("0 9 * * *", dst_gap="later")
@app.task(name="reports.daily")
def daily() -> None:
    pass
"""


@pytest.mark.parametrize(
    ("locale", "words"),
    [
        ("en", 'dst_gap: "later" is not allowed; choose one of shift, skip'),
        ("zh-CN", "「夏令时跳过的时刻」的取值「later」无效;可选:shift、skip"),
    ],
)
def test_a_bad_dst_policy_is_one_named_line(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, locale: str, words: str
) -> None:
    module = f"bad_dst_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{module}.py").write_text("import procrastinate.testing\n" + APP)
    monkeypatch.syspath_prepend(str(tmp_path))
    said = refused(db_url, "schedules", "sync", "--app", f"{module}.app", env={"AGENTLAB_SCHED_LOCALE": locale})
    assert len(said.splitlines()) == 1, said
    assert said.startswith(f"--app {module}.app"), said
    assert said.endswith(words), said
    assert "ValueError" not in said and "ValidationError" not in said and "'" not in said
