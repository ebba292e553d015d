"""A plain `procrastinate worker --queues reports` whose app went through ``install(app)`` reports its queues
when it starts (before it ever runs one of our jobs), so `doctor` names it and the tick's queue it leaves
out, instead of counting it among the workers that fire."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import procrastinate

from agentlab_sched.observe import health
from agentlab_sched.settings import Settings
from agentlab_sched.worker.middleware import install
from tests.support.rows import Conn, SyncConn

S = "agentlab_sched"


async def reported(conn: Conn) -> list[dict[str, Any]]:
    cur = await conn.execute(f"SELECT name, kind, queues, procrastinate_worker_id FROM {S}.workers")
    return list(await cur.fetchall())


async def test_a_plain_worker_leaving_out_the_tick_queue_is_named_with_the_queue(db_url: str, conn: Conn) -> None:
    await conn.execute(f"SELECT {S}.schedule('daily', '0 9 * * *', 'demo.echo')")
    app = install(procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=db_url)))
    async with app.open_async():
        worker = asyncio.create_task(app.run_worker_async(queues=["reports"], install_signal_handlers=False))
        try:
            for _ in range(400):  # its start is reported at its first fetch, within moments (20 s at most)
                if await reported(conn):
                    break
                await asyncio.sleep(0.05)
            [row] = await reported(conn)
            assert (row["kind"], row["queues"]) == ("procrastinate", ["reports"])
            assert row["procrastinate_worker_id"] is not None
            found = await health.examine(conn, Settings.from_env())
        finally:
            worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await worker
    firing = [f for f in found if f.check == "firing"]
    assert [(f.level, f.code) for f in firing] == [
        ("problem", "doctor.nothing_fires"),
        ("problem", "doctor.never_fires"),
    ]
    assert firing[1].message("en") == (
        f"worker {row['name']} takes only the queues reports: it never runs the tick (queue default), so it fires "
        "nothing"
    )
    assert "doctor.fires" not in [f.code for f in found]


async def test_an_agentlab_sched_worker_that_does_not_fire_and_leaves_out_the_tick_queue_is_named(
    sync_conn: SyncConn, conn: Conn
) -> None:
    sync_conn.execute(f"SELECT {S}.schedule('daily', '0 9 * * *', 'demo.echo')")
    sync_conn.execute(
        f"""INSERT INTO {S}.workers (name, kind, host, pid, queues, concurrency, fires, notifies, clock_skew)
            VALUES ('w1', 'agentlab-sched', 'h', 1, ARRAY['reports'], 10, false, true, 0)"""
    )
    found = await health.examine(conn, Settings.from_env())
    firing = [(f.level, f.code, f.message("en")) for f in found if f.check == "firing"]
    assert firing == [
        ("problem", "doctor.nothing_fires", firing[0][2]),
        ("problem", "doctor.never_fires",
         "worker w1 takes only the queues reports: it never runs the tick (queue default), so it fires nothing"),
    ]  # fmt: skip
