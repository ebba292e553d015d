"""CONTRIBUTING.md's map of the package matches the code: every package and module is there, in the
order of the layers, and every module it names exists."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "agentlab_sched"
LAYERS_TEST = ROOT / "tests" / "contract" / "test_layers.py"


def map_entries() -> list[tuple[str, str]]:
    """(entry, its text) of the map's code block: ``core/`` -> "the pure core, ... cron.py ..."."""
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    block = text.split("### The package", 1)[1].split("```", 2)[1]
    entries: list[tuple[str, str]] = []
    for line in block.splitlines():
        match = re.match(r"^  (\S+)\s*(.*)$", line)
        if match:
            entries.append((match.group(1), match.group(2)))
        elif line.startswith("   ") and entries:
            name, said = entries[-1]
            entries[-1] = (name, f"{said} {line.strip()}")
    return entries


def layers() -> list[list[str]]:
    tree = ast.parse(LAYERS_TEST.read_text(encoding="utf-8"))
    for node in tree.body:
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and node.target.id == "LAYERS"
            and node.value
        ):
            value = ast.literal_eval(node.value)
            return [sorted(layer) for layer in value]
    raise AssertionError("LAYERS not found in test_layers.py")


def test_every_package_and_module_is_on_the_map_and_nothing_else() -> None:
    entries = dict(map_entries())
    actual = {p.name + "/" for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    actual |= {p.name for p in PACKAGE.glob("*.py")}
    assert set(entries) == actual, (
        f"missing from the map: {sorted(actual - set(entries))}; on the map but not in the code: "
        f"{sorted(set(entries) - actual)}"
    )


def test_each_package_line_names_its_modules_and_only_those() -> None:
    wrong = []
    for entry, said in map_entries():
        if not entry.endswith("/") or entry == "messages/":
            continue
        folder = PACKAGE / entry.rstrip("/")
        modules = {p.name for p in folder.glob("*.py") if p.name != "__init__.py"}
        named = set(re.findall(r"\b([a-z_]\w*\.py)\b", said))
        if modules - named:
            wrong.append(f"{entry}: the map does not name {sorted(modules - named)}")
        if named - modules:
            wrong.append(f"{entry}: the map names {sorted(named - modules)}, which do not exist")
    assert not wrong, "\n".join(wrong)


def test_the_map_lists_packages_in_the_order_of_the_layers() -> None:
    order = [name.rstrip("/").removesuffix(".py") for name, _ in map_entries()]
    order = [name for name in order if name != "__init__"]
    ranks = {name: index for index, layer in enumerate(layers()) for name in layer}
    present = [name for name in order if name in ranks]
    assert present == sorted(present, key=lambda name: ranks[name]), present
    assert set(order) <= set(ranks), f"not in any layer: {sorted(set(order) - set(ranks))}"
