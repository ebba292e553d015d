"""The packages are layers: each may import only the ones below it (CONTRIBUTING.md draws them).

Read from the source (every ``import`` and ``from ... import``, also those inside functions and under
``TYPE_CHECKING``), so a cycle cannot hide in a lazy import.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "agentlab_sched"

#: Lowest first. Names on one line are one layer: they may not import each other either way round.
LAYERS: list[set[str]] = [
    {"messages"},
    {"errors"},
    {"limits", "settings", "_plain", "waiting"},
    {"core"},
    {"database"},
    {"notify"},
    {"observe"},
    {"schedules"},
    {"firing"},
    {"runs"},
    {"tasks"},
    {"imports"},
    {"worker"},
    {"demo"},
    {"web"},
    {"cli"},
]
#: The package's own ``__init__`` is the public facade: it may import any layer (none imports it back).
FACADE = "__init__"


def _layer_of(name: str) -> int:
    for index, layer in enumerate(LAYERS):
        if name in layer:
            return index
    raise AssertionError(f"agentlab_sched.{name} is in no layer: add it to LAYERS in {__file__} and CONTRIBUTING.md")


def _top(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "agentlab_sched":
        return None
    return parts[1] if len(parts) > 1 else FACADE


def _package_of(path: Path) -> str:
    """The dotted package a module of agentlab_sched is in (what its relative imports start from)."""
    parts = path.resolve().relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts if path.name == "__init__.py" else parts[:-1]).removesuffix(".__init__")


def imports_of(path: Path, package: str | None = None) -> list[tuple[int, str]]:
    """(line, top-level package) of every import of agentlab_sched in ``path``; relative imports are read
    from ``package`` (the module's own package, found from its place under agentlab_sched by default)."""
    found: list[tuple[int, str]] = []
    # Imports are statements: the others are not looked at.
    for node in (n for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))) if isinstance(n, ast.stmt)):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom):
            if node.level:
                # from . import x / from ..firing import tick: the package, up level - 1 steps.
                base = (package if package is not None else _package_of(path)).split(".")
                base = base[: len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            if module == "agentlab_sched":
                names = [f"agentlab_sched.{alias.name}" for alias in node.names]
            elif node.module is None:
                names = [f"{module}.{alias.name}" for alias in node.names]
            else:
                names = [module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        for name in names:
            top = _top(name)
            if top is not None:
                found.append((node.lineno, top))
    return found


def violations(package: Path = PACKAGE) -> list[str]:
    """Every import against the layers in the modules under ``package`` (a copy of agentlab_sched in a test)."""
    wrong = []
    for path in sorted(package.rglob("*.py")):
        relative = path.relative_to(package)
        own = relative.parts[0].removesuffix(".py")
        if own == FACADE:
            continue
        mine = _layer_of(own)
        dotted = ".".join(("agentlab_sched", *relative.with_suffix("").parts[:-1]))
        for line, other in imports_of(path, dotted):
            if other == own:
                continue
            if other == FACADE:
                wrong.append(f"agentlab_sched/{relative}:{line} imports the package facade agentlab_sched")
            elif _layer_of(other) >= mine:
                wrong.append(f"agentlab_sched/{relative}:{line} ({own}) imports {other}, which is not below it")
    return wrong


def test_every_package_imports_only_the_layers_below_it() -> None:
    wrong = violations()
    assert not wrong, "imports against the layers:\n" + "\n".join(wrong)


def test_every_package_is_in_a_layer() -> None:
    for path in PACKAGE.iterdir():
        if path.name.startswith(("__", ".")) or path.name == "py.typed":
            continue
        if path.is_dir() and not (path / "__init__.py").exists():
            continue  # data folders
        if path.suffix in {".py", ""}:
            _layer_of(path.name.removesuffix(".py"))


def test_the_check_catches_an_upward_import(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from agentlab_sched.worker import batch\n")
    [(line, top)] = imports_of(module)
    assert (line, top) == (2, "worker") and _layer_of("worker") > _layer_of("core")


@pytest.mark.parametrize("lower, upper", [("core", "database"), ("firing", "runs"), ("runs", "worker")])
def test_the_order_is_the_documented_one(lower: str, upper: str) -> None:
    assert _layer_of(lower) < _layer_of(upper)


@pytest.mark.parametrize(
    "source, found",
    [
        ("from ..firing import tick\n", "firing"),
        ("from .. import worker\n", "worker"),
        ("from ..worker.batch import BatchWorker\n", "worker"),
        ("from . import cron\n", "core"),
    ],
)
def test_relative_imports_are_read_from_the_modules_package(tmp_path: Path, source: str, found: str) -> None:
    copy = tmp_path / "agentlab_sched"
    (copy / "core").mkdir(parents=True)
    (copy / "core" / "planner.py").write_text(source)
    assert imports_of(copy / "core" / "planner.py", "agentlab_sched.core") == [(1, found)]
    wrong = violations(copy)
    if found == "core":
        assert wrong == []
    else:
        assert wrong == [f"agentlab_sched/core/planner.py:1 (core) imports {found}, which is not below it"]
