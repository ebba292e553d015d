"""On-ramps: schedules made from where people come from (pg_cron's jobs, Procrastinate's periodic tasks).

Each import creates equivalent schedules, paused unless asked to enable them (the old scheduler may still
be firing them), remembers where each came from (``schedules.imported_from``, so importing again skips
what it imported already), and reports what it could not translate and why. ``docs/coming-from.md``.
"""

from typing import Any

__all__ = ["LITERAL_BRACES", "literal"]

#: How a template writes ``{{`` itself: the placeholder whose value is two braces (``sql/41_render.sql``).
LITERAL_BRACES = "{{ '{{' }}"


def literal(value: Any) -> Any:
    """``value`` (text, or JSON data: its strings and keys) with every ``{{`` written as :data:`LITERAL_BRACES`.

    Text imported from another scheduler (a pg_cron command, a periodic task's kwargs) renders as it was
    written: a ``{{ schedule.name }}`` in it never becomes a live placeholder.
    """
    if isinstance(value, str):
        return value.replace("{{", LITERAL_BRACES)
    if isinstance(value, dict):
        return {literal(k): literal(v) for k, v in value.items()}
    if isinstance(value, list):
        return [literal(v) for v in value]
    return value
