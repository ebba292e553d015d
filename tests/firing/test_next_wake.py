"""How long the precise loop sleeps (the ``next_wake`` query, run after every tick): the first due time,
a schedule under another worker's lease counting from the lease's end, read by the due index: with
thousands of schedules due later it reads a few rows, not every schedule (at a million it was 280 ms and
33,000 buffers a call, 0.35 CPU-s a minute of an idle worker's server)."""

from __future__ import annotations

from typing import Any

import pytest

from agentlab_sched.database import queries
from tests.support.rows import Conn, fetched

S = "agentlab_sched"


async def _make(conn: Conn, count: int) -> None:
    """``count`` schedules due a day ahead and later, and a, b, c, each due at a moment a test sets."""
    await conn.execute(
        f"SELECT {S}.schedule('later-' || g, '0 0 1 1 *', 'demo.echo') FROM generate_series(1, %s) g", (count,)
    )
    for name in ("a", "b", "c"):
        await conn.execute(f"SELECT {S}.schedule(%s, '0 0 1 1 *', 'demo.echo')", (name,))
    await conn.execute(  # planned (as a worker leaves them), each due at a second of its own a day ahead
        f"UPDATE {S}.schedules SET next_run_at = now() + interval '1 day' + id * interval '1 second', replan = NULL"
    )
    await conn.execute(f"ANALYZE {S}.schedules")


async def _set(conn: Conn, name: str, due_in: int, leased_for: int | None = None, enabled: bool = True) -> None:
    """Schedule ``name`` due in ``due_in`` seconds, under a lease ending in ``leased_for`` (None: no lease)."""
    await conn.execute(
        f"""UPDATE {S}.schedules SET next_run_at = now() + make_interval(secs => %s),
               resolving_until = now() + make_interval(secs => %s), enabled = %s, replan = NULL WHERE name = %s""",
        (due_in, leased_for, enabled, name),
    )


async def _wake(conn: Conn) -> tuple[int | None, bool]:
    row = fetched(await queries.one(conn, "next_wake"))
    return (None if row["wait"] is None else round(float(row["wait"])), row["more"])


async def _reads(conn: Conn) -> dict[str, Any]:
    cur = await conn.execute(
        "SELECT seq_scan, idx_tup_fetch FROM pg_stat_xact_user_tables WHERE relid = %s::regclass",
        (f"{S}.schedules",),
    )
    return dict(fetched(await cur.fetchone()))


@pytest.mark.parametrize(
    "a, b, c, wait, due_time",
    [
        ((100, None), (10, 50), (3000, None), 50, False),  # b is leased until 50 s from now: it wakes the loop then
        ((100, None), (10, 200), (3000, None), 100, True),  # b's lease outlasts a's due time: a wakes it
        ((100, None), (10, -5), (3000, None), 10, True),  # b's lease ended: b is due in 10 s like any schedule
        ((100, None), (150, 160), (3000, None), 100, True),  # a lease on a schedule due after a: a
        ((100, 400), (300, 350), (3000, None), 350, False),  # every one due before c leased: the first lease's end
        ((-30, None), (10, None), (3000, None), -30, True),  # overdue: a negative wait (the loop fires at once)
    ],
)
async def test_the_first_due_time_counts_a_lease_from_its_end(
    conn: Conn,
    a: tuple[int, int | None],
    b: tuple[int, int | None],
    c: tuple[int, int | None],
    wait: int,
    due_time: bool,
) -> None:
    await _make(conn, 0)
    await conn.execute(f"UPDATE {S}.schedules SET enabled = false, replan = NULL WHERE name LIKE 'later-%%'")
    for name, (due_in, leased_for) in zip("abc", (a, b, c), strict=True):
        await _set(conn, name, due_in, leased_for)
    assert await _wake(conn) == (wait, False)
    # The instant the loop may tick for ahead of time: a due time, never the end of a lease.
    row = fetched(await queries.one(conn, "next_wake"))
    cur = await conn.execute(
        f"""SELECT next_run_at FROM {S}.schedules WHERE enabled AND coalesce(resolving_until <= now(), true)
            ORDER BY next_run_at LIMIT 1"""
    )
    first_due = fetched(await cur.fetchone())["next_run_at"]  # the first not under a lease
    assert row["at"] == (first_due if due_time else None)


async def test_paused_schedules_count_nothing_and_none_due_is_no_wait(conn: Conn) -> None:
    await _make(conn, 0)
    await _set(conn, "a", 5, enabled=False)
    await _set(conn, "b", 60)
    await conn.execute(f"UPDATE {S}.schedules SET enabled = false, replan = NULL WHERE name <> 'b'")
    assert await _wake(conn) == (60, False)
    await conn.execute(f"UPDATE {S}.schedules SET enabled = false, replan = NULL")
    assert await _wake(conn) == (None, False)
    await conn.execute(f"UPDATE {S}.schedules SET enabled = true, replan = 'edit' WHERE name = 'a'")
    assert (await _wake(conn))[1] is True  # something waits already: a schedule to plan again


async def test_thousands_of_later_schedules_are_not_read(conn: Conn) -> None:
    await _make(conn, 3000)
    await _set(conn, "a", 100)
    await _set(conn, "b", 10, 50)
    async with conn.transaction():  # pg_stat_xact_user_tables: this transaction's reads
        before = await _reads(conn)
        assert await _wake(conn) == (50, False)
        after = await _reads(conn)
    assert after["seq_scan"] == before["seq_scan"], (before, after)
    assert after["idx_tup_fetch"] - before["idx_tup_fetch"] < 20, (before, after)


async def test_it_never_starts_parallel_workers_even_where_the_planner_would(conn: Conn) -> None:
    # At a million schedules the lease check was planned as a parallel scan of a third of them (two
    # workers started at every call). Starting workers made free here, and any table large enough, so that
    # only the query's estimate of the rows it reads keeps its plan serial.
    await _make(conn, 3000)
    await _set(conn, "b", 10, 50)
    await conn.execute(f"ANALYZE {S}.schedules")
    for setting in ("parallel_setup_cost", "min_parallel_table_scan_size", "min_parallel_index_scan_size"):
        await conn.execute(f"SET {setting} = 0")
    cur = await conn.execute("EXPLAIN " + queries.text("next_wake"))
    plan = "\n".join(str(r["QUERY PLAN"]) for r in await cur.fetchall())
    assert "Gather" not in plan, plan
    assert await _wake(conn) == (50, False)
