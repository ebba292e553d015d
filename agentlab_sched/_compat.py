"""Import paths of the first releases, kept working: ``agentlab_sched.tick`` is ``agentlab_sched.firing.tick``.

The package is grouped by what it holds (``schedules``, ``firing``, ``runs``, ``database``); code written
against the flat layout still imports. Each old name is the very module object of its new home (not a
copy), so attributes, monkeypatching and ``isinstance`` checks agree whichever path was used.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
from types import ModuleType

#: old module name -> where it lives now
MOVED = {
    "agentlab_sched.admin": "agentlab_sched.schedules.admin",
    "agentlab_sched.cron": "agentlab_sched.schedules.cron",
    "agentlab_sched.planner": "agentlab_sched.schedules.planner",
    "agentlab_sched.tick": "agentlab_sched.firing.tick",
    "agentlab_sched.hooks": "agentlab_sched.firing.hooks",
    "agentlab_sched.blueprint": "agentlab_sched.firing.blueprint",
    "agentlab_sched.lifecycle": "agentlab_sched.runs.lifecycle",
    "agentlab_sched.middleware": "agentlab_sched.runs.middleware",
    "agentlab_sched.context": "agentlab_sched.runs.context",
    "agentlab_sched.approvals": "agentlab_sched.runs.approvals",
    "agentlab_sched.housekeeping": "agentlab_sched.runs.housekeeping",
    "agentlab_sched.db": "agentlab_sched.database",
    "agentlab_sched.embedded": "agentlab_sched.database.embedded",
    "agentlab_sched.migrate": "agentlab_sched.database.migrate",
    "agentlab_sched.plain": "agentlab_sched._plain",
}


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self) -> None:
        self._specs: dict[str, importlib.machinery.ModuleSpec | None] = {}

    def find_spec(
        self, fullname: str, path: object = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = importlib.import_module(MOVED[spec.name])
        self._specs[spec.name] = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the module was imported under its new name, whose spec it keeps."""
        old_name = next(old for old, new in MOVED.items() if new == module.__name__)
        module.__spec__ = self._specs.pop(old_name, module.__spec__)


def install() -> None:
    """Make the old names importable (once)."""
    if not any(isinstance(f, _MovedModules) for f in sys.meta_path):
        sys.meta_path.append(_MovedModules())
