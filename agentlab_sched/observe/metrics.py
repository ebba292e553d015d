"""Prometheus metrics of `agentlab-sched worker --metrics-port PORT` (off by default), with prometheus_client.

What this worker did, counted from its events (:mod:`.events`):

- ``agentlab_sched_fires_total{status, reason_code}``: fires it recorded;
- ``agentlab_sched_fire_lateness_seconds``: from a fire's due time to its ledger row (histogram);
- ``agentlab_sched_run_start_lateness_seconds``: from a fire's due time to its job starting (histogram);
- ``agentlab_sched_run_changes_total{status}``: run changes it saw (running, succeeded, failed, ...);
- ``agentlab_sched_tick_duration_seconds``: how long one tick took (histogram).

What the database holds, read at each scrape (cheap queries on partial indexes):

- ``agentlab_sched_runs{status}``: runs not ended, by status (queued, running, awaiting_approval, suspended:
  the runs waiting for a person to resume or abandon them are ``status="suspended"``, not a series of their own);
- ``agentlab_sched_outbox_backlog``, ``agentlab_sched_outbox_oldest_pending_seconds``: notifications not
  sent yet; ``agentlab_sched_outbox_retrying``: of those, the ones whose delivery failed at least once;
  ``agentlab_sched_notifications_failed``: notifications given up on in the last 24 hours;
- ``agentlab_sched_overdue_schedules``: enabled schedules that nothing fired on time (the ``overdue`` view);
- ``agentlab_sched_schedule_consecutive_failures{schedule}`` and
  ``agentlab_sched_schedule_last_success_timestamp_seconds{schedule}`` (absent until a run succeeded):
  per schedule, what an alert on one failing schedule needs;
- ``agentlab_sched_database_up``: 0 when the scrape could not read the database.

And the process's own (``process_*``: CPU, memory, open files; ``python_gc_*``, ``python_info``). Counters
have no ``_created`` series.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Mapping
from typing import Any

import psycopg
from prometheus_client import (
    GC_COLLECTOR,
    PLATFORM_COLLECTOR,
    PROCESS_COLLECTOR,
    CollectorRegistry,
    Counter,
    Histogram,
    disable_created_metrics,
    start_http_server,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from psycopg.rows import dict_row

from agentlab_sched.core.statuses import OPEN_RUN_STATUSES
from agentlab_sched.database import queries
from agentlab_sched.errors import ValidationError
from agentlab_sched.observe import events

__all__ = ["Metrics"]

logger = logging.getLogger(__name__)

#: Lateness buckets (seconds): on time is under a second; a minute late is an incident.
LATENESS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 300.0, 3600.0)
TICK = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class _DatabaseCollector(Collector):
    """Gauges read from the database at each scrape, on a connection of its own (scrapes run in a thread)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._conn: psycopg.Connection[Any] | None = None
        self._lock = threading.Lock()

    def _read(self) -> Mapping[str, Any] | None:
        with self._lock:
            try:
                if self._conn is None or self._conn.closed:
                    self._conn = psycopg.connect(
                        self.url, autocommit=True, row_factory=dict_row, connect_timeout=3,
                        options="-c statement_timeout=5000", application_name="agentlab-sched metrics",
                    )  # fmt: skip
                row = queries.one_sync(self._conn, "metrics_gauges")
                if row is not None:
                    row = {**row, "schedules": queries.rows_sync(self._conn, "metrics_schedules")}
                return row
            except psycopg.Error as exc:
                logger.warning("metrics: cannot read the database: %s", exc)
                if self._conn is not None:
                    self._conn.close()
                self._conn = None
                return None

    def collect(self) -> Iterator[GaugeMetricFamily]:
        row = self._read()
        yield GaugeMetricFamily(
            "agentlab_sched_database_up", "1 when this scrape could read the database", value=0 if row is None else 1
        )
        if row is None:
            return
        runs = GaugeMetricFamily("agentlab_sched_runs", "Runs not ended, by status", labels=["status"])
        for status in OPEN_RUN_STATUSES:
            runs.add_metric([status], float(row["runs"].get(status, 0)))
        yield runs
        gauges = (
            ("agentlab_sched_outbox_backlog", "Notifications not sent yet", row["backlog"]),
            ("agentlab_sched_outbox_retrying", "Notifications not sent yet whose delivery failed at least once",
             row["retrying"]),
            ("agentlab_sched_outbox_oldest_pending_seconds", "Age of the oldest notification not sent yet",
             row["oldest"]),
            ("agentlab_sched_notifications_failed", "Notifications given up on in the last 24 hours", row["failed"]),
            ("agentlab_sched_overdue_schedules", "Enabled schedules that nothing fired on time", row["overdue"]),
        )  # fmt: skip
        for name, documentation, value in gauges:
            yield GaugeMetricFamily(name, documentation, value=float(value or 0))
        failures = GaugeMetricFamily(
            "agentlab_sched_schedule_consecutive_failures", "Runs of the schedule that failed in a row",
            labels=["schedule"],
        )  # fmt: skip
        success = GaugeMetricFamily(
            "agentlab_sched_schedule_last_success_timestamp_seconds",
            "When a run of the schedule last succeeded (Unix time)",
            labels=["schedule"],
        )
        for s in row.get("schedules") or []:
            failures.add_metric([s["name"]], float(s["failures"] or 0))
            if s["last_success"] is not None:
                success.add_metric([s["name"]], float(s["last_success"]))
        yield failures
        yield success

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


class Metrics:
    """A registry of its own (one per worker, so several can live in one process), served on ``port``."""

    def __init__(self, url: str) -> None:
        disable_created_metrics()  # a _created series beside every counter doubles them for nothing
        self.registry = CollectorRegistry()
        for collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR):  # the process's own
            self.registry.register(collector)
        self.fires = Counter(
            "agentlab_sched_fires", "Fires this worker recorded", ["status", "reason_code"], registry=self.registry
        )
        self.fire_lateness = Histogram(
            "agentlab_sched_fire_lateness_seconds", "From a fire's due time to its ledger row",
            buckets=LATENESS, registry=self.registry,
        )  # fmt: skip
        self.start_lateness = Histogram(
            "agentlab_sched_run_start_lateness_seconds", "From a fire's due time to its job starting",
            buckets=LATENESS, registry=self.registry,
        )  # fmt: skip
        self.run_changes = Counter(
            "agentlab_sched_run_changes", "Run changes this worker saw, by new status", ["status"],
            registry=self.registry,
        )  # fmt: skip
        self.tick = Histogram(
            "agentlab_sched_tick_duration_seconds", "How long one tick took", buckets=TICK, registry=self.registry
        )
        self._database = _DatabaseCollector(url)
        self.registry.register(self._database)
        self._server: Any = None
        self._thread: threading.Thread | None = None

    def observe(self, event: str, data: Mapping[str, Any]) -> None:
        """An event of :mod:`.events` (subscribed while serving)."""
        if event == "fire":
            self.fires.labels(data.get("status") or "", data.get("reason_code") or "").inc()
            if data.get("late_seconds") is not None:
                self.fire_lateness.observe(float(data["late_seconds"]))
        elif event == "run":
            self.run_changes.labels(data.get("status") or "").inc()
            if data.get("status") == "running" and data.get("late_seconds") is not None:
                self.start_lateness.observe(max(0.0, float(data["late_seconds"])))
        elif event == "tick" and data.get("seconds") is not None:
            self.tick.observe(float(data["seconds"]))

    def serve(self, port: int, addr: str = "127.0.0.1") -> int:
        """Serve ``/metrics`` on ``port`` (0: any free port) of ``addr`` (the loopback unless told: the
        metrics name schedules and tasks); returns the port. A port in use is a ValidationError naming
        ``--metrics-port``."""
        try:
            self._server, self._thread = start_http_server(port, addr=addr, registry=self.registry)
        except OSError as exc:
            logger.debug("cannot serve metrics on port %s: %s", port, exc)
            raise ValidationError("cli.metrics_port", "metrics_port", port=port) from None
        events.subscribe(self.observe)
        return int(self._server.server_port)

    def stop(self) -> None:
        events.unsubscribe(self.observe)
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        self._database.close()
