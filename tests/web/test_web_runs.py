"""Runs on the dashboard: approve and reject a waiting run, resume and abandon suspended ones (one by one and
in bulk), cancel; each role's buttons; the run's timeline; a refusal is the database's own words."""

from __future__ import annotations

import re

from tests.support.web import Web

RUN_ACTIONS = {"approve", "reject", "resume-run", "abandon-run", "cancel-run"}


def buttons(html: str) -> set[str]:
    return set(re.findall(r'<button type="submit" name="action" value="([a-z-]+)"', html))


def test_approve_a_waiting_run_records_the_person(web: Web) -> None:
    web.schedule("report", task="demo.ask")
    run_id = web.awaiting("report")
    client = web.signed_in(web.admin)
    page = client.get(f"/runs/{run_id}")
    assert page.status_code == 200
    assert '<h1 data-status="awaiting_approval">' in page.text
    assert "Send the report?" in page.text
    assert buttons(page.text) == {"approve", "reject", "cancel-run"}
    listing = client.get("/runs?status=awaiting_approval").text
    assert f'href="/runs/{run_id}"' in listing and 'data-status="awaiting_approval"' in listing
    response = web.post(client, f"/runs/{run_id}", action="approve", comment="looks right")
    assert response.status_code == 303
    with web.owner() as conn:
        row = conn.execute(
            "SELECT status, decided_by, comment FROM agentlab_sched.approvals WHERE run_id = %s", (run_id,)
        ).fetchone()
    assert row == ("approved", web.admin, "looks right")
    page = client.get(f"/runs/{run_id}").text
    assert f"approved by {web.admin}: looks right" in page  # the timeline
    # Approving twice is refused with the database's words, not a traceback.
    response = web.post(client, f"/runs/{run_id}", action="approve")
    assert response.status_code == 409
    assert "Traceback" not in response.text and 'role="alert"' in response.text


def test_reject_in_chinese(web: Web) -> None:
    web.schedule("report", task="demo.ask")
    run_id = web.awaiting("report")
    client = web.signed_in(web.admin)
    client.get("/schedules?lang=zh-CN")
    page = client.get(f"/runs/{run_id}").text
    assert "批准" in page and "驳回" in page
    response = web.post(client, f"/runs/{run_id}", action="reject", comment="不发")
    assert response.status_code == 303
    assert web.run_status(run_id) == "cancelled"
    assert "已驳回" in client.get(f"/runs/{run_id}").text


def test_resume_and_abandon_suspended_runs(web: Web) -> None:
    web.schedule("a", overlap="allow_all")
    first, second = web.suspended("a"), web.suspended("a")
    client = web.signed_in(web.admin)
    page = client.get(f"/runs/{first}").text
    assert buttons(page) == {"resume-run", "abandon-run", "cancel-run"}
    assert web.post(client, f"/runs/{first}", action="resume-run").status_code == 303
    assert web.run_status(first) == "queued"
    assert web.post(client, f"/runs/{second}", action="abandon-run").status_code == 303
    assert web.run_status(second) == "cancelled"
    # Resuming a run that is not suspended: the database says why.
    response = web.post(client, f"/runs/{first}", action="resume-run")
    assert response.status_code == 409
    assert "is not suspended" in response.text


def test_bulk_abandon_of_suspended_runs(web: Web) -> None:
    web.schedule("a", overlap="allow_all")
    runs = [web.suspended("a") for _ in range(3)]
    client = web.signed_in(web.admin)
    page = client.get("/runs?status=suspended").text
    assert {"resume-run", "abandon-run"} <= buttons(page)
    response = web.post(client, "/runs?status=suspended", action="abandon-run", schedule="a")
    assert response.status_code == 303
    assert [web.run_status(r) for r in runs] == ["cancelled"] * 3
    assert "Abandoned 3 suspended runs." in client.get(response.headers["location"]).text


def test_reader_gets_no_run_button_and_is_refused(web: Web) -> None:
    web.schedule("report", task="demo.ask")
    run_id = web.awaiting("report")
    client = web.signed_in(web.reader)
    page = client.get(f"/runs/{run_id}").text
    assert buttons(page) & RUN_ACTIONS == set()
    response = web.post(client, f"/runs/{run_id}", action="approve")
    assert response.status_code == 403
    assert "permission denied" in response.text
    assert web.run_status(run_id) == "awaiting_approval"


def test_cancel_a_running_run_and_the_schedule_page_lists_it(web: Web) -> None:
    web.schedule("report")
    run_id = web.launch("report")
    client = web.signed_in(web.admin)
    page = client.get("/schedules/report").text
    assert f'href="/runs/{run_id}"' in page
    assert web.post(client, f"/runs/{run_id}", action="cancel-run").status_code == 303
    timeline = client.get(f"/runs/{run_id}").text
    assert "queued" in timeline and "started" in timeline
