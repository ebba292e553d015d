"""trigger()/trigger_now() look for a free instant a microsecond at a time; an operator's BEFORE INSERT
trigger on the requests table that pins fire_at makes every attempt collide: the search is bounded and the
refusal says why, instead of spinning for ever."""

from __future__ import annotations

import time

import psycopg
import pytest
from psycopg.rows import DictRow

S = "agentlab_sched"


def test_a_pinned_fire_at_ends_the_search_with_a_reason(sync_conn: psycopg.Connection[DictRow]) -> None:
    sync_conn.execute(f"SELECT {S}.schedule('daily', '0 9 * * *', 'demo.echo')")
    sync_conn.execute(
        """CREATE FUNCTION public.pin_fire_at() RETURNS trigger LANGUAGE plpgsql AS $$
           BEGIN NEW.fire_at := timestamptz '2026-01-01 00:00+00'; RETURN NEW; END $$"""
    )
    sync_conn.execute(
        f"CREATE TRIGGER pin BEFORE INSERT ON {S}.fire_requests FOR EACH ROW EXECUTE FUNCTION public.pin_fire_at()"
    )
    sync_conn.execute(f"SELECT {S}.trigger_now('daily')")  # the first takes the pinned instant
    began = time.monotonic()
    with pytest.raises(psycopg.errors.InvalidParameterValue) as refused:
        sync_conn.execute(f"SELECT {S}.trigger_now('daily')")
    assert time.monotonic() - began < 10
    assert refused.value.diag.message_primary == (
        'schedule "daily": no free instant for a manual fire after 1000 tries; a trigger on '
        "agentlab_sched.fire_requests that sets fire_at would do that (each request needs an instant of its own)"
    )
    assert sync_conn.execute(f"SELECT count(*) AS n FROM {S}.fire_requests").fetchone() == {"n": 1}
