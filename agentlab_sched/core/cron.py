"""The cron language: parsing with exact errors, and due times in a time zone (pure, no I/O).

Language (``docs/cron.md`` is the user's reference):

- five fields ``minute hour day-of-month month day-of-week``, or six with **seconds last** (the
  croniter / Procrastinate convention), or seven as Quartz writes them: ``second minute hour
  day-of-month month day-of-week year`` (seconds first, a year 1970-2199 last); fields are separated by
  spaces or tabs;
- in each field: ``*``, a value ``a``, a range ``a-b``, steps ``*/n``, ``a-b/n`` and ``a/n`` (from ``a``
  to the field's end), and comma lists of those; a step is 1 to the field's maximum;
- values are numbers, or names in month (``JAN``-``DEC``) and day-of-week (``SUN``-``SAT``), in any case;
  day-of-week is 0-7, 0 and 7 both Sunday (``*`` and ``a/n`` run to 6: 7 appears only when written); a
  day-of-week range may end at Sunday (``SAT-SUN`` is 6-7);
- day-of-month also takes ``L`` (the last day; pg_cron's ``$`` is the same), ``L-n`` (n days before it),
  ``LW`` (the last weekday) and ``nW`` (the weekday nearest day n, within the month); day-of-week takes
  ``d#n`` (the nth such day of the month, n 1-5) and ``dL`` (the last such day); these stand alone as
  list items; ``?`` alone is ``*`` in either day field;
- macros ``@yearly @annually @monthly @weekly @daily @midnight @hourly`` (any case);
- intervals: ``@every 90m`` / ``@every 1h30m from 00:15`` (real elapsed time from an anchor) and
  pg_cron's ``N seconds`` (1-59);
- day-of-month and day-of-week combine with OR when both are restricted, with AND when either starts
  with ``*`` or is ``?`` (Vixie cron, which cronsim follows: ``0 0 */2 * MON`` is Mondays on odd days);
- Jenkins' hashed values: ``H`` (one value of the field), ``H/n``, ``H(a-b)`` and ``H(a-b)/n``, chosen by a
  stable hash (SHA-256) of a seed, the schedule's name: ``H * * * *`` fires once an hour at a minute of its
  own, and schedules spread evenly over the hour; ``H`` in day-of-month picks from 1-28 (as in Jenkins);
- refused, each with a message naming it: wrap-around ranges (``FRI-MON``), the day forms in the wrong
  field or inside a range or step, croniter's ``L5`` and ``W15`` spellings, random ``R`` values.

The SQL validator ``agentlab_sched.cron_problem()`` (``sql/20_cron_fields.sql``, ``21_cron.sql``) accepts this language
with the same error codes and parameters; a property test holds the two together.

Time (DST), for calendar expressions:

- *fixed-hour* schedules (the hour field names hours: numbers, ranges, lists; no ``*``, no step) are
  evaluated on the local wall clock. A time that a DST gap skips follows ``dst_gap``: ``shift``
  (default) fires once at the first instant after the jump, ``skip`` drops it. In a repeated hour, a
  schedule that fires once in that hour (one minute, one second) follows ``dst_repeat``: ``first``
  (default), ``last`` or ``both`` occurrences; one that fires more often within the hour runs through
  both copies of it (Vixie's rule: ``* 1-6 * * *`` does not go silent for an hour);
- schedules whose hour field is ``*`` or has a step follow real elapsed time: they fire at every
  instant at which the local clock shows a matching time (none in a gap, both copies of a repeated
  hour), which keeps ``*/30 * * * *`` at 30 real minutes across both transitions.

Intervals follow real elapsed time: ``anchor + k * every`` for every whole k, whatever the clock does.

Evaluation: cronsim's walk (forward, and in reverse for the latest due time without walking through a
backlog) over naive wall-clock times, with this module's day-of-month and day-of-week rules (cronsim
has no ``L-n`` or ``nW``) plugged into it; the DST rule is then applied here, by ``_instants``.
cronsim's own DST handling is not used: it covers five-field expressions only, and its real-time mode
jumps whole hours (it misses fires in zones that shift by 30 minutes).
"""

from __future__ import annotations

import calendar
import functools
import hashlib
import re
from collections.abc import Hashable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, timedelta
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim

from agentlab_sched import limits, messages
from agentlab_sched.errors import ValidationError

__all__ = ["DST_GAP", "DST_REPEAT", "MACROS", "Cron", "DstGap", "DstRepeat", "Upcoming", "check_timezone", "parse"]

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

DstGap = Literal["shift", "skip"]
DstRepeat = Literal["first", "last", "both"]
#: The choices of the two DST policies, the default first.
DST_GAP: tuple[DstGap, ...] = ("shift", "skip")
DST_REPEAT: tuple[DstRepeat, ...] = ("first", "last", "both")

#: The separators between fields (ASCII whitespace only, as in SQL).
_SPACE = " \t\n\r\f\v"
_SPLIT = re.compile(r"[ \t\n\r\f\v]+")
_DIGITS = re.compile(r"[0-9]+")
_LETTERS = re.compile(r"[A-Za-z]+")
#: Day-of-month forms (upper-cased): L, $, L-n, LW, nW, and croniter's W15 (refused with a hint).
_DOM_FORM = re.compile(r"[L$](-.*)?|[L$]W|[0-9]+W|W[0-9]+")
#: Day-of-week forms (upper-cased): d#n, dL, and croniter's L5 (refused with a hint).
_DOW_FORM = re.compile(r"(?:[0-9]+|[A-Z]{3})(?:#.*|L)|L(?:[0-9]+|[A-Z]{3})")
#: Jenkins' and croniter's hashed and random values: H, H/5, H(0-29), R.
_HASHED = re.compile(r"[HR](?:[(/].*)?")
#: A hashed value as Jenkins writes it: H, H(a-b), H/n, H(a-b)/n (the range and step checked later).
_HASH_FORM = re.compile(r"[Hh](?:\(([^()]*)\))?(?:/(.*))?")
#: Whether an expression has a hashed item (only then does the seed change the result).
_HAS_HASH = re.compile(r"(?:^|[ \t\n\r\f\v,])[Hh](?=[(/ \t\n\r\f\v,]|$)")
_SECONDS_WORD = re.compile(r"seconds?", re.IGNORECASE)
_DURATION = re.compile(r"(?:([0-9]+)d)?(?:([0-9]+)h)?(?:([0-9]+)m)?(?:([0-9]+)s)?")
_TIME = re.compile(r"([0-9]{1,2}):([0-9]{2})(?::([0-9]{2}))?")
_DATE_TIME = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})[T ]([0-9]{2}):([0-9]{2})(?::([0-9]{2}))?")
_UPPER = str.maketrans("abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ")
_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
#: Days in each month (February 29: a leap day is a day that occurs).
_DAYS_IN_MONTH = (0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
#: The longest interval ``@every`` takes.
_EVERY_MAX = timedelta(days=366)
#: The date of an interval's anchor when only a time is given.
_ANCHOR_DATE = date(2000, 1, 1)


@dataclass(frozen=True)
class _Field:
    key: str  # message term: cron.field.<key>
    lo: int
    hi: int
    star_hi: int  # where * and a/n end (6 for day-of-week: 7 = Sunday only when written)
    names: tuple[str, ...] = ()  # names[i] is the value lo_name + i
    name_base: int = 0
    hint: str = ""
    hash_hi: int | None = None  # where a bare H ends, when not at star_hi (day-of-month: 28, as Jenkins)


_MINUTE = _Field("minute", 0, 59, 59)
_HOUR = _Field("hour", 0, 23, 23)
_DOM = _Field("day-of-month", 1, 31, 31, hash_hi=28)
_MONTH_NAMES = tuple("JAN FEB MAR APR MAY JUN JUL AUG SEP OCT NOV DEC".split())
_DAY_NAMES = tuple("SUN MON TUE WED THU FRI SAT".split())
_MONTH = _Field("month", 1, 12, 12, _MONTH_NAMES, 1, "JAN-DEC")
_DOW = _Field("day-of-week", 0, 7, 6, _DAY_NAMES, 0, "SUN-SAT")
_SECOND = _Field("second", 0, 59, 59)
_YEAR = _Field("year", 1970, 2199, 2199)
#: Fields in the order they are written (five or six fields; seven are Quartz's, see ``_QUARTZ``).
_FIELDS = (_MINUTE, _HOUR, _DOM, _MONTH, _DOW, _SECOND)
#: Seven fields, as Quartz (and EventBridge with seconds) writes them: seconds first, then the year.
_QUARTZ = (_SECOND, _MINUTE, _HOUR, _DOM, _MONTH, _DOW, _YEAR)


def _fail(code: str, spec: _Field | None = None, **params: object) -> ValidationError:
    if spec is not None:
        params = {"field": messages.term(f"cron.field.{spec.key}"), **params}
    return ValidationError(code, "cron", **params)


# -- day rules beyond plain values ------------------------------------------------------------------


def _last_day(d: date) -> int:
    return calendar.monthrange(d.year, d.month)[1]


def _nearest_weekday(year: int, month: int, day: int, last: int) -> int:
    """The weekday (Mon-Fri) nearest ``day``, never leaving the month (Quartz's ``W``)."""
    weekday = calendar.weekday(year, month, day)  # 0 Monday .. 6 Sunday
    if weekday == 5:  # Saturday: the Friday before, or the Monday after when the 1st is a Saturday
        return day - 1 if day > 1 else day + 2
    if weekday == 6:  # Sunday: the Monday after, or the Friday before when it is the last day
        return day + 1 if day < last else day - 2
    return day


def _last_weekday(d: date, last: int) -> int:
    weekday = calendar.weekday(d.year, d.month, last)
    return last - max(0, weekday - 4)


@dataclass(frozen=True)
class _Days:
    """The day-of-month rule: plain days, ``L-k`` offsets (``L`` is 0), ``LW``, ``nW``."""

    values: frozenset[int]
    last: frozenset[int] = frozenset()
    last_weekday: bool = False
    nearest: frozenset[int] = frozenset()

    def match(self, d: date) -> bool:
        if d.day in self.values:
            return True
        if not (self.last or self.last_weekday or self.nearest):
            return False
        last = _last_day(d)
        if last - d.day in self.last:
            return True
        if self.last_weekday and d.day == _last_weekday(d, last):
            return True
        return any(n <= last and d.day == _nearest_weekday(d.year, d.month, n, last) for n in self.nearest)

    def can_occur(self, month: int) -> bool:
        """Whether some day of the rule exists in ``month`` (in some year)."""
        longest = _DAYS_IN_MONTH[month]
        return (
            any(v <= longest for v in self.values)
            or any(k < longest for k in self.last)
            or self.last_weekday
            or any(n <= longest for n in self.nearest)
        )


@dataclass(frozen=True)
class _Weekdays:
    """The day-of-week rule: plain days (0 Sunday .. 6 Saturday), ``dL`` and ``d#n``."""

    values: frozenset[int]
    last: frozenset[int] = frozenset()
    nth: frozenset[tuple[int, int]] = frozenset()

    def match(self, d: date) -> bool:
        weekday = (d.weekday() + 1) % 7
        if weekday in self.values:
            return True
        if weekday in self.last and d.day + 7 > _last_day(d):
            return True
        return (weekday, (d.day + 6) // 7) in self.nth


# -- parsing ----------------------------------------------------------------------------------------


def _value(token: str, spec: _Field, item: str) -> int:
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
    if _DOM_FORM.fullmatch(upper) or _DOW_FORM.fullmatch(upper):  # a day form inside a range or step
        belongs = spec is (_DOM if _DOM_FORM.fullmatch(upper) else _DOW)
        raise _fail("cron.special_combined" if belongs else "cron.special_misplaced", spec, value=item)
    if spec.names and letters:
        raise _fail("cron.name_unknown", spec, value=token, names=spec.hint)
    raise _fail("cron.not_a_number", spec, value=token)


@dataclass
class _Parsed:
    """One field: its plain values, its day forms, and its spelling in ``Cron.canonical``."""

    values: set[int] = field(default_factory=set)
    last: set[int] = field(default_factory=set)  # day-of-month L-k, or day-of-week dL
    last_weekday: bool = False
    nearest: set[int] = field(default_factory=set)
    nth: set[tuple[int, int]] = field(default_factory=set)
    spelt: list[str] = field(default_factory=list)
    #: Every value a hashed item could take, whatever the seed: the check for days that never come
    #: looks at these too, so that whether an expression is valid never depends on a name.
    possible: set[int] = field(default_factory=set)


def _day_form(item: str, upper: str, spec: _Field, out: _Parsed) -> None:
    """A day-of-month or day-of-week form (the caller matched one of the two patterns)."""
    if spec is _DOM:
        if upper in ("L", "$"):
            out.last.add(0)
            out.spelt.append("L")
        elif upper in ("LW", "$W"):
            out.last_weekday = True
            out.spelt.append("LW")
        elif upper[1] == "-":
            offset = upper[2:]
            if not _DIGITS.fullmatch(offset) or not 1 <= int(offset) <= 30:
                raise _fail("cron.last_offset", spec, value=item)
            out.last.add(int(offset))
            out.spelt.append(f"L-{int(offset)}")
        elif upper[0] == "W":
            raise _fail("cron.w_prefix", spec, value=item, suggestion=item[1:] + item[0])
        else:
            day = _value(item[:-1], spec, item)
            out.nearest.add(day)
            out.spelt.append(f"{day}W")
        return
    if upper[0] == "L" and not upper.endswith("L") and "#" not in upper:
        raise _fail("cron.l_prefix", spec, value=item, suggestion=item[1:] + item[0])
    if "#" in upper:
        day_text, _, week = item.partition("#")
        day = _value(day_text, spec, item) % 7
        if not _DIGITS.fullmatch(week) or not 1 <= int(week) <= 5:
            raise _fail("cron.nth_out_of_range", spec, value=item)
        out.nth.add((day, int(week)))
        out.spelt.append(f"{day}#{int(week)}")
    else:
        day = _value(item[:-1], spec, item) % 7
        out.last.add(day)
        out.spelt.append(f"{day}L")


def _hash(seed: str, spec: _Field) -> int:
    """A stable, evenly spread number from the seed and the field (SHA-256: the same in every process)."""
    digest = hashlib.sha256(f"{seed}\x00{spec.key}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def _step_of(step_text: str, spec: _Field, item: str) -> int:
    if not _DIGITS.fullmatch(step_text):
        raise _fail("cron.step_not_number", spec, value=item)
    step = int(step_text)
    if not 1 <= step <= spec.hi:
        raise _fail("cron.step_out_of_range", spec, value=step_text, min=1, max=spec.hi)
    return step


def _hashed(item: str, spec: _Field, seed: str, out: _Parsed) -> None:
    """Jenkins' ``H``, ``H(a-b)``, ``H/n``, ``H(a-b)/n``: values chosen by the seed's hash (checks in SQL's order)."""
    if spec is _YEAR:
        raise _fail("cron.special_misplaced", spec, value=item)
    form = _HASH_FORM.fullmatch(item)
    if form is None:
        raise _fail("cron.hash_malformed", spec, value=item)
    lo, hi = spec.lo, spec.hash_hi if spec.hash_hi is not None else spec.star_hi
    if form.group(1) is not None:
        ends = form.group(1).split("-")
        if len(ends) != 2 or "" in ends:
            raise _fail("cron.hash_malformed", spec, value=item)
        lo, hi = _value(ends[0], spec, item), _value(ends[1], spec, item)
        if lo > hi:
            raise _fail("cron.range_reversed", spec, value=form.group(1))
    width = hi - lo + 1
    number = _hash(seed, spec)
    if form.group(2) is None:
        chosen = range(lo + number % width, lo + number % width + 1)
    else:
        step = _step_of(form.group(2), spec, item)
        chosen = range(lo + number % min(step, width), hi + 1, step)
    out.values.update(chosen)
    out.possible.update(range(lo, hi + 1))
    out.spelt.extend(str(v) for v in chosen)


def _field(text: str, spec: _Field, seed: str = "") -> _Parsed:
    """The values of one field, and its canonical spelling (``*`` and ``*/n`` kept, the rest listed)."""
    out = _Parsed()
    day_field = spec is _DOM or spec is _DOW
    if day_field and text == "?":
        text = "*"
    for item in text.split(","):
        if item == "":
            raise _fail("cron.list_empty_item", spec, value=text)
        if "?" in item:
            if day_field:
                raise _fail("cron.question_alone", spec, value=text)
            raise _fail("cron.special_misplaced", spec, value=item)
        upper = item.translate(_UPPER)
        if _HASHED.fullmatch(upper):
            if upper[0] == "R":
                raise _fail("cron.hashed", spec, value=item)
            _hashed(item, spec, seed, out)
            continue
        dom_form = _DOM_FORM.fullmatch(upper) is not None
        if dom_form or _DOW_FORM.fullmatch(upper):
            if spec is not (_DOM if dom_form else _DOW):
                raise _fail("cron.special_misplaced", spec, value=item)
            _day_form(item, upper, spec, out)
            continue
        base, slash, step_text = item.partition("/")
        if base == "*":
            start, end = spec.lo, spec.star_hi
        elif base == "":
            raise _fail("cron.malformed", spec, value=item)
        elif "-" in base:
            ends = base.split("-")
            if len(ends) != 2 or "" in ends:
                raise _fail("cron.malformed", spec, value=item)
            start, end = _value(ends[0], spec, item), _value(ends[1], spec, item)
            if spec is _DOW and end == 0 and start > 0:
                end = 7  # a range ending at Sunday: SAT-SUN is 6-7
            if start > end:
                raise _fail("cron.range_reversed", spec, value=base)
        else:
            start = _value(base, spec, item)
            end = max(start, spec.star_hi) if slash else start
        step = _step_of(step_text, spec, item) if slash else 1
        chosen = range(start, end + 1, step)
        out.values.update(chosen)
        if base == "*":
            out.spelt.append("*" if step == 1 else f"*/{step}")
        else:
            out.spelt.extend(str(v) for v in chosen)
    return out


def _interval_text(text: str) -> timedelta | None:
    """pg_cron's ``N seconds`` (1-59); None when ``text`` is not in that form."""
    parts = _SPLIT.split(text)
    if len(parts) != 2 or not _SECONDS_WORD.fullmatch(parts[1]) or not parts[1].isascii():
        return None
    if not _DIGITS.fullmatch(parts[0]) or not 1 <= int(parts[0]) <= 59:
        raise _fail("cron.seconds_interval", value=text)
    return timedelta(seconds=int(parts[0]))


def _every(text: str) -> tuple[timedelta, datetime]:
    """``@every <duration> [from <anchor>]``: the interval and its anchor (a naive local time)."""
    parts = _SPLIT.split(text)[1:]
    duration = _DURATION.fullmatch(parts[0].translate(_LOWER)) if parts else None
    if duration is None or not parts[0] or (len(parts) > 1 and parts[1].translate(_LOWER) != "from"):
        raise _fail("cron.every_malformed", value=text)
    if len(parts) not in (1, 3, 4):
        raise _fail("cron.every_malformed" if len(parts) == 2 else "cron.every_anchor", value=text)
    units = (86400, 3600, 60, 1)
    every = sum(int(n) * size for n, size in zip(duration.groups(), units, strict=True) if n is not None)
    if not 1 <= every <= _EVERY_MAX.total_seconds():
        raise _fail("cron.every_out_of_range", value=text)
    anchor = datetime.combine(_ANCHOR_DATE, datetime.min.time())
    if len(parts) > 1:
        anchor_text = " ".join(parts[2:])
        whole = _DATE_TIME.fullmatch(anchor_text)
        clock = _TIME.fullmatch(anchor_text)
        numbers = [int(n or 0) for n in whole.groups()] if whole else None
        if numbers is None and clock:
            numbers = [_ANCHOR_DATE.year, _ANCHOR_DATE.month, _ANCHOR_DATE.day, *(int(n or 0) for n in clock.groups())]
        year, month, day, hour, minute, second = numbers or (0, 0, 0, 0, 0, 0)
        if (
            numbers is None
            or not (1 <= year and 1 <= month <= 12 and hour <= 23 and minute <= 59 and second <= 59)
            or not 1 <= day <= calendar.monthrange(year, month)[1]
        ):
            raise _fail("cron.every_anchor", value=text)
        anchor = datetime(year, month, day, hour, minute, second)
    return timedelta(seconds=every), anchor


def _split(text: str) -> tuple[list[str], bool]:
    """The fields of ``text`` (macros expanded), and whether it has seconds (seven fields: Quartz's order)."""
    if text.startswith("@"):
        fields = MACROS.get(text.translate(_LOWER))
        if fields is None:
            raise _fail("cron.macro_unknown", value=text)
        return fields.split(), False
    parts = _SPLIT.split(text)
    if len(parts) not in (5, 6, 7):
        raise _fail("cron.field_count", count=len(parts), expr=text)
    return parts, len(parts) >= 6


def _is_every(text: str) -> bool:
    head = _SPLIT.split(text, maxsplit=1)[0]
    return head.translate(_LOWER) == "@every"


def parse(expr: str, *, dst_gap: DstGap = "shift", dst_repeat: DstRepeat = "first", seed: str | None = None) -> Cron:
    """Parse a cron expression (cached); raises ValidationError naming the field and value.

    ``dst_gap`` and ``dst_repeat`` are the schedule's DST policies for fixed-time fires (see the
    module docstring and ``docs/cron.md``); they change evaluation only, never what is accepted.
    ``seed`` is what ``H`` fields hash: the schedule's name (None: the empty seed, enough to validate).
    Whether an expression is accepted never depends on the seed.
    """
    for option, value, allowed in (("dst_gap", dst_gap, DST_GAP), ("dst_repeat", dst_repeat, DST_REPEAT)):
        if value not in allowed:  # the same refusal as SQL's validate_choice()
            raise ValidationError(
                "schedule.unknown_value", option, field=messages.term(f"schedule.field.{option}"),
                value=str(value), allowed=list(allowed),
            )  # fmt: skip
    limits.check_cron_length(expr)  # before any parsing: a huge expression would take seconds
    # The seed is part of the cache key only when it matters: a million hourly schedules share one entry.
    return _with_policy(expr, dst_gap, dst_repeat, (seed or "") if is_hashed(expr) else "")


def is_hashed(expr: str) -> bool:
    """Whether ``expr`` has an ``H`` field, whose values then depend on the seed (the schedule's name)."""
    return isinstance(expr, str) and _HAS_HASH.search(expr) is not None


@functools.lru_cache(maxsize=8192)
def _with_policy(expr: str, dst_gap: DstGap, dst_repeat: DstRepeat, seed: str = "") -> Cron:
    base = _parse(expr, seed)
    if (dst_gap, dst_repeat) == ("shift", "first"):
        return base
    return replace(base, dst_gap=dst_gap, dst_repeat=dst_repeat)


@functools.lru_cache(maxsize=8192)
def _parse(expr: str, seed: str = "") -> Cron:
    if expr is None:
        raise _fail("cron.empty")
    text = expr.strip(_SPACE)
    if text == "":
        raise _fail("cron.empty")
    if _is_every(text):
        every, anchor = _every(text)
        return _interval(expr, every, anchor)
    seconds_every = _interval_text(text)
    if seconds_every is not None:
        return _interval(expr, seconds_every, datetime.combine(_ANCHOR_DATE, datetime.min.time()))
    parts, has_seconds = _split(text)
    quartz = len(parts) == 7
    fields = [_field(t, spec, seed) for t, spec in zip(parts, _QUARTZ if quartz else _FIELDS, strict=False)]
    year: _Parsed | None = None
    if quartz:
        second, minute, hour, dom, month, dow, year = fields
        parts = [*parts[1:6], parts[0]]  # the order of five and six fields, for what follows
    else:
        if not has_seconds:
            fields.append(_Parsed(values={0}, spelt=["0"]))
        minute, hour, dom, month, dow, second = fields
    dom_text, dow_text = parts[2], parts[4]
    day_and = dom_text.startswith("*") or dow_text.startswith("*") or "?" in (dom_text, dow_text)  # else OR
    # Days that never come: judged on every value a hashed item could take (never on the seed's pick).
    possible = _Days(
        frozenset(dom.values | dom.possible), frozenset(dom.last), dom.last_weekday, frozenset(dom.nearest)
    )
    if day_and and not any(possible.can_occur(m) for m in month.values | month.possible):
        raise _fail("cron.day_never", _DOM, value=dom_text, month=parts[3])
    days = _Days(frozenset(dom.values), frozenset(dom.last), dom.last_weekday, frozenset(dom.nearest))
    weekdays = _Weekdays(frozenset(v % 7 for v in dow.values), frozenset(dow.last), frozenset(dow.nth))
    canonical = " ".join(",".join(f.spelt) for f in (second, minute, hour, dom, month, dow))
    if year is not None:
        canonical += " " + ",".join(year.spelt)
    state = {
        "seconds": frozenset(second.values),
        "minutes": frozenset(minute.values),
        "hours": frozenset(hour.values),
        "months": frozenset(month.values),
        "day_and": day_and,
        "_days": days,
        "_weekdays": weekdays,
        "fixup_tz": None,
        "skip_initial_tick": False,
        "_years": tuple(sorted(year.values)) if year is not None else None,
    }
    return Cron(
        expr=expr,
        has_seconds=has_seconds,
        fixed_time=not ("*" in parts[1] or "/" in parts[1]),
        sub_hourly=len(minute.values) * len(second.values) > 1,
        canonical=canonical,
        _state=state,
    )


def _interval(expr: str, every: timedelta, anchor: datetime) -> Cron:
    seconds = int(every.total_seconds())
    return Cron(
        expr=expr,
        has_seconds=bool(seconds % 60 or anchor.second),
        fixed_time=False,
        sub_hourly=every < timedelta(hours=1),
        canonical=f"@every {seconds}s from {anchor.isoformat()}",
        every=every,
        anchor=anchor,
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


# -- time -------------------------------------------------------------------------------------------

Note = Literal["dst_gap", "dst_repeat", "dst_skipped"]


@dataclass(frozen=True)
class Upcoming:
    """A coming due time: ``at`` in UTC, ``local`` in the schedule's zone, and why it is special.

    ``note`` is ``"dst_gap"`` for a fixed time that did not exist (moved to the first instant after the
    jump), ``"dst_repeat"`` for a time in a repeated hour (``fold`` 0 its first occurrence, 1 its
    second), ``"dst_skipped"`` for a fixed time a gap skipped that does not fire (``dst_gap = skip``:
    only when asked for; ``at`` is then the first instant after the jump), else ``None``. ``nominal`` is
    the wall-clock time the expression names when no clock showed it (a gap).
    """

    at: datetime
    local: datetime
    note: Note | None = None
    fold: int = 0
    nominal: datetime | None = None


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


Repeat = Literal["first", "last", "both"]


#: A due time as ``_instants`` gives it: the instant, its note, its fold, the wall time a gap skipped.
_Due = tuple[datetime, Note | None, int, datetime | None]


def _instants(
    walls: Iterator[datetime], zone: ZoneInfo, gap: Literal["shift", "skip", "none"], repeat: Repeat, reverse: bool
) -> Iterator[_Due]:
    """Wall-clock due times (ascending, or descending when ``reverse``) as instants, in the same order.

    A time in a gap: the first instant after the jump when ``shift``; with ``skip`` the same instant,
    noted ``dst_skipped`` (a fire that does not happen: callers drop it); with ``none`` nothing. A time in
    a repeated hour: its first occurrence, its second, or both (then the repeated hour's due times come
    twice: all first occurrences, then all second ones).
    """
    repeated: list[datetime] = []  # both: due times of the repeated hour not yet given out
    for wall in walls:
        at = wall.replace(tzinfo=zone).astimezone(UTC)  # fold=0: the first occurrence
        if at.astimezone(zone).replace(tzinfo=None) != wall:  # in a gap
            if gap != "none":
                yield _gap_end(wall, zone), "dst_gap" if gap == "shift" else "dst_skipped", 0, wall
            continue
        if not _repeat_length(wall, zone):
            if repeated:
                yield from _both_occurrences(repeated, zone, reverse)
                repeated = []
            yield at, None, 0, None
        elif repeat == "first":
            yield at, "dst_repeat", 0, None
        elif repeat == "last":
            yield wall.replace(tzinfo=zone, fold=1).astimezone(UTC), "dst_repeat", 1, None
        else:
            repeated.append(wall)
    if repeated:
        yield from _both_occurrences(repeated, zone, reverse)


def _both_occurrences(walls: list[datetime], zone: ZoneInfo, reverse: bool) -> Iterator[_Due]:
    for fold in (1, 0) if reverse else (0, 1):
        for wall in walls:
            yield wall.replace(tzinfo=zone, fold=fold).astimezone(UTC), "dst_repeat", fold, None


class _Walk(CronSim):
    """cronsim's walk over naive wall-clock times, with this module's day rules.

    Built from a parsed expression's state (never from text: cronsim has no ``L-n`` or ``nW``); cronsim
    moves month by month, day by day, hour by hour and asks ``match_dom`` / ``match_dow`` about days.
    """

    _days: _Days
    _weekdays: _Weekdays
    #: The years of a seven-field expression (ascending), None when every year.
    _years: tuple[int, ...] | None

    def match_dom(self, d: date) -> bool:
        return self._days.match(d)

    def match_dow(self, d: date) -> bool:
        return self._weekdays.match(d)

    def _to_year(self) -> None:
        """Move to the nearest allowed year in the walk's direction; StopIteration when none is left."""
        years = self._years
        if years is None or self.dt.year in years:
            return
        if self.tick_direction > 0:
            later = [y for y in years if y > self.dt.year]
            if not later:
                raise StopIteration
            self.dt = datetime(later[0], 1, 1)
        else:
            earlier = [y for y in years if y < self.dt.year]
            if not earlier:
                raise StopIteration
            self.dt = datetime(earlier[-1], 12, 31, 23, 59, 59)

    def advance(self) -> None:
        """cronsim's forward walk, with the year field (cronsim has none): jumps to the next allowed year."""
        if self._years is None:
            return super().advance()
        while True:
            self._to_year()
            self.advance_month()
            if self.dt.year not in self._years:
                continue
            if self.advance_day() or self.advance_hour() or self.advance_minute() or self.advance_second():
                continue
            return None

    def reverse(self) -> None:
        """cronsim's backward walk, with the year field."""
        if self._years is None:
            return super().reverse()
        while True:
            self._to_year()
            self.reverse_month()
            if self.dt.year not in self._years:
                continue
            if self.reverse_day() or self.reverse_hour() or self.reverse_minute() or self.reverse_second():
                continue
            return None


@dataclass(frozen=True)
class Cron:
    """A parsed cron expression. All datetimes in and out are timezone-aware; results are UTC.

    ``fixed_time``: the hour field names hours, so a DST gap moves (``dst_gap = shift``) or drops
    (``skip``) a fire; ``sub_hourly``: it fires more than once within an hour, so it runs through both
    copies of a repeated hour, where a once-an-hour fixed time follows ``dst_repeat``. ``canonical`` is
    the normalised six-field, seconds-first expression (``@every <seconds>s from <anchor>`` for an
    interval). ``every`` and ``anchor`` (naive, in the schedule's zone) are set for intervals.
    """

    expr: str
    has_seconds: bool
    fixed_time: bool = True
    sub_hourly: bool = False
    dst_gap: DstGap = "shift"
    dst_repeat: DstRepeat = "first"
    canonical: str = field(default="", repr=False)
    every: timedelta | None = None
    anchor: datetime | None = None
    _state: dict[str, Any] | None = field(default=None, repr=False, compare=False, hash=False)

    @property
    def rule(self) -> Hashable:
        """What decides the due times, whatever the text said: equal for two expressions (``H`` resolved)
        that fire at the same instants in every zone, so one evaluation serves both."""
        return (replace(self, expr=""), tuple(sorted((self._state or {}).items())))

    # -- the walk and the DST rule ------------------------------------------------------------------

    def _walls(self, start: datetime, reverse: bool) -> _Walk:
        """Naive wall-clock due times from ``start`` (exclusive): DST is applied afterwards."""
        assert self._state is not None
        walk = _Walk.__new__(_Walk)
        walk.__dict__.update(self._state)
        walk.dt = start
        walk.tick_direction = -1 if reverse else 1
        return walk

    @property
    def _repeat(self) -> Repeat:
        """What a due time in a repeated hour does: first, last or both occurrences."""
        if not self.fixed_time or self.sub_hourly:
            return "both"
        return self.dst_repeat

    def _anchor_at(self, tz: str) -> datetime:
        assert self.anchor is not None
        if _is_utc(tz):
            check_timezone(tz)
            return self.anchor.replace(tzinfo=UTC)
        return self.anchor.replace(tzinfo=_zone(tz)).astimezone(UTC)

    def _interval_at_or_before(self, t: datetime, tz: str) -> datetime:
        assert self.every is not None
        anchor = self._anchor_at(tz)
        return anchor + ((t - anchor) // self.every) * self.every

    @property
    def _gap(self) -> Literal["shift", "skip", "none"]:
        """What a due time in a gap does: moves to the jump, is skipped, or (real time) never comes."""
        return self.dst_gap if self.fixed_time else "none"

    def _forward(self, t: datetime, tz: str, inclusive: bool, skipped: bool = False) -> Iterator[_Due]:
        """Due times after ``t`` (from ``t`` if inclusive), strictly increasing, with their notes.

        With ``skipped``, also the fixed times a gap skips under ``dst_gap = skip`` (noted ``dst_skipped``).
        """
        t = _aware(t).astimezone(UTC)
        if self.every is not None:
            at = self._interval_at_or_before(t, tz)
            if at < t or not inclusive:
                at += self.every
            while True:
                yield at, None, 0, None
                at += self.every
        start = t.replace(microsecond=0) - timedelta(seconds=1)  # cronsim steps one second first
        if _is_utc(tz):
            check_timezone(tz)
            for wall in self._walls(start.replace(tzinfo=None), False):
                at = wall.replace(tzinfo=UTC)
                if at > t or (inclusive and at == t):
                    yield at, None, 0, None
            return
        zone = _zone(tz)
        local = start.astimezone(zone)
        wall = local.replace(tzinfo=None)
        repeat = self._repeat
        if repeat != "first" and not local.fold:
            wall -= _repeat_length(wall, zone)  # the repeated hour's second occurrences are still ahead
        last: datetime | None = None
        last_skipped: datetime | None = None
        for due in _instants(self._walls(wall, False), zone, self._gap, repeat, False):
            at, note = due[0], due[1]
            if at < t or (at == t and not inclusive):
                continue
            if note == "dst_skipped":
                if skipped and (last_skipped is None or at > last_skipped):
                    last_skipped = at
                    yield due
                continue
            if last is not None and at <= last:
                continue  # a gap's fixed times merged into one fire
            last = at
            yield due

    def _backward(self, t: datetime, tz: str, strict: bool) -> datetime | None:
        """The latest due time at or before ``t`` (before ``t`` if strict), stepping back from ``t``."""
        t = _aware(t).astimezone(UTC)
        if self.every is not None:
            at = self._interval_at_or_before(t, tz)
            return at - self.every if strict and at == t else at
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
        for at, note, _, _ in _instants(self._walls(wall, True), zone, self._gap, self._repeat, True):
            if note != "dst_skipped" and (at < t or (at == t and not strict)):
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
        return (due[0] for due in self._forward(t, tz, inclusive))

    def upcoming(self, after: datetime, tz: str, n: int, *, skipped: bool = False) -> list[Upcoming]:
        """The next ``n`` due times after ``after``, in UTC and local time, with DST notes.

        With ``skipped``, the fixed times a DST gap skips (``dst_gap = skip``) are listed among them,
        noted ``dst_skipped``; they do not count towards ``n``.
        """
        zone = _zone(tz)
        result: list[Upcoming] = []
        fires = 0
        if n <= 0:
            return result
        for at, note, fold, nominal in self._forward(after, tz, False, skipped):
            result.append(Upcoming(at=at, local=at.astimezone(zone), note=note, fold=fold, nominal=nominal))
            fires += note != "dst_skipped"
            if fires >= n:
                break
        return result


# A tick computes the same answers for every schedule sharing a cron text and a zone (same ``now``):
# remember the latest ones. Results depend on nothing else (the zone data is fixed in a process).


@functools.lru_cache(maxsize=16384)
def _next_after(cron: Cron, t: datetime, tz: str, inclusive: bool) -> datetime | None:
    for due in cron._forward(t, tz, inclusive):
        return due[0]
    return None


@functools.lru_cache(maxsize=16384)
def _backward(cron: Cron, t: datetime, tz: str, strict: bool) -> datetime | None:
    return cron._backward(t, tz, strict)
