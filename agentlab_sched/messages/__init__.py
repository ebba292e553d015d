"""User-facing text in `en` and `zh-CN`.

Every message has a stable code and one template per locale. Templates use ``{name}`` placeholders,
filled from plain strings and numbers only, so no Python repr can leak into a message. The catalogue
is split by domain (one module each); `agentlab-sched migrate` copies it into the database table
``agentlab_sched.messages`` so SQL functions render the very same words (``agentlab_sched.msg()``).
"""

from __future__ import annotations

import os
import string
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from agentlab_sched.messages import _cli as _cli
from agentlab_sched.messages import _cron as _cron
from agentlab_sched.messages import _firing as _firing
from agentlab_sched.messages import _imports as _imports
from agentlab_sched.messages import _notify as _notify
from agentlab_sched.messages import _runs as _runs
from agentlab_sched.messages import _sql as _sql
from agentlab_sched.messages import _validation as _validation
from agentlab_sched.messages import _web as _web
from agentlab_sched.messages import _worker as _worker

LOCALES = ("en", "zh-CN")
DEFAULT_LOCALE = "en"
#: The environment variable of the deployment's locale (settings.Settings.locale reads it too).
LOCALE_VARIABLE = "AGENTLAB_SCHED_LOCALE"

#: The suffix of a message's singular form: ``CODE.one`` is rendered instead of ``CODE`` when its parameter
#: ``count`` is 1 ("1 schedule", not "1 schedules"). A module gives them as ``SINGULAR`` (code -> English);
#: Chinese has no plural, so its template is the message's own.
ONE = ".one"

#: code -> {locale: template}
CATALOG: dict[str, dict[str, str]] = {}
for _module in (_validation, _cron, _firing, _runs, _notify, _sql, _imports, _cli, _worker, _web):
    for _code, (_en, _zh) in _module.MESSAGES.items():
        if _code in CATALOG:
            raise RuntimeError(f"message code defined twice: {_code}")
        CATALOG[_code] = {"en": _en, "zh-CN": _zh}
    for _code, _en in getattr(_module, "SINGULAR", {}).items():
        CATALOG[_code + ONE] = {"en": _en, "zh-CN": _module.MESSAGES[_code][1]}

#: The words for "no value", used instead of Python's None.
NOT_SET = {"en": "not set", "zh-CN": "未填写"}


def current_locale() -> str:
    """The deployment's locale: ``AGENTLAB_SCHED_LOCALE`` (``en`` or ``zh-CN``), ``en`` by default."""
    value = os.environ.get(LOCALE_VARIABLE, "").strip()
    return normalise_locale(value) if value else DEFAULT_LOCALE


def normalise_locale(value: str) -> str:
    """Map ``zh``, ``zh_CN``, ``zh-cn`` ... onto a shipped locale; anything else is English."""
    lowered = value.strip().replace("_", "-").lower()
    if lowered.startswith("zh"):
        return "zh-CN"
    return "en"


def known_locale(value: str) -> str | None:
    """The shipped locale ``value`` names (``zh``, ``zh_CN``, ``zh-cn.UTF-8``, ``en-US`` ...), or None for a
    language there is no catalogue for (``fr``): callers refuse that rather than answer in English."""
    lowered = value.strip().replace("_", "-").lower().split(".")[0]
    if lowered.startswith("zh"):
        return "zh-CN"
    if lowered == "en" or lowered.startswith("en-"):
        return "en"
    return None


def term(code: str, **params: object) -> dict[str, object]:
    """A message parameter that renders as message ``code`` in the reader's locale (a field name, ...)."""
    return {"msg": code, "params": params} if params else {"msg": code}


def seconds(value: float | int | timedelta) -> dict[str, float]:
    """A message parameter that renders as a duration in the reader's locale."""
    return {"duration": value.total_seconds() if isinstance(value, timedelta) else float(value)}


#: The most items a list shown with :func:`shown` names; the rest are counted ("and 480 more").
SHOWN = 20


def shown(values: Iterable[object], limit: int = SHOWN) -> dict[str, object]:
    """A list parameter that renders as its first ``limit`` items and how many more there are, so that a
    message about 100,000 schedules stays a line (the full list is the caller's to keep, e.g. as items)."""
    items = list(values)
    return shown_of(items, len(items), limit)


def shown_of(values: Iterable[object], total: int, limit: int = SHOWN) -> dict[str, object]:
    """As :func:`shown`, for a list of which only the first items were read, and ``total`` there are."""
    items = list(values)[:limit]
    return {"items": items, "more": max(0, total - len(items))}


def text(value: object, locale: str) -> str:
    """Render one parameter for a message: never a Python repr."""
    if value is None:
        return NOT_SET[locale]
    if isinstance(value, dict) and "duration" in value:  # seconds, said as "10 minutes" / "10 分钟"
        return duration(float(value["duration"]), locale)
    if isinstance(value, dict) and "msg" in value:  # a term that is itself a message, e.g. a field name
        return render(str(value["msg"]), locale, **(value.get("params") or {}))
    if isinstance(value, dict) and "items" in value and "more" in value:  # a list cut by shown()
        listed = text(value["items"], locale)
        more = int(str(value["more"]))
        return render("doctor.and_more", locale, items=listed, count=more) if more else listed
    if isinstance(value, bool):
        return ("yes" if value else "no") if locale == "en" else ("是" if value else "否")
    if isinstance(value, (list, tuple, set, frozenset)):
        sep = ", " if locale == "en" else "、"
        return sep.join(text(v, locale) for v in value)
    if isinstance(value, timedelta):
        return duration(value, locale)
    return str(value)


def render(code: str, locale: str | None = None, /, **params: object) -> str:
    """The text of message ``code`` in ``locale`` (the deployment's by default)."""
    loc = normalise_locale(locale) if locale else current_locale()
    if str(params.get("count")) == "1" and code + ONE in CATALOG:  # SQL's msg() chooses the same way
        code += ONE
    template = CATALOG[code][loc]
    return template.format_map(_Params({k: text(v, loc) for k, v in params.items()}))


class _Params(dict[str, str]):
    def __missing__(self, key: str) -> str:  # a missing parameter shows as itself, never a KeyError
        return "{" + key + "}"


_UNITS = (
    (86400, ("day", "days"), "天"),
    (3600, ("hour", "hours"), "小时"),
    (60, ("minute", "minutes"), "分钟"),
    (1, ("second", "seconds"), "秒"),
)


def duration(value: timedelta | float | int, locale: str) -> str:
    """``10 minutes`` / ``10 分钟``; ``1 hour 30 minutes`` / ``1 小时 30 分钟``."""
    seconds = int(value.total_seconds() if isinstance(value, timedelta) else value)
    if seconds <= 0:
        return "0 seconds" if locale == "en" else "0 秒"
    parts: list[str] = []
    for size, (one, many), zh in _UNITS:
        count, seconds = divmod(seconds, size)
        if count:
            parts.append(f"{count} {one if count == 1 else many}" if locale == "en" else f"{count} {zh}")
    return " ".join(parts)


def local_time(value: datetime, tz: str) -> str:
    """A time in the schedule's zone as ``YYYY-MM-DD HH:MM``, with the seconds when it is not a whole
    minute (fractions of a second are not shown); SQL's ``local_time_text`` writes the same."""
    local = value.astimezone(ZoneInfo(tz))
    return local.strftime("%Y-%m-%d %H:%M:%S" if local.second or local.microsecond else "%Y-%m-%d %H:%M")


def catalog_rows() -> list[tuple[str, str, str]]:
    """(code, locale, template) rows for the database copy of the catalogue."""
    return [(code, loc, tpl) for code, per in sorted(CATALOG.items()) for loc, tpl in per.items()]


def check_catalog(catalog: Mapping[str, Mapping[str, str]] = CATALOG) -> list[str]:
    """Codes whose locales disagree on placeholders (a test keeps this empty)."""
    bad = []
    for code, per in catalog.items():
        names = {loc: {f for _, f, _, _ in string.Formatter().parse(tpl) if f} for loc, tpl in per.items()}
        if set(per) != set(LOCALES) or len({frozenset(v) for v in names.values()}) != 1:
            bad.append(code)
    return bad
