"""The repository stands alone: its code, SQL, tests, benchmarks and docs refer to its own docs/ pages,
never to a design document or an issue tracker outside it."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
import tempfile
import tomllib
from collections import defaultdict
from pathlib import Path

import pytest

from tests.support.markers import COLLECTED, LONG_FIRST

ROOT = Path(__file__).resolve().parents[2]
#: A design document, its section signs, an issue number, the shared folder outside the repository.
OUTSIDE = re.compile(r"\bDESIGN\b|§|\b[Ii]ssues? #?\d+|\.\./shared\b|/work/shared\b")


def _files() -> list[Path]:
    found = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "pyproject.toml"]
    for folder, patterns in (
        ("agentlab_sched", ("*.py", "*.sql")),
        ("tests", ("*.py",)),
        ("bench", ("*.py", "*.sh", "*.sql")),
        ("docs", ("*.md",)),
        (".ci", ("*",)),
    ):
        for pattern in patterns:
            found.extend(p for p in (ROOT / folder).rglob(pattern) if p.is_file())
    return [p for p in found if p.exists() and p != Path(__file__).resolve()]


def test_no_reference_to_a_document_outside_the_repository() -> None:
    hits = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for path in _files()
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if OUTSIDE.search(line)
    ]
    assert hits == [], "refer to a docs/ page instead:\n" + "\n".join(hits)


def test_ci_runs_the_readme_test_command_the_floor_then_the_linters_and_mypy() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    [command] = [line for line in readme.splitlines() if line.endswith(".venv/bin/pytest -q")]
    # Comments and the `step` lines (how long each step took, in CI's log) aside.
    ci = [line for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
          if not line.startswith(("#", "step "))]  # fmt: skip
    assert command in ci
    after = ci[ci.index(command) + 1 :]
    assert after == [".ci/floor", ".venv/bin/ruff check .", ".venv/bin/ruff format --check .", ".venv/bin/mypy"]


def test_the_floor_run_installs_the_lowest_procrastinate_pyproject_allows() -> None:
    """.ci/floor reads the floor from pyproject.toml, so raising it there is all it takes."""
    floor = (ROOT / ".ci" / "floor").read_text(encoding="utf-8")
    assert '"procrastinate==${floor}"' in floor
    assert ".venv-floor/bin/python -m pytest -q" in floor
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    assert [d for d in deps if d.startswith("procrastinate")] == ["procrastinate>=3.9,<4"]


#: Run in a pytest of its own: every test of the suite with the names of its marks, written to a file.
COLLECT_MARKS = """
import json, sys, pytest
class Marks:
    def pytest_collection_finish(self, session):
        self.found = {item.nodeid: sorted({m.name for m in item.iter_markers()}) for item in session.items}
marks = Marks()
code = pytest.main(["--collect-only", "-q", "-n", "0", "-p", "no:cacheprovider"], plugins=[marks])
open(sys.argv[1], "w").write(json.dumps(marks.found))
sys.exit(code)
"""


def _collected_marks(config: pytest.Config) -> dict[str, list[str]]:
    """The suite's tests and their marks: this session's collection when it was the whole suite (a
    pytest process of pytest-xdist collects all of it), else one collection of its own."""
    every = {path.relative_to(ROOT).as_posix() for path in (ROOT / "tests").rglob("test_*.py")}
    this = config.stash.get(COLLECTED, {})
    if {nodeid.split("::")[0] for nodeid in this} == every:
        return this
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "marks.json"
        subprocess.run([sys.executable, "-c", COLLECT_MARKS, str(out)], cwd=ROOT, capture_output=True, check=True)
        found: dict[str, list[str]] = json.loads(out.read_text(encoding="utf-8"))
    return found


def test_every_start_in_the_long_first_list_names_a_test(pytestconfig: pytest.Config) -> None:
    """tests/support/markers.py deals the longest tests out first: a renamed one would silently fall back
    into the collection's order, and the suite end late."""
    nodes = [nodeid.removeprefix("tests/") for nodeid in _collected_marks(pytestconfig)]
    assert [start for start in LONG_FIRST if not any(node.startswith(start) for node in nodes)] == []


def test_the_floor_run_leaves_out_only_tests_that_never_reach_procrastinate(pytestconfig: pytest.Config) -> None:
    """.ci/floor selects by marker (tests/support/markers.py), with or without the database-only tests (as
    the floor's SQL is or is not the installed release's), and leaves out tests/cluster: under either
    selection, a file none of whose tests it selects must neither import Procrastinate nor start a worker,
    and it must leave something out (or it is the suite)."""
    floor = (ROOT / ".ci" / "floor").read_text(encoding="utf-8")
    assert re.findall(r'set -- tests -m "\$marks" --ignore (\S+)', floor) == ["tests/cluster"]
    expressions = re.findall(r'marks="([^"]+)"', floor)
    assert expressions == ["worker or procrastinate", "db or worker or procrastinate"]

    marked = _collected_marks(pytestconfig)

    def files(marks: str) -> set[str]:
        # pytest's -m reads an expression of names with and, or, not: so does Python.
        return {
            nodeid.split("::")[0]
            for nodeid, names in marked.items()
            if eval(marks, {"__builtins__": {}}, defaultdict(bool, dict.fromkeys(names, True)))
        }

    every = {
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "tests").rglob("test_*.py")
        if not path.is_relative_to(ROOT / "tests" / "cluster")
    }
    # Importing Procrastinate, a worker started, or a "worker" command line (["worker"], "worker", "--x").
    reaching = re.compile(r'^\s*(from|import) procrastinate|run_worker|"worker"\s*(\]|,\s*("--|\*))', re.M)
    for expression in expressions:
        left_out = sorted(every - files(expression))  # one collection: every test file has tests
        assert "tests/core/test_cron.py" in left_out, left_out
        for name in left_out:
            path = ROOT / name
            if path == Path(__file__).resolve():
                continue  # this file names what it looks for
            assert not reaching.search(path.read_text(encoding="utf-8")), (expression, name)


def test_no_test_module_imports_another() -> None:
    """Tests share through fixtures (conftest.py) and tests/support only: a test module that imported
    another would run that one's tests' module code, and tie the two files together."""
    found = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""] if node.level == 0 else ["." * node.level + (node.module or "")]
                names += [f"{node.module}.{a.name}" for a in node.names if node.level == 0 and node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            for name in names:
                parts = name.split(".")
                if (
                    name.startswith(".")
                    or any(p.startswith("test_") or p == "conftest" for p in parts)
                    or (parts[0] == "tests" and parts[1:2] != ["support"])
                ):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {name}")
    assert found == [], "share through a fixture or tests/support instead:\n" + "\n".join(found)


def test_no_import_inside_a_function_dodges_a_cycle() -> None:
    """Modules import each other at the top; a function may import an optional heavy library only, saying
    why on the line. Apart: the command line and the package's ``__getattr__``, which import what a command
    or a name needs when it is used, so that ``agentlab-sched --help`` starts without Procrastinate, psycopg,
    httpx or the web app (held by tests/cli/test_cli_start.py)."""
    found = []
    lazy = {ROOT / "agentlab_sched" / "__init__.py", *(ROOT / "agentlab_sched" / "cli").glob("*.py")}
    for path in sorted(set((ROOT / "agentlab_sched").rglob("*.py")) - lazy):
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        for node in ast.walk(ast.parse(text)):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for inner in ast.walk(node):
                if isinstance(inner, ast.Import | ast.ImportFrom):
                    names = [inner.module or ""] if isinstance(inner, ast.ImportFrom) else [a.name for a in inner.names]
                    ours = any(n == "agentlab_sched" or n.startswith("agentlab_sched.") for n in names)
                    if ours or "#" not in lines[inner.lineno - 1]:
                        found.append(f"{path.relative_to(ROOT)}:{inner.lineno}: {lines[inner.lineno - 1].strip()}")
    assert found == [], "import at the top of the module:\n" + "\n".join(found)
