"""The message catalogue: complete in both locales, and rendered the same by Python and SQL."""

from __future__ import annotations

import psycopg
import pytest
from psycopg.rows import DictRow

from agentlab_sched import messages


def test_every_message_has_en_and_zh_cn_with_the_same_placeholders() -> None:
    assert messages.check_catalog() == []
    assert all(set(per) == {"en", "zh-CN"} for per in messages.CATALOG.values())


def test_no_python_repr_leaks_into_a_message() -> None:
    assert messages.render("launch.unknown_task", "en", task=None) == (
        "no live worker has registered the task not set; start a worker that includes it"
    )
    assert messages.render("launch.unknown_task", "zh-CN", task=None).startswith("没有在线的 worker 注册过任务 未填写")


@pytest.mark.parametrize("seconds", [0, 1, 59, 60, 61, 90, 3600, 3661, 86400, 90061])
def test_durations_read_the_same_in_python_and_sql(sync_conn: psycopg.Connection[DictRow], seconds: int) -> None:
    for loc in messages.LOCALES:
        row = sync_conn.execute("SELECT agentlab_sched.duration_text(%s, %s) AS t", (seconds, loc)).fetchone()
        assert row is not None and row["t"] == messages.duration(seconds, loc)
    assert messages.duration(90, "en") == "1 minute 30 seconds"
    assert messages.duration(90, "zh-CN") == "1 分钟 30 秒"


def test_sql_renders_terms_durations_and_nulls_like_python(sync_conn: psycopg.Connection[DictRow]) -> None:
    params = {"timeout": messages.seconds(600)}
    for loc in messages.LOCALES:
        row = sync_conn.execute(
            "SELECT agentlab_sched.msg('run.timed_out', %s::jsonb, %s) AS t", (psycopg.types.json.Json(params), loc)
        ).fetchone()
        assert row is not None and row["t"] == messages.render("run.timed_out", loc, **params)
    assert messages.render("run.timed_out", "en", **params) == (
        "timed out: still running after the schedule's timeout of 10 minutes; it was aborted"
    )
