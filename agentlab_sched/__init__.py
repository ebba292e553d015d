"""agentlab-sched: a Postgres-native scheduler for agent and workflow runs.

What a host app and its tasks use, importable from here::

    app.add_tasks_from(agentlab_sched.blueprint, namespace="agentlab_sched")
    agentlab_sched.install(app)                      # the run middleware: context, approvals, timeouts

    run = agentlab_sched.current_run()               # inside a task
    raise agentlab_sched.AwaitApproval("Publish?", state={...})
    raise agentlab_sched.LaunchRefused("no published version")   # in a resolver
"""

from __future__ import annotations

from .approvals import AwaitApproval
from .blueprint import blueprint  # the Blueprint object, not the module of the same name
from .context import current_run
from .hooks import LaunchRefused
from .middleware import install

__all__ = ["AwaitApproval", "LaunchRefused", "blueprint", "current_run", "install"]
