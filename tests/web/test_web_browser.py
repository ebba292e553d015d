"""The dashboard in a real browser: Debian's Chromium driven by Playwright, against the real server (uvicorn on
a free port) and database. Skips, saying so, where Chromium or Playwright is missing (.ci/run installs them).

The screenshots of docs/web.md are taken here: ``AGENTLAB_SCHED_WEB_SCREENSHOTS=1`` writes them into docs/web/
(otherwise into the test's temporary directory, so a run leaves the work tree alone).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from agentlab_sched.settings import Settings
from agentlab_sched.web import WebConfig, create_app
from agentlab_sched.web.server import address, bind
from tests.support.web import Web

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--no-first-run",
]  # fmt: skip
ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "web"

if not os.path.exists(CHROMIUM):
    pytest.skip(f"{CHROMIUM} is missing (apt-get install chromium): the browser tests need it", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright for Python is not installed")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            yield chromium
        finally:
            chromium.close()


class Site:
    """The dashboard served by uvicorn in a thread, on a free port."""

    def __init__(self, config: WebConfig) -> None:
        self.sock = bind("127.0.0.1", 0)
        self.url = address(self.sock, config).rstrip("/")
        self.server = uvicorn.Server(
            uvicorn.Config(create_app(config), log_level="warning", lifespan="on", timeout_graceful_shutdown=1)
        )
        self.contexts: list[Any] = []
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started and time.monotonic() < deadline:
            time.sleep(0.02)
        assert self.server.started

    def stop(self) -> None:
        for context in self.contexts:  # their event streams end with them
            context.close()
        self.server.should_exit = True
        self.thread.join(10)
        self.sock.close()


@pytest.fixture
def site(web: Web) -> Iterator[Site]:
    served = Site(WebConfig(database_url=web.db_url, settings=Settings.from_env()))
    try:
        yield served
    finally:
        served.stop()


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    if os.environ.get("AGENTLAB_SCHED_WEB_SCREENSHOTS") == "1":
        DOCS.mkdir(parents=True, exist_ok=True)
        return DOCS
    return tmp_path


def sign_in(
    browser: Any, site: Site, who: str, password: str, *, javascript: bool = True, locale: str = "en-US"
) -> Any:
    context = browser.new_context(
        java_script_enabled=javascript, locale=locale, viewport={"width": 1280, "height": 900}
    )
    site.contexts.append(context)
    page = context.new_page()
    dialogs: list[str] = []

    def on_dialog(dialog: Any) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", on_dialog)
    page.dialogs = dialogs
    page.goto(site.url + "/schedules")
    page.fill("input[name=username]", who)
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")
    page.wait_for_url(site.url + "/schedules")
    return page


def test_admin_pauses_a_filtered_set_and_reader_finds_no_action(
    browser: Any, site: Site, web: Web, shots: Path
) -> None:
    web.schedule("daily-report", cron="0 9 * * 1", timezone="Asia/Shanghai")
    for name in ("etl-orders", "etl-stock"):
        web.schedule(name, cron="*/15 * * * *")
    web.launch("etl-orders")
    page = sign_in(browser, site, web.admin, "agentlab-test")
    page.screenshot(path=str(shots / "schedules.png"), full_page=True)
    page.fill("input[name=q]", "etl")
    page.click("form.filters button[type=submit]")
    page.wait_for_url("**q=etl**")
    assert page.locator("tr[data-schedule]").count() == 2
    page.fill("#bulk-reason", "warehouse migration")
    page.click("button[name=action][value=pause]")
    assert page.locator(".confirm").inner_text() == "Pause 2 schedules?"
    page.click("button[name=action][value=pause]")
    page.wait_for_selector("text=Paused 2 schedules.")
    assert page.locator("tr.paused").count() == 2
    page.goto(site.url + "/schedules/daily-report")
    page.screenshot(path=str(shots / "schedule.png"), full_page=True)

    reader = sign_in(browser, site, web.reader, "agentlab-test")
    reader.goto(site.url + "/schedules/etl-orders")
    assert reader.locator("button[name=action]").count() == 0
    assert "warehouse migration" in reader.content()


def test_a_refresh_that_arrives_while_someone_types_waits_until_they_leave_the_form(
    browser: Any, site: Site, web: Web
) -> None:
    web.schedule("daily-report")
    page = sign_in(browser, site, web.admin, "agentlab-test")
    held: list[Any] = []

    def hold(route: Any) -> None:  # the page's own refresh fetches wait here until the test lets them go
        if route.request.resource_type == "fetch":
            held.append(route)
        else:
            route.continue_()

    page.route(site.url + "/schedules", hold)
    with page.expect_request(lambda r: r.resource_type == "fetch" and r.url == site.url + "/schedules"):
        web.schedule("etl-stock")  # announced: the page fetches itself again
    page.fill("input[name=q]", "etl")  # while the fetch is on its way
    page.evaluate(
        "document.addEventListener('agentlab:put-off', () => { document.body.dataset.putOff = 'yes'; }, {once: true})"
    )
    for route in held:
        route.continue_()
    page.unroute(site.url + "/schedules")
    page.wait_for_selector("body[data-put-off=yes]", state="attached", timeout=5000)
    assert page.input_value("#f-q") == "etl"  # what was typed is still there, in the same field
    assert page.locator("tr[data-schedule]").count() == 1
    page.locator("#f-q").blur()  # the focus leaves the form: the refresh put off is made
    page.wait_for_selector("tr[data-schedule=etl-stock]")
    page.fill("input[name=q]", "etl")
    page.click("form.filters button[type=submit]")
    page.wait_for_url("**q=etl**")
    assert page.locator("tr[data-schedule]").count() == 1


def test_health_names_its_findings_and_load_shows_the_hourly_storm(
    browser: Any, site: Site, web: Web, shots: Path
) -> None:
    with web.owner() as conn:
        conn.execute(  # a storm at every hour's :00, and H spreading the others over the hour
            "SELECT agentlab_sched.schedule('etl-' || lpad(g::text, 3, '0'), '0 * * * *', 'etl.load')"
            " FROM generate_series(1, 120) g"
        )
        conn.execute(
            "SELECT agentlab_sched.schedule('sync-' || lpad(g::text, 3, '0'), 'H * * * *', 'sync.pull')"
            " FROM generate_series(1, 60) g"
        )
    page = sign_in(browser, site, web.admin, "agentlab-test")
    page.goto(site.url + "/health")
    finding = page.locator("tr[data-status] td", has_text="tasks no live worker has registered").inner_text()
    assert "etl.load, sync.pull (schedules etl-001, etl-002," in finding and "etl-020 and 160 more" in finding
    page.screenshot(path=str(shots / "health-page.png"), full_page=True)
    page.goto(site.url + "/load")
    counts = [
        int(c) for c in page.locator("table.heat td[data-count]").evaluate_all("tds => tds.map(c => c.dataset.count)")
    ]
    assert len(counts) == 1440 and sum(counts) == 24 * 180
    storm = page.locator("table.heat tbody tr td:first-of-type[data-count]").evaluate_all(
        "tds => tds.map(c => Number(c.dataset.count))"
    )
    assert len(storm) >= 23 and min(storm) >= 120  # the :00 column: the storm (and any H that fell on it)
    page.screenshot(path=str(shots / "load-page.png"), full_page=True)


def test_trigger_only_role_runs_now_without_javascript(browser: Any, site: Site, web: Web) -> None:
    web.schedule("report")
    page = sign_in(browser, site, web.oncall, "agentlab-test", javascript=False)
    page.goto(site.url + "/schedules/report")
    assert [b.get_attribute("value") for b in page.locator("button[name=action]").all()] == ["trigger"]
    page.click("button[name=action][value=trigger]")
    page.wait_for_selector("text=Requested (#")


def test_edit_preview_moves_as_you_type_and_a_bad_value_names_the_field(
    browser: Any, site: Site, web: Web, shots: Path
) -> None:
    web.schedule("report", cron="0 9 * * *", timezone="Asia/Shanghai")
    page = sign_in(browser, site, web.admin, "agentlab-test")
    page.goto(site.url + "/schedules/report")
    page.wait_for_selector("#edit-preview li")
    assert page.locator("#edit-preview li").first.inner_text().endswith("09:00 (" + page.locator(
        "#edit-preview li").first.inner_text().split("(")[1])  # fmt: skip
    page.fill("#edit-cron", "30 18 * * *")
    page.wait_for_selector("#edit-preview li:has-text('18:30')")  # no eval: the CSP forbids it
    page.fill("#edit-cron", "0 25 * * *")
    page.wait_for_selector("#edit-preview [data-field=cron]")
    assert "hour: 25 is outside 0-23" in page.locator("#edit-preview").inner_text()
    page.click("button[name=action][value=edit]")
    page.wait_for_selector("span.field-error[data-field=cron]")
    assert "hour: 25 is outside 0-23" in page.locator("span.field-error[data-field=cron]").inner_text()
    page.screenshot(path=str(shots / "edit-refused.png"), full_page=True)


def test_a_new_fire_appears_without_reloading(browser: Any, site: Site, web: Web) -> None:
    web.schedule("report", overlap="allow_all")
    page = sign_in(browser, site, web.admin, "agentlab-test")
    page.goto(site.url + "/schedules/report")
    assert page.locator("table.ledger tr[data-status=started]").count() == 0
    page.evaluate("window.__same_document = true")
    time.sleep(0.5)  # the page's EventSource connects
    started = time.monotonic()
    web.launch("report")
    page.wait_for_selector("table.ledger tr[data-status=started]", timeout=2000)
    assert time.monotonic() - started < 2
    assert page.evaluate("window.__same_document") is True  # updated in place, not reloaded
    # More pages listening: still one database connection for all of them (and none polls).
    for _ in range(3):
        sign_in(browser, site, web.admin, "agentlab-test").goto(site.url + "/runs")
    time.sleep(0.5)
    with web.owner() as conn:
        live = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND application_name = 'agentlab-sched web live'"
        ).fetchone()
    assert live == (1,)


def test_approve_in_the_browser_and_the_zh_cn_page(browser: Any, site: Site, web: Web, shots: Path) -> None:
    web.schedule("weekly-report", task="demo.ask")
    run_id = web.awaiting("weekly-report", "Send the weekly report?")
    page = sign_in(browser, site, web.admin, "agentlab-test", locale="zh-CN")
    assert page.locator("html").get_attribute("lang") == "zh-CN"
    page.goto(site.url + f"/runs/{run_id}")
    page.screenshot(path=str(shots / "run-zh-CN.png"), full_page=True)
    page.fill("#comment", "可以发送")
    page.click("button[name=action][value=approve]")
    page.wait_for_selector("text=已批准。")
    assert web.run_status(run_id) == "awaiting_approval"  # until a worker starts segment 2
    with web.owner() as conn:
        row = conn.execute(
            "SELECT status, decided_by FROM agentlab_sched.approvals WHERE run_id = %s", (run_id,)
        ).fetchone()
    assert row == ("approved", web.admin)


def test_hostile_names_stay_text_and_a_foreign_post_is_refused(browser: Any, site: Site, web: Web) -> None:
    web.schedule("<img src=x onerror=alert(1)>")
    web.schedule("[x](javascript:alert(1))")
    page = sign_in(browser, site, web.admin, "agentlab-test")
    page.goto(site.url + "/schedules")
    assert page.locator("img").count() == 0
    assert page.locator("a", has_text="[x](javascript:alert(1))").get_attribute("href").startswith("/schedules/")
    page.goto(site.url + "/schedules/" + "%3Cimg%20src%3Dx%20onerror%3Dalert(1)%3E")
    assert page.locator("h1").inner_text() == "<img src=x onerror=alert(1)>"
    assert page.dialogs == []
    # A form posted from another origin (a page elsewhere posting here) is refused: SameSite=Strict keeps the
    # cookie away, and the Origin check refuses it anyway.
    status = page.evaluate(
        """async (url) => (await fetch(url, {method: 'POST', body: new URLSearchParams({action: 'pause'}),
            headers: {'Content-Type': 'application/x-www-form-urlencoded'}})).status""",
        site.url + "/schedules/%5Bx%5D(javascript:alert(1))",
    )
    assert status == 403  # no CSRF token


@pytest.fixture
def worker(web: Web) -> Iterator[subprocess.Popen[bytes]]:
    """A real `agentlab-sched worker` (the demo app) on the test's database."""
    env = {**os.environ, "AGENTLAB_SCHED_DATABASE_URL": web.db_url, "AGENTLAB_SCHED_LOCALE": "en"}
    proc = subprocess.Popen(
        [sys.executable, "-c", "from agentlab_sched.cli import main; main()", "worker", "--quiet"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        yield proc
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_run_now_then_approve_and_see_it_finish_with_a_real_worker(
    browser: Any, site: Site, web: Web, worker: subprocess.Popen[bytes]
) -> None:
    web.schedule("ask-me", task="demo.ask")
    page = sign_in(browser, site, web.admin, "agentlab-test")
    page.goto(site.url + "/runs?status=awaiting_approval")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # the worker registers its tasks when it starts
        with web.owner() as conn:
            if conn.execute("SELECT 1 FROM agentlab_sched.workers").fetchone():
                break
        time.sleep(0.2)
    other = page.context.new_page()
    other.goto(site.url + "/schedules/ask-me")
    other.click("button[name=action][value=trigger]")
    other.wait_for_selector("text=Fired now")
    # The list shows the waiting run without a reload (live), once the worker ran it to its approval point.
    page.wait_for_selector("table.runs tr[data-status=awaiting_approval] a", timeout=20_000)
    page.click("table.runs tr[data-status=awaiting_approval] a")
    page.fill("#comment", "go ahead")
    page.click("button[name=action][value=approve]")
    page.wait_for_selector("text=Approved.")
    page.wait_for_selector("h1[data-status=succeeded]", timeout=20_000)  # live: the worker finished it
    assert "go ahead" in page.locator("dd code").nth(2).inner_text()  # demo.ask returns what the approver said


def hang_worker(url: str, mode: str, log: Path) -> subprocess.Popen[bytes]:
    """A real worker subprocess whose task ``t.hang`` hangs (``hang``) or returns at once (``finish``)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "AGENTLAB_SCHED_LOCALE": "en"}
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "tests.support.hang_worker", url, mode], env=env, stdout=out, stderr=out, cwd=ROOT
        )


def wait_until(what: str, check: Any, limit: float = 30.0) -> Any:
    """Poll ``check`` (every 0.1 s, at most ``limit`` s) until it returns something true."""
    deadline = time.monotonic() + limit
    while not (found := check()):
        assert time.monotonic() < deadline, f"{what}: not within {limit} s"
        time.sleep(0.1)
    return found


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_a_run_suspended_by_killing_its_worker_is_resumed_on_screen_and_goes_on(
    browser: Any, site: Site, web: Any, tmp_path: Path
) -> None:
    with web.owner() as conn:
        conn.execute("""SELECT agentlab_sched.schedule('agent', '0 9 * * *', 't.hang', '{"topic": "weekly"}')""")
    log = tmp_path / "workers.log"
    first = hang_worker(web.db_url, "hang", log)
    try:
        with web.owner() as conn:
            wait_until("the worker registers t.hang", lambda: conn.execute(
                "SELECT 1 FROM agentlab_sched.known_tasks WHERE task = 't.hang'").fetchone())  # fmt: skip
            with conn.transaction():  # a manual fire, as a worker's tick would launch it
                conn.execute("SELECT 1 FROM agentlab_sched.schedules WHERE name = 'agent' FOR UPDATE")
                row = conn.execute(
                    """SELECT agentlab_sched.launch(s, clock_timestamp(), 'manual', NULL, 'manual:test') AS r
                       FROM agentlab_sched.schedules s WHERE s.name = 'agent'"""
                ).fetchone()
            assert row is not None and row[0]["status"] == "started", row
            run_id = str(row[0]["run_id"])
        wait_until("the worker runs it", lambda: web.run_status(run_id) == "running")
        first.send_signal(signal.SIGKILL)
        assert first.wait(10) == -signal.SIGKILL
    finally:
        stop(first)
    assert web.run_status(run_id) == "running"  # nobody has noticed yet
    # Housekeeping an hour later: the killed worker's heartbeat is an hour old, its run is suspended.
    with web.owner() as conn:
        conn.execute("SELECT agentlab_sched.housekeeping(now() + interval '1 hour')")
    assert web.run_status(run_id) == "suspended"

    page = sign_in(browser, site, web.admin, "agentlab-test")
    page.goto(site.url + "/runs?status=suspended")
    page.click("table.runs tr[data-status=suspended] a")
    page.wait_for_selector("h1[data-status=suspended]")
    page.click("button[name=action][value=resume-run]")
    page.wait_for_selector("text=Resumed.")
    page.wait_for_selector("h1[data-status=queued]")
    second = hang_worker(web.db_url, "finish", log)
    try:
        page.wait_for_selector("h1[data-status=succeeded]", timeout=30_000)  # live: the new worker finished it
    finally:
        stop(second)
    with web.owner() as conn:
        done = conn.execute(
            """SELECT r.status, r.result, r.acted_by_login, j.attempts FROM agentlab_sched.runs r
               JOIN procrastinate_jobs j ON j.id = r.job_id WHERE r.id = %s""",
            (run_id,),
        ).fetchone()
    assert done == ("succeeded", {"resumed": {"topic": "weekly"}}, web.admin, 2), log.read_text()
