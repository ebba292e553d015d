"""An app on a connector the scheduler cannot run on (aiopg, psycopg2) is refused when it is installed,
naming its connector and the supported one, rather than failing at every tick; agentlab-sched worker says
it in one line."""

from __future__ import annotations

import procrastinate
import pytest
from procrastinate.connector import BaseAsyncConnector

from agentlab_sched.errors import SchedError
from agentlab_sched.worker.middleware import install


class OtherConnector(BaseAsyncConnector):
    """A connector of another driver (aiopg's and psycopg2's need packages this machine may lack)."""


def test_an_app_on_another_driver_is_refused_naming_the_supported_connector() -> None:
    app = procrastinate.App(connector=OtherConnector())
    with pytest.raises(SchedError) as refused:
        install(app)
    assert refused.value.message("en") == (
        f"the app's connector is {__name__}.OtherConnector; the scheduler runs on procrastinate.PsycopgConnector "
        "only (psycopg 3: its tick, housekeeping and run bookkeeping use a psycopg 3 pool). Give the app a "
        "procrastinate.PsycopgConnector"
    )
    assert "procrastinate.PsycopgConnector" in refused.value.message("zh-CN")


def test_psycopg_and_the_testing_connector_are_accepted(db_url: str) -> None:
    install(procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=db_url)))
    install(procrastinate.App(connector=procrastinate.testing.InMemoryConnector()))
