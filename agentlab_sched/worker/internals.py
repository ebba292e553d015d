"""Every private name of Procrastinate that the worker relies on, in one place, and how to check them.

Procrastinate has no public hook for taking jobs in batches or finishing them with the run's result, so
``worker/batch.py`` overrides a few private methods of its ``Worker`` and reads a few of its private
attributes; ``worker/process.py`` reads the pool of its psycopg connector; ``worker/jobs.py`` recognises the
words its SQL functions raise for a job that is no longer running. Each is listed here with its shape
(the parameters of a method, the type of an attribute, the call that makes an override reachable), so a
Procrastinate release that drops or reshapes one is named at once: by the test suite
(``tests/worker/test_procrastinate_internals.py``) and when ``agentlab-sched worker`` starts, instead of
an ``AttributeError`` in the middle of a run. A plain ``procrastinate worker`` uses none of them.

Checked against the Procrastinate versions in ``CHECKED_AGAINST``; raise that tuple when a new release
passes ``problems()``.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.resources
import inspect
from dataclasses import dataclass
from typing import Literal

import procrastinate
from procrastinate import testing

__all__ = ["CHECKED_AGAINST", "PRIVATE", "SQL_WORDS", "Private", "problems"]

#: The Procrastinate releases every name below was checked against.
CHECKED_AGAINST = ("3.9.0", "3.10.0")


@dataclass(frozen=True)
class Private:
    """One private name: where it lives, what shape we rely on, who uses it and why."""

    #: ``module:Class`` in Procrastinate.
    owner: str
    name: str
    kind: Literal["method", "coroutine", "attribute"]
    #: For a method: its parameter names after ``self`` (keyword-only ones included), in order.
    #: For an attribute: the type of its value on a fresh instance.
    shape: tuple[str, ...] | type
    #: Our code that uses it, and for what.
    used_by: str
    #: For a method we override: the Procrastinate method whose source must still call it, else our
    #: override would silently never run.
    called_from: str | None = None


PRIVATE: tuple[Private, ...] = (
    Private(
        "procrastinate.worker:Worker",
        "_fetch_and_process_jobs",
        "coroutine",
        (),
        "batch.BatchWorker overrides it: takes as many jobs as there are free slots in one statement",
        called_from="_run_loop",
    ),
    Private(
        "procrastinate.worker:Worker",
        "_process_job",
        "coroutine",
        ("context",),
        "batch.BatchWorker calls it for each job it took, so middleware, retries and aborts stay Procrastinate's",
    ),
    Private(
        "procrastinate.worker:Worker",
        "_persist_job_status",
        "coroutine",
        ("job", "status", "retry_decision", "context", "job_result"),
        "batch.BatchWorker overrides it: a job's end is written in a batch, with its run's result",
        called_from="_process_job",
    ),
    Private(
        "procrastinate.worker:Worker",
        "_log_extra",
        "method",
        ("action", "context", "job_result", "kwargs"),
        "batch.BatchWorker logs a job's end with Procrastinate's own fields, and overrides it: the fields of "
        "the lines every job gets are not built when those lines are not shown",
        called_from="_process_job",
    ),
    Private(
        "procrastinate.worker:Worker",
        "_handle_notification",
        "coroutine",
        ("channel", "notification"),
        "batch.BatchWorker hands it what its own NOTIFY listener heard (new jobs, abort requests)",
    ),
    Private(
        "procrastinate.worker:Worker",
        "_stop_event",
        "attribute",
        asyncio.Event,
        "batch.BatchWorker stops taking jobs and bounds its writes once it is set",
    ),
    Private(
        "procrastinate.worker:Worker",
        "_new_job_event",
        "attribute",
        asyncio.Event,
        "batch.BatchWorker clears it before each fetch and sets it when its listener connects",
    ),
    Private(
        "procrastinate.worker:Worker",
        "_job_ids_to_abort",
        "attribute",
        dict,
        "batch.BatchWorker gives each job context its abort reason, and forgets a job once written",
    ),
    Private(
        "procrastinate.worker:Worker",
        "_running_jobs",
        "attribute",
        dict,
        "batch.BatchWorker registers the tasks it starts, so shutdown waits for them and aborts them",
    ),
    Private(
        "procrastinate.psycopg_connector:PsycopgConnector",
        "_get_standalone_connection",
        "method",
        (),
        "batch._Session opens its connections as the connector opens its listener's (same settings, same hooks)",
    ),
    Private(
        "procrastinate.psycopg_connector:PsycopgConnector",
        "_json_loads",
        "attribute",
        type(None),
        "batch._Session decodes job arguments with the app's JSON decoder (None: psycopg's own)",
    ),
    Private(
        "procrastinate.psycopg_connector:PsycopgConnector",
        "_async_pool",
        "attribute",
        type(None),
        "process._pool_for reads the opened pool's size to fit it to the worker's concurrency; process._open"
        " forgets a pool that could not open (its next open_async would keep the closed one)",
    ),
)

#: Words Procrastinate's SQL functions raise for a job that is not (or no longer) running, which
#: ``worker/jobs.py`` takes to mean "settled already" (file of Procrastinate's package, text).
SQL_WORDS: tuple[tuple[str, str], ...] = (
    ("sql/schema.sql", "Job was not found or not in"),
    ("sql/schema.sql", "Job was not found or has an invalid status"),
)


def _owner(path: str) -> type:
    module, _, name = path.partition(":")
    owner: type = getattr(importlib.import_module(module), name)
    return owner


def _instance(owner: type) -> object:
    """A fresh instance to read attributes from (nothing is opened or connected)."""
    if owner.__name__ == "Worker":
        return owner(app=procrastinate.App(connector=testing.InMemoryConnector()))
    if owner.__name__ == "PsycopgConnector":
        return owner()
    raise AssertionError(f"no way to make a {owner.__name__} to check")


def _parameters(function: object) -> tuple[str, ...]:
    names = [
        p.name if p.kind is not inspect.Parameter.VAR_KEYWORD else "kwargs"
        for p in inspect.signature(function).parameters.values()  # type: ignore[arg-type]
    ]
    return tuple(names[1:]) if names and names[0] == "self" else tuple(names)


def _check(private: Private) -> str | None:
    where = f"{private.owner.replace(':', '.')}.{private.name}"
    try:
        owner = _owner(private.owner)
    except (ImportError, AttributeError):
        return f"{private.owner.replace(':', '.')} is gone (needed for {where}: {private.used_by})"
    if private.kind == "attribute":
        instance = _instance(owner)
        if not hasattr(instance, private.name):
            return f"{where} is gone ({private.used_by})"
        assert isinstance(private.shape, type)
        value = getattr(instance, private.name)
        if not isinstance(value, private.shape):
            return f"{where} is a {type(value).__name__}, not a {private.shape.__name__} ({private.used_by})"
        return None
    function = getattr(owner, private.name, None)
    if function is None:
        return f"{where} is gone ({private.used_by})"
    is_coroutine = inspect.iscoroutinefunction(function)
    if is_coroutine != (private.kind == "coroutine"):
        return f"{where} is {'now' if is_coroutine else 'no longer'} a coroutine function ({private.used_by})"
    found, wanted = _parameters(function), private.shape
    assert isinstance(wanted, tuple)
    if found != wanted:
        return f"{where} takes ({', '.join(found)}), not ({', '.join(wanted)}) ({private.used_by})"
    if private.called_from is not None:
        caller = getattr(owner, private.called_from, None)
        if caller is None or f"self.{private.name}(" not in inspect.getsource(caller):
            return f"{where} is no longer called by {private.called_from}: our override would never run"
    return None


def problems() -> list[str]:
    """What the installed Procrastinate lacks or has reshaped of what the worker relies on (empty: all is
    there). Each line names the private name, what changed and who needs it."""
    found = [problem for private in PRIVATE if (problem := _check(private)) is not None]
    package = importlib.resources.files("procrastinate")
    for path, words in SQL_WORDS:
        if words not in package.joinpath(path).read_text(encoding="utf-8"):
            found.append(f"procrastinate/{path} no longer raises {words!r} (worker/jobs.py recognises it)")
    return found
