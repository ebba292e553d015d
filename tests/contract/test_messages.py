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


def test_a_count_of_one_reads_in_the_singular_in_python_and_sql(sync_conn: psycopg.Connection[DictRow]) -> None:
    """ "1 live worker", "1 enabled schedule waits": the singular form when ``count`` is 1, in Python and SQL
    alike; Chinese has no plural, so its words are the message's own."""
    cases = {
        ("doctor.fires", 1): "firing: 1 live worker can fire schedules",
        ("doctor.fires", 2): "firing: 2 live workers can fire schedules",
        ("doctor.workers_none", 1): "workers: none running, and 1 enabled schedule waits to fire; start one: "
        "agentlab-sched worker --app APP (or procrastinate --app APP worker)",
        ("cli.imported", 1): "created 1 schedule from x.json",
        ("cli.imported", 0): "created 0 schedules from x.json",
        ("doctor.migrations_ok", 1): "schema: up to date (1 migration applied)",
    }
    for (code, count), en in cases.items():
        assert messages.render(code, "en", count=count, path="x.json") == en
        row = sync_conn.execute(
            "SELECT agentlab_sched.msg(%s, jsonb_build_object('count', %s::int, 'path', 'x.json'), 'en') AS t",
            (code, count),
        ).fetchone()
        assert row is not None and row["t"] == en, code
        zh = messages.render(code, "zh-CN", count=count, path="x.json")
        assert zh == messages.CATALOG[code]["zh-CN"].replace("{count}", str(count)).replace("{path}", "x.json")
    assert messages.render("doctor.fires", "zh-CN", count=1) == "触发:1 个在线 worker 可以触发定时任务"
    # Every singular form is of a message that has a count, and says it.
    singular = [code for code in messages.CATALOG if code.endswith(messages.ONE)]
    assert singular and all("{count}" in messages.CATALOG[code]["en"] for code in singular)
    assert all("{count}" in messages.CATALOG[code.removesuffix(messages.ONE)]["en"] for code in singular)
