"""`agentlab-sched doctor [--json]`: what needs a person; exit 1 when anything does, 0 when nothing does."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

import typer
from rich.text import Text

from agentlab_sched import messages
from agentlab_sched.cli import common

#: How each level is marked on its line.
MARKS = {"ok": ("✓", "green"), "info": ("·", "dim"), "warning": ("!", "yellow"), "problem": ("✗", "red")}


def register(app: typer.Typer) -> None:
    app.command("doctor")(doctor_cmd)


def doctor_cmd(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON (for scripts) instead of text.")] = False,
) -> None:
    """Check what needs a person (schema, workers and their queues, clocks, overdue and stopped schedules,
    tasks, suspended runs, fire requests, notifications, keys); exits 1 if anything does."""
    from agentlab_sched.database.connections import display_url
    from agentlab_sched.observe import health

    st = common.state(ctx)
    database = st.database()
    settings = st.settings()
    shown = display_url(database.url)
    findings = common.run(
        ctx,
        lambda conn: health.examine(
            conn, settings, database=shown, url=database.url, embedded=bool(database.embedded_dir)
        ),
    )
    needs = [f for f in findings if f.level in health.NEEDS_A_PERSON]
    if as_json:
        common.print_json(
            {"healthy": not needs, "needs_attention": len(needs), "findings": [f.as_dict(st.locale) for f in findings]}
        )
    else:
        console = common.out()
        for f in findings:
            mark, style = MARKS[f.level]
            console.print(Text(f"{mark} ", style=style) + Text(f.message(st.locale)))
            if f.code == "doctor.workers":
                for item in f.items:
                    console.print(Text("    " + worker_text(item, st.locale)))
        summary = ("doctor.needs_attention", {"count": len(needs)}) if needs else ("doctor.healthy", {})
        console.print(Text(common.text(summary[0], st.locale, **summary[1]), style="red" if needs else "green"))
    raise typer.Exit(1 if needs else 0)


def worker_text(w: Mapping[str, Any], locale: str) -> str:
    """One live worker: what it is, the queues it takes, its concurrency, whether it fires and notifies."""
    if w.get("kind") == "agentlab-sched":
        fires = messages.term("doctor.fires_precise" if w.get("fires") else "doctor.fires_none")
    elif w.get("takes_tick_queue"):
        fires = messages.term("doctor.fires_tick", queue=w.get("tick_queue"))
    else:
        fires = messages.term("doctor.fires_none")
    return messages.render(
        "doctor.worker_item", locale, kind=messages.term(f"doctor.kind.{w.get('kind')}"), name=w.get("name"),
        queues=w.get("queues") or messages.term("event.all_queues"),
        concurrency=w.get("concurrency") if w.get("concurrency") is not None else "?",
        fires=fires, notifies=messages.term("event.notifies_yes" if w.get("notifies") else "event.notifies_no"),
    )  # fmt: skip
