"""`agentlab-sched worker` as an operator sees it: a ready line, a line per fire and run change (or JSON
lines with stable fields), Prometheus metrics scraped from a real worker, and `doctor` seeing that worker."""

from __future__ import annotations

import io
import json
import logging
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from agentlab_sched.cli import app
from agentlab_sched.observe import events, output
from tests.support.rows import SyncConn, fetched

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-c", "from agentlab_sched.cli import main; main()"]
ENV = {"AGENTLAB_SCHED_LOCALE": None, "AGENTLAB_SCHED_DATABASE_URL": None, "AGENTLAB_SCHED_SECRET_KEY": None}


class Worker:
    """An `agentlab-sched worker` process whose stdout lines are read as they come."""

    def __init__(self, url: str, *args: str, locale: str = "en") -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTLAB_SCHED_")}
        env["AGENTLAB_SCHED_LOCALE"] = locale
        self.proc = subprocess.Popen(
            [*CLI, "--database-url", url, "worker", *args], cwd=ROOT, env=env, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, encoding="utf-8",
        )  # fmt: skip
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))

    def wait_for(self, predicate: Any, limit: float = 30.0) -> str:
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.2)
            except queue.Empty:
                assert self.proc.poll() is None, (
                    f"the worker exited: {self.proc.stderr.read() if self.proc.stderr else ''}"
                )
                continue
            self.seen.append(line)
            if predicate(line):
                return line
        raise AssertionError(f"no such line within {limit} s; seen: {self.seen}")

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        self.reader.join(timeout=5)  # stdout is at its end: the worker exited
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()
        while not self.lines.empty():
            self.seen.append(self.lines.get())
        return code


def _json(line: str) -> dict[str, Any]:
    try:
        data = json.loads(line)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        return response.read().decode("utf-8")


def _scrape_when(port: int, name: str, limit: float = 30.0) -> str:
    """A scrape in which the sample ``name`` has counted something: a tick's duration is observed when
    the tick ends, which can be after the run of a fire it recorded has already succeeded."""
    deadline = time.monotonic() + limit
    while True:
        scrape = _scrape(port)
        if _metric(scrape, name) >= 1 or time.monotonic() > deadline:
            return scrape
        time.sleep(0.1)


def _metric(text: str, name: str, **labels: str) -> float:
    """The value of one sample of the scrape (0 when absent)."""
    want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        key, _, value = line.rpartition(" ")
        sample, _, rest = key.partition("{")
        got = ",".join(sorted(rest.rstrip("}").split(","))) if rest else ""
        if sample == name and got == want:
            return float(value)
    return 0.0


def test_json_lines_metrics_and_doctor_from_a_real_worker(db_url: str, sync_conn: SyncConn) -> None:
    sync_conn.execute("SELECT agentlab_sched.schedule('every-second', '* * * * * *', 'demo.echo')")
    sync_conn.execute("SELECT agentlab_sched.schedule('refused', '* * * * * *', 'reports.weekly')")
    worker = Worker(db_url, "--log-format", "json", "--metrics-port", "0", "--concurrency", "4")
    try:
        ready = _json(worker.wait_for(lambda line: _json(line).get("event") == "ready"))
        for key in ("time", "level", "logger", "event", "message", *events.FIELDS):
            assert key in ready
        assert ready["fires"] is True and ready["concurrency"] == 4 and ready["queues"] == []
        assert "demo.echo" in ready["tasks"] and ready["database"].startswith("postgresql://")
        port = int(ready["metrics_port"])

        started = _json(worker.wait_for(lambda line: _json(line).get("status") == "started"))
        assert (started["event"], started["schedule"], started["reason_code"]) == ("fire", "every-second", None)
        assert started["fire_id"] > 0 and len(started["run_id"]) == 36 and started["level"] == "info"
        refused = _json(worker.wait_for(lambda line: _json(line).get("status") == "failed_to_start"))
        assert (refused["schedule"], refused["reason_code"], refused["level"]) == (
            "refused", "launch.unknown_task", "warning")  # fmt: skip
        done = _json(worker.wait_for(
            lambda line: _json(line).get("event") == "run" and _json(line).get("status") == "succeeded"))  # fmt: skip
        assert done["schedule"] == "every-second" and done["fire_id"] and done["run_id"]

        scrape = _scrape_when(port, "agentlab_sched_tick_duration_seconds_count")
        assert _metric(scrape, "agentlab_sched_fires_total", status="started", reason_code="") >= 1
        assert _metric(scrape, "agentlab_sched_fires_total", status="failed_to_start",
                       reason_code="launch.unknown_task") >= 1  # fmt: skip
        assert _metric(scrape, "agentlab_sched_fire_lateness_seconds_count") >= 1
        assert _metric(scrape, "agentlab_sched_run_start_lateness_seconds_count") >= 1
        assert _metric(scrape, "agentlab_sched_run_changes_total", status="succeeded") >= 1
        assert _metric(scrape, "agentlab_sched_tick_duration_seconds_count") >= 1
        assert _metric(scrape, "agentlab_sched_database_up") == 1
        assert _metric(scrape, "agentlab_sched_overdue_schedules") == 0
        assert _metric(scrape, "agentlab_sched_runs", status="suspended") == 0
        assert _metric(scrape, "agentlab_sched_outbox_backlog") == 0
        for status in ("queued", "running", "awaiting_approval", "suspended"):
            assert f'agentlab_sched_runs{{status="{status}"}}' in scrape
        assert "agentlab_sched_notifications_failed" in scrape and "agentlab_sched_outbox_retrying" in scrape

        # doctor sees the worker: what it runs, that it fires; the unregistered task is the one problem.
        result = CliRunner(env=ENV).invoke(app, ["--database-url", db_url, "doctor", "--json"])
        report = json.loads(result.stdout)
        [workers] = [f for f in report["findings"] if f["code"] == "doctor.workers"]
        [me] = workers["items"]
        assert (me["kind"], me["queues"], me["concurrency"], me["fires"]) == ("agentlab-sched", None, 4, True)
        bad = {f["code"] for f in report["findings"] if f["level"] in ("warning", "problem")}
        assert (result.exit_code, bad) == (1, {"doctor.unregistered"})
    finally:
        code = worker.stop()
    assert code == 0
    assert any(_json(line).get("event") == "stopped" for line in worker.seen)
    # Stopped cleanly: it is no longer counted.
    assert fetched(sync_conn.execute("SELECT count(*) AS n FROM agentlab_sched.workers").fetchone())["n"] == 0


def test_lines_in_chinese_and_quiet(db_url: str, sync_conn: SyncConn) -> None:
    sync_conn.execute("SELECT agentlab_sched.schedule('每秒', '* * * * * *', 'demo.echo')")
    worker = Worker(db_url, locale="zh-CN")
    try:
        ready = worker.wait_for(lambda line: line.startswith("已就绪:"))
        assert "负责触发定时任务" in ready and "同时运行 10 个作业" in ready
        fire = worker.wait_for(lambda line: "每秒 定时触发:已发起" in line)
        assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d(:\d\d)? 每秒 定时触发:已发起,运行 #[0-9a-f]{6}", fire), fire
        run = worker.wait_for(lambda line: "已成功" in line)
        assert re.fullmatch(r" {4}每秒 运行 #[0-9a-f]{6}:已成功", run), run
    finally:
        assert worker.stop() == 0
    assert worker.seen[-1] == "已停止"


def _events_printed(fmt: str, locale: str, quiet: bool) -> str:
    stream = io.StringIO()
    with output.configure(fmt, locale=locale, quiet=quiet, stream=stream):
        events.worker_event("ready", locale, database="postgresql://x@h/db", queues=[], tasks=["demo.echo"],
                            concurrency=10, fires=True, notifies=False, metrics_port=None)  # fmt: skip
        events.fire_recorded(
            schedule="daily", fire_id=7, fire_at=datetime(2026, 3, 1, 1, 0, tzinfo=UTC), kind="scheduled",
            status="skipped_overlap", timezone="Asia/Shanghai", reason_code="overlap.in_progress",
            reason_params={"run": "1a2b3c"}, locale="en",
        )  # fmt: skip
        events.run_changed(schedule="daily", run_id="1a2b3c4d-0000-0000-0000-000000000000", status="failed",
                           error="boom", locale="en")  # fmt: skip
        logging.getLogger("agentlab_sched.test").error("something broke")
    return stream.getvalue()


def test_each_event_is_one_sentence_in_the_reader_language() -> None:
    en = _events_printed("lines", "en", quiet=False).splitlines()
    assert en[1] == (
        "2026-03-01 09:00 daily scheduled fire: skipped_overlap: the previous run #1a2b3c is still in progress; "
        "this fire was skipped"
    )
    assert en[2:] == ["    daily run #1a2b3c: failed: boom", "error: something broke"]
    zh = _events_printed("lines", "zh-CN", quiet=False).splitlines()
    assert zh[1] == "2026-03-01 09:00 daily 定时触发:因重叠跳过:上一次运行 #1a2b3c 仍在进行中,本次触发已跳过"
    assert zh[2:] == ["    daily 运行 #1a2b3c:已失败:boom", "错误:something broke"]


def test_quiet_prints_only_warnings_and_errors() -> None:
    printed = _events_printed("lines", "en", quiet=True).splitlines()
    assert printed == [
        "    daily run #1a2b3c: failed: boom",
        "error: something broke",
    ]


def test_json_records_always_carry_the_stable_fields() -> None:
    records = [json.loads(line) for line in _events_printed("json", "en", quiet=False).splitlines()]
    assert [r["event"] for r in records] == ["ready", "fire", "run", None]
    for r in records:
        assert list(r)[:10] == ["time", "level", "logger", "event", "message", *events.FIELDS]
    fire = records[1]
    assert (fire["schedule"], fire["fire_id"], fire["run_id"], fire["status"], fire["reason_code"]) == (
        "daily", 7, None, "skipped_overlap", "overlap.in_progress")  # fmt: skip
    assert records[3]["schedule"] is None and records[3]["message"] == "something broke"


def test_an_unknown_log_format_and_a_taken_metrics_port_are_one_line(db_url: str) -> None:
    result = CliRunner(env=ENV).invoke(app, ["--database-url", db_url, "worker", "--log-format", "xml"])
    assert result.exit_code == 2
    assert result.stderr.strip() == '--log-format: "xml" is not a format; choose one of lines, json'
    import socket

    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = CliRunner(env=ENV).invoke(app, ["--database-url", db_url, "worker", "--metrics-port", str(port)])
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines()[-1].startswith(f"--metrics-port {port}: cannot serve metrics there")
