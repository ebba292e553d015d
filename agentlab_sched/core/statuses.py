"""Run and fire statuses: the one definition (docs/runs.md).

``STATUSES`` says, for every status a run or a fire can have, whether it is open (a run not ended yet:
it counts against the schedule's overlap policy), final (ended: it never changes again), held (open,
but waiting on a person: an approval, or a resume of a suspended run), a failure (ended in failure: it
counts towards ``pause_after_failures``), interrupted (held because its worker stopped under it: it will
not continue by itself), error-free (a run in it carries no error: entering it clears one), and what
pg_cron calls it (``cron``: the status of ``cron.job_run_details``). Everything else is derived:

- Python: the tuples and frozensets below (``runs.lifecycle``, ``observe.metrics``, ``observe.events``
  read them);
- SQL: ``migrate`` copies the table into ``agentlab_sched.statuses`` before it applies ``sql/``, and
  ``sql/01_statuses.sql`` makes from it the IMMUTABLE helpers ``agentlab_sched.run_is_open(status)``,
  ``run_is_final``, ``run_is_active`` (queued or running: a worker has it or will), ``run_is_held``,
  ``run_is_failure``, ``run_is_troubled`` (a failure, or interrupted), ``run_is_error_free`` and
  ``run_cron_status`` (pg_cron's word), with the list written into their body so that PostgreSQL
  inlines them into a query.

What cannot call a function keeps a literal list: the CHECK constraints of ``runs.status`` and
``fires.status`` and the predicates of the partial indexes on ``runs`` (``database/current_schema.sql``).
``tests/contract/test_statuses.py`` names every other literal list of statuses, in SQL or Python.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Kind = Literal["run", "fire"]


@dataclass(frozen=True)
class Status:
    """One status of a run or a fire."""

    kind: Kind
    name: str
    #: Not ended: counts against overlap (skip, buffer_one, cancel_other).
    open: bool = False
    #: Ended: the row never changes status again.
    final: bool = False
    #: Open, and waiting on a person (approve or reject; resume or abandon).
    held: bool = False
    #: Ended in failure: counts towards pause_after_failures (abandoned, cancelled and suspended runs do not).
    failure: bool = False
    #: Held because its worker stopped under it (on_interrupt suspend): it will not continue by itself.
    interrupted: bool = False
    #: A run in it carries no error: entering it clears the run's error.
    error_free: bool = False
    #: pg_cron's word for it in cron.job_run_details (starting, running, succeeded, failed); a fire has
    #: none (a fire not started is failed, a started one says what its run says).
    cron: str | None = None


#: Every status, in the order lists show them.
STATUSES: tuple[Status, ...] = (
    Status("run", "queued", open=True, error_free=True, cron="starting"),
    Status("run", "running", open=True, error_free=True, cron="running"),
    Status("run", "awaiting_approval", open=True, held=True, error_free=True, cron="running"),
    Status("run", "suspended", open=True, held=True, interrupted=True, cron="running"),
    Status("run", "succeeded", final=True, error_free=True, cron="succeeded"),
    Status("run", "failed", final=True, failure=True, cron="failed"),
    Status("run", "cancelled", final=True, cron="failed"),
    Status("run", "timed_out", final=True, failure=True, cron="failed"),
    # A fire is written once, with what became of it.
    Status("fire", "started", final=True),
    Status("fire", "skipped_overlap", final=True),
    Status("fire", "skipped_misfire", final=True),
    Status("fire", "failed_to_start", final=True),
)

RUN_STATUSES: tuple[str, ...] = tuple(s.name for s in STATUSES if s.kind == "run")
FIRE_STATUSES: tuple[str, ...] = tuple(s.name for s in STATUSES if s.kind == "fire")
#: Runs not ended, in list order (metrics shows one gauge each).
OPEN_RUN_STATUSES: tuple[str, ...] = tuple(s.name for s in STATUSES if s.kind == "run" and s.open)
FINAL_RUN_STATUSES: tuple[str, ...] = tuple(s.name for s in STATUSES if s.kind == "run" and s.final)
#: Open runs waiting on a person.
HELD_RUN_STATUSES: tuple[str, ...] = tuple(s.name for s in STATUSES if s.kind == "run" and s.held)
#: Open runs a worker has or will have (queued, running).
ACTIVE_RUN_STATUSES: tuple[str, ...] = tuple(s.name for s in STATUSES if s.kind == "run" and s.open and not s.held)
#: Runs that ended in failure (failed, timed_out).
FAILURE_RUN_STATUSES: tuple[str, ...] = tuple(s.name for s in STATUSES if s.kind == "run" and s.failure)
#: Runs that went wrong: a failure, or interrupted (a worker logs them at WARNING).
TROUBLED_RUN_STATUSES: tuple[str, ...] = tuple(
    s.name for s in STATUSES if s.kind == "run" and (s.failure or s.interrupted)
)
#: Runs that carry no error.
ERROR_FREE_RUN_STATUSES: tuple[str, ...] = tuple(s.name for s in STATUSES if s.kind == "run" and s.error_free)

OPEN_RUNS: frozenset[str] = frozenset(OPEN_RUN_STATUSES)
FINAL_RUNS: frozenset[str] = frozenset(FINAL_RUN_STATUSES)


def catalog_rows() -> list[tuple[str, str, int, bool, bool, bool, bool, bool, bool, str | None]]:
    """Rows of ``agentlab_sched.statuses`` (kind, status, position, is_open, is_final, is_held, is_failure,
    is_interrupted, is_error_free, cron_status), written by every migrate."""
    return [
        (s.kind, s.name, i, s.open, s.final, s.held, s.failure, s.interrupted, s.error_free, s.cron)
        for i, s in enumerate(STATUSES)
    ]
