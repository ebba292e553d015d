"""SQL backfill() refuses a range that surely holds more due times than a backfill may fire when it is
asked for (nothing is written), as Python's backfill() and the CLI do, in the session's language; the
bound it counts by never refuses a range the worker's exact count would take."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentlab_sched.core import cron as cronlib
from agentlab_sched.limits import LIMITS
from tests.support.rows import SyncConn

T0 = datetime(2026, 3, 1, tzinfo=UTC)
LIMIT = LIMITS["backfill_times"]
S = "agentlab_sched"


def _refusal(conn: SyncConn, *args: object) -> psycopg.Error:
    with pytest.raises(psycopg.errors.InvalidParameterValue) as caught:
        conn.execute(f"SELECT {S}.backfill(%s, %s, %s)", args)
    return caught.value


@pytest.mark.parametrize(
    ("cron", "timezone", "span"),
    [
        ("* * * * *", "UTC", timedelta(days=2)),  # 2,881 due times
        ("*/30 * * * * *", "Asia/Shanghai", timedelta(hours=12)),  # every 30 seconds
        ("0 9 * * *", "America/New_York", timedelta(days=3 * 365)),  # daily, through six DST changes
        ("@every 1m", "UTC", timedelta(days=1)),
        ("0 * * * 1-5", "Europe/Berlin", timedelta(days=100)),
    ],
)
def test_an_over_limit_range_is_refused_when_asked(
    sync_conn: SyncConn, cron: str, timezone: str, span: timedelta
) -> None:
    sync_conn.execute(f"SELECT {S}.schedule('busy', %s, 'demo.echo', '{{}}', %s)", (cron, timezone))
    sync_conn.execute("SET agentlab_sched.locale = 'en'")
    exc = _refusal(sync_conn, "busy", T0, T0 + span)
    detail = json.loads(exc.diag.message_detail or "{}")
    assert (detail["code"], detail["field"], detail["params"]["limit"]) == ("backfill.too_many", "to", LIMIT)
    assert exc.diag.message_primary is not None and exc.diag.message_primary.startswith(
        f"backfill: the range {detail['params']['start']} to {detail['params']['end']} holds more than {LIMIT} due"
    )
    sync_conn.execute("SET agentlab_sched.locale = 'zh-CN'")
    zh = _refusal(sync_conn, "busy", T0, T0 + span).diag.message_primary or ""
    assert str(LIMIT) in zh and "backfill" not in zh
    assert sync_conn.execute(f"SELECT count(*) AS n FROM {S}.fire_requests").fetchone() == {"n": 0}
    due = cronlib.parse(cron).iter_from(T0, timezone, inclusive=True)
    exact = sum(1 for _ in zip(range(LIMIT + 1), due, strict=False))
    assert exact == LIMIT + 1  # the worker would refuse it too


def test_a_range_within_the_limit_is_asked_for(sync_conn: SyncConn) -> None:
    sync_conn.execute(f"SELECT {S}.schedule('busy', '* * * * *', 'demo.echo')")
    row = sync_conn.execute(f"SELECT {S}.backfill('busy', %s, %s) AS id", (T0, T0 + timedelta(hours=16))).fetchone()
    assert row is not None and row["id"] > 0  # 961 due times: the worker fires them


CRONS = st.sampled_from([
    "* * * * *", "*/7 * * * *", "0 9 * * *", "30 2 * * *", "0 0 * * 0", "15 10 * * MON-FRI", "0 */6 * * *",
    "0 0 1 * *", "0 12 15,28 * *", "5 4 * * SUN", "*/20 * * * * *", "0 30 1 * * * *", "@every 90m", "@hourly",
    "@daily", "@weekly", "@monthly", "45 23 * * 6", "0 0-23/5 * * *", "59 1 * * *", "0 2,3 * * *",
])  # fmt: skip
ZONES = st.sampled_from(["UTC", "America/New_York", "Europe/London", "Australia/Lord_Howe", "Asia/Kolkata"])


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    cron=CRONS,
    timezone=ZONES,
    gap=st.sampled_from(["shift", "skip"]),
    start_days=st.integers(min_value=-4000, max_value=4000),
    factor=st.floats(min_value=0.5, max_value=3.0),
)
def test_the_bound_never_refuses_what_the_worker_would_fire(
    sync_conn: SyncConn, cron: str, timezone: str, gap: cronlib.DstGap, start_days: int, factor: float
) -> None:
    """Ranges around the limit: whenever SQL says "surely more", Python's exact count is more."""
    parsed = cronlib.parse(cron, dst_gap=gap)
    start = T0 + timedelta(days=start_days, minutes=start_days % 97)
    due = parsed.iter_from(start, timezone, inclusive=True)
    times = list(zip(range(int(LIMIT * factor) + 2), due, strict=False))
    end = times[-1][1] - timedelta(seconds=1)
    row = sync_conn.execute(
        f"SELECT {S}.due_times_surely_over(%s, %s, %s, %s, %s) AS over", (cron, timezone, start, end, LIMIT)
    ).fetchone()
    assert row is not None
    if row["over"]:
        assert len(times) - 1 > LIMIT, (cron, timezone, gap, start, end)
