"""The cron language: parsing with exact errors, and due times in a time zone (pure, no I/O).

Language (``docs/cron.md`` is the user's reference):

- five fields ``minute hour day-of-month month day-of-week``, or six with **seconds last** (the
  croniter / Procrastinate convention); fields are separated by spaces or tabs;
- in each field: ``*``, a value ``a``, a range ``a-b``, steps ``*/n``, ``a-b/n`` and ``a/n`` (from ``a``
  to the field's end), and comma lists of those; a step is 1 to the field's maximum;
- values are numbers, or names in month (``JAN``-``DEC``) and day-of-week (``SUN``-``SAT``), in any case;
  day-of-week is 0-7, 0 and 7 both Sunday (``*`` and ``a/n`` run to 6: 7 appears only when written);
- macros ``@yearly @annually @monthly @weekly @daily @midnight @hourly`` (any case);
- day-of-month and day-of-week combine with OR when both are restricted, with AND when either starts
  with ``*`` (Vixie cron, which cronsim follows: ``0 0 */2 * MON`` is Mondays on odd days);
- not accepted: ``L``, ``W``, ``#``, ``?`` (Quartz extensions), wrap-around ranges (``FRI-MON``).

The SQL validator ``agentlab_sched.cron_problem()`` (``sql/20_cron.sql``) accepts exactly this language
with the same error codes and parameters; a property test holds the two together.

Time (the DST rules of ``docs/cron.md``):

- *fixed-time* schedules (the hour field names hours: numbers, ranges, lists; no ``*``, no step) are
  evaluated on the local wall clock: a time that a DST gap skips fires once, at the first instant
  after the jump; a time in a repeated hour fires once, at its first occurrence;
- schedules whose hour field is ``*`` or has a step follow real elapsed time: they fire at every
  instant at which the local clock shows a matching time (none in a gap, both halves of a repeated
  hour), which keeps ``*/30 * * * *`` at 30 real minutes across both transitions.

Evaluation: cronsim (forward, and ``reverse=True`` for the latest due time without walking through a
backlog) run as a calendar over naive wall-clock times, on a canonical six-field expression (seconds
first, lists spelt out); the DST rule is then applied here, by ``_instants``. cronsim's own DST
handling is not used: it covers five-field expressions only, and its real-time mode jumps whole
hours (it misses fires in zones that shift by 30 minutes).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim

from agentlab_sched import messages
from agentlab_sched.errors import ValidationError

__all__ = ["MACROS", "Cron", "Upcoming", "check_timezone", "parse"]

#: Macro -> the five fields it stands for.
MACROS: dict[str, str] = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}

#: The separators between fields (ASCII whitespace only, as in SQL).
_SPACE = " \t\n\r\f\v"
_SPLIT = re.compile(r"[ \t\n\r\f\v]+")
_DIGITS = re.compile(r"[0-9]+")
_LETTERS = re.compile(r"[A-Za-z]+")
_QUARTZ_DOM = re.compile(r"L|LW|[0-9]+W")
_QUARTZ_DOW = re.compile(r"(?:[0-9]+|[A-Z]{3})?L")
_UPPER = str.maketrans("abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ")
_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
#: Days in each month (February 29: a leap day is a day that occurs).
_DAYS_IN_MONTH = (0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


@dataclass(frozen=True)
class _Field:
    key: str  # message term: cron.field.<key>
    lo: int
    hi: int
    star_hi: int  # where * and a/n end (6 for day-of-week: 7 = Sunday only when written)
    names: tuple[str, ...] = ()  # names[i] is the value lo_name + i
    name_base: int = 0
    hint: str = ""


_MINUTE = _Field("minute", 0, 59, 59)
_HOUR = _Field("hour", 0, 23, 23)
_DOM = _Field("day-of-month", 1, 31, 31)
_MONTH_NAMES = tuple("JAN FEB MAR APR MAY JUN JUL AUG SEP OCT NOV DEC".split())
_DAY_NAMES = tuple("SUN MON TUE WED THU FRI SAT".split())
_MONTH = _Field("month", 1, 12, 12, _MONTH_NAMES, 1, "JAN-DEC")
_DOW = _Field("day-of-week", 0, 7, 6, _DAY_NAMES, 0, "SUN-SAT")
_SECOND = _Field("second", 0, 59, 59)
#: Fields in the order they are written.
_FIELDS = (_MINUTE, _HOUR, _DOM, _MONTH, _DOW, _SECOND)


def _fail(code: str, spec: _Field | None = None, **params: object) -> ValidationError:
    if spec is not None:
        params = {"field": messages.term(f"cron.field.{spec.key}"), **params}
    return ValidationError(code, "cron", **params)


def _value(token: str, spec: _Field) -> int:
    """One number or name of a field (the order of checks is the SQL validator's too)."""
    if _DIGITS.fullmatch(token):
        number = int(token)
        if not spec.lo <= number <= spec.hi:
            raise _fail("cron.out_of_range", spec, value=token, min=spec.lo, max=spec.hi)
        return number
    upper = token.translate(_UPPER)  # ASCII letters only, whatever the locale
    letters = _LETTERS.fullmatch(token) is not None
    if spec.names and letters and upper in spec.names:
        return spec.names.index(upper) + spec.name_base
    if (spec is _DOM and _QUARTZ_DOM.fullmatch(upper)) or (spec is _DOW and _QUARTZ_DOW.fullmatch(upper)):
        raise _fail("cron.unsupported", spec, value=token)
    if spec.names and letters:
        raise _fail("cron.name_unknown", spec, value=token, names=spec.hint)
    raise _fail("cron.not_a_number", spec, value=token)


def _field(text: str, spec: _Field) -> tuple[frozenset[int], str]:
    """The values of one field, and its spelling for cronsim (``*`` and ``*/n`` kept, the rest listed)."""
    values: set[int] = set()
    spelt: list[str] = []
    for item in text.split(","):
        if item == "":
            raise _fail("cron.list_empty_item", spec, value=text)
        if "#" in item or "?" in item:
            raise _fail("cron.unsupported", spec, value=item)
        base, slash, step_text = item.partition("/")
        if base == "*":
            start, end = spec.lo, spec.star_hi
        elif base == "":
            raise _fail("cron.malformed", spec, value=item)
        elif "-" in base:
            ends = base.split("-")
            if len(ends) != 2 or "" in ends:
                raise _fail("cron.malformed", spec, value=item)
            start, end = _value(ends[0], spec), _value(ends[1], spec)
            if start > end:
                raise _fail("cron.range_reversed", spec, value=base)
        else:
            start = _value(base, spec)
            end = max(start, spec.star_hi) if slash else start
        step = 1
        if slash:
            if not _DIGITS.fullmatch(step_text):
                raise _fail("cron.step_not_number", spec, value=item)
            step = int(step_text)
            if not 1 <= step <= spec.hi:
                raise _fail("cron.step_out_of_range", spec, value=step_text, min=1, max=spec.hi)
        chosen = range(start, end + 1, step)
        values.update(chosen)
        if base == "*":
            spelt.append("*" if step == 1 else f"*/{step}")
        else:
            spelt.extend(str(v) for v in chosen)
    return frozenset(values), ",".join(spelt)


def _split(expr: str) -> tuple[list[str], bool]:
    """The fields of ``expr`` (macros expanded), and whether it has seconds."""
    text = expr.strip(_SPACE)
    if text == "":
        raise _fail("cron.empty")
    if text.startswith("@"):
        fields = MACROS.get(text.translate(_LOWER))
        if fields is None:
            raise _fail("cron.macro_unknown", value=text)
        return fields.split(), False
    parts = _SPLIT.split(text)
    if len(parts) not in (5, 6):
        raise _fail("cron.field_count", count=len(parts), expr=text)
    return parts, len(parts) == 6


#: The attributes of a CronSim that parsing sets (copied from a template instead of parsing per call).
_SIM_STATE = ("parts", "day_and", "seconds", "minutes", "hours", "days", "months", "weekdays")


def _sim_state(canonical: str) -> dict[str, Any] | None:
    probe = CronSim(canonical, datetime(2000, 1, 1))
    state = vars(probe)
    needed = (*_SIM_STATE, "dt", "tick_direction", "skip_initial_tick", "fixup_tz")
    if not all(name in state for name in needed):
        return None  # a cronsim with other internals: construct it per call instead
    return {name: state[name] for name in _SIM_STATE} | {"skip_initial_tick": False, "fixup_tz": None}


@functools.lru_cache(maxsize=8192)
def parse(expr: str) -> Cron:
    """Parse a cron expression (cached on the text); raises ValidationError naming the field and value."""
    if expr is None:
        raise _fail("cron.empty")
    parts, has_seconds = _split(expr)
    sets: list[frozenset[int]] = []
    spelt: list[str] = []
    for text, spec in zip(parts, _FIELDS, strict=False):
        values, canonical = _field(text, spec)
        sets.append(values)
        spelt.append(canonical)
    hour, dom, month, dow = parts[1:5]
    day_and = dom.startswith("*") or dow.startswith("*")  # else OR (Vixie)
    if day_and and min(sets[2]) > max(_DAYS_IN_MONTH[m] for m in sets[3]):
        raise _fail("cron.day_never", _DOM, value=dom, month=month)
    seconds = spelt[5] if has_seconds else "0"
    canonical = " ".join([seconds, *spelt[:5]])
    return Cron(
        expr=expr,
        has_seconds=has_seconds,
        fixed_time=not ("*" in hour or "/" in hour),
        canonical=canonical,
        _state=_sim_state(canonical),
    )


def check_timezone(name: str) -> ZoneInfo:
    """The zone of an IANA name; raises ``ValidationError("timezone.unknown", "timezone", value=name)``.

    Accepted: names of the IANA database that zoneinfo loads, spelt as the database spells them (the
    SQL ``agentlab_sched.check_timezone`` accepts the same: names PostgreSQL knows as zone files, not
    abbreviations such as ``PST`` nor POSIX strings such as ``UTC+3``).
    """
    return _zone(name)


_ZONE_NAME = re.compile(r"[A-Za-z0-9_+-]+(?:/[A-Za-z0-9_+-]+)*")
#: Files in a zoneinfo directory that are not zones PostgreSQL offers.
_NOT_ZONES = frozenset({"localtime", "posixrules"})


@functools.lru_cache(maxsize=1024)
def _zone(name: str) -> ZoneInfo:
    if (
        not isinstance(name, str)
        or not _ZONE_NAME.fullmatch(name)
        or name in _NOT_ZONES
        or name.startswith(("posix/", "right/"))
    ):
        raise ValidationError("timezone.unknown", "timezone", value=name)
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError, UnicodeError):
        raise ValidationError("timezone.unknown", "timezone", value=name) from None


Note = Literal["dst_gap", "dst_repeat"]


@dataclass(frozen=True)
class Upcoming:
    """A coming due time: ``at`` in UTC, ``local`` in the schedule's zone, and why it is special.

    ``note`` is ``"dst_gap"`` for a fixed time that did not exist (moved to the first instant after the
    jump), ``"dst_repeat"`` for a time in a repeated hour, else ``None``.
    """

    at: datetime
    local: datetime
    note: Note | None = None


def _aware(t: datetime) -> datetime:
    if t.tzinfo is None or t.utcoffset() is None:
        raise ValueError("cron: datetimes must be timezone-aware")
    return t


def _is_utc(tz: str) -> bool:
    return tz in ("UTC", "Etc/UTC")


def _repeat_length(wall: datetime, zone: ZoneInfo) -> timedelta:
    """How long the clock is set back at ``wall`` (zero when ``wall`` is not in a repeated hour)."""
    first = wall.replace(tzinfo=zone, fold=0).utcoffset()
    second = wall.replace(tzinfo=zone, fold=1).utcoffset()
    assert first is not None and second is not None
    return max(first - second, timedelta(0))


def _gap_end(wall: datetime, zone: ZoneInfo) -> datetime:
    """The first instant after the DST jump that skipped the wall-clock time ``wall``."""
    a = wall.replace(tzinfo=zone, fold=0).timestamp()
    b = wall.replace(tzinfo=zone, fold=1).timestamp()
    lo, hi = int(min(a, b)), int(max(a, b))  # local(lo) < wall < local(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if datetime.fromtimestamp(mid, zone).replace(tzinfo=None) > wall:
            hi = mid
        else:
            lo = mid
    return datetime.fromtimestamp(hi, UTC)


def _instants(
    walls: Iterator[datetime], zone: ZoneInfo, fixed: bool, reverse: bool
) -> Iterator[tuple[datetime, Note | None]]:
    """Wall-clock due times (ascending, or descending when ``reverse``) as instants, in the same order.

    Fixed time: a time in a gap -> the first instant after the jump; in a repeated hour -> its first
    occurrence. Real time: a time in a gap never shows on the clock; one in a repeated hour shows twice,
    so the repeated hour's due times come twice: all first occurrences, then all second ones.
    """
    repeated: list[datetime] = []  # real time: due times of the repeated hour not yet given out
    for wall in walls:
        at = wall.replace(tzinfo=zone).astimezone(UTC)  # fold=0: the first occurrence
        if at.astimezone(zone).replace(tzinfo=None) != wall:  # in a gap
            if fixed:
                yield _gap_end(wall, zone), "dst_gap"
            continue
        if not _repeat_length(wall, zone):
            if repeated:
                yield from _both_occurrences(repeated, zone, reverse)
                repeated = []
            yield at, None
        elif fixed:
            yield at, "dst_repeat"
        else:
            repeated.append(wall)
    if repeated:
        yield from _both_occurrences(repeated, zone, reverse)


def _both_occurrences(walls: list[datetime], zone: ZoneInfo, reverse: bool) -> Iterator[tuple[datetime, Note]]:
    for fold in (1, 0) if reverse else (0, 1):
        for wall in walls:
            yield wall.replace(tzinfo=zone, fold=fold).astimezone(UTC), "dst_repeat"


@dataclass(frozen=True)
class Cron:
    """A parsed cron expression. All datetimes in and out are timezone-aware; results are UTC.

    ``fixed_time`` says which DST rule applies (see the module docstring); ``canonical`` is the
    six-field, seconds-first expression handed to cronsim.
    """

    expr: str
    has_seconds: bool
    fixed_time: bool = True
    canonical: str = field(default="", repr=False)
    _state: dict[str, Any] | None = field(default=None, repr=False, compare=False, hash=False)

    # -- cronsim ------------------------------------------------------------------------------------

    def _walls(self, start: datetime, reverse: bool) -> CronSim:
        """cronsim over naive wall-clock times from ``start`` (exclusive), without parsing again.

        Naive times keep cronsim to the calendar: DST is applied afterwards, by ``_instants``.
        """
        if self._state is None:
            return CronSim(self.canonical, start, reverse=reverse)
        sim = CronSim.__new__(CronSim)
        sim.__dict__.update(self._state)
        sim.dt = start
        sim.tick_direction = -1 if reverse else 1
        return sim

    def _forward(self, t: datetime, tz: str, inclusive: bool) -> Iterator[tuple[datetime, Note | None]]:
        """Due times after ``t`` (from ``t`` if inclusive), strictly increasing, with their notes."""
        t = _aware(t).astimezone(UTC)
        start = t.replace(microsecond=0) - timedelta(seconds=1)  # cronsim steps one second first
        if _is_utc(tz):
            check_timezone(tz)
            for wall in self._walls(start.replace(tzinfo=None), False):
                at = wall.replace(tzinfo=UTC)
                if at > t or (inclusive and at == t):
                    yield at, None
            return
        zone = _zone(tz)
        local = start.astimezone(zone)
        wall = local.replace(tzinfo=None)
        if not self.fixed_time and not local.fold:
            wall -= _repeat_length(wall, zone)  # the repeated hour's second occurrences are still ahead
        last: datetime | None = None
        for at, note in _instants(self._walls(wall, False), zone, self.fixed_time, False):
            if at < t or (at == t and not inclusive) or (last is not None and at <= last):
                continue  # before t, or a gap's fixed times merged into one fire
            last = at
            yield at, note

    def _backward(self, t: datetime, tz: str, strict: bool) -> datetime | None:
        """The latest due time at or before ``t`` (before ``t`` if strict), stepping back from ``t``."""
        t = _aware(t).astimezone(UTC)
        start = t.replace(microsecond=0) + timedelta(seconds=1)  # cronsim steps one second back first
        if _is_utc(tz):
            check_timezone(tz)
            for wall in self._walls(start.replace(tzinfo=None), True):
                at = wall.replace(tzinfo=UTC)
                if at < t or (at == t and not strict):
                    return at
            return None
        zone = _zone(tz)
        local = start.astimezone(zone)
        wall = local.replace(tzinfo=None)
        if local.fold:
            wall += _repeat_length(wall, zone)  # the repeated hour's first occurrences are all behind us
        for at, _ in _instants(self._walls(wall, True), zone, self.fixed_time, True):
            if at < t or (at == t and not strict):
                return at
        return None

    # -- API ----------------------------------------------------------------------------------------

    def next_after(self, t: datetime, tz: str, *, inclusive: bool = False) -> datetime | None:
        """The first due time after ``t`` (at or after ``t`` if ``inclusive``), in UTC; None if none."""
        return _next_after(self, _aware(t).astimezone(UTC), tz, inclusive)  # UTC: no fold in the key

    def latest_at_or_before(self, t: datetime, tz: str) -> datetime | None:
        """The latest due time at or before ``t`` (cronsim in reverse: no walk through a backlog)."""
        return _backward(self, _aware(t).astimezone(UTC), tz, False)

    def previous_before(self, t: datetime, tz: str) -> datetime | None:
        """The latest due time strictly before ``t``."""
        return _backward(self, _aware(t).astimezone(UTC), tz, True)

    def iter_from(self, t: datetime, tz: str, *, inclusive: bool = False) -> Iterator[datetime]:
        """Due times after ``t`` (at or after if ``inclusive``), in UTC, strictly increasing."""
        return (at for at, _ in self._forward(t, tz, inclusive))

    def upcoming(self, after: datetime, tz: str, n: int) -> list[Upcoming]:
        """The next ``n`` due times after ``after``, in UTC and local time, with DST notes."""
        zone = _zone(tz)
        result: list[Upcoming] = []
        if n <= 0:
            return result
        for at, note in self._forward(after, tz, False):
            result.append(Upcoming(at=at, local=at.astimezone(zone), note=note))
            if len(result) >= n:
                break
        return result


# A tick computes the same answers for every schedule sharing a cron text and a zone (same ``now``):
# remember the latest ones. Results depend on nothing else (the zone data is fixed in a process).


@functools.lru_cache(maxsize=16384)
def _next_after(cron: Cron, t: datetime, tz: str, inclusive: bool) -> datetime | None:
    for at, _ in cron._forward(t, tz, inclusive):
        return at
    return None


@functools.lru_cache(maxsize=16384)
def _backward(cron: Cron, t: datetime, tz: str, strict: bool) -> datetime | None:
    return cron._backward(t, tz, strict)
