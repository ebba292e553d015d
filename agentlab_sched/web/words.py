"""How the pages say things: labels in the reader's language, a cron in words, times in two zones."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

from agentlab_sched import messages
from agentlab_sched.core import cron as cronlib

__all__ = ["choose_locale", "cron_words", "dst_note", "label", "when"]


def label(code: str, locale: str, **params: object) -> str:
    """The catalogue's words for ``web.<code>`` (or for ``code`` itself when it names another domain's)."""
    full = f"web.{code}" if f"web.{code}" in messages.CATALOG else code
    return messages.render(full, locale, **params)


def value(kind: str, raw: str | None, locale: str) -> str:
    """An option's value or a job's status in words (``web.value.skip``, ``web.job.doing``), with the raw
    value beside it; the raw value alone where the catalogue has no words for it."""
    if raw is None:
        return messages.NOT_SET[locale]
    code = f"web.{kind}.{raw}"
    return f"{messages.render(code, locale)} ({raw})" if code in messages.CATALOG else raw


def choose_locale(chosen: str | None, accept_language: str | None) -> str:
    """The reader's language: the one chosen with the switch, else the first of Accept-Language we ship."""
    if chosen:
        known = messages.known_locale(chosen)
        if known:
            return known
    for part in (accept_language or "").split(","):
        known = messages.known_locale(part.split(";")[0].strip()) if part.strip() else None
        if known:
            return known
    return messages.DEFAULT_LOCALE


def when(value: datetime | str | None, tz: str = "UTC") -> str:
    """``YYYY-MM-DD HH:MM`` in zone ``tz`` (empty for no time)."""
    if value is None:
        return ""
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    try:
        return messages.local_time(value, tz)
    except (KeyError, ValueError):
        return messages.local_time(value, "UTC")


def zone_abbrev(value: datetime | None, tz: str) -> str:
    """The zone's abbreviation at that instant (``CST``, ``+08``), for a time shown in it."""
    if value is None:
        return ""
    try:
        return value.astimezone(ZoneInfo(tz)).strftime("%Z")
    except (KeyError, ValueError):
        return "UTC"


_NUMBER = re.compile(r"^\d+$")
_DAYS = {"SUN": 0, "MON": 1, "TUE": 2, "WED": 3, "THU": 4, "FRI": 5, "SAT": 6}
_MACROS = {"@hourly": "0 * * * *", "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@weekly": "0 0 * * 0",
           "@monthly": "0 0 1 * *", "@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *"}  # fmt: skip


def _day(field: str) -> int | None:
    field = field.upper()
    if _NUMBER.match(field):
        return int(field) % 7
    return _DAYS.get(field)


def _phrase(expr: str, locale: str) -> str | None:
    """The common shapes of a cron in words; None for anything else (the expression is shown as it is)."""
    expr = _MACROS.get(expr.strip().lower(), expr.strip())
    fields = expr.split()
    if len(fields) == 6:  # seconds last (the croniter / Procrastinate convention)
        *five, seconds = fields
        if five == ["*"] * 5 and seconds.startswith("*/") and _NUMBER.match(seconds[2:]):
            return label("cron.every_seconds", locale, n=int(seconds[2:]))
        if seconds != "0":
            return None
        fields = five
    if len(fields) != 5:
        return None
    minute, hour, dom, month, dow = fields
    if [minute, hour, dom, month, dow] == ["*"] * 5:
        return label("cron.every_minute", locale)
    if minute.startswith("*/") and _NUMBER.match(minute[2:]) and [hour, dom, month, dow] == ["*"] * 4:
        return label("cron.every_minutes", locale, n=int(minute[2:]))
    if _NUMBER.match(minute) and [hour, dom, month, dow] == ["*"] * 4:
        return label("cron.hourly", locale, minute=f"{int(minute):02d}")
    if not (_NUMBER.match(minute) and _NUMBER.match(hour)) or month != "*":
        return None
    at = f"{int(hour):02d}:{int(minute):02d}"
    if dom == "*" and dow == "*":
        return label("cron.daily", locale, time=at)
    if dom == "*" and dow.upper() in ("1-5", "MON-FRI"):
        return label("cron.weekdays", locale, time=at)
    if dom == "*" and _day(dow) is not None:
        return label("cron.weekly", locale, day=label(f"day.{_day(dow)}", locale), time=at)
    if dow == "*" and _NUMBER.match(dom):
        return label("cron.monthly", locale, day=int(dom), time=at)
    return None


#: The zones people name by their city in Chinese; others are said by their IANA name.
_ZONES_ZH = {"Asia/Shanghai": "上海", "Asia/Hong_Kong": "香港", "Asia/Taipei": "台北", "Asia/Tokyo": "东京",
             "Asia/Singapore": "新加坡", "Europe/London": "伦敦", "Europe/Berlin": "柏林", "Europe/Paris": "巴黎",
             "America/New_York": "纽约", "America/Los_Angeles": "洛杉矶", "UTC": "UTC", "Etc/UTC": "UTC"}  # fmt: skip


def cron_words(expr: str, tz: str, locale: str) -> str | None:
    """``every Monday at 09:00 (Shanghai time)`` / ``每周一 09:00（上海时间）``; None for a shape it does not know."""
    phrase = _phrase(expr, locale)
    if phrase is None:
        return None
    if locale == "zh-CN":
        zone = _ZONES_ZH.get(tz, tz)
    else:
        zone = "UTC" if tz in ("UTC", "Etc/UTC") else tz.rsplit("/", 1)[-1].replace("_", " ")
    return label("cron.in_zone", locale, text=phrase, zone=zone)


def dst_note(expr: cronlib.Cron, t: cronlib.Upcoming, locale: str) -> str:
    """Why a coming fire is special (DST), as ``schedules next`` says it; empty when it is not."""
    if t.note == "dst_gap":
        return messages.render("cli.note_dst_gap", locale)
    if t.note == "dst_skipped":
        return messages.render("cli.note_dst_skipped", locale, time=t.nominal.strftime("%H:%M") if t.nominal else "")
    if t.note != "dst_repeat":
        return ""
    if not expr.fixed_time or expr.sub_hourly:
        code = "cli.note_dst_repeat_copy_second" if t.fold else "cli.note_dst_repeat_copy_first"
    elif expr.dst_repeat == "both":
        code = "cli.note_dst_repeat_both_second" if t.fold else "cli.note_dst_repeat_both_first"
    else:
        code = "cli.note_dst_repeat_last" if expr.dst_repeat == "last" else "cli.note_dst_repeat"
    return messages.render(code, locale)


def reason(code: str | None, params: Any, recorded: str | None, locale: str) -> str:
    """A ledger reason in the reader's language, as SQL's ``reason_text`` renders it: from the catalogue when
    it knows the code, else the text recorded with the row."""
    if code is None or code not in messages.CATALOG:
        return recorded or ""
    if code == "launch.refused" and not (isinstance(params, dict) and "reason" in params):
        return recorded or ""
    return messages.render(code, locale, **(params if isinstance(params, dict) else {}))


def utc(value: datetime) -> str:
    """``YYYY-MM-DD HH:MM`` in UTC."""
    return when(value.astimezone(UTC), "UTC")


def plain_value(value: Any) -> str:
    """A value from JSON (the audit, inputs, results) as text, never a Python repr."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
