"""How `agentlab-sched worker` and `dev` print: one line per event in the reader's language, or JSON lines.

:func:`configure` installs one handler on the root logger (stdout). ``lines``: the events of
:mod:`.events` as sentences (the ready line, one per fire and run change), other records as
``warning: ...``; ``json``: one object per record with ``time``, ``level``, ``logger``, ``event``,
``message`` and the stable fields of :data:`.events.FIELDS` always present (null where they do not apply),
then the record's other fields. ``quiet``: only warnings and errors. Procrastinate's own INFO records
(every job started and ended) stay out of the lines: the run lines say it in fewer words.

A job that failed with one of our refusals (a :class:`~agentlab_sched.errors.SchedError`: a ``sql`` run's
SQLSTATE and message, ...) is one line in the reader's language, in any Procrastinate worker of an
installed app: never a traceback, never Procrastinate's English "ended with status" line. When the job was
a run, the run middleware's line said it already (:func:`told`), so that record is left out.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, TextIO

from procrastinate import exceptions as pexc

from agentlab_sched import messages
from agentlab_sched.errors import SchedError
from agentlab_sched.observe import events

__all__ = ["FORMATS", "JsonFormatter", "LineFormatter", "configure", "quiet_aborts", "told"]

#: ``--log-format`` values.
FORMATS = ("lines", "json")

#: Attributes every LogRecord has: what is left is what the caller passed as ``extra=``.
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime", "taskName"}


def _extra(record: logging.LogRecord) -> dict[str, Any]:
    return {k: v for k, v in vars(record).items() if k not in _STANDARD}


class LineFormatter(logging.Formatter):
    """Events as one sentence in ``locale``; anything else as ``level: message``. ``clean`` makes the line
    fit for a terminal (the CLI escapes control characters of names and reasons with it)."""

    def __init__(self, locale: str, clean: Callable[[str], str] | None = None) -> None:
        super().__init__()
        self.locale = locale
        self.clean = clean or (lambda line: line)

    def format(self, record: logging.LogRecord) -> str:
        data = vars(record)
        event = data.get("event")
        if event == "fire":
            line = events.fire_line(data, self.locale)
        elif event == "run":
            line = "    " + events.run_line(data, self.locale)
        elif event in ("ready", "stopped"):
            line = events.worker_line(event, data, self.locale)
        else:
            level = f"log.{record.levelname.lower()}"
            name = messages.render(level, self.locale) if level in messages.CATALOG else record.levelname.lower()
            line = messages.render("event.because", self.locale, line=name, why=record.getMessage())
            if record.exc_info and not _is_cancellation(record.exc_info[1]):
                return self.clean(line) + "\n" + self.formatException(record.exc_info)
        return self.clean(line)


class JsonFormatter(logging.Formatter):
    """One JSON object per record: stable keys first, then the record's own fields."""

    def format(self, record: logging.LogRecord) -> str:
        extra = _extra(record)
        data: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": extra.pop("event", None),
            "message": record.getMessage(),
        }
        for name in events.FIELDS:
            data[name] = extra.pop(name, None)
        data.update(extra)
        if record.exc_info and not _is_cancellation(record.exc_info[1]):
            data["exception"] = self.formatException(record.exc_info)
        return _INVISIBLE.sub(lambda m: f"\\u{ord(m.group()):04x}", json.dumps(data, ensure_ascii=False, default=str))


#: Characters json.dumps writes raw that a terminal or log viewer acts on: C1 controls, bidi controls
#: (U+202E turns text around), line and paragraph separators, zero-width joiners and the BOM. The JSON
#: lines carry them as \u escapes (only strings can hold them, so the line stays the same JSON).
_INVISIBLE = re.compile("[\u0080-\u009f\u061c\u200b-\u200f\u2028-\u202e\u2066-\u2069\ufeff]")


def _is_cancellation(exc: BaseException | None) -> bool:
    return isinstance(exc, asyncio.CancelledError | pexc.JobAborted)


class _QuietAborts(logging.Filter):
    """Procrastinate logs a job aborted for its timeout (or a cancel) with the CancelledError that stopped it:
    the run line says what happened, a traceback says nothing more."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and _is_cancellation(record.exc_info[1]):
            record.exc_info = None
            record.exc_text = None
        return True


_quiet_aborts = _QuietAborts()


#: The attribute by which the run middleware marks an error its run line said.
_TOLD = "_agentlab_sched_told"


def told(exc: BaseException) -> None:
    """The run line of this error was logged: Procrastinate's record of the same failure adds nothing."""
    with contextlib.suppress(AttributeError, TypeError):
        setattr(exc, _TOLD, True)


class _RefusedJobs(logging.Filter):
    """Procrastinate's record of a job that failed with a SchedError becomes one line in the reader's
    language (``locale``, else the deployment's), or is left out when the run line said it."""

    def __init__(self) -> None:
        super().__init__()
        self.locale: str | None = None

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if not isinstance(exc, SchedError) or not str(getattr(record, "action", "")).startswith("job_error"):
            return True
        if getattr(exc, _TOLD, False):
            return False
        job = getattr(record, "job", None) or {}
        locale = self.locale or messages.current_locale()
        code = "event.job_error_retry" if record.action == "job_error_retry" else "event.job_error"  # type: ignore[attr-defined]
        record.msg = messages.render(code, locale, task=job.get("task_name") or "?", job=job.get("id") or "?",
                                     error=exc.message(locale))  # fmt: skip
        record.args = ()
        record.exc_info = None
        record.exc_text = None
        return True


_refused_jobs = _RefusedJobs()

#: The namespace of the scheduler's own jobs (the blueprint's tick and housekeeping).
OWN_PREFIX = "agentlab_sched:"


class _QuietOwnJobs(logging.Filter):
    """Procrastinate's INFO lines about the scheduler's own jobs (the tick starts and ends every second or
    so) are left out: a plain worker's log stays about the app's jobs. Their warnings and errors stay."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno > logging.INFO:
            return True
        job = getattr(record, "job", None)
        task = job.get("task_name") if isinstance(job, dict) else None
        return not (isinstance(task, str) and task.startswith(OWN_PREFIX))


_quiet_own_jobs = _QuietOwnJobs()


class _NoInputs(logging.Filter):
    """A job's inputs stay out of Procrastinate's records: its call string (``task[id](kwargs)``, the inputs
    as Python reprs: a command, a token) becomes ``task[id]`` in the message, and the job's fields lose
    ``task_kwargs``. The run's inputs are in the database, for whoever may read them."""

    def filter(self, record: logging.LogRecord) -> bool:
        job = getattr(record, "job", None)
        if not isinstance(job, dict) or not ("task_kwargs" in job or "call_string" in job):
            return True
        short = f"{job.get('task_name')}[{job.get('id')}]"
        call = job.get("call_string")
        if isinstance(call, str) and call and isinstance(record.msg, str) and call in record.msg:
            record.msg = record.msg.replace(call, short)
        record.job = {k: v for k, v in job.items() if k != "task_kwargs"} | {"call_string": short}
        return True


_no_inputs = _NoInputs()


def quiet_aborts() -> None:
    """No CancelledError traceback when Procrastinate reports an aborted job, a job refused by one of our
    errors in one line, no INFO lines about the scheduler's own jobs, and no job's inputs in any of its
    lines (also in `procrastinate worker`)."""
    worker_logger = logging.getLogger("procrastinate.worker")
    for each in (_no_inputs, _quiet_aborts, _refused_jobs, _quiet_own_jobs):
        if each not in worker_logger.filters:
            worker_logger.addFilter(each)


@contextmanager
def configure(
    fmt: str = "lines",
    *,
    locale: str = "en",
    quiet: bool = False,
    stream: TextIO | None = None,
    clean: Callable[[str], str] | None = None,
) -> Iterator[None]:
    """Print log records as ``fmt`` while the block runs (the previous logging set-up comes back after)."""
    quiet_aborts()
    root = logging.getLogger()
    ours = logging.getLogger("agentlab_sched")
    theirs = logging.getLogger("procrastinate")
    handler = logging.StreamHandler(stream or sys.stdout)
    handler.addFilter(_no_inputs)  # records of Procrastinate's child loggers too (a worker's own name)
    handler.setFormatter(JsonFormatter() if fmt == "json" else LineFormatter(locale, clean))
    saved = (root.level, ours.level, theirs.level, list(root.handlers))
    said = _refused_jobs.locale
    _refused_jobs.locale = locale
    root.handlers = [handler]
    root.setLevel(logging.WARNING)
    ours.setLevel(logging.WARNING if quiet else logging.INFO)
    theirs.setLevel(logging.WARNING)
    try:
        yield
    finally:
        _refused_jobs.locale = said
        root.handlers = saved[3]
        root.setLevel(saved[0])
        ours.setLevel(saved[1])
        theirs.setLevel(saved[2])
