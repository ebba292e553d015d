"""Durations as people write them: ``90s``, ``10m``, ``1h30m``, ``2d``, ``1w 2d``, ``10 minutes``, plain
seconds. The one parser of the CLI's options, the retention setting and ``prune --older-than``."""

from __future__ import annotations

import re
from datetime import timedelta

from agentlab_sched.errors import ValidationError

__all__ = ["UNITS", "parse"]

#: Unit spellings -> seconds.
UNITS: dict[str, int] = {
    "s": 1, "sec": 1, "secs": 1, "second": 1, "seconds": 1,
    "m": 60, "min": 60, "mins": 60, "minute": 60, "minutes": 60,
    "h": 3600, "hr": 3600, "hrs": 3600, "hour": 3600, "hours": 3600,
    "d": 86400, "day": 86400, "days": 86400,
    "w": 604800, "week": 604800, "weeks": 604800,
}  # fmt: skip
_PART = re.compile(r"(\d+(?:\.\d+)?)\s*([a-z]+)[\s,]*")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def parse(value: str, field: str, label: object, *, negative: bool = False) -> timedelta:
    """``value`` as a duration; a ValidationError (``schedule.bad_duration``) names ``field`` (its
    localised ``label``, a ``messages.term``, in the message) and the value. With ``negative``, a leading
    ``-`` is kept (the database then refuses it in its own words); without, it is refused here. A duration
    longer than a timedelta holds (about 2.7 million years) is ``duration.too_long``."""
    try:
        return _parse(value, field, label, negative=negative)
    except OverflowError:
        raise ValidationError("duration.too_long", field, field=label, value=value) from None


def _parse(value: str, field: str, label: object, *, negative: bool) -> timedelta:
    raw = value.strip().lower()
    sign = 1
    if negative and raw.startswith("-"):
        sign, raw = -1, raw[1:].strip()
    if _NUMBER.fullmatch(raw):
        return timedelta(seconds=sign * float(raw))
    total = 0.0
    pos = 0
    while pos < len(raw):
        match = _PART.match(raw, pos)
        if not match or match.group(2) not in UNITS:
            break
        total += float(match.group(1)) * UNITS[match.group(2)]
        pos = match.end()
    if pos == 0 or pos < len(raw):
        raise ValidationError("schedule.bad_duration", field, field=label, value=value)
    return timedelta(seconds=sign * total)
