"""Runs that pause for a person: ``raise AwaitApproval(title, state=...)``.

A task raises :class:`AwaitApproval`; the run middleware ends its job normally and the run becomes
``awaiting_approval`` with a pending approval row for its segment (docs/runs.md). A person approves it
(``agentlab-sched runs approve ID``, SQL ``agentlab_sched.approve(run_id, ...)``, or
:func:`agentlab_sched.runs.lifecycle.approve`): the same task runs again for the same run, in the next
segment, and reads the state it saved and the decision from ``current_run()``. Rejecting it cancels
the run. Until the approved run starts again it still counts as awaiting approval (overlap).

:func:`ask_once` is the simplest use: pause once, then return what the approver said.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentlab_sched.errors import ValidationError
from agentlab_sched.runs.context import current_run

__all__ = ["AwaitApproval", "ask_once"]

#: The longest approval title.
MAX_TITLE = 500


class AwaitApproval(Exception):
    """Raised by a task to pause its run until a person approves or rejects it.

    ``title`` is what the person is asked (1 to 500 characters); ``state`` is any JSON data the task
    needs to continue (dicts, lists, strings, numbers, booleans, None), handed back in the next
    segment as ``current_run().state``.
    """

    def __init__(self, title: str, state: Any = None) -> None:
        if not isinstance(title, str) or not title.strip() or len(title) > MAX_TITLE:
            raise ValidationError("run.bad_title", "title")
        super().__init__(title)
        self.title = title
        self.state = state


async def ask_once(title: str, inputs: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Pause the current run for approval once; in the next segment, return what the approver said.

    Returns ``{"approved_by", "approved_label", "approved_at", "comment", "inputs"}``: the database role
    that approved, the name it gave, the database's time, and ``inputs`` as given when asking.
    Raises :class:`AwaitApproval` in the first segment (let it propagate), and
    :class:`~agentlab_sched.runs.context.NoRunContext` outside a run.
    """
    run = current_run()
    approval = run.approval
    if approval is None or approval.status != "approved":
        raise AwaitApproval(title, state={"inputs": dict(inputs or {})})
    saved = run.state if isinstance(run.state, dict) else {}
    return {
        "approved_by": approval.decided_by,
        "approved_label": approval.decided_label,
        "approved_at": approval.decided_at.isoformat() if approval.decided_at else None,
        "comment": approval.comment,
        "inputs": saved.get("inputs", dict(inputs or {})),
    }
