"""The one exception type users catch, carrying the field, the value and the message."""

from __future__ import annotations

from agentlab_sched import messages


class SchedError(Exception):
    """A refused request: bad input, a stale version, an unknown schedule.

    ``code`` is the stable message code, ``field`` the input it is about (or ``None``), ``params`` the
    values the message names. ``str(err)`` is the message in the deployment's locale;
    ``err.message(locale)`` renders it in another.
    """

    def __init__(self, code: str, field: str | None = None, /, **params: object) -> None:
        self.code = code
        self.field = field
        self.params = params
        super().__init__(self.message())

    def message(self, locale: str | None = None) -> str:
        return messages.render(self.code, locale, **self.params)


class ValidationError(SchedError):
    """Input that can never be right as written (SQLSTATE 22023 / 23514 on the SQL side)."""


class NotFound(SchedError):
    """No schedule or run by that name or id."""


class Conflict(SchedError):
    """A stale ``expected_version``, a run not in the state the request needs, ..."""


def from_database(exc: Exception) -> SchedError | None:
    """Rebuild the SchedError a SQL function raised with ``agentlab_sched.fail()`` (None for others)."""
    import json

    diag = getattr(exc, "diag", None)
    detail = getattr(diag, "message_detail", None) if diag else None
    if not detail or not detail.startswith("{"):
        return None
    try:
        data = json.loads(detail)
    except ValueError:
        return None
    if not isinstance(data, dict) or "code" not in data:
        return None
    from agentlab_sched import messages

    if data["code"] not in messages.CATALOG:
        return None
    kind = {"23514": ValidationError, "22023": ValidationError, "P0002": NotFound, "40001": Conflict}
    cls = kind.get(getattr(diag, "sqlstate", None) or "", SchedError)
    return cls(data["code"], data.get("field"), **(data.get("params") or {}))
