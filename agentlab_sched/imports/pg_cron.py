"""``agentlab-sched import pg-cron``: pg_cron's jobs as sql schedules.

Reads ``cron.job`` (in the same database, or another one: ``source``), and for each job makes a schedule
of the built-in sql task (``admin.schedule_sql``) with the same name (``jobname``, else ``pg_cron-<id>``),
cron text, command, database and role, in pg_cron's time zone (``cron.timezone``; GMT before pg_cron
1.6), with pg_cron's overlap (a fire while the last run is going waits: ``buffer_one``) and a statement
timeout (pg_cron has none; 24 hours, the longest a sql schedule takes, unless given).

They are made **paused** unless ``enable``: pg_cron still runs its jobs. ``unschedule`` (with ``enable``,
pg_cron in the same database) removes the pg_cron jobs in the transaction that enables the schedules, so
each job runs in exactly one scheduler at every moment. A job that cannot be translated (a cron text this
language refuses, ``@reboot``, a superuser role, another host, a name taken by another schedule) is
reported with the reason, and nothing of it is written; the others go ahead.

A job read from **another server** (``source`` is not on this one) names a database of that server: it is
refused unless ``database_map`` says which database of this server it runs in (``{"app": "app_copy"}``).
``run_as`` and ``statement_timeout`` are checked once, before any job: a superuser, the schema's owner, a
role that does not exist, or a timeout of zero are refused as a whole.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from datetime import timedelta
from typing import Any

import psycopg

from agentlab_sched import messages
from agentlab_sched.core import cron as cronlib
from agentlab_sched.database import queries
from agentlab_sched.errors import SchedError, ValidationError
from agentlab_sched.imports import literal
from agentlab_sched.schedules import admin

__all__ = ["DEFAULT_STATEMENT_TIMEOUT", "ImportReport", "Imported", "Job", "Refused", "import_jobs"]

#: The statement timeout of an imported job (pg_cron has none): the longest a sql schedule takes.
DEFAULT_STATEMENT_TIMEOUT = timedelta(hours=24)
#: pg_cron runs one instance of a job at a time and queues the next: buffer_one.
OVERLAP = "buffer_one"
_LOCAL_HOSTS = ("", "localhost", "127.0.0.1", "::1")


@dataclass(frozen=True)
class Job:
    """A row of pg_cron's ``cron.job``."""

    jobid: int
    jobname: str | None
    schedule: str
    command: str
    nodename: str
    nodeport: int
    database: str
    username: str
    active: bool

    @property
    def name(self) -> str:
        """The schedule's name: the job's name, else ``pg_cron-<jobid>``."""
        return self.jobname or f"pg_cron-{self.jobid}"


@dataclass(frozen=True)
class Imported:
    """A job that is (now, or since an earlier import) the schedule ``name``."""

    jobid: int
    name: str
    cron: str
    database: str
    username: str
    enabled: bool
    #: ``created`` by this import, ``already`` imported before, ``enabled`` (imported before, enabled now).
    outcome: str
    #: Whether this import removed the pg_cron job.
    unscheduled: bool = False


@dataclass(frozen=True)
class Refused:
    """A job that was not translated: why, as a message (code and parameters) and in words."""

    jobid: int
    name: str
    code: str
    reason: str


@dataclass
class ImportReport:
    """What an import did (or, dry, would do)."""

    source_database: str
    timezone: str
    enable: bool
    unschedule: bool
    dry_run: bool
    #: Whether pg_cron is in this database (its jobs can be removed here: --unschedule).
    same_database: bool = True
    imported: list[Imported] = field(default_factory=list)
    refused: list[Refused] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _source_key(jobid: int, database: str) -> str:
    """``imported_from`` of the schedule made from a job: how a second import recognises it."""
    return f"pg_cron job {jobid} in database {database}"


async def import_jobs(
    conn: psycopg.AsyncConnection[Any],
    source: psycopg.AsyncConnection[Any] | None = None,
    *,
    enable: bool = False,
    unschedule: bool = False,
    run_as: str | None = None,
    timezone: str | None = None,
    statement_timeout: timedelta = DEFAULT_STATEMENT_TIMEOUT,
    dry_run: bool = False,
    locale: str | None = None,
    database_map: dict[str, str] | None = None,
) -> ImportReport:
    """Make schedules of pg_cron's jobs (read from ``source``, default ``conn``'s database) in ``conn``'s.

    ``run_as`` replaces every job's role (pg_cron jobs often run as a superuser, which a sql schedule may
    not); ``timezone`` replaces pg_cron's. Raises :class:`ValidationError` before writing anything when
    the import as a whole cannot be done (no pg_cron, an unknown time zone, ``unschedule`` without
    ``enable`` or across databases).
    """
    if statement_timeout <= timedelta(0):
        raise ValidationError("import.statement_timeout_positive", "statement_timeout", value=str(statement_timeout))
    if run_as is not None:
        role = await queries.one(conn, "run_as_role", {"role": run_as})
        if role is None:
            raise ValidationError("import.run_as_unknown", "run_as", role=run_as)
        if role["superuser"] or role["owner"]:
            raise ValidationError("import.run_as_unusable", "run_as", role=run_as)
    if unschedule and not enable:
        raise ValidationError("import.unschedule_needs_enable", "unschedule")
    if unschedule and source is not None:
        raise ValidationError("import.unschedule_needs_same_database", "unschedule")
    reader = source or conn
    if not await queries.value(reader, "pg_cron_present"):
        raise ValidationError("import.no_pg_cron", "from")
    jobs = [Job(**row) for row in await queries.rows(reader, "pg_cron_jobs")]
    setting = await queries.one(reader, "pg_cron_timezone")
    assert setting is not None
    zone = timezone or setting["timezone"] or "UTC"  # pg_cron before 1.6 reads schedules in GMT
    try:
        cronlib.check_timezone(zone)
    except ValidationError:
        raise ValidationError("import.bad_timezone", "timezone", value=zone) from None
    report = ImportReport(setting["database"], zone, enable, unschedule, dry_run, same_database=source is None)
    other_server = source is not None and not await _same_server(conn, source)
    done = {row["imported_from"]: row for row in await queries.rows(conn, "imported_schedules")}
    async with conn.transaction(force_rollback=dry_run):
        for job in jobs:
            if other_server:
                mapped = (database_map or {}).get(job.database)
                if mapped is None:
                    reason = messages.render("import.other_server", locale, database=job.database)
                    report.refused.append(Refused(job.jobid, job.name, "import.other_server", reason))
                    continue
                job = replace(job, database=mapped)
            await _one(conn, job, report, done, run_as, statement_timeout, locale)
    return report


async def _same_server(conn: psycopg.AsyncConnection[Any], source: psycopg.AsyncConnection[Any]) -> bool:
    """Whether ``source`` is a database of the server ``conn`` is on: the same system identifier (else the
    same address and port)."""
    here = await queries.one(conn, "server_identity")
    there = await queries.one(source, "server_identity")
    assert here is not None and there is not None
    if here["system_identifier"] and there["system_identifier"]:
        return bool(here["system_identifier"] == there["system_identifier"])
    return (here["address"], here["port"]) == (there["address"], there["port"])


async def _one(
    conn: psycopg.AsyncConnection[Any],
    job: Job,
    report: ImportReport,
    done: dict[str, dict[str, Any]],
    run_as: str | None,
    statement_timeout: timedelta,
    locale: str | None,
) -> None:
    key = _source_key(job.jobid, report.source_database)
    username = run_as or job.username

    def refuse(code: str, **params: object) -> None:
        reason = messages.render(code, locale, **params)
        report.refused.append(Refused(job.jobid, job.name, code, reason))

    earlier = done.get(key)
    if earlier is None:
        try:
            taken = await admin.get(conn, job.name)
        except SchedError:
            taken = None
        if taken is not None:
            return refuse("import.name_taken", name=job.name)
        host = job.nodename or ""
        if host not in _LOCAL_HOSTS and not host.startswith("/"):
            return refuse("import.other_host", host=host, port=job.nodeport)
        try:
            async with conn.transaction():  # a savepoint: a refused job leaves nothing behind
                await admin.schedule_sql(
                    conn, job.name, job.schedule, literal(job.command), database=job.database, username=username,
                    timezone=report.timezone, statement_timeout=statement_timeout, enabled=False,
                )  # fmt: skip
                await queries.execute(conn, "mark_imported", {"name": job.name, "source": key, "overlap": OVERLAP})
        except SchedError as err:
            if err.code == "sql.not_allowed" and run_as is None:  # pg_cron's jobs often run as a superuser
                report.refused.append(Refused(job.jobid, job.name, err.code, messages.render(
                    "import.run_as_hint", locale, reason=err.message(locale))))  # fmt: skip
                return None
            return refuse(err.code, **err.params)
        outcome, name = "created", job.name
    else:
        outcome, name = "already", earlier["name"]
    current = await admin.get(conn, name)
    unscheduled = False
    if report.enable and job.active and not current.enabled:
        current = await admin.resume(conn, name)
        outcome = "enabled" if outcome == "already" else outcome
    elif not current.enabled:
        reason = "import.paused_inactive" if report.enable else "import.paused"
        await admin.pause_because(conn, name, reason, {"jobid": job.jobid})
    if report.unschedule and current.enabled:
        unscheduled = bool(await queries.value(conn, "pg_cron_unschedule", {"jobid": job.jobid}))
    report.imported.append(
        Imported(job.jobid, name, job.schedule, job.database, username, current.enabled, outcome, unscheduled)
    )
