"""`agentlab-sched worker`, `dev` and `doctor`."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import time
from typing import Any

import psycopg
import typer
from rich.console import Console
from rich.text import Text

from agentlab_sched import database as db
from agentlab_sched.cli import common
from agentlab_sched.database import queries, roles
from agentlab_sched.database.migrate import migrate
from agentlab_sched.demo import make_app
from agentlab_sched.firing import tick
from agentlab_sched.notify.webhooks import key_problems
from agentlab_sched.worker import run_worker

console = Console()

#: The demo schedules `dev` seeds: one every 10 s, one that overlaps itself (skip policy).
DEMO_SCHEDULES = (
    {
        "name": "demo-echo-every-10s",
        "cron": "* * * * * */10",
        "task": "demo.echo",
        "inputs": {"day": "{{ schedule.date }}", "at": "{{ schedule.fire_at }}"},
    },
    {
        "name": "demo-overlapping-sleep",
        "cron": "* * * * * */5",
        "task": "demo.sleep",
        "inputs": {"seconds": 12},
    },
)


def _database(ctx: typer.Context) -> Any:
    return common.state(ctx).database()


def register(app: typer.Typer) -> None:
    """Add worker, dev and doctor to the root CLI."""

    @app.command()
    def worker(
        ctx: typer.Context,
        app_path: str = typer.Option("agentlab_sched.demo.app", "--app", help="dotted path of the Procrastinate app"),
        concurrency: int = typer.Option(10, "--concurrency", min=1, help="jobs run at once"),
        queue: list[str] = typer.Option(None, "--queue", help="queues to run (all by default)"),
    ) -> None:
        """Run a worker: jobs, the scheduler's precise loop and notification dispatch."""

        database = _database(ctx)
        procrastinate_app = common.load_app(app_path, database.url)
        settings = common.state(ctx).settings()
        asyncio.run(
            run_worker(
                procrastinate_app,
                database.url,
                concurrency=concurrency,
                queues=queue or None,
                settings=settings,
            )
        )

    @app.command()
    def dev(
        ctx: typer.Context,
        duration: float = typer.Option(0, "--duration", help="stop after this many seconds (0: until Ctrl-C)"),
    ) -> None:
        """Embedded PostgreSQL, migrate, demo schedules, a worker and a live view: the first command to run."""

        database = _database(ctx)
        console.print(Text.assemble(("agentlab-sched dev", "bold"), " on ", common.safe(database.origin)))
        migrate(database.url, locale=common.state(ctx).locale)
        console.print("migrated; seeding the demo schedules; Ctrl-C stops", highlight=False)
        asyncio.run(_dev(database.url, duration))

    @app.command()
    def doctor(ctx: typer.Context) -> None:
        """Check the database, the schema, live workers and overdue schedules."""
        asyncio.run(_doctor(_database(ctx), common.state(ctx).settings()))


async def _seed(url: str) -> None:
    conn = await db.connect(url)
    try:
        for spec in DEMO_SCHEDULES:
            await queries.execute(conn, "seed_demo_schedule", {**spec, "inputs": json.dumps(spec["inputs"])})
        await tick.replan(conn)
    finally:
        await conn.close()


async def _dev(url: str, duration: float) -> None:
    await _seed(url)
    stop = asyncio.Event()
    worker = asyncio.create_task(run_worker(make_app(url), url, stop=stop))
    view = await db.connect(url)
    began = time.monotonic()
    seen: dict[str, str] = {}
    try:
        while not worker.done():
            for line in await _changes(view, seen):
                console.print(line, highlight=False)
            if duration and time.monotonic() - began >= duration:
                break
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(worker), timeout=1.0)
    except (KeyboardInterrupt, asyncio.CancelledError):
        pass
    finally:
        stop.set()
        await view.close()
        await worker


async def _changes(conn: Any, seen: dict[str, str]) -> list[Text]:
    """One line per fire recorded and per run status change since the last call: the live view."""
    lines = []
    for row in await queries.rows(conn, "recent_fires"):
        key = f"fire:{row['id']}"
        run = f" run #{row['run_id'][:6]}" if row["run_id"] else ""
        name = common.safe(row["name"])  # user text: shown as written, never read as markup
        if key not in seen:
            seen[key] = row["status"]
            why = f" — {common.safe(row['reason'])}" if row["reason"] else ""
            lines.append(
                Text.assemble(
                    (f"{row['fire_at']:%H:%M:%S}", "bold"),
                    f" {name} {row['kind']} fire: ",
                    (row["status"], "cyan"),
                    run + why,
                )
            )
        if row["run_id"] and seen.get(f"run:{row['run_id']}") != row["run_status"]:
            seen[f"run:{row['run_id']}"] = row["run_status"]
            if row["run_status"] != "queued":
                lines.append(Text.assemble(f"         {name}{run}: ", (row["run_status"], "green")))
    return lines


async def _doctor(database: Any, settings: Any) -> None:
    console.print(common.cell(f"database: {database.origin}"))
    conn = await db.connect(database.url)
    try:
        version = await queries.value(conn, "server_version")
        console.print(f"PostgreSQL {version}", highlight=False)
        counts = await queries.one(conn, "doctor_counts")
        assert counts is not None
        console.print(f"migrations applied: {counts['migrations']}", highlight=False)
        console.print(f"live workers: {counts['workers']}", highlight=False)
        console.print(f"overdue schedules: {counts['overdue']}", highlight=False)
        for problem in await key_problems(conn, settings):
            console.print(Text(problem.message(settings.locale), style="yellow"))
    finally:
        await conn.close()
    with psycopg.connect(database.url, autocommit=True) as sync:
        names = roles.configured(sync)
        if names is None:
            console.print(common.cell(common.text("roles.none", settings.locale)))
        else:
            console.print(common.cell(common.text("roles.configured", settings.locale, **dataclasses.asdict(names))))
        for warning in roles.warnings(sync):
            console.print(common.cell(common.text(warning.code, settings.locale, **warning.params), style="yellow"))
