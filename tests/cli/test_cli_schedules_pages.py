"""`schedules list` a page at a time: by name, at most --limit, the next page --after the last name, and
how many there are (counted up to admin.COUNT_BOUND, an estimate beyond)."""

from __future__ import annotations

import json

import psycopg

from agentlab_sched.schedules import admin
from tests.support.cli import ok


def _create(db_url: str, names: list[str]) -> None:
    with psycopg.connect(db_url) as conn:
        conn.execute(
            "SELECT agentlab_sched.schedule_many(%s::jsonb)",
            [json.dumps([{"name": n, "cron": "0 9 * * *", "task": "demo.echo"} for n in names])],
        )


def _names(stdout: str) -> list[str]:
    return [line.split()[0] for line in stdout.splitlines() if line.startswith(("alpha", "beta", "gamma"))]


def test_pages_by_name_with_the_next_one_said(db_url: str) -> None:
    _create(db_url, ["gamma", "alpha", "beta"])
    first = ok(db_url, "schedules", "list", "--limit", "2").stdout
    assert _names(first) == ["alpha", "beta"]
    assert first.splitlines()[-1] == "2 of 3 schedules shown; the next page: --after beta"
    second = ok(db_url, "schedules", "list", "--limit", "2", "--after", "beta").stdout
    assert _names(second) == ["gamma"]
    assert "next page" not in second
    assert ok(db_url, "schedules", "list", "--after", "gamma").stdout.strip() == "no schedules after gamma"
    zh = ok(db_url, "--locale", "zh-CN", "schedules", "list", "--limit", "1").stdout
    assert zh.splitlines()[-1] == "显示了 3 个定时任务中的 1 个;下一页:--after alpha"
    listed = json.loads(ok(db_url, "schedules", "list", "--json", "--limit", "2", "--after", "alpha").stdout)
    assert [s["name"] for s in listed] == ["beta", "gamma"]


def test_past_the_bound_the_count_is_an_estimate(db_url: str) -> None:
    _create(db_url, [f"s{i:05d}" for i in range(admin.COUNT_BOUND + 1)])
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute("ANALYZE agentlab_sched.schedules")
    last = ok(db_url, "schedules", "list", "--limit", "3").stdout.splitlines()[-1]
    assert last == f"3 of about {admin.COUNT_BOUND + 1} schedules shown (an estimate); the next page: --after s00002"
