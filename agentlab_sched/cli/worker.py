"""`agentlab-sched worker` and `dev` (`doctor` is mounted from its own module)."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

from agentlab_sched.cli import common, doctor, web
from agentlab_sched.cli.database import without_password
from agentlab_sched.errors import ValidationError

if TYPE_CHECKING:
    import procrastinate

#: The demo schedules `dev` seeds: one every 10 s, one that overlaps itself (skip policy). A run that a
#: stopped `dev` interrupted runs again when a worker is back (on_interrupt retry), rather than waiting to
#: be resumed and holding the overlapping one up.
DEMO_SCHEDULES: tuple[dict[str, Any], ...] = (
    {
        "name": "demo-echo-every-10s",
        "cron": "* * * * * */10",
        "task": "demo.echo",
        "inputs": {"day": "{{ schedule.date }}", "at": "{{ schedule.fire_at }}"},
        "on_interrupt": "retry",
    },
    {
        "name": "demo-overlapping-sleep",
        "cron": "* * * * * */5",
        "task": "demo.sleep",
        "inputs": {"seconds": 12},
        "on_interrupt": "retry",
    },
)


def register(app: typer.Typer) -> None:
    """Add worker, dev and doctor to the root CLI."""
    app.command("worker")(worker_cmd)
    app.command("dev")(dev_cmd)
    doctor.register(app)


Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="Print only warnings and errors (no line per fire).")]
LogFormat = Annotated[
    str, typer.Option("--log-format", help="lines (one sentence per event, in the locale) or json (one object a line).")
]
MetricsPort = Annotated[
    int | None,
    typer.Option("--metrics-port", min=0, max=65535, help="Serve Prometheus metrics on this port (0: any free one).",
                 show_default=False),
]  # fmt: skip
MetricsHost = Annotated[
    str,
    typer.Option("--metrics-host", help="The address metrics are served on (0.0.0.0: every interface)."),
]


def worker_cmd(
    ctx: typer.Context,
    app_path: Annotated[str, typer.Option("--app", help="Dotted path of the Procrastinate app.")] = common.DEMO_APP,
    concurrency: Annotated[int, typer.Option("--concurrency", min=1, help="Jobs run at once.")] = 10,
    queue: Annotated[
        list[str] | None, typer.Option("--queue", help="Queues to run (all by default); repeatable.")
    ] = None,
    quiet: Quiet = False,
    log_format: LogFormat = "lines",
    metrics_port: MetricsPort = None,
    metrics_host: MetricsHost = "127.0.0.1",
    listen_url: Annotated[
        str | None,
        typer.Option(
            "--listen-url",
            help="A direct PostgreSQL URL to LISTEN on when the database URL goes through "
            "a transaction pooler (AGENTLAB_SCHED_LISTEN_URL).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Run a worker: jobs, the scheduler's precise loop and notification dispatch; a line per fire and run.

    It rides through database restarts and cut connections, and exits only when asked to (SIGTERM,
    SIGINT: status 0, within 3 s) or on an error it cannot ride through (status 1).
    """
    import asyncio

    from agentlab_sched.observe import output
    from agentlab_sched.worker.process import run_worker

    st = common.state(ctx)
    _check_format(log_format)
    # A host app is loaded before the database is looked at: a wrong --app is one line, nothing else.
    host_app = None if app_path == common.DEMO_APP else common.load_app(app_path, "")
    database = st.database()
    procrastinate_app = host_app or common.load_app(app_path, database.url)

    async def work() -> None:
        clean = await run_worker(
            procrastinate_app, database.url, concurrency=concurrency, queues=queue or None,
            settings=st.settings(), metrics_port=metrics_port, metrics_host=metrics_host, app_path=app_path,
            listen_url=listen_url,
        )  # fmt: skip
        if not clean:
            # Something ignores its abort (a synchronous task): exit without waiting for its thread; its
            # run is suspended by housekeeping.
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)

    with output.configure(log_format, locale=st.locale, quiet=quiet, clean=common.safe):
        asyncio.run(work())


def _check_format(value: str) -> None:
    from agentlab_sched.observe import output

    if value not in output.FORMATS:
        raise ValidationError("cli.log_format", "log_format", value=value, allowed=list(output.FORMATS))


def dev_cmd(
    ctx: typer.Context,
    duration: Annotated[float, typer.Option("--duration", help="Stop after this many seconds (0: until Ctrl-C).")] = 0,
    quiet: Quiet = False,
    log_format: LogFormat = "lines",
) -> None:
    """The first command to run: the demo in its own database, a worker and a line per fire and run."""
    import asyncio

    from psycopg import conninfo

    from agentlab_sched.database.connections import display_url
    from agentlab_sched.database.migrate import migrate
    from agentlab_sched.demo import make_app
    from agentlab_sched.observe import output

    st = common.state(ctx)
    _check_format(log_format)
    database = st.database(dev=True)
    embedded_server = not st.database_url
    common.say(ctx, "dev.banner" if embedded_server else "dev.banner_url", database=display_url(database.url))
    dashboard = web.dev_dashboard(database.url, st.settings())
    common.say(ctx, "dev.connect", url=without_password(database.url), flag=" --dev" if embedded_server else "")
    migrate(database.url, locale=st.locale)

    demo = make_app(database.url)
    asyncio.run(_seed(database.url, list(demo.tasks)))
    common.say(ctx, "dev.seeded", names=[spec["name"] for spec in DEMO_SCHEDULES])
    common.say(ctx, "dev.keeps_running" if embedded_server else "dev.ctrl_c")
    common.say(ctx, "web.dev_address", url=dashboard[2])
    with output.configure(log_format, locale=st.locale, quiet=quiet, clean=common.safe):
        asyncio.run(_dev(demo, database.url, duration, st.settings(), dashboard))
    common.say(
        ctx,
        "dev.stopped" if embedded_server else "dev.stopped_url",
        database=conninfo.conninfo_to_dict(database.url).get("dbname") or "",
    )


async def _seed(url: str, tasks: list[str]) -> None:
    """The demo schedules, fresh: planned from now on (a second `dev` never replays the first one's times),
    and the runs a previous `dev` left suspended when it stopped abandoned (they would block `skip`)."""
    from agentlab_sched import database as db
    from agentlab_sched.firing import tick
    from agentlab_sched.runs import lifecycle
    from agentlab_sched.schedules import admin

    conn = await db.connect(url)
    try:
        await tick.register_tasks(conn, tasks)
        for spec in DEMO_SCHEDULES:
            await admin.schedule(
                conn, spec["name"], spec["cron"], spec["task"], spec["inputs"], timezone="UTC", enabled=False,
                on_interrupt=spec["on_interrupt"],
            )  # fmt: skip
            await admin.resume(conn, spec["name"])
            await lifecycle.abandon_suspended(conn, spec["name"], "agentlab-sched dev")
    finally:
        await conn.close()


async def _dev(demo: procrastinate.App, url: str, duration: float, settings: Any, dashboard: Any) -> None:
    import asyncio

    from agentlab_sched.web import serve
    from agentlab_sched.worker.process import run_worker

    stop = asyncio.Event()
    if duration:
        asyncio.get_running_loop().call_later(duration, stop.set)
    pages_stop = asyncio.Event()  # the dashboard stops with the worker
    pages = asyncio.create_task(serve(dashboard[0], dashboard[1], pages_stop))
    try:
        await run_worker(demo, url, stop=stop, settings=settings, app_path=common.DEMO_APP)
    finally:
        pages_stop.set()
        await pages
