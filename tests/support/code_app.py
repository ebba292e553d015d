"""A Procrastinate app with a schedule defined in code, for
`agentlab-sched schedules sync --app tests.support.code_app.app`."""

from __future__ import annotations

import procrastinate
from procrastinate.testing import InMemoryConnector

import agentlab_sched

app = procrastinate.App(connector=InMemoryConnector())


@agentlab_sched.schedule("0 2 * * *", name="nightly", timezone="Europe/Berlin")
@app.task(name="maintenance.nightly")
def nightly() -> None:
    return None
