"""What one `agentlab-sched web` server serves, and how."""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from datetime import timedelta

from agentlab_sched.settings import Settings

__all__ = ["WebConfig"]


@dataclass(frozen=True)
class WebConfig:
    """The settings of one web server.

    ``database_url`` is the configured database: people sign in to it as their own PostgreSQL roles (its
    host, port and database, their user and password); the server's own connection (the one that LISTENs
    and answers ``/healthz``) uses it as given. With ``local``, a visitor is signed in as the URL's own
    role without a password (a single-user embedded set-up: ``dev``, ``web --local``).
    """

    database_url: str
    settings: Settings = field(default_factory=Settings.from_env)
    read_only: bool = False
    #: Where the pages live, ``/`` or ``/ops`` (no trailing slash but for the root).
    base_path: str = "/"
    local: bool = False
    #: Signs the session cookies; a new one per process by default (sessions end with the server).
    secret: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    #: How long a session lasts without use.
    session_ttl: timedelta = timedelta(hours=8)
    #: Connections at most per signed-in person.
    pool_size: int = 3
    #: Whether the cookie needs HTTPS (behind a TLS proxy).
    secure_cookies: bool = False

    @property
    def prefix(self) -> str:
        """The base path without its trailing slash ('' at the root): what every link starts with."""
        return self.base_path.rstrip("/")
