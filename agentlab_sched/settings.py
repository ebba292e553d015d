"""Settings from the environment: one table, documented in docs/settings.md.

| variable | default | meaning |
|---|---|---|
| AGENTLAB_SCHED_DATABASE_URL | (embedded) | PostgreSQL URL; without one, an embedded server is started |
| AGENTLAB_SCHED_DATA_DIR | user data dir | where the embedded server keeps its data |
| AGENTLAB_SCHED_LOCALE | en | `en` or `zh-CN`: language of reasons, errors and notifications |
| AGENTLAB_SCHED_SCHEDULER | 1 | 0 turns firing off in a worker that should only run jobs |
| AGENTLAB_SCHED_ON_TIME_WINDOW | 60 | seconds after a due time within which a fire still counts as on time |
| AGENTLAB_SCHED_BATCH_SIZE | 1000 | schedules claimed per transaction by a tick |
| AGENTLAB_SCHED_SECRET_KEY | (none) | Fernet keys, comma-separated, newest first, for webhook URLs and secrets |
| AGENTLAB_SCHED_WEBHOOK_ALLOW_PRIVATE | 0 | 1 allows webhooks to private, loopback and link-local addresses |
| AGENTLAB_SCHED_PUBLIC_URL | (none) | base URL used for links in notifications |
| AGENTLAB_SCHED_RETENTION | (none) | prune finished history older than this (e.g. `30d`) during housekeeping |
| AGENTLAB_SCHED_SCHEDULER_QUEUE | default | the Procrastinate queue of the periodic tick and housekeeping |
| AGENTLAB_SCHED_CRON_SCHEMA | cron | where migrate makes pg_cron's monitoring views (job, job_run_details); off: none |
| AGENTLAB_SCHED_RESOLVER_TIMEOUT | 10 | seconds a resolver may take before its fire is failed_to_start |
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from agentlab_sched.messages import current_locale


def _flag(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    return raw.strip().lower() in ("1", "true", "yes", "on")


def _number(name: str, default: float) -> float:
    raw = os.environ.get(name, "").strip()
    return float(raw) if raw else default


def _schema_name(raw: str | None) -> str | None:
    value = (raw if raw is not None else "cron").strip()
    return None if value.lower() in ("", "off", "none", "0", "false", "no") else value


@dataclass(frozen=True)
class Settings:
    """A snapshot of the environment; build one with `Settings.from_env()`."""

    database_url: str | None = None
    data_dir: str | None = None
    locale: str = "en"
    scheduler: bool = True
    on_time_window: float = 60.0
    batch_size: int = 1000
    secret_keys: tuple[str, ...] = field(default=(), repr=False)
    webhook_allow_private: bool = False
    public_url: str | None = None
    retention: str | None = None
    scheduler_queue: str = "default"
    #: Where migrate makes the pg_cron-compatible views; None: nowhere.
    cron_schema: str | None = "cron"
    #: Seconds a resolver may take for one fire; then the fire is failed_to_start (launch.resolver_timeout).
    resolver_timeout: float = 10.0

    @classmethod
    def from_env(cls) -> Settings:
        keys = tuple(k.strip() for k in os.environ.get("AGENTLAB_SCHED_SECRET_KEY", "").split(",") if k.strip())
        return cls(
            database_url=os.environ.get("AGENTLAB_SCHED_DATABASE_URL") or None,
            data_dir=os.environ.get("AGENTLAB_SCHED_DATA_DIR") or None,
            locale=current_locale(),
            scheduler=_flag("AGENTLAB_SCHED_SCHEDULER", True),
            on_time_window=_number("AGENTLAB_SCHED_ON_TIME_WINDOW", 60.0),
            batch_size=int(_number("AGENTLAB_SCHED_BATCH_SIZE", 1000)),
            secret_keys=keys,
            webhook_allow_private=_flag("AGENTLAB_SCHED_WEBHOOK_ALLOW_PRIVATE", False),
            public_url=os.environ.get("AGENTLAB_SCHED_PUBLIC_URL") or None,
            retention=os.environ.get("AGENTLAB_SCHED_RETENTION") or None,
            scheduler_queue=os.environ.get("AGENTLAB_SCHED_SCHEDULER_QUEUE", "").strip() or "default",
            cron_schema=_schema_name(os.environ.get("AGENTLAB_SCHED_CRON_SCHEMA")),
            resolver_timeout=_number("AGENTLAB_SCHED_RESOLVER_TIMEOUT", 10.0),
        )
