"""typer's CliRunner builds the click command tree from the Typer app at every ``invoke``: about 135 ms for
this CLI (typer evaluates every parameter's annotation), most of a refused command's time in the tests. The
app does not change while the tests run, so each tree is built once (a plugin of tests/conftest.py).

A real ``agentlab-sched`` process builds it once anyway; what a test invokes is the same tree.
"""

from __future__ import annotations

import functools

import typer.main
import typer.testing

# The one name of typer's this leans on: if a typer release drops it, say so rather than go slow unseen.
assert typer.testing._get_command is typer.main.get_command, "typer.testing no longer imports get_command"
typer.testing._get_command = functools.cache(typer.main.get_command)
