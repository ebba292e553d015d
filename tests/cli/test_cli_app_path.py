"""`--app myproject.app` from the directory that holds myproject: a module path is resolved to the module's
one procrastinate.App (whatever its name), and a module without one gets a hint (did you mean ...?)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import procrastinate
import pytest

from agentlab_sched.cli.common import load_app
from agentlab_sched.errors import ValidationError

APP = "import procrastinate\n{name} = procrastinate.App(connector=procrastinate.testing.InMemoryConnector())\n"


def project(root: Path, package: str, body: str) -> None:
    (root / package).mkdir()
    (root / package / "__init__.py").write_text("")
    (root / package / "app.py").write_text(body)


@pytest.fixture(autouse=True)
def _clean_modules() -> Iterator[None]:
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        if name.startswith("proj_"):
            del sys.modules[name]


def test_a_module_path_is_its_single_app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project(tmp_path, "proj_one", APP.format(name="application"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    found = load_app("proj_one.app", "postgresql:///unused")
    assert isinstance(found, procrastinate.App)
    assert found is sys.modules["proj_one.app"].application


def test_a_module_without_an_app_says_what_was_meant(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project(tmp_path, "proj_none", "x = 1\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValidationError) as refused:
        load_app("proj_none.app", "postgresql:///unused")
    assert refused.value.message("en") == (
        "--app proj_none.app: this module holds no procrastinate.App (did you mean proj_none.app.app?)"
    )
    assert refused.value.message("zh-CN") == (
        "--app proj_none.app:这个模块里没有 procrastinate.App(是不是想用 proj_none.app.app?)"
    )
