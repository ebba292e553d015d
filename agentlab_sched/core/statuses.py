"""Run and fire statuses: the one definition (docs/runs.md).

``STATUSES`` says, for every status a run or a fire can have, whether it is open (a run not ended yet:
it counts against the schedule's overlap policy), final (ended: it never changes again) and held (open,
but waiting on a person: an approval, or a resume of a suspended run). Everything else is derived:

- Python: the tuples and frozensets below (``runs.lifecycle``, ``observe.metrics`` read them);
- SQL: ``migrate`` copies the table into ``agentlab_sched.statuses`` before it applies ``sql/``, and
  ``sql/01_statuses.sql`` makes from it the IMMUTABLE helpers ``agentlab_sched.run_is_open(status)``,
  ``run_is_final``, ``run_is_active`` (queued or running: a worker has it or will) and ``run_is_held``,
  with the list written into their body so that PostgreSQL inlines them into a query.

What cannot call a function keeps a literal list: the CHECK constraints of ``runs.status`` and
``fires.status`` and the predicates of the partial indexes on ``runs`` (``database/current_schema.sql``).
``tests/contract/test_statuses.py`` names every list, in SQL or Python, that disagrees with this table.
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


#: Every status, in the order lists show them.
STATUSES: tuple[Status, ...] = (
    Status("run", "queued", open=True),
    Status("run", "running", open=True),
    Status("run", "awaiting_approval", open=True, held=True),
    Status("run", "suspended", open=True, held=True),
    Status("run", "succeeded", final=True),
    Status("run", "failed", final=True),
    Status("run", "cancelled", final=True),
    Status("run", "timed_out", final=True),
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

OPEN_RUNS: frozenset[str] = frozenset(OPEN_RUN_STATUSES)
FINAL_RUNS: frozenset[str] = frozenset(FINAL_RUN_STATUSES)


def catalog_rows() -> list[tuple[str, str, int, bool, bool, bool]]:
    """Rows of ``agentlab_sched.statuses`` (kind, status, position, is_open, is_final, is_held), written by
    every migrate."""
    return [(s.kind, s.name, i, s.open, s.final, s.held) for i, s in enumerate(STATUSES)]
