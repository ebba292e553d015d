"""`fires` and `runs list` a page at a time, newest first: at most --limit rows, the next page --before the
last row shown (a fire by its id, the first column of the table and ``fire_id`` in --json; a run by its id
or its first characters), by keyset on the ledger's order (created_at, id); a last line gives the next
page's option when there is one. Rows are written with their times given (no clock, no sleep)."""

from __future__ import annotations

import json
import re
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

from agentlab_sched.database import queries
from agentlab_sched.runs import lifecycle
from tests.support.cli import ok, refused
from tests.support.rows import Conn, SyncConn

T0 = datetime(2026, 10, 5, 1, 0, tzinfo=UTC)

#: Run ids chosen so that two share their first six characters (``aaaaaa``: a prefix naming two runs).
RUN_IDS = [
    uuid.UUID("aaaaaa01-0000-4000-8000-000000000001"),
    uuid.UUID("aaaaaa02-0000-4000-8000-000000000002"),
    uuid.UUID("b1b1b1b1-0000-4000-8000-000000000003"),
    uuid.UUID("c2c2c2c2-0000-4000-8000-000000000004"),
    uuid.UUID("d3d3d3d3-0000-4000-8000-000000000005"),
    uuid.UUID("e4e4e4e4-0000-4000-8000-000000000006"),
    uuid.UUID("f5f5f5f5-0000-4000-8000-000000000007"),
]


def _schedule(conn: SyncConn, name: str) -> int:
    row = conn.execute(
        """INSERT INTO agentlab_sched.schedules (name, cron, timezone, task, next_run_at, replan)
           VALUES (%s, '0 9 * * *', 'UTC', 'demo.echo', NULL, NULL) RETURNING id""",
        (name,),
    ).fetchone()
    assert row is not None
    return int(row["id"])


def _runs(db_url: str) -> list[uuid.UUID]:
    """Seven runs of schedule "daily", newest first by (created_at, id): the three of minute 4 share their
    created_at (the id breaks the tie), and the ids are not in created_at order."""
    minutes = [4, 4, 6, 1, 4, 0, 2]
    with psycopg.connect(db_url, autocommit=True, row_factory=psycopg.rows.dict_row) as conn:
        sid = _schedule(conn, "daily")
        for run_id, minute in zip(RUN_IDS, minutes, strict=True):
            conn.execute(
                """INSERT INTO agentlab_sched.runs (id, schedule_id, task, status, started_by, created_at)
                   VALUES (%s, %s, 'demo.echo', 'succeeded', 'test', %s)""",
                (run_id, sid, T0 + timedelta(minutes=minute)),
            )
    return [r for _, r in sorted(zip(minutes, RUN_IDS, strict=True), reverse=True)]


def _run_rows(stdout: str) -> list[str]:
    """The short ids of the rows of a `runs list` table, in order."""
    return [line.split()[0].lstrip("#") for line in stdout.splitlines() if line.startswith("#")]


def _short(run_id: uuid.UUID) -> str:
    return str(run_id)[:6]


def test_runs_list_pages_back_with_before(db_url: str) -> None:
    newest_first = _runs(db_url)
    assert [_short(r) for r in newest_first] == ["b1b1b1", "d3d3d3", "aaaaaa", "aaaaaa", "f5f5f5", "c2c2c2", "e4e4e4"]

    first = ok(db_url, "runs", "list", "--limit", "3").stdout
    assert _run_rows(first) == [_short(r) for r in newest_first[:3]]
    # The whole id: the six characters shown name two runs here (and many in a large ledger).
    assert first.splitlines()[-1] == f"the next page: --before {newest_first[2]}"

    second = ok(db_url, "runs", "list", "--limit", "3", "--before", str(newest_first[2])).stdout
    assert _run_rows(second) == [_short(r) for r in newest_first[3:6]]
    assert second.splitlines()[-1] == f"the next page: --before {newest_first[5]}"

    # The last page, the run named by its first characters as the table shows them (# or not).
    third = ok(db_url, "runs", "list", "--limit", "3", "--before", _short(newest_first[5])).stdout
    assert _run_rows(third) == [_short(newest_first[6])]
    assert "next page" not in third
    assert ok(db_url, "runs", "list", "--before", f"#{_short(newest_first[6])}").stdout == "no runs\n"

    # Page by page by the line each page ends with: every run once, in order.
    seen: list[str] = []
    args: list[str] = []
    while True:
        out = ok(db_url, "runs", "list", "--limit", "3", "--json", *args).stdout
        page = [r["id"] for r in json.loads(out)]
        seen += page
        if len(page) < 3:
            break
        args = ["--before", page[-1]]
    assert seen == [str(r) for r in newest_first]

    # A full page with nothing after it says no next page; one short of all does.
    assert "next page" not in ok(db_url, "runs", "list", "--limit", "7").stdout
    assert ok(db_url, "runs", "list", "--limit", "6").stdout.splitlines()[-1] == (
        f"the next page: --before {newest_first[5]}"
    )
    zh = ok(db_url, "--locale", "zh-CN", "runs", "list", "--limit", "2").stdout
    assert zh.splitlines()[-1] == f"下一页:--before {newest_first[1]}"

    # --json: a plain list, each run with its id and created_at (the key), the next line nowhere.
    listed = json.loads(ok(db_url, "runs", "list", "--json", "--limit", "3", "--before", str(newest_first[0])).stdout)
    assert [(r["id"], r["created_at"]) for r in listed] == [
        (str(r), (T0 + timedelta(minutes=m)).isoformat()) for r, m in zip(newest_first[1:4], [4, 4, 4], strict=True)
    ]
    # With the other filters: the next page of the schedule's succeeded runs.
    kept = ok(db_url, "runs", "list", "--schedule", "daily", "--status", "succeeded", "--before", str(newest_first[4]))
    assert _run_rows(kept.stdout) == [_short(r) for r in newest_first[5:]]


def test_runs_list_refuses_a_before_that_names_no_one_run(db_url: str) -> None:
    _runs(db_url)
    assert refused(db_url, "runs", "list", "--before", "zz") == (
        '--before: "zz" is not a run id; give the id or its first characters (at least 4, like 1a2b3c)'
    )
    assert refused(db_url, "--locale", "zh-CN", "runs", "list", "--before", "zz") == (
        "--before 的取值「zz」不是运行编号;请写完整编号或它的前几位(至少 4 位,如 1a2b3c)"
    )
    assert refused(db_url, "runs", "list", "--before", "0000abcd") == '--before: there is no run "0000abcd"'
    assert refused(db_url, "--locale", "zh-CN", "runs", "list", "--before", "0000abcd") == (
        "--before 的取值「0000abcd」:没有这个编号的运行"
    )
    assert refused(db_url, "runs", "list", "--before", "aaaaaa") == (
        '--before: "aaaaaa" names 2 runs; give more characters of the id'
    )
    assert refused(db_url, "--locale", "zh-CN", "runs", "list", "--before", "#aaaaaa") == (
        "--before 的取值「#aaaaaa」对应 2 次运行;请多写几位编号"
    )


async def test_list_runs_before_is_the_page_after_that_key(conn: Conn, db_url: str) -> None:
    newest_first = _runs(db_url)
    runs = {r.id: r for r in await lifecycle.list_runs(conn, limit=50)}
    assert list(runs) == newest_first
    key = (runs[newest_first[2]].created_at, newest_first[2])
    page = await lifecycle.list_runs(conn, before=key, limit=3)
    assert [r.id for r in page] == newest_first[3:6]
    # Strictly older: a run of the same created_at with a larger id is not older.
    tie = [r for r in newest_first if runs[r].created_at == T0 + timedelta(minutes=4)]
    assert [r.id for r in await lifecycle.list_runs(conn, before=(T0 + timedelta(minutes=4), tie[1]))] == (
        newest_first[newest_first.index(tie[1]) + 1 :]
    )
    assert await lifecycle.list_runs(conn, before=(runs[newest_first[-1]].created_at, newest_first[-1])) == []
    assert [r.id for r in await lifecycle.list_runs(conn, "daily", status="succeeded", before=key, limit=1)] == [
        newest_first[3]
    ]


# ---------------------------------------------------------------------------------------------- fires


def _fires(db_url: str) -> list[dict[str, Any]]:
    """Seven fires, newest first by (created_at, id) as the ledger lists them: five of "daily", two of
    "weekly"; two written at the same instant (the id breaks the tie), and a backfill written last for a
    due time long past (the ledger's order is when a fire was written, not its due time)."""
    plan = [  # (schedule, due day, status, minute written)
        ("daily", 0, "started", 0),
        ("weekly", 0, "started", 1),
        ("daily", 1, "skipped_overlap", 2),
        ("daily", 2, "started", 3),
        ("weekly", 7, "skipped_misfire", 3),
        ("daily", 3, "started", 5),
        ("daily", -30, "started", 6),
    ]
    with psycopg.connect(db_url, autocommit=True, row_factory=psycopg.rows.dict_row) as conn:
        ids = {name: _schedule(conn, name) for name in ("daily", "weekly")}
        written = []
        for name, day, status, minute in plan:
            row = conn.execute(
                """INSERT INTO agentlab_sched.fires (schedule_id, fire_at, kind, status, created_at)
                   VALUES (%s, %s, %s, %s, %s) RETURNING id, created_at""",
                (ids[name], T0 + timedelta(days=day), "backfill" if day < 0 else "scheduled", status,
                 T0 + timedelta(minutes=minute)),
            ).fetchone()  # fmt: skip
            assert row is not None
            written.append({"id": row["id"], "created_at": row["created_at"], "schedule": name, "status": status})
    return sorted(written, key=lambda f: (f["created_at"], f["id"]), reverse=True)


def _fire_rows(stdout: str) -> list[int]:
    """The fire ids of the rows of a `fires` table (its first column), in order."""
    return [int(line.split()[0]) for line in stdout.splitlines() if re.match(r"\s*\d+ ", line)]


def test_fires_pages_back_with_before(db_url: str) -> None:
    newest_first = _fires(db_url)
    ids = [f["id"] for f in newest_first]
    assert ids[0] == max(ids) and newest_first[-1]["created_at"] == T0  # the backfill first, by when written

    first = ok(db_url, "fires", "--limit", "3").stdout
    # The fire's id, in the first column, is what --before takes.
    assert first.splitlines()[0].split() == ["id", "fire", "at", "schedule", "kind", "status", "run", "reason"]
    assert _fire_rows(first) == ids[:3]
    assert first.splitlines()[-1] == f"the next page: --before {ids[2]}"

    second = ok(db_url, "fires", "--limit", "3", "--before", str(ids[2])).stdout
    assert _fire_rows(second) == ids[3:6]
    assert second.splitlines()[-1] == f"the next page: --before {ids[5]}"

    third = ok(db_url, "fires", "--limit", "3", "--before", str(ids[5])).stdout
    assert _fire_rows(third) == ids[6:]
    assert "next page" not in third
    assert ok(db_url, "fires", "--before", str(ids[6])).stdout == "no fires\n"
    assert _fire_rows(first) + _fire_rows(second) + _fire_rows(third) == ids

    # Page by page through --json by fire_id: every fire once.
    seen: list[int] = []
    args: list[str] = []
    while True:
        page = json.loads(ok(db_url, "fires", "--limit", "3", "--json", *args).stdout)
        assert all(set(f) >= {"fire_id", "created_at", "fire_at"} for f in page)
        seen += [f["fire_id"] for f in page]
        if len(page) < 3:
            break
        args = ["--before", str(page[-1]["fire_id"])]
    assert seen == ids and len(set(seen)) == len(ids)

    assert "next page" not in ok(db_url, "fires", "--limit", "7").stdout
    zh = ok(db_url, "--locale", "zh-CN", "fires", "--limit", "3", "--before", str(ids[0])).stdout
    assert _fire_rows(zh) == ids[1:4]
    assert zh.splitlines()[-1] == f"下一页:--before {ids[3]}"

    # One schedule's fires, a page at a time (the key may be any fire: the page is what is older).
    daily = [f["id"] for f in newest_first if f["schedule"] == "daily"]
    page = ok(db_url, "fires", "daily", "--limit", "2", "--before", str(daily[1])).stdout
    assert _fire_rows(page) == daily[2:4]
    assert page.splitlines()[-1] == f"the next page: --before {daily[3]}"
    weekly = [f["id"] for f in newest_first if f["schedule"] == "weekly"]
    assert _fire_rows(ok(db_url, "fires", "weekly", "--before", str(ids[0])).stdout) == weekly
    started = json.loads(ok(db_url, "fires", "--status", "started", "--json", "--before", str(ids[1])).stdout)
    assert [f["fire_id"] for f in started] == [f["id"] for f in newest_first[2:] if f["status"] == "started"]


def test_fires_refuses_a_before_that_is_not_a_fire(db_url: str) -> None:
    _fires(db_url)
    for bad in ("abc", "0", "-3", "1.5", "#12", "99999999999999999999", "١٢"):
        assert refused(db_url, "fires", "--before", bad) == (
            f'--before: "{bad}" is not a fire id; give the number in the first column of fires (like 1234)'
        ), bad
    assert refused(db_url, "--locale", "zh-CN", "fires", "--before", "abc") == (
        "--before 的取值「abc」不是触发编号;请写触发记录第一列中的数字(如 1234)"
    )
    assert refused(db_url, "fires", "--before", "987654") == (
        "--before: there is no fire 987654 (never written, or pruned)"
    )
    assert refused(db_url, "--locale", "zh-CN", "fires", "daily", "--before", "987654") == (
        "--before 的取值「987654」:没有这个编号的触发记录(从未写入,或已被清理)"
    )


def test_a_page_starts_in_the_index_at_the_key(sync_conn: SyncConn) -> None:
    """Both pages read by the index of the list's order, started at the key (an Index Cond), never a sort
    of the ledger."""
    at = T0
    cases = [
        ("list_fires", {"before_at": at, "before_id": 1}, "fires_created_idx"),
        ("list_runs", {"before_at": at, "before_id": RUN_IDS[0], "until": None}, "runs_created_idx"),
    ]
    for name, key, index in cases:
        params = {"schedule": None, "status": None, "since": None, "limit": 51, **key}
        with sync_conn.transaction():
            sync_conn.execute("SET LOCAL enable_seqscan = off")
            plan = "\n".join(r["QUERY PLAN"] for r in sync_conn.execute(f"EXPLAIN {queries.text(name)}", params))
        # Partitioned: each partition's copy of the index is named after it and its columns.
        assert re.search(rf"Index Scan using \S*({index}|created_at_id_idx)\S* on", plan), plan
        assert "Index Cond: (ROW(" in plan, plan
        assert not re.search(r"(^|->)\s*Sort\s+\(", plan, flags=re.M), plan
