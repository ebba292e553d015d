"""An event's line is rendered when it is logged, and only then: listeners get the fields either way."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

import pytest

from agentlab_sched.observe import events

AT = datetime(2026, 12, 7, 9, 0, tzinfo=UTC)


def _fire() -> None:
    events.fire_recorded(
        schedule="daily-report", fire_id=7, fire_at=AT, kind="scheduled", status="started", timezone="Asia/Shanghai",
        run_id="1a2b3c4d-0000-0000-0000-000000000000",
    )  # fmt: skip


def test_an_unlogged_fire_renders_no_line_and_still_tells_the_listeners(monkeypatch: pytest.MonkeyPatch) -> None:
    rendered: list[str] = []

    def line(data: Any, locale: str) -> str:
        rendered.append(str(data["schedule"]))
        return "a line"

    heard: list[tuple[str, dict[str, Any]]] = []
    monkeypatch.setattr(events, "fire_line", line)
    monkeypatch.setattr(events.FIRES, "level", logging.WARNING)
    events.subscribe(listener := lambda event, data: heard.append((event, dict(data))))
    try:
        _fire()
    finally:
        events.unsubscribe(listener)
    assert rendered == []
    assert [(event, data["schedule"], data["status"], data["run_id"]) for event, data in heard] == [
        ("fire", "daily-report", "started", "1a2b3c4d-0000-0000-0000-000000000000")
    ]


def test_a_logged_fire_renders_its_line_once(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(events.FIRES, "level", logging.INFO)
    with caplog.at_level(logging.INFO, logger=events.FIRES.name):
        _fire()
    assert [r.getMessage() for r in caplog.records if r.name == events.FIRES.name] == [
        "2026-12-07 17:00 daily-report scheduled fire: started, run #1a2b3c"
    ]
