"""agentlab-sched: a Postgres-native scheduler for agent and workflow runs.

What a host app and its tasks use, importable from here::

    app.add_tasks_from(agentlab_sched.blueprint, namespace="agentlab_sched")
    agentlab_sched.install(app)                      # the run middleware: context, approvals, timeouts

    run = agentlab_sched.current_run()               # inside a task
    raise agentlab_sched.AwaitApproval("Publish?", state={...})
    raise agentlab_sched.LaunchRefused("no published version")   # in a resolver

    @agentlab_sched.schedule("0 9 * * 1", timezone="Asia/Shanghai")   # a schedule defined in code
    @app.task(name="reports.weekly")
    def weekly(): ...

The package, by what it holds (``docs/python.md`` is the user's guide, ``CONTRIBUTING.md`` the map):

- ``core``: the pure core: the cron language, the planner, the schedule options (no I/O);
- ``database``: connections, the embedded server, migrations and the SQL;
- ``schedules``: the admin API, schedules defined in code, re-planning;
- ``firing``: the tick, manual and backfill requests, resolvers;
- ``runs``: the run lifecycle, run context, approvals, housekeeping;
- ``notify``: webhook notifications (outbox dispatch, platforms, secrets);
- ``observe``: events, log output, metrics, presence, the doctor's checks;
- ``worker``: the worker process: ``run_worker``, the batch runner, the run middleware, the blueprint;
- ``messages``: every user-facing text in ``en`` and ``zh-CN``;
- ``cli``: the ``agentlab-sched`` command; ``demo``: the demo app.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentlab_sched.errors import Conflict, NotFound, SchedError, ValidationError

if TYPE_CHECKING:
    import procrastinate

    from agentlab_sched.firing.hooks import LaunchRefused, LaunchRequest, resolver
    from agentlab_sched.runs.approvals import AwaitApproval
    from agentlab_sched.runs.context import current_run
    from agentlab_sched.schedules.code import schedule
    from agentlab_sched.worker.middleware import install

    #: What the module's ``__getattr__`` hands out (a new one at every read), for type checkers.
    blueprint: procrastinate.Blueprint


def __getattr__(name: str) -> object:
    # Imported at the first read, not with the package: `agentlab-sched --version` and every module that
    # needs only the errors or the messages then start without Procrastinate, psycopg and httpx.
    if name == "blueprint":
        # A new blueprint at every read: Procrastinate binds a blueprint's tasks to the one app that
        # includes it, so `app.add_tasks_from(agentlab_sched.blueprint, ...)` must hand each app its own.
        from agentlab_sched.worker import blueprint as blueprint_module

        return blueprint_module.make_blueprint()
    if name in ("LaunchRefused", "LaunchRequest", "resolver"):
        from agentlab_sched.firing import hooks

        return getattr(hooks, name)
    if name == "AwaitApproval":
        from agentlab_sched.runs.approvals import AwaitApproval

        return AwaitApproval
    if name == "current_run":
        from agentlab_sched.runs.context import current_run

        return current_run
    if name == "schedule":
        from agentlab_sched.schedules.code import schedule

        return schedule
    if name == "install":
        from agentlab_sched.worker.middleware import install

        return install
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    # Including the scheduler in a Procrastinate app
    "blueprint",  # the tick and housekeeping tasks: app.add_tasks_from(blueprint, namespace="agentlab_sched")
    "install",  # the run middleware for the app's workers
    "schedule",  # a schedule defined in code, on a task: synced by the app's workers when they start
    # Inside a task
    "AwaitApproval",  # pause the run for a person
    "current_run",  # what the task knows about its run
    # Resolvers: refuse a launch before it happens
    "LaunchRefused",
    "LaunchRequest",
    "resolver",
    # Errors every API raises (the tree is drawn in agentlab_sched.errors)
    "Conflict",
    "NotFound",
    "SchedError",
    "ValidationError",
]
