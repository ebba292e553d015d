"""One duration parser for the CLI's options, the retention setting and prune's age, and local-time text
that Python and SQL write alike."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg.rows import DictRow

from agentlab_sched import messages
from agentlab_sched.cli import common
from agentlab_sched.core import durations
from agentlab_sched.errors import ValidationError
from agentlab_sched.runs import lifecycle


@pytest.mark.parametrize(
    "text, expected",
    [
        ("90s", timedelta(seconds=90)),
        ("10m", timedelta(minutes=10)),
        ("1h30m", timedelta(hours=1, minutes=30)),
        ("2d", timedelta(days=2)),
        ("1w 2d", timedelta(days=9)),
        ("10 minutes", timedelta(minutes=10)),
        ("1 hr, 5 mins", timedelta(hours=1, minutes=5)),
        ("45", timedelta(seconds=45)),
        ("0.5h", timedelta(minutes=30)),
    ],
)
def test_the_cli_and_retention_read_the_same_durations(text: str, expected: timedelta) -> None:
    assert common.parse_duration(text, "timeout") == expected
    assert lifecycle.parse_age(text, "retention") == expected


def test_a_bad_duration_names_the_field_and_the_value_in_both_languages() -> None:
    with pytest.raises(ValidationError) as bad:
        lifecycle.parse_age("thirty days", "retention")
    assert bad.value.field == "retention" and bad.value.params["value"] == "thirty days"
    assert "thirty days" in bad.value.message("en") and "thirty days" in bad.value.message("zh-CN")
    with pytest.raises(ValidationError) as bad:
        common.parse_duration("10 fortnights", "timeout")
    assert bad.value.field == "timeout" and "10 fortnights" in bad.value.message("en")
    with pytest.raises(ValidationError):
        lifecycle.parse_age("", "older_than")


def test_a_negative_duration_is_kept_for_the_database_to_refuse_only_where_asked() -> None:
    assert common.parse_duration("-5m", "timeout") == timedelta(minutes=-5)
    with pytest.raises(ValidationError):
        lifecycle.parse_age("-5m", "retention")


def test_one_table_of_units() -> None:
    assert durations.UNITS["hrs"] == 3600 and durations.UNITS["w"] == 604800


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    at=st.datetimes(min_value=datetime(1971, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)),
    tz=st.sampled_from(["UTC", "Asia/Shanghai", "Europe/Berlin", "America/New_York", "Asia/Kolkata"]),
    fraction=st.sampled_from([0, 1, 500_000, 999_999]),
    whole_minute=st.booleans(),
)
def test_local_time_text_is_the_same_in_python_and_sql(
    sync_conn: psycopg.Connection[DictRow], at: datetime, tz: str, fraction: int, whole_minute: bool
) -> None:
    if whole_minute:
        at = at.replace(second=0, microsecond=fraction)
    row = sync_conn.execute("SELECT agentlab_sched.local_time_text(%s, %s) AS text", (at, tz)).fetchone()
    assert row is not None
    assert messages.local_time(at, tz) == row["text"], (at, tz)
