"""carry_out_request() checks the due times and refusals it is given (an admin may call it): a manual
request fires at its own instant, a backfill at most the backfill limit of times inside its range, and a
refusal is a resolver's, recorded by a worker's login, in the system's words."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from agentlab_sched.firing.requests import backfill_times
from tests.support.rows import fetched
from tests.support.security_helpers import Roles

T0 = datetime(2026, 3, 1, tzinfo=UTC)


def _code(exc: psycopg.Error) -> str:
    return json.loads(exc.diag.message_detail or "{}").get("code", "")


def test_an_admin_cannot_choose_the_times_or_the_words_of_a_request(db_url: str, roles: Roles) -> None:
    groups = roles.groups()
    admin = roles.login("admin", groups.admin)
    with roles.connect(admin) as c:
        c.execute("SELECT agentlab_sched.schedule('s', '0 * * * *', 'demo.echo')")
        backfill = fetched(
            c.execute("SELECT agentlab_sched.backfill('s', %s, %s)", (T0, T0 + timedelta(hours=3))).fetchone()
        )[0]
        manual = fetched(c.execute("SELECT agentlab_sched.trigger('s')").fetchone())[0]

        def refused(request_id: int, times: list[datetime], refusals: object = None) -> str:
            with pytest.raises(psycopg.Error) as caught:
                c.execute(
                    "SELECT agentlab_sched.carry_out_request(%s, %s::timestamptz[], %s::jsonb)",
                    (request_id, times, json.dumps(refusals if refusals is not None else [])),
                )
            return _code(caught.value)

        far = [T0 + timedelta(hours=i) for i in range(5000)]
        assert refused(backfill, far) == "backfill.too_many"
        assert refused(backfill, [datetime(1900, 1, 1, tzinfo=UTC), datetime(2999, 12, 31, tzinfo=UTC)]) == (
            "request.bad_times"
        )
        assert refused(backfill, [T0 + timedelta(hours=1), T0 + timedelta(hours=1)]) == "request.bad_times"
        assert refused(manual, [T0]) == "request.bad_times"
        words = [{"reason_code": "launch.refused", "reason_params": {"reason": "mine"}, "reason": "my own words"}]
        assert refused(backfill, [T0], words) == "request.refusal_not_allowed"
        status = fetched(
            c.execute("SELECT array_agg(status ORDER BY id) FROM agentlab_sched.fire_requests").fetchone()
        )[0]
        assert status == ["pending", "pending"]  # nothing carried out, nothing failed
    with psycopg.connect(db_url, autocommit=True) as worker:  # the owner (a worker's rights and more)
        bogus = [{"reason_code": "schedule.paused_after_failures", "reason_params": {}, "reason": "x"}]
        with pytest.raises(psycopg.Error) as caught:
            worker.execute(
                "SELECT agentlab_sched.carry_out_request(%s, %s::timestamptz[], %s::jsonb)",
                (backfill, [T0], json.dumps(bogus)),
            )
        assert _code(caught.value) == "request.refusal_not_allowed"
        words[0]["reason"] = "pretending to be something else"
        worker.execute(
            "SELECT agentlab_sched.carry_out_request(%s, %s::timestamptz[], %s::jsonb)",
            (backfill, [T0], json.dumps(words)),
        )
        reason = fetched(worker.execute("SELECT reason FROM agentlab_sched.fires WHERE kind = 'backfill'").fetchone())[
            0
        ]
    assert "mine" in reason and "pretending" not in reason


def test_a_backfill_fires_only_at_due_times_of_the_schedules_cron(db_url: str, roles: Roles) -> None:
    groups = roles.groups()
    admin = roles.login("admin", groups.admin)
    start, end = datetime(2026, 3, 7, 12, tzinfo=UTC), datetime(2026, 3, 9, 12, tzinfo=UTC)
    with roles.connect(admin) as c:
        # A fixed time in New York's gap (02:30 on 8 March is moved to 03:00 EDT), and an H minute.
        c.execute("SELECT agentlab_sched.schedule('s', 'H 2 * * *', 'demo.echo', timezone => 'America/New_York')")
        row = fetched(c.execute("SELECT to_jsonb(s) AS s FROM agentlab_sched.schedules s").fetchone())[0]
        due = backfill_times(row, start, end)
        rid = fetched(c.execute("SELECT agentlab_sched.backfill('s', %s, %s)", (start, end)).fetchone())[0]
        carry = "SELECT agentlab_sched.carry_out_request(%s, %s::timestamptz[])"
        for wrong in ([due[0] + timedelta(minutes=1)], [due[0], due[1] - timedelta(hours=1)], [start]):
            with pytest.raises(psycopg.Error) as caught:
                c.execute(carry, (rid, wrong))
            assert _code(caught.value) == "request.bad_times"
        assert due[0] == datetime(2026, 3, 8, 7, tzinfo=UTC)  # 02:mm was skipped: the jump's instant, 03:00 EDT
        assert len(due) == 2
        done = fetched(c.execute(carry, (rid, due)).fetchone())[0]
        fired = fetched(c.execute("SELECT array_agg(fire_at ORDER BY fire_at) FROM agentlab_sched.fires").fetchone())[0]
    assert [f["fire_at"] for f in done["fires"]] == [t.isoformat() for t in due]
    assert fired == due
