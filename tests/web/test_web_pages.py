"""The dashboard over HTTP, on a real database, signed in as real roles: what each role sees and may do,
the refusals (the database's own words), the session's protections, escaping, the languages, read-only mode."""

from __future__ import annotations

import asyncio
import concurrent.futures
import re

import pytest
from cryptography.fernet import Fernet

from agentlab_sched import database as db
from agentlab_sched.notify.webhooks import set_webhook
from agentlab_sched.settings import Settings
from tests.support.web import Web

XSS = "<img src=x onerror=alert(1)>"
LINK = "[x](javascript:alert(1))"
CJK = re.compile(r"[\u4e00-\u9fff]")


def buttons(html: str) -> set[str]:
    """The values of the action buttons on a page."""
    return set(re.findall(r'<button type="submit" name="action" value="([a-z-]+)"', html))


def test_healthz_and_login_page(web: Web) -> None:
    client = web.client()
    assert client.get("/healthz").text == "ok\n"
    page = client.get("/login")
    assert page.status_code == 200
    assert '<html lang="en">' in page.text
    assert 'name="username"' in page.text and 'name="password"' in page.text
    # Every page is behind the sign-in.
    assert client.get("/schedules").status_code == 303
    assert client.get("/schedules").headers["location"] == "/login?next=%2Fschedules"


def test_headers_and_cookie(web: Web) -> None:
    client = web.client()
    page = client.get("/login")
    csp = page.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp
    assert page.headers["x-frame-options"] == "DENY"
    response = web.sign_in(client, web.admin)
    cookie = response.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=strict" in cookie and "max-age=" in cookie
    assert "<script>" not in client.get("/schedules").text  # no inline script


def test_admin_sees_every_action_and_acts_as_itself(web: Web) -> None:
    web.schedule("report")
    client = web.signed_in(web.admin)
    page = client.get("/schedules/report")
    assert page.status_code == 200
    assert buttons(page.text) == {"pause", "trigger", "backfill", "edit", "delete"}
    response = web.post(client, "/schedules/report", action="pause", reason="maintenance window")
    assert response.status_code == 303
    page = client.get("/schedules/report")
    assert "maintenance window" in page.text and "Paused." in page.text
    assert buttons(page.text) == {"resume", "trigger", "backfill", "edit", "delete"}
    with web.owner() as conn:
        who = conn.execute(
            "SELECT db_role FROM agentlab_sched.schedule_changes WHERE schedule_name = 'report'"
            " ORDER BY id DESC LIMIT 1"
        ).fetchone()
    assert who == (web.admin,)  # the person, not the server
    listing = client.get("/schedules?status=paused").text
    assert 'data-schedule="report"' in listing and "maintenance window" in listing
    assert f"<small>by {web.admin}, " in listing  # who paused it: the audit's newest row


def test_reader_sees_no_button_and_a_post_is_refused_by_the_database(web: Web) -> None:
    web.schedule("report")
    client = web.signed_in(web.reader)
    page = client.get("/schedules/report")
    assert page.status_code == 200
    assert buttons(page.text) == set()
    assert buttons(client.get("/schedules").text) == set()
    response = web.post(client, "/schedules/report", action="pause", reason="x")
    assert response.status_code == 403
    assert "permission denied for function pause" in response.text
    assert "Traceback" not in response.text
    with web.owner() as conn:
        assert conn.execute("SELECT enabled FROM agentlab_sched.schedules WHERE name = 'report'").fetchone() == (True,)


def test_trigger_only_role_gets_run_now_and_nothing_else(web: Web) -> None:
    web.schedule("report")
    client = web.signed_in(web.oncall)
    page = client.get("/schedules/report")
    assert buttons(page.text) == {"trigger"}
    response = web.post(client, "/schedules/report", action="trigger")
    assert response.status_code == 303
    page = client.get("/schedules/report")
    assert "Requested (#" in page.text
    with web.owner() as conn:
        row = conn.execute("SELECT requested_by FROM agentlab_sched.fire_requests ORDER BY id DESC LIMIT 1").fetchone()
    assert row is not None and web.oncall in row[0]


def test_a_post_without_the_token_or_from_another_origin_is_refused(web: Web) -> None:
    web.schedule("report")
    client = web.signed_in(web.admin)
    assert client.post("/schedules/report", data={"action": "pause"}).status_code == 403
    token = web.csrf(client, "/schedules/report")
    response = client.post(
        "/schedules/report", data={"action": "pause", "csrf": token}, headers={"origin": "http://evil.example"}
    )
    assert response.status_code == 403
    assert "another site" in response.text
    with web.owner() as conn:
        assert conn.execute("SELECT enabled FROM agentlab_sched.schedules WHERE name = 'report'").fetchone() == (True,)
    # The same post from here goes through.
    response = client.post(
        "/schedules/report", data={"action": "pause", "csrf": token}, headers={"origin": "http://testserver"}
    )
    assert response.status_code == 303


@pytest.mark.parametrize("name", [XSS, LINK])
def test_attacker_text_stays_text(web: Web, name: str) -> None:
    web.schedule(name)
    client = web.signed_in(web.admin)
    listing = client.get("/schedules").text
    if name == XSS:
        assert XSS not in listing and "&lt;img src=x onerror=alert(1)&gt;" in listing
    else:  # shown as it is, never a link
        assert f">{LINK}</a>" in listing
    assert 'href="javascript:' not in listing and "<img" not in listing
    response = web.post(client, "/schedules/x", action="pause", reason=XSS)
    assert response.status_code == 404
    assert XSS not in response.text


def test_wrong_password_is_refused_when_the_server_checks_passwords(web: Web) -> None:
    client = web.client()
    response = web.sign_in(client, web.admin, password="wrong")
    if response.status_code == 303:
        pytest.skip("this PostgreSQL trusts local connections: it does not check passwords")
    assert response.status_code == 401
    assert "password authentication failed" in response.text


def test_zh_cn_pages_carry_no_english_label(web: Web) -> None:
    web.schedule("report", cron="0 9 * * 1", timezone="Asia/Shanghai")
    client = web.signed_in(web.admin)
    for path in ("/schedules?lang=zh-CN", "/schedules/report", "/runs", "/health", "/load"):
        page = client.get(path)
        assert page.status_code == 200, path
        assert '<html lang="zh-CN">' in page.text, path
        labels = re.findall(r"<(?:th|label|button|legend|h1|h2|caption)[^>]*>([^<]+)<", page.text)
        english = [t for t in labels if re.search(r"[A-Za-z]{3,}", t) and not CJK.search(t)]
        allowed = {"UTC", "PID", "Cron", "English", "agentlab-sched"}
        assert [t for t in english if t.strip() not in allowed and "report" not in t] == [], path
    assert "每周一 09:00（上海时间）" in client.get("/schedules").text


def test_accept_language_chooses_the_language(web: Web) -> None:
    client = web.client()
    page = client.get("/login", headers={"accept-language": "zh-CN,zh;q=0.9,en;q=0.5"})
    assert '<html lang="zh-CN">' in page.text and "登录" in page.text


def test_read_only_hides_and_refuses_every_action(web: Web) -> None:
    web.schedule("report")
    client = web.signed_in(web.admin, read_only=True)
    page = client.get("/schedules/report")
    assert buttons(page.text) == set()
    response = web.post(client, "/schedules/report", action="pause")
    assert response.status_code == 403
    assert "read-only" in response.text


def test_edit_refusal_names_the_field_and_a_good_edit_saves(web: Web) -> None:
    web.schedule("report")
    client = web.signed_in(web.admin)
    response = web.post(client, "/schedules/report", action="edit", cron="0 25 * * *", timezone="UTC", version="1")
    assert response.status_code == 400
    assert 'data-field="cron"' in response.text
    assert "hour: 25 is outside 0-23" in response.text
    response = web.post(client, "/schedules/report", action="edit", cron="30 9 * * *", timezone="UTC")
    assert response.status_code == 303
    with web.owner() as conn:
        assert conn.execute("SELECT cron FROM agentlab_sched.schedules WHERE name = 'report'").fetchone() == (
            "30 9 * * *",
        )
    preview = client.get("/schedules/report/preview", params={"cron": "0 9 * * *", "timezone": "Asia/Shanghai"}).json()
    assert preview["ok"] and len(preview["times"]) == 5 and preview["times"][0]["local"].endswith("09:00")
    bad = client.get("/schedules/report/preview", params={"cron": "61 * * * *", "timezone": "UTC"}).json()
    assert bad == {"ok": False, "field": "cron", "error": bad["error"]} and "minute" in bad["error"]


def test_backfill_shows_the_count_before_it_runs(web: Web) -> None:
    web.schedule("report", cron="0 * * * *")
    client = web.signed_in(web.admin)
    response = web.post(
        client, "/schedules/report", action="backfill", **{"from": "2026-01-01T00:00", "to": "2026-01-01T05:00"}
    )
    assert response.status_code == 200
    assert 'data-count="6"' in response.text and "This range holds 6 fires." in response.text
    with web.owner() as conn:
        assert conn.execute("SELECT count(*) FROM agentlab_sched.fires").fetchone() == (0,)
    response = web.post(
        client, "/schedules/report", action="backfill", confirm="6",
        **{"from": "2026-01-01T00:00", "to": "2026-01-01T05:00"},
    )  # fmt: skip
    assert response.status_code == 303
    with web.owner() as conn:
        assert conn.execute("SELECT count(*) FROM agentlab_sched.fires WHERE kind = 'backfill'").fetchone() == (6,)


def test_bulk_pause_of_a_filtered_set_confirms_the_count(web: Web) -> None:
    for name in ("etl-a", "etl-b", "other"):
        web.schedule(name)
    client = web.signed_in(web.admin)
    response = web.post(client, "/schedules?q=etl", action="pause", q="etl", reason="migration")
    assert response.status_code == 200
    assert 'data-count="2"' in response.text and "Pause 2 schedules?" in response.text
    response = web.post(
        client, "/schedules", action="pause", q="etl", reason="migration", confirm="2", names=["etl-a", "etl-b"]
    )
    assert response.status_code == 303
    with web.owner() as conn:
        rows = conn.execute(
            "SELECT name, enabled, paused_reason FROM agentlab_sched.schedules ORDER BY name"
        ).fetchall()
    assert rows == [("etl-a", False, "migration"), ("etl-b", False, "migration"), ("other", True, None)]


def test_schedules_list_pages_by_keyset_and_keeps_filters_in_the_url(web: Web) -> None:
    with web.owner() as conn:
        for i in range(55):
            conn.execute("SELECT agentlab_sched.schedule(%s, '0 9 * * *', 'demo.echo')", (f"s{i:03d}",))
    client = web.signed_in(web.reader)
    first = client.get("/schedules?q=s0").text
    assert first.count("data-schedule=") == 50
    found = re.search(r'rel="next" href="([^"]+)"', first)
    assert found is not None and "after=s049" in found.group(1) and "q=s0" in found.group(1)
    second = client.get(found.group(1).replace("&amp;", "&")).text
    assert re.findall(r'data-schedule="([^"]+)"', second) == [f"s{i:03d}" for i in range(50, 55)]


def test_the_text_filter_matches_a_part_of_the_name_or_task_in_any_case_and_wildcards_as_themselves(web: Web) -> None:
    with web.owner() as conn:
        for name, task in (("ETL_Orders", "demo.echo"), ("etlxorders", "demo.echo"), ("rate-100%", "demo.echo"),
                           ("c:\\tmp", "demo.echo"), ("nightly", "Reports.Daily")):  # fmt: skip
            conn.execute("SELECT agentlab_sched.schedule(%s, '0 9 * * *', %s)", (name, task))
    client = web.signed_in(web.reader)

    def names(q: str) -> list[str]:
        return re.findall(r'data-schedule="([^"]+)"', client.get("/schedules", params={"q": q}).text)

    assert names("l_o") == ["ETL_Orders"]  # "_" is an underscore, not any character
    assert names("ORDERS") == ["ETL_Orders", "etlxorders"]
    assert names("0%") == ["rate-100%"]
    assert names("%") == ["rate-100%"]
    assert names("\\t") == ["c:\\tmp"]
    assert names("reports.d") == ["nightly"]  # the task's name
    assert names("zz") == []


def test_health_load_runs_and_local_mode(web: Web) -> None:
    web.schedule("report", cron="*/5 * * * *")
    client = web.client(local=True)
    page = client.get("/schedules")
    assert page.status_code == 200
    assert "without a password" in page.text
    assert client.get("/health").status_code == 200
    load = client.get("/load")
    assert load.status_code == 200 and "288 fires in all" in load.text
    assert client.get("/runs?status=suspended").status_code == 200
    assert client.get("/runs/00000000").status_code == 404


def test_base_path_prefixes_every_link_and_the_cookie(web: Web) -> None:
    web.schedule("report")
    client = web.client(base_path="/ops")
    assert client.get("/schedules").status_code == 404
    assert client.get("/ops/schedules").headers["location"] == "/ops/login?next=%2Fops%2Fschedules"
    token = web.csrf(client, "/ops/login")
    response = client.post("/ops/login", data={"username": web.admin, "password": "agentlab-test", "csrf": token})
    assert response.status_code == 303 and response.headers["location"] == "/ops/schedules"
    assert "path=/ops" in response.headers["set-cookie"].lower()
    page = client.get("/ops/schedules").text
    assert 'href="/ops/schedules/report"' in page and 'src="/ops/static/pages.js"' in page
    assert client.get("/ops/static/pages.js").status_code == 200
    assert client.get("/ops/healthz").text == "ok\n"


def test_sign_out_closes_the_session(web: Web) -> None:
    client = web.signed_in(web.admin)
    assert client.get("/schedules").status_code == 200
    assert client.get("/logout").status_code == 303
    assert client.get("/schedules").status_code == 303  # back to /login


def test_delete_and_run_now_as_admin(web: Web) -> None:
    web.schedule("report")
    web.schedule("old")
    client = web.signed_in(web.admin)
    response = web.post(client, "/schedules/report", action="trigger")
    assert response.status_code == 303
    page = client.get("/schedules/report").text
    assert "Fired now" in page
    with web.owner() as conn:
        assert conn.execute("SELECT kind FROM agentlab_sched.fires").fetchall() == [("manual",)]
    response = web.post(client, "/schedules/old", action="delete", sure="1")
    assert response.status_code == 303 and response.headers["location"] == "/schedules"
    assert "Deleted old." in client.get("/schedules").text
    assert client.get("/schedules/old").status_code == 404


def test_a_stale_edit_is_refused_with_the_database_words(web: Web) -> None:
    web.schedule("report")
    client = web.signed_in(web.admin)
    response = web.post(client, "/schedules/report", action="edit", cron="30 9 * * *", version="7")
    assert response.status_code == 400
    assert "version" in response.text and "Traceback" not in response.text


def test_test_send_without_a_webhook_is_refused_in_words(web: Web) -> None:
    web.schedule("report")
    client = web.signed_in(web.admin)
    assert "test-send" not in buttons(client.get("/schedules/report").text)  # no webhook: no button
    response = web.post(client, "/schedules/report", action="test-send")
    assert response.status_code == 409
    assert "webhook" in response.text and "Traceback" not in response.text


def test_a_webhook_shows_its_host_hint_never_its_url_or_secret(web: Web) -> None:
    token = "0f1e2d3c-aaaa-bbbb-cccc-123456789abc"
    web.schedule("report")

    async def configure() -> None:
        conn = await db.connect(web.db_url, locale="en")
        try:
            settings = Settings(secret_keys=(Fernet.generate_key().decode(),), locale="en")
            url = f"https://open.feishu.cn/open-apis/bot/v2/hook/{token}"
            await set_webhook(conn, "report", url=url, secret="s3cret-value", settings=settings)
        finally:
            await conn.close()

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, configure()).result()
    client = web.signed_in(web.admin)
    page = client.get("/schedules/report").text
    assert "feishu https://open.feishu.cn/" in page and "test-send" in buttons(page)  # the hint: host, last characters
    for path in ("/schedules/report", "/schedules"):
        text = client.get(path).text
        assert token not in text and "s3cret-value" not in text and "gAAAAA" not in text


def test_health_names_at_most_twenty_of_many_schedules_and_counts_the_rest(web: Web) -> None:
    with web.owner() as conn:
        conn.execute(
            "SELECT agentlab_sched.schedule('s' || lpad(g::text, 3, '0'), '0 9 * * *', 'reports.gone')"
            " FROM generate_series(1, 500) g"
        )
    shown = ", ".join(f"s{n:03}" for n in range(1, 21))
    page = web.signed_in(web.admin).get("/health").text
    assert (
        f"tasks no live worker has registered: reports.gone (schedules {shown} and 480 more); their fires are "
        "refused until a worker whose app has them runs"
    ) in page
    assert "s021" not in page and len(page) < 20_000
    zh = web.signed_in(web.admin).get("/health?lang=zh-CN").text
    assert f"(定时任务 {'、'.join(f's{n:03}' for n in range(1, 21))} 及另外 480 项)" in zh


def test_load_shows_the_lateness_of_the_runs_fires_started(web: Web) -> None:
    web.schedule("report", cron="*/5 * * * *")
    run_id = web.launch("report")
    with web.owner() as conn:
        conn.execute(
            "UPDATE agentlab_sched.runs r SET started_at = f.fire_at + interval '2 seconds'"
            " FROM agentlab_sched.fires f WHERE f.run_id = r.id AND r.id = %s",
            (run_id,),
        )
    page = web.signed_in(web.admin).get("/load").text
    [row] = re.findall(r"<tr><td>[^<]* UTC</td><td>(\d+)</td><td>([\d.]+)</td><td>([\d.]+)</td></tr>", page)
    assert row == ("1", "2.000", "2.000")
