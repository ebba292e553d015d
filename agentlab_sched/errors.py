"""The errors users catch, and the one registry that carries them from SQL to Python.

The exception tree::

    Exception
    ├── SchedError          a refused request: ``code`` (message code), ``field``, ``params``;
    │   │                   str() is the message in the deployment's locale, .message(locale) another
    │   ├── ValidationError input that can never be right as written       SQLSTATE 22023
    │   │   └── UnknownArgument  a keyword argument a Python function does not have (also a TypeError)
    │   ├── NotFound        no schedule or run by that name or id           SQLSTATE P0002
    │   ├── Conflict        right input at the wrong moment: a stale version (40001), a name already
    │   │                   taken (23505), a run not in the state the request needs (55000)
    │   ├── NotAllowed      the session lacks a privilege the request needs           SQLSTATE 42501
    │   ├── SqlTaskError    a run of the built-in sql task failed; its message is the run's error
    │   │                   (tasks.sql)
    │   └── NoRunContext    current_run() outside a run (runs.context; also a LookupError)
    ├── LaunchRefused       a resolver refuses a fire; its reason is recorded (firing.hooks)
    ├── Unreadable          a webhook ciphertext that no key here opens, or that belongs to another
    │                       schedule (notify.secrets; internal, the callers say why in words)
    ├── GiveUp              a call retried through a database outage stopped before it succeeded (its
    │                       worker is stopping; database.reconnect; internal)
    ├── AwaitApproval       a task pauses its run until a person decides (runs.approvals; a signal,
    │                       not a failure)
    └── Warning
        └── UserWarning
            └── UnknownTaskWarning  a schedule saved for a task no live worker has registered (a warning:
                                    saved all the same; the database's RAISE WARNING, seen by Python)

:data:`REGISTRY` maps each message code that is not plain bad input to its class and SQLSTATE; every
other code the database raises is a :class:`ValidationError` with SQLSTATE 22023. ``agentlab-sched
migrate`` copies the registry into ``agentlab_sched.error_codes``, and the SQL ``agentlab_sched.fail()``
takes its SQLSTATE from there, so a SQL caller sees the same class of error (by SQLSTATE) as a Python
caller (by exception class). :func:`translated` turns what the database raised back into the
:class:`SchedError` (one helper for admin, lifecycle, firing and the middleware).

A :class:`SchedError`'s message is its catalogue entry (``agentlab_sched/messages``), in English and
Chinese, rather than its docstring: the docstring says what the class means. A subclass that always
means one thing names its code (``NoRunContext.default_code``) and is raised without arguments.

To add an error code: its message goes in the catalogue (``messages/_*.py``); when it is not plain bad
input, one line in :data:`REGISTRY` (class and SQLSTATE). SQL raises it with ``agentlab_sched.fail(code,
field, params)`` (never an explicit SQLSTATE), Python with the class the registry names.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import TracebackType
from typing import Any, ClassVar, Literal

from agentlab_sched import messages

__all__ = [
    "REGISTRY",
    "Conflict",
    "ErrorCode",
    "NotAllowed",
    "NotFound",
    "SchedError",
    "ValidationError",
    "error",
    "from_database",
    "registry_rows",
    "translated",
]


class SchedError(Exception):
    """A refused request: bad input, a stale version, an unknown schedule.

    ``code`` is the stable message code, ``field`` the input it is about (or ``None``), ``params`` the
    values the message names. ``str(err)`` is the message in the deployment's locale;
    ``err.message(locale)`` renders it in another.
    """

    #: The code of a subclass that always means one thing (raised without arguments).
    default_code: ClassVar[str | None] = None

    def __init__(self, code: str | None = None, field: str | None = None, /, **params: object) -> None:
        code = code or self.default_code
        if code is None:
            raise TypeError(f"{type(self).__name__}() needs a message code")
        self.code = code
        self.field = field
        self.params = params
        super().__init__(self.message())

    def message(self, locale: str | None = None) -> str:
        """The message in ``locale`` (the deployment's by default)."""
        return messages.render(self.code, locale, **self.params)


class ValidationError(SchedError):
    """Input that can never be right as written (SQLSTATE 22023 on the SQL side)."""


class NotFound(SchedError):
    """No schedule or run by that name or id (SQLSTATE P0002)."""


class Conflict(SchedError):
    """A stale ``expected_version``, a name already taken, a run not in the state the request needs."""


class NotAllowed(SchedError):
    """The session lacks a privilege the request needs: running SQL as a role (SQLSTATE 42501)."""


class UnknownArgument(ValidationError, TypeError):
    """A keyword argument the function does not have; its message lists the ones it has (also a TypeError,
    what Python raises for an unknown keyword)."""


class UnknownTaskWarning(UserWarning):
    """A schedule was saved for a task that no live worker has registered: accepted, but its fires are
    refused until a worker that has the task runs. ``str(w)`` is the message in the deployment's locale."""

    def __init__(self, task: str) -> None:
        self.code = "schedule.task_not_registered"
        self.task = task
        super().__init__(self.message())

    def message(self, locale: str | None = None) -> str:
        return messages.render(self.code, locale, task=self.task)


def warnings_from_notice(diag: object) -> UnknownTaskWarning | None:
    """The warning a database notice stands for (``RAISE WARNING`` with our DETAIL), or None."""
    detail = getattr(diag, "message_detail", None)
    if not detail or not detail.startswith("{"):
        return None
    try:
        data = json.loads(detail)
    except ValueError:
        return None
    if isinstance(data, dict) and data.get("code") == "schedule.task_not_registered":
        return UnknownTaskWarning(str((data.get("params") or {}).get("task", "")))
    return None


@contextmanager
def database_warnings(conn: Any) -> Iterator[None]:
    """The database's warnings on ``conn`` while the block runs (a task no live worker registered), raised as
    Python warnings (:class:`UnknownTaskWarning`) once it succeeded."""
    found: list[UnknownTaskWarning] = []

    def notice(diag: Any) -> None:  # read at once: the notice's result is freed when this returns
        warning = warnings_from_notice(diag)
        if warning is not None:
            found.append(warning)

    conn.add_notice_handler(notice)
    try:
        yield
    finally:
        conn.remove_notice_handler(notice)
    for warning in found:
        warnings.warn(warning, stacklevel=4)


@dataclass(frozen=True)
class ErrorCode:
    """What one message code is, as an error: its class and its SQLSTATE."""

    code: str
    kind: type[SchedError]
    sqlstate: str


def _codes(kind: type[SchedError], sqlstate: str, *codes: str) -> list[ErrorCode]:
    return [ErrorCode(code, kind, sqlstate) for code in codes]


#: Every code that is not plain bad input (ValidationError, 22023): code -> class and SQLSTATE.
REGISTRY: dict[str, ErrorCode] = {
    e.code: e
    for e in [
        *_codes(NotFound, "P0002", "schedule.not_found", "run.not_found"),
        *_codes(Conflict, "40001", "schedule.stale_version", "notify.rotate.changed"),
        *_codes(NotAllowed, "42501", "sql.not_allowed", "sql.no_connect", "request.refusal_not_allowed"),
        *_codes(Conflict, "23505", "schedule.name_taken", "cli.exists"),
        *_codes(Conflict, "55P03", "code.sync_locked", "migrate.locked"),
        *_codes(
            Conflict,
            "55000",
            "run.already_ended",
            "run.not_awaiting",
            "run.stale_segment",
            "run.already_decided",
            "run.not_suspended",
            "session.not_persistent",
            "trigger.not_carried_out",
            "trigger.paused",
            "request.duplicate",
            "request.error",
            "schedule.defined_in_code",
            "migrate.citus_coordinator",
            "migrate.hold_too_long",
            "setup.public_writable",
            "setup.public_planted",
        ),
    ]
}

#: What the database raises for a code the registry does not name.
DEFAULT = ErrorCode("", ValidationError, "22023")


def error(code: str, field: str | None = None, /, **params: object) -> SchedError:
    """The error of message ``code``, of the class the registry names (ValidationError otherwise)."""
    return REGISTRY.get(code, DEFAULT).kind(code, field, **params)


def from_database(exc: BaseException) -> SchedError | None:
    """Rebuild the SchedError a SQL function raised with ``agentlab_sched.fail()`` (None for others).

    ``fail()`` puts ``{"code", "field", "params"}`` in the error's DETAIL; the class comes from the
    registry, so it is the same whichever SQLSTATE a caller catches.
    """
    diag = getattr(exc, "diag", None)
    detail = getattr(diag, "message_detail", None) if diag else None
    if not detail or not detail.startswith("{"):
        return None
    try:
        data = json.loads(detail)
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get("code") not in messages.CATALOG:
        return None
    return error(data["code"], data.get("field"), **(data.get("params") or {}))


class _Translated:
    """The context manager :func:`translated` returns; sync or async."""

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> Literal[False]:
        err = from_database(exc) if isinstance(exc, Exception) else None
        if err is None:
            return False  # no error, or not one of ours: it goes on as it is
        raise err from exc

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> Literal[False]:
        return self.__exit__(kind, exc, tb)


def translated() -> _Translated:
    """Raise the database's refusals as the SchedError they stand for; anything else as it is.

    ``with errors.translated(): ...`` or ``async with conn.transaction(), errors.translated(): ...``.
    """
    return _Translated()


def registry_rows() -> list[tuple[str, str]]:
    """(code, sqlstate) rows for the database copy of the registry (written by migrate)."""
    return [(e.code, e.sqlstate) for e in REGISTRY.values()]
