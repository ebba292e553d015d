"""`schedules next` shows the times an `H` field chose for the schedule's name (the seed reaches the CLI)."""

from __future__ import annotations

import json

from agentlab_sched.core import cron
from tests.support.cli import ok


def test_next_shows_the_minute_chosen_by_the_name(db_url: str) -> None:
    for name in ("tenant-a", "tenant-b"):
        ok(db_url, "schedules", "add", name, "--cron", "H * * * *", "--task", "demo.echo")
    shown = {
        name: [t["at"] for t in json.loads(ok(db_url, "schedules", "next", name, "-n", "3", "--json").stdout)]
        for name in ("tenant-a", "tenant-b")
    }
    for name, times in shown.items():
        minute = int(cron.parse("H * * * *", seed=name).canonical.split()[1])
        assert len(times) == 3
        assert {t[14:16] for t in times} == {f"{minute:02d}"}, (name, times)
        assert {t[17:19] for t in times} == {"00"}
