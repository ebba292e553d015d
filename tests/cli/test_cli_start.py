"""The command line starts without what only its commands need: ``agentlab-sched --version`` and ``--help``
import neither Procrastinate, psycopg, httpx, the web framework, jinja2 nor cryptography (each command
imports what it uses when it runs)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from agentlab_sched.cli import database as cli_database
from agentlab_sched.database import roles

ROOT = Path(__file__).resolve().parents[2]

#: Top-level packages the command line must not import to print its version or its help.
HEAVY = (
    "procrastinate",
    "psycopg",
    "psycopg_pool",
    "httpx",
    "starlette",
    "uvicorn",
    "jinja2",
    "cryptography",
    "croniter",
    "prometheus_client",
)

#: Runs the console script's entry point with the given arguments, then prints the top-level packages
#: imported, as JSON (on stderr, after whatever the command printed on stdout).
SCRIPT = """
import json, sys
sys.argv = ["agentlab-sched", *sys.argv[1:]]
from agentlab_sched.cli import main
try:
    main()
except SystemExit as stop:
    code = stop.code
else:
    code = 0
print(json.dumps({"code": code, "modules": sorted({m.split(".")[0] for m in sys.modules})}), file=sys.stderr)
"""


@pytest.mark.parametrize("args", [(), ("--version",), ("--help",)], ids=["import", "version", "help"])
def test_the_command_line_starts_without_the_heavy_packages(args: tuple[str, ...]) -> None:
    if args:
        done = subprocess.run(
            [sys.executable, "-c", SCRIPT, *args], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
        )
        report = json.loads(done.stderr.strip().splitlines()[-1])
        assert report["code"] == 0
        assert done.stdout.startswith("agentlab-sched 0.1.0" if args == ("--version",) else "Usage: agentlab-sched")
    else:
        code = 'import json, sys; import agentlab_sched.cli; print(json.dumps({"modules": sorted(sys.modules)}))'
        done = subprocess.run(
            [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True
        )
        report = {"modules": sorted({m.split(".")[0] for m in json.loads(done.stdout)["modules"]})}
    assert [name for name in HEAVY if name in report["modules"]] == []


def test_the_package_api_is_still_importable_from_the_package() -> None:
    """``from agentlab_sched import X`` goes on working for every name of ``__all__``, each the object its
    module defines."""
    code = (
        "import agentlab_sched as a\n"
        "from agentlab_sched.firing import hooks\n"
        "from agentlab_sched.runs import approvals, context\n"
        "from agentlab_sched.schedules import code\n"
        "from agentlab_sched.worker import middleware\n"
        "import procrastinate\n"
        "assert a.LaunchRefused is hooks.LaunchRefused and a.LaunchRequest is hooks.LaunchRequest\n"
        "assert a.resolver is hooks.resolver and a.AwaitApproval is approvals.AwaitApproval\n"
        "assert a.current_run is context.current_run and a.schedule is code.schedule\n"
        "assert a.install is middleware.install\n"
        "assert isinstance(a.blueprint, procrastinate.Blueprint) and a.blueprint is not a.blueprint\n"
        "from agentlab_sched import *\n"
        "print(sorted(n for n in a.__all__ if n in globals()) == sorted(a.__all__))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout == "True\n"


def test_roles_create_s_default_prefix_is_the_library_s() -> None:
    assert cli_database.ROLES_PREFIX == roles.DEFAULT_PREFIX
