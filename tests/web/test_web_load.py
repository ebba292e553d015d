"""The load page's heat map (web/load.py) against ``schedules next``: the same fires, minute by minute.

Schedules in zones with a DST change in the day shown (New York's spring gap, London's autumn repeat), under
each DST policy, with ``H`` forms (resolved from each name: schedules with one cron fire at minutes of their
own), a validity window, ``remaining_runs``, and a paused schedule that counts nothing; ``now`` injected.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from agentlab_sched.schedules import admin
from agentlab_sched.web.live import Hub
from agentlab_sched.web.load import DAY, LoadMap, counts, evaluate, read_groups
from tests.support.rows import Conn

#: (name, cron, options): each evaluated by the heat map and by admin.upcoming (``schedules next``).
SCHEDULES: list[tuple[str, str, dict[str, Any]]] = [
    ("ny-0230", "30 2 * * *", {"timezone": "America/New_York"}),
    ("ny-0230-skip", "30 2 * * *", {"timezone": "America/New_York", "dst_gap": "skip"}),
    ("ny-every-20", "*/20 * * * *", {"timezone": "America/New_York"}),
    ("ldn-0130", "30 1 * * *", {"timezone": "Europe/London"}),
    ("ldn-0130-both", "30 1 * * *", {"timezone": "Europe/London", "dst_repeat": "both"}),
    ("ldn-0130-last", "30 1 * * *", {"timezone": "Europe/London", "dst_repeat": "last"}),
    ("ldn-H-hourly", "H * * * *", {"timezone": "Europe/London"}),
    *[(f"h-daily-{n}", "H H * * *", {"timezone": "Asia/Shanghai"}) for n in range(6)],
    *[(f"h-quarter-{n}", "H/15 * * * *", {}) for n in range(3)],
    ("h-range", "H(0-29) 2 * * *", {"timezone": "America/New_York"}),
    ("utc-0900-a", "0 9 * * *", {}),
    ("utc-0900-b", "0 9 * * *", {}),
    ("windowed", "*/30 * * * *", {"starts_at": "+3h", "ends_at": "+7h"}),
    ("limited", "0 * * * *", {"remaining_runs": 5}),
    ("seconds", "0 12 * * * */10", {}),
    ("paused", "* * * * *", {"enabled": False}),
]

#: The instants shown: the day of New York's gap (2026-03-08 02:00 EST) and of London's repeat (2026-10-25
#: 01:00-02:00 BST/GMT), a minute's start each.
NOWS = [datetime(2026, 3, 8, 5, 17, tzinfo=UTC), datetime(2026, 10, 24, 22, 41, tzinfo=UTC)]


async def _make(conn: Conn, now: datetime) -> None:
    for name, cron, options in SCHEDULES:
        opts = dict(options)
        for key in ("starts_at", "ends_at"):
            if key in opts:
                opts[key] = now + timedelta(hours=int(opts[key].strip("+h")))
        await admin.schedule(conn, name, cron, "demo.echo", {}, now=now, **opts)


async def _expected(conn: Conn, now: datetime) -> list[int]:
    """Fires per minute from ``now`` for 24 hours, from ``schedules next`` of each enabled schedule."""
    out = [0] * 1440
    for name, _, options in SCHEDULES:
        if options.get("enabled") is False:
            continue
        for t in await admin.upcoming(conn, name, admin.MAX_UPCOMING, after=now - timedelta(microseconds=1)):
            if t.at < now + DAY:
                out[int((t.at - now).total_seconds() // 60)] += 1
    return out


@pytest.mark.parametrize("now", NOWS, ids=["new-york-gap", "london-repeat"])
async def test_the_heat_map_counts_what_schedules_next_gives(conn: Conn, now: datetime) -> None:
    await _make(conn, now)
    groups = await read_groups(conn)
    fires = evaluate(((g.rule, g.cron) for g in groups), now - timedelta(hours=5))  # an older horizon start
    got = counts(groups, fires, now)
    want = await _expected(conn, now)
    assert got == want
    assert sum(groups.values()) == len(SCHEDULES) - 1  # the paused one left out


async def test_h_forms_are_resolved_per_schedule_and_shared_rules_evaluated_once(conn: Conn) -> None:
    now = NOWS[0]
    await _make(conn, now)
    groups = await read_groups(conn)
    daily = [g for g in groups if g.cron.expr == "H H * * *"]
    assert len({g.rule for g in daily}) == len(daily) > 1  # six names, (almost surely) six times of day
    plain = [size for g, size in groups.items() if g.cron.expr == "0 9 * * *"]
    assert plain == [2]  # two schedules, one group, one evaluation


async def test_the_server_keeps_the_map_and_rereads_only_when_a_change_is_heard(db_url: str, conn: Conn) -> None:
    now = NOWS[0]
    await _make(conn, now)
    clock = [now + timedelta(seconds=5)]
    load = LoadMap(db_url, clock=lambda: clock[0])
    first = await load.grid()
    assert load.reads == 1 and first["total"] == sum(await _expected(conn, now))
    evaluated = load.evaluated
    assert await load.grid() is first  # kept for the minute
    clock[0] = now + timedelta(minutes=1, seconds=2)  # the minute turned: re-counted, nothing read or evaluated
    turned = await load.grid()
    shown = [cell for hour in turned["hours"] for cell in hour["cells"] if cell[1] is not None]
    assert (len(shown), shown[0][0], shown[-1][0]) == (1440, "2026-03-08 05:18", "2026-03-09 05:17")
    assert turned["hours"][0]["cells"][0] == ("2026-03-08 05:00", None, 0)  # the clock hour's row, before now
    assert turned["total"] == sum(await _expected(conn, now + timedelta(minutes=1)))
    assert (load.reads, load.evaluated) == (1, evaluated)
    load.heard({"runs", "fires"})  # not a schedule change (and "limited" has remaining_runs: a fire is one)
    await load.grid()
    assert load.reads == 2
    load.heard({"runs"})
    await load.grid()
    assert load.reads == 2
    await admin.schedule(conn, "new-one", "15 11 * * *", "demo.echo", {}, now=now)
    load.heard({"agentlab_sched_schedules"})
    after = await load.grid()
    assert (load.reads, load.evaluated) == (3, evaluated + 1)  # only the new rule evaluated
    assert after["total"] == turned["total"] + 1


async def test_a_schedule_change_announced_reaches_the_keeper_through_the_live_hub(db_url: str, conn: Conn) -> None:
    hub = Hub(db_url)
    hub.coalesce = 0.0
    load = LoadMap(db_url)
    heard = asyncio.Event()

    def schedule_changed(why: set[str]) -> None:  # not the first LISTEN's "reconnected"
        if "agentlab_sched_schedules" in why:
            heard.set()

    hub.watchers += [load.heard, schedule_changed]
    await hub.start()
    try:
        await asyncio.wait_for(hub.listening.wait(), 10)
        assert (await load.grid())["total"] == 0 and load.reads == 1
        await admin.schedule(conn, "report", "0 9 * * *", "demo.echo", {})
        await asyncio.wait_for(heard.wait(), 10)
        assert (await load.grid())["total"] == 1 and load.reads == 2
    finally:
        await hub.close()


async def test_a_change_made_before_the_hub_listens_is_read_once_it_does(db_url: str, conn: Conn) -> None:
    # The keeper reads at the server's start, maybe before the LISTEN: a change committed in between is
    # heard by no one, so the first LISTEN makes it read again.
    load = LoadMap(db_url)
    assert (await load.grid())["total"] == 0 and load.reads == 1
    await admin.schedule(conn, "report", "0 9 * * *", "demo.echo", {})
    assert (await load.grid())["total"] == 0  # unheard: nothing listens yet
    hub = Hub(db_url)
    hub.watchers.append(load.heard)
    await hub.start()
    try:
        await asyncio.wait_for(hub.listening.wait(), 10)
        assert (await load.grid())["total"] == 1 and load.reads == 2
    finally:
        await hub.close()


async def test_the_keeper_hears_a_change_within_the_pages_coalescing_second(db_url: str, conn: Conn) -> None:
    # The pages' events are folded into one a second; the keeper is not: a page loaded right after a second
    # change shows it. A long window here makes a delayed watcher time out instead of passing by luck.
    hub = Hub(db_url)
    hub.coalesce = 60.0
    load = LoadMap(db_url)
    changes: list[set[str]] = []
    heard = asyncio.Event()

    def schedule_changed(why: set[str]) -> None:
        if "agentlab_sched_schedules" in why:
            changes.append(why)
            heard.set()

    hub.watchers += [load.heard, schedule_changed]
    await hub.start()
    try:
        await asyncio.wait_for(hub.listening.wait(), 10)
        await admin.schedule(conn, "first", "0 9 * * *", "demo.echo", {})
        await asyncio.wait_for(heard.wait(), 10)  # the first: an event for the pages at once, then the window
        heard.clear()
        assert (await load.grid())["total"] == 1
        await admin.schedule(conn, "second", "0 10 * * *", "demo.echo", {})
        await asyncio.wait_for(heard.wait(), 10)  # within the window: heard all the same
        assert (await load.grid())["total"] == 2 and len(changes) == 2 and hub.sent == 0
    finally:
        await hub.close()


async def test_the_keeper_stops_when_a_change_is_heard_as_it_is_cancelled(db_url: str) -> None:
    # The server's stop cancels the keeper; a change heard in the same moment must not swallow that cancel
    # (the stop would then wait for ever).
    load = LoadMap(db_url)
    await load.grid()  # read: the keeper's first round reads nothing and goes to wait
    keeper = asyncio.get_running_loop().create_task(load.run())
    await asyncio.sleep(0.05)  # waiting for the minute's turn or a change
    assert load.reads == 1 and not keeper.done()
    load.heard({"agentlab_sched_schedules"})
    keeper.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(keeper, 5)
