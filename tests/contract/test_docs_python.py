"""docs/python.md: every ``python`` block runs, in order, against a fresh database (what the page says is
what the API does)."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import pytest

PAGE = Path(__file__).resolve().parents[2] / "docs" / "python.md"


def blocks() -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", PAGE.read_text(encoding="utf-8"), flags=re.S | re.M)


def test_the_page_has_examples() -> None:
    assert len(blocks()) >= 6


async def test_every_example_of_the_python_page_runs(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTLAB_SCHED_DATABASE_URL", db_url)
    monkeypatch.setenv("AGENTLAB_SCHED_LOCALE", "en")
    namespace: dict[str, Any] = {}
    for number, source in enumerate(blocks(), 1):
        code = compile(source, f"docs/python.md, block {number}", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        result = eval(code, namespace)
        if result is not None:
            await result
    assert namespace["conn"].closed
