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


def imports_of(path: Path) -> list[tuple[int, str]]:
    """(line, top-level package) of every import of agentlab_sched in ``path``."""
    found: list[tuple[int, str]] = []
    # Imports are statements: the others are not looked at.
    for node in (n for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))) if isinstance(n, ast.stmt)):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "agentlab_sched":
                names = [f"agentlab_sched.{alias.name}" for alias in node.names]
            else:
                names = [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        for name in names:
            top = _top(name)
            if top is not None:
                found.append((node.lineno, top))
    return found


def violations() -> list[str]:
    wrong = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE)
        own = relative.parts[0].removesuffix(".py")
        if own == FACADE:
            continue
        mine = _layer_of(own)
        for line, other in imports_of(path):
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
