"""`agentlab-sched fires`, `runs ...` and `prune` through typer's CliRunner: what is printed, exit codes
(refusals exit 2 with the message on stderr, nothing on stdout), en and zh-CN, never a traceback."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from typer.testing import CliRunner, Result

from agentlab_sched.cli import app
from agentlab_sched.firing.tick import fire_due
from tests.support.cli import is_database_line, setup
from tests.support.firing_helpers import EN, NINE, make_schedule, set_job_status
from tests.support.runs import ask, launch, run_row

ENV = {"AGENTLAB_SCHED_LOCALE": None, "AGENTLAB_SCHED_DATABASE_URL": None}


def cli(url: str, *args: str) -> Result:
    result = CliRunner(env=ENV).invoke(app, ["--database-url", url, *args])
    assert "Traceback" not in result.output, result.output
    return result


def ok(url: str, *args: str) -> str:
    result = cli(url, *args)
    assert result.exit_code == 0, result.output
    return result.stdout


def refused(url: str, *args: str) -> str:
    result = cli(url, *args)
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    return "\n".join(line for line in result.stderr.splitlines() if not is_database_line(line))


async def waiting_run(conn: Any) -> dict[str, Any]:
    """A run of schedule "store-report" that asks for approval; its fire at NINE, a skipped one after."""
    sid = await make_schedule(conn)
    await fire_due(conn, NINE + timedelta(seconds=5), settings=EN)
    cur = await conn.execute("SELECT * FROM agentlab_sched.runs WHERE schedule_id = %s", (sid,))
    run = await cur.fetchone()
    await set_job_status(conn, run["job_id"], "doing")
    await ask(conn, run, "Send the weekly report?", {"draft": "v1"})
    await fire_due(conn, NINE + timedelta(days=1, seconds=5), settings=EN)
    return await run_row(conn, run["id"])


def test_runs_list_show_approve_and_refusals(db_url: str) -> None:
    run = setup(db_url, waiting_run)
    short = str(run["id"])[:6]

    listed = ok(db_url, "runs", "list")
    assert listed.splitlines()[0].split() == ["run", "schedule", "status", "segment", "created", "finished", "note"]
    assert f"#{short}" in listed and "awaiting approval" in listed
    assert 'awaiting approval of segment 1: "Send the weekly report?"' in listed
    assert [r["id"] for r in json.loads(ok(db_url, "runs", "list", "--status", "awaiting_approval", "--json"))] == [
        str(run["id"])
    ]
    assert ok(db_url, "runs", "list", "--status", "failed") == "no runs\n"
    assert ok(db_url, "--locale", "zh-CN", "runs", "list", "--status", "failed") == "没有运行记录\n"

    shown = json.loads(ok(db_url, "runs", "show", short, "--json"))
    assert (shown["status"], shown["segment"], shown["schedule_name"], shown["state"]) == (
        "awaiting_approval",
        1,
        "store-report",
        {"draft": "v1"},
    )
    assert [(a["segment"], a["title"], a["status"]) for a in shown["approvals"]] == [
        (1, "Send the weekly report?", "pending")
    ]
    text = ok(db_url, "--locale", "zh-CN", "runs", "show", f"#{short}")
    assert "等待审批" in text and "Send the weekly report?" in text and "待审批" in text

    assert ok(db_url, "runs", "approve", short, "--comment", "go", "--by", "alice") == (
        f"approved run #{short} (segment 1); segment 2 starts as soon as a worker picks it up\n"
    )
    assert refused(db_url, "--locale", "zh-CN", "runs", "approve", short, "--by", "bob").startswith(
        f"运行 #{short}:第 1 段的审批已由 alice ("
    )
    assert refused(db_url, "runs", "reject", short, "--by", "bob").startswith(
        f"run #{short}: the approval of segment 1 was already approved by alice ("
    )
    assert refused(db_url, "runs", "resume", short) == (
        f"run #{short} is not suspended (it is awaiting approval); only a suspended run can be resumed or "
        "abandoned; nothing was changed"
    )
    assert refused(db_url, "runs", "show", "00000000") == 'no run "00000000"'
    assert refused(db_url, "--locale", "zh-CN", "runs", "show", "x") == (
        "「x」不是运行编号;请写完整编号或它的前几位(至少 4 位,如 #1a2b3c)"
    )
    assert refused(db_url, "runs", "list", "--status", "done") == (
        'status: "done" is not a run status; choose one of queued, running, awaiting_approval, suspended, '
        "succeeded, failed, cancelled, timed_out"
    )
    assert refused(db_url, "runs", "list", "--since", "last tuesday") == (
        'since: "last tuesday" is neither a time (like 2026-10-05 09:00, UTC unless it has an offset) nor an '
        "age (like 2h or 7d)"
    )

    # Cancel it (approved, not started yet): cancelled now.
    assert ok(db_url, "runs", "cancel", short, "--by", "dave") == f"cancelled run #{short}\n"
    after = setup(db_url, lambda conn: run_row(conn, run["id"]))
    assert (after["status"], after["error"]) == ("cancelled", "cancelled by dave")


def test_runs_reject_resume_abandon(db_url: str) -> None:
    async def prepare(conn: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        sid = await make_schedule(conn, next_run_at=None, overlap="allow_all")
        waiting = await launch(conn, sid, "manual:w")
        await set_job_status(conn, waiting["job_id"], "doing")
        await ask(conn, waiting, "ok?", None)
        stalled = await launch(conn, sid, "manual:s")
        await conn.execute("UPDATE procrastinate_jobs SET status = 'doing' WHERE id = %s", (stalled["job_id"],))
        await conn.execute("SELECT agentlab_sched.detect_suspended()")
        return waiting, stalled

    waiting, stalled = setup(db_url, prepare)
    w, s = str(waiting["id"])[:6], str(stalled["id"])[:6]
    assert ok(db_url, "--locale", "zh-CN", "runs", "reject", w, "--comment", "不发了", "--by", "bob") == (
        f"已驳回运行 #{w},运行已取消\n"
    )
    # Rendered in the locale of whoever acted (the CLI's here).
    assert setup(db_url, lambda conn: run_row(conn, waiting["id"]))["error"].startswith("已被 bob (")
    assert setup(db_url, lambda conn: run_row(conn, waiting["id"]))["error"].endswith(") 驳回:不发了")

    listed = ok(db_url, "runs", "list", "--status", "suspended")
    assert f"#{s}" in listed and "suspended: the worker running it stopped" in listed
    assert ok(db_url, "runs", "resume", s, "--by", "erin") == (
        f"run #{s} is queued again; it starts as soon as a worker picks it up\n"
    )
    setup(db_url, lambda conn: conn.execute(
        "UPDATE procrastinate_jobs SET status = 'doing' WHERE id = %s", (stalled["job_id"],)))  # fmt: skip
    setup(db_url, lambda conn: conn.execute("SELECT agentlab_sched.detect_suspended()"))
    assert ok(db_url, "runs", "abandon", s, "--by", "erin") == f"abandoned run #{s}; it is cancelled\n"
    assert refused(db_url, "runs", "abandon", s) == f"run #{s} has already ended (cancelled); nothing was changed"


def test_runs_cancel_a_running_run_asks_its_worker(db_url: str) -> None:
    async def prepare(conn: Any) -> dict[str, Any]:
        sid = await make_schedule(conn, next_run_at=None)
        run = await launch(conn, sid)
        await set_job_status(conn, run["job_id"], "doing")
        return run

    run = setup(db_url, prepare)
    short = str(run["id"])[:6]
    assert ok(db_url, "runs", "cancel", short, "--by", "dave") == (
        f"asked run #{short} to stop; it ends as cancelled when its worker aborts it (a synchronous task must "
        "check context.should_abort())\n"
    )
    data = json.loads(ok(db_url, "runs", "show", short, "--json"))
    assert (data["status"], data["abort_reason"], data["cancelled_by"]) == ("running", "cancel", "dave")


def test_fires_lists_the_ledger_with_filters(db_url: str) -> None:
    run = setup(db_url, waiting_run)
    short = str(run["id"])[:6]
    text = ok(db_url, "fires", "store-report")
    assert text.splitlines()[0].split() == ["id", "fire", "at", "schedule", "kind", "status", "run", "reason"]
    assert "2026-10-06 09:00 (Asia/Shanghai)" in text and "2026-10-05 09:00 (Asia/Shanghai)" in text
    assert f"#{short} awaiting approval" in text
    rows = json.loads(ok(db_url, "fires", "--status", "skipped_overlap", "--json"))
    assert [(r["schedule_name"], r["fire_at"], r["reason_code"]) for r in rows] == [
        ("store-report", "2026-10-06T01:00:00+00:00", "overlap.awaiting_approval")
    ]
    assert rows[0]["reason"] == f"the previous run #{short} is awaiting approval; this fire was skipped"
    assert ok(db_url, "fires", "--since", "2099-01-01") == "no fires\n"
    assert len(json.loads(ok(db_url, "fires", "--since", "1h", "--json"))) == 2
    assert refused(db_url, "fires", "nope") == 'no schedule named "nope"'
    assert refused(db_url, "--locale", "zh-CN", "fires", "--status", "ok") == (
        "状态:「ok」不是触发状态;可选:started、skipped_overlap、skipped_misfire、failed_to_start"
    )


def test_prune_reports_what_it_removed_and_refuses_bad_ages(db_url: str) -> None:
    setup(db_url, waiting_run)
    # The day of the skipped fire goes whole; the day of the run awaiting approval stays.
    assert ok(db_url, "prune", "--older-than", "30d") == (
        "pruned history older than 30 days: 1 fires, 0 runs, 0 jobs, 0 fire requests, in 1 whole partitions "
        "(a day still holding unfinished work is kept)\n"
    )
    assert json.loads(ok(db_url, "prune", "--older-than", "1h", "--json")) == {
        "fires": 0,
        "runs": 0,
        "jobs": 0,
        "requests": 0,
        "partitions": 0,
    }
    assert refused(db_url, "prune", "--older-than", "30s") == (
        "older_than: 30 seconds is too short; keep at least 1 minute of history"
    )
    assert refused(db_url, "--locale", "zh-CN", "prune", "--older-than", "a month") == (
        "「保留时长」「a month」不是时长;请写成 90s、10m、1h30m、2d 或 0 这样的形式"
    )
