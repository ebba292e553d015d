"""Schedules defined in code: @agentlab_sched.schedule on a Procrastinate task, synced by the app's
workers; edits from SQL refused; a schedule gone from the code paused, not deleted; the newest
deployment wins (docs/coming-from.md, "Schedules as code")."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import procrastinate
import psycopg
import pytest
from procrastinate.testing import InMemoryConnector

import agentlab_sched
from agentlab_sched import database as db
from agentlab_sched.errors import Conflict, ValidationError
from agentlab_sched.schedules import admin, code
from agentlab_sched.worker.blueprint import register_app_tasks
from tests.support.cli import ok, refused
from tests.support.rows import Conn
from tests.support.security_helpers import Roles

NOW = datetime(2026, 3, 1, tzinfo=UTC)


def app_v1() -> procrastinate.App:
    app = procrastinate.App(connector=InMemoryConnector())

    @agentlab_sched.schedule(
        "0 9 * * 1", timezone="Asia/Shanghai", inputs={"week": "{{ schedule.week_start }}"}, overlap="buffer_one"
    )
    @app.task(name="reports.weekly")
    def weekly(week: str) -> str:
        return week

    @app.task(name="sync.hourly")
    @agentlab_sched.schedule("5 * * * *", timeout=timedelta(minutes=10))  # below @app.task works too
    def hourly() -> None:
        return None

    @agentlab_sched.schedule("0 3 * * *", name="cleanup-night")
    @agentlab_sched.schedule("0 15 * * *", name="cleanup-day")
    @app.task(name="cleanup")
    def cleanup() -> None:
        return None

    return app


def app_v2() -> procrastinate.App:
    """The next version: weekly moves to 10:00 and loses its overlap; cleanup-day is gone."""
    app = procrastinate.App(connector=InMemoryConnector())

    @agentlab_sched.schedule("0 10 * * 1", timezone="Asia/Shanghai", inputs={"week": "{{ schedule.week_start }}"})
    @app.task(name="reports.weekly")
    def weekly(week: str) -> str:
        return week

    @app.task(name="sync.hourly")
    @agentlab_sched.schedule("5 * * * *", timeout=timedelta(minutes=10))
    def hourly() -> None:
        return None

    @agentlab_sched.schedule("0 3 * * *", name="cleanup-night")
    @app.task(name="cleanup")
    def cleanup() -> None:
        return None

    return app


def test_declarations_are_checked_when_the_module_is_imported() -> None:
    with pytest.raises(ValidationError) as caught:
        agentlab_sched.schedule("0 25 * * *")
    assert caught.value.message("en") == "hour: 25 is outside 0-23"
    with pytest.raises(ValidationError):
        agentlab_sched.schedule("0 9 * * *", timezone="PST")
    with pytest.raises(TypeError, match="colour"):
        agentlab_sched.schedule("0 9 * * *", colour="red")


def test_declared_and_fingerprint() -> None:
    items = code.declared(app_v1())
    assert [(task, d.name or task, d.cron) for task, d in items] == [
        ("cleanup", "cleanup-day", "0 15 * * *"),
        ("cleanup", "cleanup-night", "0 3 * * *"),
        ("reports.weekly", "reports.weekly", "0 9 * * 1"),
        ("sync.hourly", "sync.hourly", "5 * * * *"),
    ]
    assert items[2][1].defined_in.startswith("tests.schedules.test_code_schedules.app_v1.<locals>.weekly (")
    decorator = (
        _line('"0 9 * * 1", timezone="Asia/Shanghai", inputs=') - 1
    )  # the line above: "@agentlab_sched.schedule("
    assert items[2][1].defined_in.endswith(f"test_code_schedules.py:{decorator})")
    assert code.fingerprint(items) == code.fingerprint(code.declared(app_v1()))  # the same code, the same
    assert code.fingerprint(items) != code.fingerprint(code.declared(app_v2()))


def _line(text: str) -> int:
    """The line of this file where ``text`` first appears (a decorator's)."""
    with open(__file__, encoding="utf-8") as f:
        return next(i for i, line in enumerate(f, 1) if text in line)


async def test_sync_creates_the_schedules_and_marks_them_as_defined_in_code(conn: Conn) -> None:
    report = await code.sync(conn, app_v1(), now=NOW)
    assert sorted(report.created) == ["cleanup-day", "cleanup-night", "reports.weekly", "sync.hourly"]
    weekly = await admin.get(conn, "reports.weekly")
    assert (weekly.cron, weekly.timezone, weekly.task, weekly.overlap, weekly.inputs, weekly.enabled) == (
        "0 9 * * 1",
        "Asia/Shanghai",
        "reports.weekly",
        "buffer_one",
        {"week": "{{ schedule.week_start }}"},
        True,
    )
    assert weekly.next_run_at == datetime(2026, 3, 2, 1, 0, tzinfo=UTC)  # Monday 09:00 in Shanghai
    assert weekly.defined_in is not None and "test_code_schedules.py:" in weekly.defined_in
    assert (await admin.get(conn, "sync.hourly")).timeout == timedelta(minutes=10)
    again = await code.sync(conn, app_v1(), now=NOW)
    assert (again.created, again.updated, sorted(again.unchanged)) == ([], [], sorted(report.created))


async def test_edits_from_sql_and_python_are_refused_saying_where(conn: Conn) -> None:
    await code.sync(conn, app_v1(), now=NOW)
    where = (await admin.get(conn, "reports.weekly")).defined_in
    with pytest.raises(Conflict) as caught:
        await admin.alter(conn, "reports.weekly", cron="0 8 * * 1")
    assert caught.value.code == "schedule.defined_in_code"
    assert caught.value.message("en") == (
        f'name: schedule "reports.weekly" is defined in code ({where}): change it there and deploy (here it can'
        " be paused, resumed, triggered and backfilled)"
    )
    assert caught.value.message("zh-CN").startswith(f"名称:定时任务「reports.weekly」定义在代码中({where})")
    with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState):
        await conn.execute("UPDATE agentlab_sched.schedules SET inputs = '{}' WHERE name = 'reports.weekly'")
    with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState):
        await conn.execute("SELECT agentlab_sched.unschedule('reports.weekly')")
    with pytest.raises(psycopg.errors.InvalidParameterValue):  # marking is a sync's alone
        await conn.execute("SELECT agentlab_sched.code_schedule_mark('reports.weekly', 'elsewhere', 'x')")
    # a session setting is no way round it
    await conn.execute("SELECT set_config('agentlab_sched.code_sync', 'on', false)")
    with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState):
        await conn.execute("SELECT agentlab_sched.alter_schedule('reports.weekly', cron => '0 8 * * 1')")
    # what stays open: pause, resume, trigger
    paused = await admin.pause(conn, "reports.weekly", "holiday week")
    assert (paused.enabled, paused.paused_reason) == (False, "holiday week")
    resumed = await admin.resume(conn, "reports.weekly", now=NOW)
    assert resumed.enabled and resumed.cron == "0 9 * * 1"
    await conn.execute("SELECT agentlab_sched.trigger('reports.weekly')")


def test_the_cli_says_where_a_schedule_is_defined(db_url: str) -> None:
    ok(db_url, "schedules", "sync", "--app", "tests.support.code_app.app")
    message = refused(db_url, "schedules", "edit", "nightly", "--cron", "0 3 * * *")
    assert message.startswith('name: schedule "nightly" is defined in code (tests.support.code_app.nightly (')
    assert "code_app.py:" in message
    shown = ok(db_url, "schedules", "show", "nightly").stdout
    assert "defined in code" in shown and "tests.support.code_app.nightly" in shown


async def test_the_next_deployment_updates_pauses_what_is_gone_and_the_old_one_does_not_fight(conn: Conn) -> None:
    await code.sync(conn, app_v1(), now=NOW)
    paused_by_hand = await admin.pause(conn, "sync.hourly", "maintenance")
    report = await code.sync(conn, app_v2(), now=NOW)
    # reports.weekly changed; the others moved (another function, other lines): defined_in follows them
    assert (sorted(report.updated), report.paused_gone) == (
        ["cleanup-night", "reports.weekly", "sync.hourly"],
        ["cleanup-day"],
    )
    weekly = await admin.get(conn, "reports.weekly")
    assert (weekly.cron, weekly.overlap) == ("0 10 * * 1", "skip")  # left out of the decorator: the default
    gone = await admin.get(conn, "cleanup-day")
    assert gone.enabled is False and gone.paused_reason is not None
    assert gone.paused_reason.startswith(
        "no longer defined in code (it was defined in tests.schedules.test_code_schedules"
    )
    assert (await admin.get(conn, "sync.hourly")).paused_reason == paused_by_hand.paused_reason  # kept paused
    # an old worker (v1) starting again changes nothing: v2 is newer
    old = await code.sync(conn, app_v1(), now=NOW)
    assert sorted(old.newer_elsewhere) == ["cleanup-day", "cleanup-night", "reports.weekly", "sync.hourly"]
    assert old.created == old.updated == old.paused_gone == []
    assert (await admin.get(conn, "reports.weekly")).cron == "0 10 * * 1"
    assert not (await admin.get(conn, "cleanup-day")).enabled
    # going back on purpose: adopt v1; cleanup-day is declared again and fires again
    back = await code.sync(conn, app_v1(), adopt=True, now=NOW)
    assert sorted(back.updated) == ["cleanup-day", "cleanup-night", "reports.weekly", "sync.hourly"]
    assert (await admin.get(conn, "reports.weekly")).cron == "0 9 * * 1"
    assert (await admin.get(conn, "cleanup-day")).enabled
    # a schedule gone from the code may be deleted
    await code.sync(conn, app_v2(), adopt=True, now=NOW)
    assert await admin.unschedule(conn, "cleanup-day") is True


async def test_a_name_taken_by_a_schedule_not_in_code_is_left_alone(conn: Conn) -> None:
    await admin.schedule(conn, "reports.weekly", "0 7 * * *", "reports.weekly", now=NOW)
    report = await code.sync(conn, app_v1(), now=NOW)
    assert "reports.weekly" not in report.created
    assert report.refused["reports.weekly"].startswith("a schedule named reports.weekly exists and is not defined")
    s = await admin.get(conn, "reports.weekly")
    assert (s.cron, s.defined_in) == ("0 7 * * *", None)


async def test_two_apps_do_not_pause_each_others_schedules(conn: Conn) -> None:
    other = procrastinate.App(connector=InMemoryConnector())

    @agentlab_sched.schedule("*/10 * * * *")
    @other.task(name="billing.sweep")
    def sweep() -> None:
        return None

    await code.sync(conn, app_v1(), now=NOW)
    report = await code.sync(conn, other, now=NOW)  # newer, but it does not run app_v1's tasks
    assert (report.created, report.paused_gone, report.newer_elsewhere) == (["billing.sweep"], [], [])
    again = await code.sync(conn, app_v1(), now=NOW)
    assert again.newer_elsewhere == [] and again.paused_gone == []
    assert [(await admin.get(conn, n)).enabled for n in ("reports.weekly", "billing.sweep")] == [True, True]


async def test_one_task_with_two_unnamed_schedules_is_refused(conn: Conn) -> None:
    app = procrastinate.App(connector=InMemoryConnector())

    @agentlab_sched.schedule("0 9 * * *")
    @agentlab_sched.schedule("0 18 * * *")
    @app.task(name="twice")
    def twice() -> None:
        return None

    with pytest.raises(agentlab_sched.SchedError) as caught:
        await code.sync(conn, app)
    assert caught.value.message("en") == (
        "name: twice is declared more than once in code (give each schedule of a task its own name=)"
    )


async def test_a_worker_syncs_when_it_starts(conn: Conn) -> None:
    app = app_v1()
    await register_app_tasks(app, conn, force=True)  # what a worker does when it starts (and its tick)
    assert (await admin.get(conn, "reports.weekly")).defined_in is not None
    # the first time only, in a process
    async with conn.transaction():  # as a sync may: delete what the code defines
        await conn.execute("SELECT agentlab_sched.begin_code_sync('test', '{}', '{}')")
        await conn.execute("DELETE FROM agentlab_sched.schedules")
    await register_app_tasks(app, conn, force=True)
    assert await (await conn.execute("SELECT count(*) AS n FROM agentlab_sched.schedules")).fetchone() == {"n": 0}


def test_cli_sync(db_url: str) -> None:
    result = json.loads(ok(db_url, "schedules", "sync", "--app", "tests.support.code_app.app", "--json").stdout)
    assert result["created"] == ["nightly"]
    words = ok(db_url, "schedules", "sync", "--app", "tests.support.code_app.app").stdout
    assert words.startswith("schedules defined in code (deployment ") and "0 created, 0 updated, 1 unchanged" in words


async def test_the_sync_is_an_admins_a_worker_role_alone_leaves_the_schedules_alone(
    db_url: str, roles: Roles, caplog: pytest.LogCaptureFixture
) -> None:
    groups = roles.groups()
    worker_login, admin_login = roles.login("host", groups.worker), roles.login("deployer", groups.admin)
    as_worker = await db.connect(roles.url(worker_login), locale="en")
    try:
        app = app_v1()
        await register_app_tasks(app, as_worker, force=True)  # a worker's start: logged, not raised
        assert "could not sync the schedules defined in code" in caplog.text
    finally:
        await as_worker.close()
    as_admin = await db.connect(roles.url(admin_login), locale="en")
    try:
        report = await code.sync(as_admin, app_v1(), now=NOW)
        assert sorted(report.created) == ["cleanup-day", "cleanup-night", "reports.weekly", "sync.hourly"]
        assert (await admin.get(as_admin, "reports.weekly")).defined_in is not None
    finally:
        await as_admin.close()


async def test_the_sync_functions_take_over_no_hand_made_schedule_and_a_fake_deployment_wins_nothing(
    conn: Conn,
) -> None:
    """An admin may call the sync functions: they mark only schedules the sync created (or that code already
    defines), a mark names the deployment this transaction's sync began, and a deployment registered without
    writing a schedule does not make the real deployment's syncs skip it."""
    await admin.schedule(conn, "mine", "0 7 * * *", "demo.echo", now=NOW)
    await code.sync(conn, app_v1(), now=NOW)
    names = sorted(
        r["name"] for r in await (await conn.execute("SELECT name FROM agentlab_sched.schedules")).fetchall()
    )
    tasks = sorted(app_v1().tasks)
    begin = "SELECT agentlab_sched.begin_code_sync('fake', %s::text[], %s::text[])"

    async def refused_code(statement: str) -> str:
        with pytest.raises(psycopg.Error) as caught:
            async with conn.transaction():
                await conn.execute(begin, (tasks, names))
                await conn.execute(statement)
        return json.loads(caught.value.diag.message_detail or "{}")["code"]

    assert await refused_code("SELECT agentlab_sched.code_schedule_mark('mine', 'evil.py', 'fake')") == (
        "code.not_from_code"
    )
    assert await refused_code("SELECT agentlab_sched.code_schedule_mark('reports.weekly', 'x', 'not-this-one')") == (
        "code.not_syncing"
    )
    async with conn.transaction():  # a fake deployment, the newest now, that wrote nothing
        await conn.execute(begin, (tasks, names))
        await conn.execute("SELECT agentlab_sched.code_schedule_gone('mine')")
        await conn.execute("SELECT agentlab_sched.end_code_sync()")
    mine = await admin.get(conn, "mine")
    assert (mine.enabled, mine.defined_in, mine.paused_reason) == (True, None, None)
    again = await code.sync(conn, app_v1(), now=NOW)
    assert again.newer_elsewhere == []
    assert sorted(again.unchanged) == sorted(n for n in names if n != "mine")
