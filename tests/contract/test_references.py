"""What the docs, comments and SQL name exists: every ``agentlab_sched/...`` path, every Python name
``agentlab_sched.x.y`` and every ``module.function`` of the package.

Read from README.md, CONTRIBUTING.md and docs/*.md (all of the text), and from the comments and docstrings
of the package's, the tests' and the benchmarks' Python and the comments of the SQL, so a move or a rename
that leaves a stale name behind fails here, naming the file, the line and the name.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import io
import re
import tokenize
import types
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "agentlab_sched"
SQL_DIRS = (PACKAGE / "database" / "sql", PACKAGE / "database" / "migrations", PACKAGE / "database" / "queries")

#: A path of the repository: agentlab_sched/..., tests/..., bench/..., docs/... (a file or a folder).
PATH = re.compile(r"(?<![\w/.-])((?:agentlab_sched|tests|bench|docs)/[\w./-]*[\w/])")
#: A path inside the package written without its root: worker/batch.py, database/sql/40_claim.sql.
SHORT_PATH = re.compile(r"(?<![\w/.-])((?:[a-z_]+/)+[\w-]+\.(?:py|sql))\b")
#: A dotted Python name of the package: agentlab_sched.worker.batch.BatchWorker.
DOTTED = re.compile(r"(?<![\w.])agentlab_sched(?:\.[A-Za-z_]\w*)+")
#: module.attribute, where module is a module of the package by its last name (tick.fire_due).
MODULE_ATTR = re.compile(r"(?<![\w./])([a-z_][a-z0-9_]*)\.([A-Za-z_]\w*)\b(?!\.\w)")
#: folder/module.attribute, a module of the package by its path (firing/tick.fire_due, core/planner.plan).
FOLDER_ATTR = re.compile(r"(?<![\w/.-])((?:[a-z_]+/)+)([a-z_][a-z0-9_]*)\.([A-Za-z_]\w*)\b(?!\.\w)")


@cache
def _modules() -> dict[str, list[str]]:
    """Last name -> dotted names of the package's modules with it (``tick`` -> ``agentlab_sched.firing.tick``)."""
    found: dict[str, list[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found.setdefault(parts[-1], []).append(".".join(parts))
    return found


@cache
def _sql_objects() -> frozenset[str]:
    """Names of the SQL schema's objects (tables, views, functions, types), which share the package's name."""
    text = "\n".join(p.read_text(encoding="utf-8") for d in SQL_DIRS for p in d.glob("*.sql"))
    text += "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "tests").rglob("*.sql"))
    names = set(re.findall(r"agentlab_sched\.(\w+)", text))
    names |= set(re.findall(r"(?i)(?:TABLE|VIEW|FUNCTION|PROCEDURE|TYPE|INDEX|SEQUENCE)\s+(?:IF\s+NOT\s+EXISTS\s+)?"
                            r"(?:agentlab_sched\.)?(\w+)", text))  # fmt: skip
    return frozenset(names)


@cache
def _sql_columns() -> frozenset[str]:
    """Words of the migrations' table definitions, comments left out: the columns' names among them."""
    text = "\n".join(p.read_text(encoding="utf-8") for p in (PACKAGE / "database" / "migrations").glob("*.sql"))
    return frozenset(re.findall(r"\w+", re.sub(r"--[^\n]*", "", text)))


def _python_text(path: Path) -> Iterator[tuple[int, str]]:
    """(line, text) of the comments and docstrings of a Python file."""
    source = path.read_text(encoding="utf-8")
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            doc = ast.get_docstring(node, clean=False)
            if doc and node.body:
                first = node.body[0].lineno
                for offset, line in enumerate(doc.splitlines()):
                    yield first + offset, line


def _sql_text(path: Path) -> Iterator[tuple[int, str]]:
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if "--" in line:
            yield number, line[line.index("--") :]


def _doc_text(path: Path) -> Iterator[tuple[int, str]]:
    yield from enumerate(path.read_text(encoding="utf-8").splitlines(), 1)


def sources() -> Iterator[tuple[Path, int, str]]:
    for path in [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for number, text in _doc_text(path):
            yield path, number, text
    for folder in ("agentlab_sched", "tests", "bench"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path == Path(__file__).resolve():
                continue
            for number, text in _python_text(path):
                yield path, number, text
    for directory in SQL_DIRS:
        for path in sorted(directory.glob("*.sql")):
            for number, text in _sql_text(path):
                yield path, number, text


def _path_exists(name: str) -> bool:
    name = name.rstrip("/.")
    if (
        any(ch in name for ch in "*{<")
        or "NN" in name
        or any(name == m or name.startswith(f"{m}/") for m in MADE_LATER)
    ):
        return True  # a pattern (00NN_<what>.sql), not a path; or made by a run (bench/results/storm.json)
    return (ROOT / name).exists()


def _made_lazily(target: object, attribute: str) -> bool:
    """Whether a module makes ``attribute`` in its ``__getattr__`` (read from that function's text): such a
    name is not made here, as `agentlab_sched.demo.app` would start the embedded server in the user's data
    directory."""
    lazy = vars(target).get("__getattr__") if isinstance(target, types.ModuleType) else None
    return lazy is not None and attribute not in vars(target) and f'"{attribute}"' in inspect.getsource(lazy)


def _python_name_exists(dotted: str) -> bool:
    parts = dotted.split(".")
    if len(parts) >= 2 and parts[1] in _sql_objects() and not (PACKAGE / parts[1]).exists():
        return True  # a SQL object of the schema agentlab_sched
    for split in range(len(parts), 0, -1):
        try:
            target: object = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        for attribute in parts[split:]:
            if _made_lazily(target, attribute):
                return True  # what it holds is not looked into
            if not hasattr(target, attribute):
                # `agentlab_sched.runs` the table and `agentlab_sched.runs` the package share a name:
                # `agentlab_sched.runs.status` is the table's column.
                return len(parts) == 3 and parts[1] in _sql_objects() and parts[2] in _sql_columns()
            target = getattr(target, attribute)
        return True
    return False


def _module_attribute_exists(module: str, attribute: str) -> bool | None:
    """None when ``module`` is no module of the package (not ours to check)."""
    candidates = _modules().get(module)
    if not candidates or module in {"agentlab_sched"}:
        return None
    for dotted in candidates:
        try:
            imported = importlib.import_module(dotted)
        except ImportError:
            continue
        if hasattr(imported, attribute) or (PACKAGE.joinpath(*dotted.split(".")[1:]) / f"{attribute}.py").exists():
            return True
    return attribute in {"py", "sql", "md"}  # a file name (planner.py) is the path check's


def _folder_attribute_exists(module_path: str, attribute: str) -> bool:
    """Whether ``firing/tick`` (a module of the package by its path, from the package or from its database
    folder) exists and has ``attribute``."""
    for base in (PACKAGE, PACKAGE / "database"):
        if (base / f"{module_path}.py").exists():
            dotted = ".".join(base.relative_to(ROOT).parts + tuple(module_path.split("/")))
            return hasattr(importlib.import_module(dotted), attribute)
    return False


#: Last names of our modules that are also other things in prose: SQL tables and columns
#: (``runs.error``), pg_cron's schema (``cron.job``), message codes (``cron.out_of_range``), variables of
#: examples (``database.url``, ``dispatcher.stop()``), other libraries (``json.loads``). Checked only as
#: dotted (``agentlab_sched.x.y``) or path names.
AMBIGUOUS = {
    "json", "settings", "options", "messages", "errors", "context", "code", "sql", "cli", "demo", "cron",
    "database", "dispatcher", "worker", "web", "imports", "notify", "tasks", "limits",
}  # fmt: skip
#: Package folders: a short path (``worker/batch.py``) that starts with one of these is the package's.
FOLDERS = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()} | {
    "sql",
    "migrations",
    "queries",
}
#: What follows a file's name (web/schedules.png): a file, which the path checks look at, not an attribute.
FILE_SUFFIXES = {"py", "sql", "md", "png", "jpg", "svg", "css", "js", "html", "json", "toml", "txt", "csv"}
#: Folders that exist only once something ran (git-ignored).
MADE_LATER = {"bench/results"}


def stale(lines: Iterator[tuple[Path, int, str]] | None = None) -> list[str]:
    """Every stale path or name in ``lines`` (by default, all of the repository's text)."""
    found: list[str] = []
    for path, number, text in lines if lines is not None else sources():
        where = f"{path.relative_to(ROOT)}:{number}"
        for match in PATH.finditer(text):
            if not _path_exists(match.group(1)):
                found.append(f"{where}: no such path {match.group(1)}")
        for match in SHORT_PATH.finditer(text):
            name = match.group(1)
            if name.split("/")[0] not in FOLDERS:
                continue  # another project's path (an example's host/tasks.py) or a full one, checked above
            if not any((base / name).exists() for base in (PACKAGE, ROOT, PACKAGE / "database")):
                found.append(f"{where}: no such file {name} in agentlab_sched/")
        for match in DOTTED.finditer(text):
            if not _python_name_exists(match.group(0).rstrip(".")):
                found.append(f"{where}: no such name {match.group(0)}")
        for match in FOLDER_ATTR.finditer(text):
            folders, module, attribute = match.groups()
            if folders.split("/")[0] not in FOLDERS or attribute in FILE_SUFFIXES:
                continue  # another project's path, or a file name (the path checks' work)
            if not _folder_attribute_exists(folders + module, attribute):
                found.append(f"{where}: {folders}{module}.{attribute} does not exist in agentlab_sched/")
        for match in MODULE_ATTR.finditer(text):
            module, attribute = match.groups()
            if module in AMBIGUOUS or module in _sql_objects():
                continue
            if _module_attribute_exists(module, attribute) is False:
                found.append(f"{where}: {module}.{attribute} does not exist in {', '.join(_modules()[module])}")
    return found


def test_every_path_and_name_the_docs_comments_and_sql_give_exists() -> None:
    found = stale()
    assert not found, "stale names (moved or renamed?):\n" + "\n".join(found)


@pytest.mark.parametrize(
    "text, complaint",
    [
        ("see agentlab_sched/planner.py", "no such path agentlab_sched/planner.py"),
        ("see `firing/scheduler.py`", "no such file firing/scheduler.py"),
        ("call agentlab_sched.runner.BatchWorker", "no such name agentlab_sched.runner.BatchWorker"),
        ("tick.replan does it", "tick.replan does not exist"),
        ("schedules/planner.plan(state, now)", "schedules/planner.plan does not exist"),
        ("runs/middleware.RunMiddleware", "runs/middleware.RunMiddleware does not exist"),
        ("firing/tick.no_such_function()", "firing/tick.no_such_function does not exist"),
    ],
)
def test_a_stale_name_is_caught(text: str, complaint: str) -> None:
    found = stale(iter([(ROOT / "docs" / "probe.md", 1, text)]))
    assert len(found) == 1 and complaint in found[0], found


def test_names_that_exist_pass() -> None:
    text = (
        "agentlab_sched/worker/batch.py, `worker/batch.py`, agentlab_sched.worker.batch.BatchWorker, "
        "tick.fire_due, agentlab_sched.fires (a table), agentlab_sched.runs.lifecycle, agentlab_sched.blueprint, "
        "agentlab_sched.runs.status (a column), planner.py, core/planner.plan, firing/tick.fire_due(conn, now), "
        "worker/middleware.RunMiddleware"
    )
    assert stale(iter([(ROOT / "docs" / "probe.md", 1, text)])) == []
