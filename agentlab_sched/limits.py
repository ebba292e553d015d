"""Size limits (docs/security.md), the bound of on_interrupt retry and the policy windows (docs/runs.md):
one definition, checked by Python and, copied by migrate into ``agentlab_sched.config``
(``limit.<name>``), by SQL (``agentlab_sched.size_limit(name)``, ``agentlab_sched.policy_interval(name)``).

They keep every schedule small: its inputs are copied into each fire's ledger row, run and job, and a
huge cron expression takes seconds to check.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from agentlab_sched.errors import ValidationError
from agentlab_sched.messages import SHOWN, term

#: name -> the limit. Bytes are of the JSON text (UTF-8); characters are Unicode characters.
LIMITS: dict[str, int] = {
    # a schedule's input template (copied into every fire: ledger row, run, Procrastinate job)
    "inputs_bytes": 64 * 1024,
    # the inputs one trigger() gives instead of the schedule's
    "trigger_inputs_bytes": 64 * 1024,
    # a cron expression
    "cron_chars": 1000,
    # what may be shown of a webhook URL (webhook_url_hint)
    "webhook_url_hint_chars": 300,
    # how many times on_interrupt retry runs one run again (then it is suspended)
    "interrupt_retries": 3,
    # the due times one backfill fires (more is refused)
    "backfill_times": 1000,
    # the most names a finding lists (doctor's facts too); the rest are counted ("and 480 more")
    "names_shown": SHOWN,
}

#: name -> seconds: the policy windows, read by SQL as intervals (``agentlab_sched.policy_interval(name)``).
POLICY: dict[str, int] = {
    # how long a task asked to abort (a timeout, a cancel) may go on before its run says it ignores the abort
    "abort_grace_seconds": 10,
    # a worker whose heartbeat is older has stalled: its running runs are interrupted (Procrastinate's
    # stalled-worker window)
    "stall_seconds": 30,
    # a task is known when a worker registered it within this window; a fire of any other is refused
    "known_task_seconds": 600,
}

#: The policy windows as Python durations.
ABORT_GRACE = timedelta(seconds=POLICY["abort_grace_seconds"])
STALL_WINDOW = timedelta(seconds=POLICY["stall_seconds"])
KNOWN_TASK_WINDOW = timedelta(seconds=POLICY["known_task_seconds"])


def json_size(value: Any) -> int:
    """The size in bytes of ``value`` as JSON text, as PostgreSQL writes jsonb (``", "`` and ``": "``)."""
    return len(json.dumps(value, ensure_ascii=False, default=str).encode("utf-8"))


def check_inputs(value: Mapping[str, Any] | Any, *, limit: str = "inputs_bytes") -> None:
    """Refuse inputs larger than ``LIMITS[limit]`` (a ValidationError naming ``inputs``)."""
    size = json_size(value)
    if size > LIMITS[limit]:
        raise ValidationError(
            "schedule.too_large", "inputs", field=term("schedule.field.inputs"), size=size, max=LIMITS[limit]
        )


def check_cron_length(expr: str) -> None:
    """Refuse a cron expression longer than ``LIMITS["cron_chars"]`` before it is parsed."""
    if isinstance(expr, str) and len(expr) > LIMITS["cron_chars"]:
        raise ValidationError(
            "schedule.too_long", "cron", field=term("schedule.field.cron"), length=len(expr), max=LIMITS["cron_chars"]
        )


def catalog_rows() -> list[tuple[str, str]]:
    """(key, value) rows of ``agentlab_sched.config`` for the database's copy (written by migrate)."""
    return [(f"limit.{name}", str(value)) for name, value in (LIMITS | POLICY).items()]
