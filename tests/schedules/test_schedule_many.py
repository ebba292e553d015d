"""Many schedules at once: SQL schedule_many(), admin.schedule_many() and `schedules import FILE` (CSV or
JSON lines). All validated, all or nothing, the failing definition named by its place, name and field."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.rows import DictRow

from agentlab_sched.errors import ValidationError
from agentlab_sched.schedules import admin
from tests.support.cli import ok, refused
from tests.support.rows import fetched
from tests.support.security_helpers import Roles


async def names(conn: psycopg.AsyncConnection[DictRow]) -> list[str]:
    cur = await conn.execute("SELECT name FROM agentlab_sched.schedules ORDER BY id")
    return [r["name"] for r in await cur.fetchall()]


async def test_creates_all_with_defaults_audit_and_a_replan(conn: psycopg.AsyncConnection[DictRow]) -> None:
    count = await admin.schedule_many(
        conn,
        [
            {"name": "t-1", "cron": "H * * * *", "task": "demo.echo"},
            {"name": "t-2", "cron": "0  9 * * *", "task": "demo.echo", "inputs": {"a": 1}, "timezone": "Asia/Shanghai"},
            {"name": "t-3", "cron": "*/5 * * * *", "task": "demo.echo", "misfire_grace": timedelta(minutes=2),
             "overlap": "allow_all", "enabled": False},
        ],
    )  # fmt: skip
    assert count == 3
    cur = await conn.execute(
        """SELECT name, cron, timezone, inputs, overlap, misfire_grace, enabled, version, replan
           FROM agentlab_sched.schedules ORDER BY id"""
    )
    rows = await cur.fetchall()
    assert [(r["name"], r["cron"], r["timezone"], r["inputs"], r["enabled"], r["version"]) for r in rows] == [
        ("t-1", "H * * * *", "UTC", {}, True, 1),
        ("t-2", "0 9 * * *", "Asia/Shanghai", {"a": 1}, True, 1),
        ("t-3", "*/5 * * * *", "UTC", {}, False, 1),
    ]
    assert rows[2]["misfire_grace"] == timedelta(minutes=2) and rows[2]["overlap"] == "allow_all"
    assert [r["replan"] for r in rows] == ["now", "now", None]
    cur = await conn.execute(
        "SELECT schedule_name, operation, new_values ->> 'cron' AS cron"
        " FROM agentlab_sched.schedule_changes ORDER BY id"
    )
    assert [tuple(r.values()) for r in await cur.fetchall()] == [
        ("t-1", "insert", "H * * * *"),
        ("t-2", "insert", "0 9 * * *"),
        ("t-3", "insert", "*/5 * * * *"),
    ]
    # The mark is gone with the call: a plain insert afterwards is validated again.
    with pytest.raises(psycopg.Error, match="hour: 25 is outside 0-23"):
        await conn.execute(
            "INSERT INTO agentlab_sched.schedules (name, cron, task, timezone)"
            " VALUES ('x', '0 25 * * *', 'demo.echo', 'UTC')"
        )


@pytest.mark.parametrize(
    ("definitions", "code", "field", "message"),
    [
        (
            [{"name": "a", "cron": "0 9 * * *", "task": "demo.echo"}, {"name": "b", "cron": "0 25 * * *", "task": "t"}],
            "cron.out_of_range",
            "cron",
            "definition 2 (b): hour: 25 is outside 0-23",
        ),
        (
            [{"name": "a", "cron": "0 9 * * *", "task": "demo.echo", "timezone": "Mars/Base"}],
            "timezone.unknown",
            "timezone",
            "definition 1 (a): ",
        ),
        (
            [{"name": "a", "cron": "0 9 * * *", "task": "demo.echo"}, {"name": "a", "cron": "0 9 * * *", "task": "x"}],
            "schedule.bulk_duplicate",
            "name",
            'definition 2 (a): the name "a" is also given in definition 1',
        ),
        (
            [{"name": "a", "cron": "0 9 * * *", "task": "demo.echo", "colour": "red"}],
            "schedule.bulk_unknown_field",
            "colour",
            "definition 1 (a): colour is not an argument of schedule() (known: name, cron, task, inputs, timezone,",
        ),
        (
            [{"name": "a", "cron": "0 9 * * *", "task": "demo.echo"}, {"name": "b", "task": "demo.echo"}],
            "schedule.required",
            "cron",
            "definition 2 (b): ",
        ),
        (
            [{"name": "a", "cron": "0 9 * * *", "task": "demo.echo", "priority": "high"}],
            "schedule.bulk_bad_value",
            "priority",
            "definition 1 (a): priority: high is not a valid value",
        ),
        (
            [{"name": "ok", "cron": "0 9 * * *", "task": "demo.echo"}, {"name": "c", "cron": "0 9 * * *",
                                                                         "task": "demo.echo", "overlap": "sometimes"}],
            "schedule.bad_choice",
            "overlap",
            "definition 2 (c): ",
        ),
    ],
)  # fmt: skip
async def test_refuses_all_naming_the_definition(
    conn: psycopg.AsyncConnection[DictRow], definitions: list[dict[str, Any]], code: str, field: str, message: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        await admin.schedule_many(conn, definitions)
    err = caught.value
    assert err.code == "schedule.bulk_row"
    assert (err.params["code"], err.field) == (code, field) or (code in ("schedule.required", "schedule.bad_choice"))
    assert str(err).startswith(message), str(err)
    assert await names(conn) == []


async def test_an_existing_name_is_refused(conn: psycopg.AsyncConnection[DictRow]) -> None:
    await admin.schedule(conn, "taken", "0 9 * * *", "demo.echo")
    with pytest.raises(ValidationError) as caught:
        await admin.schedule_many(
            conn,
            [
                {"name": "new", "cron": "0 9 * * *", "task": "demo.echo"},
                {"name": "taken", "cron": "0 9 * * *", "task": "demo.echo"},
            ],
        )
    assert str(caught.value) == 'definition 2 (taken): a schedule named "taken" already exists'
    assert await names(conn) == ["taken"]


async def test_sql_form_and_its_refusal_of_a_non_array(conn: psycopg.AsyncConnection[DictRow]) -> None:
    cur = await conn.execute(
        "SELECT agentlab_sched.schedule_many(%s::jsonb) AS n",
        [json.dumps([{"name": f"s{i}", "cron": "H H * * *", "task": "demo.echo"} for i in range(500)])],
    )
    assert fetched(await cur.fetchone())["n"] == 500
    with pytest.raises(psycopg.Error, match="the definitions must be a JSON array of objects"):
        await conn.execute("SELECT agentlab_sched.schedule_many('{}'::jsonb)")


def test_import_csv_and_json_lines(db_url: str, tmp_path: Path) -> None:
    csv_file = tmp_path / "s.csv"
    csv_file.write_text(
        'name,cron,task,inputs,timezone\nc-1,H * * * *,demo.echo,"{""n"": 1}",UTC\nc-2,0 9 * * *,demo.echo,,\n'
    )
    assert ok(db_url, "schedules", "import", str(csv_file)).stdout.strip() == f"created 2 schedules from {csv_file}"
    lines = tmp_path / "s.jsonl"
    lines.write_text(
        '{"name": "j-1", "cron": "0 9 * * *", "task": "demo.echo"}\n\n'
        '{"name": "j-2", "cron": "H/15 * * * *", "task": "demo.echo"}\n'
    )
    assert ok(db_url, "schedules", "import", str(lines)).stdout.strip() == f"created 2 schedules from {lines}"
    listed = json.loads(ok(db_url, "schedules", "list", "--json").stdout)
    assert sorted(s["name"] for s in listed) == ["c-1", "c-2", "j-1", "j-2"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        '{"name": "k-1", "cron": "0 9 * * *", "task": "demo.echo"}\n'
        '{"name": "k-2", "cron": "0 9 * *", "task": "demo.echo"}\n'
    )
    assert refused(db_url, "schedules", "import", str(bad)) == (
        'definition 2 (k-2): cron: expected 5, 6 or 7 fields, got 4 in "0 9 * *"'
    )
    assert refused(db_url, "--locale", "zh-CN", "schedules", "import", str(bad)) == (
        "第 2 条定义(k-2):cron 表达式应有 5、6 或 7 个字段,「0 9 * *」有 4 个"
    )
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"name": "x"\n')
    assert refused(db_url, "schedules", "import", str(broken)).startswith(f"{broken}, line 1: not a JSON object (")
    assert refused(db_url, "schedules", "import", str(tmp_path / "none.csv")) == (
        f"cannot read {tmp_path / 'none.csv'}: No such file or directory"
    )


async def test_rows_and_audit_are_what_schedule_writes(conn: psycopg.AsyncConnection[DictRow]) -> None:
    """The bulk insert leaves the triggers out: it makes each row and its audit values itself, by the
    trigger's own functions; every column but the ones of the moment (id, created, replanned, paused)
    is what schedule() stores for the same definition, and each audit row holds the stored row."""
    definitions: list[dict[str, Any]] = [
        {"name": "a", "cron": "H * * * *", "task": "demo.echo"},
        {"name": "b", "cron": " 0  9 * * 1 ", "task": "demo.echo", "inputs": {"d": "{{ schedule.date }}"},
         "timezone": "Asia/Shanghai", "overlap": "allow_all", "misfire_grace": "120 seconds"},
        {"name": "c", "cron": "*/5 * * * *", "task": "demo.echo", "enabled": False, "remaining_runs": 3,
         "starts_at": "2030-01-01T00:00:00+00:00", "dst_gap": "skip", "priority": 5},
    ]  # fmt: skip
    assert await admin.schedule_many(conn, definitions) == 3
    for d in definitions:
        args = {k: json.dumps(v) if k == "inputs" else v for k, v in d.items() if k != "name"}
        named = ", ".join(f"{k} => %({k})s" + ("::jsonb" if k == "inputs" else "") for k in args)
        params = {"name": "single-" + d["name"], **args}
        await conn.execute(f"SELECT agentlab_sched.schedule(%(name)s, {named})", params)
    moment = ["id", "name", "created_at", "updated_at", "replan_at", "paused_at"]
    cur = await conn.execute(
        """SELECT b.name, to_jsonb(b) - %(moment)s::text[] AS bulk, to_jsonb(s) - %(moment)s::text[] AS single,
                  b.replan_at IS NULL AS unplanned, b.paused_at IS NOT NULL AS paused
           FROM agentlab_sched.schedules b JOIN agentlab_sched.schedules s ON s.name = 'single-' || b.name
           ORDER BY b.id""",
        {"moment": moment},
    )
    rows = await cur.fetchall()
    assert [(r["name"], r["unplanned"], r["paused"]) for r in rows] == [
        ("a", False, False),
        ("b", False, False),
        ("c", True, True),
    ]
    for r in rows:
        assert r["bulk"] == r["single"], r["name"]
    assert rows[1]["bulk"]["cron"] == "0 9 * * 1"
    cur = await conn.execute(
        """SELECT s.name, c.new_values = agentlab_sched.schedule_audit_values(s) AS same, c.operation, c.db_role
           FROM agentlab_sched.schedules s JOIN agentlab_sched.schedule_changes c ON c.schedule_id = s.id
           WHERE s.name IN ('a', 'b', 'c') ORDER BY s.id"""
    )
    me = fetched(await (await conn.execute("SELECT session_user AS u")).fetchone())["u"]
    assert [tuple(r.values()) for r in await cur.fetchall()] == [(n, True, "insert", me) for n in ("a", "b", "c")]


async def test_the_bulk_key_holds_for_its_insert_only(conn: psycopg.AsyncConnection[DictRow]) -> None:
    """Once schedule_many() returns, a row written in the same transaction is validated and audited again,
    even with the key's setting given by hand (the sequence's value was put back)."""
    async with conn.transaction():
        await admin.schedule_many(conn, [{"name": "ok", "cron": "0 9 * * *", "task": "demo.echo"}])
        await conn.execute("SELECT set_config('agentlab_sched.bulk_insert', 'on', true)")
        with pytest.raises(psycopg.Error, match="hour: 25 is outside 0-23"):
            async with conn.transaction():
                await conn.execute("SELECT agentlab_sched.schedule('bad', '0 25 * * *', 'demo.echo')")
        await conn.execute("SELECT agentlab_sched.schedule('fine', '0  8 * * *', 'demo.echo')")
        cur = await conn.execute(
            """SELECT s.name, s.cron, count(c.id) AS audit FROM agentlab_sched.schedules s
               LEFT JOIN agentlab_sched.schedule_changes c ON c.schedule_id = s.id GROUP BY s.id ORDER BY s.id"""
        )
        assert [tuple(r.values()) for r in await cur.fetchall()] == [("ok", "0 9 * * *", 1), ("fine", "0 8 * * *", 1)]


def test_no_other_role_can_set_the_key(db_url: str, roles: Roles) -> None:
    """The key is the owner's sequence: a role that may create schedules and sets the key's setting by
    hand is refused at the sequence, never let through unvalidated; schedule_many() works for it."""
    names = roles.groups()
    admin_login = roles.login("bulkadmin", names.admin)
    with psycopg.connect(db_url, autocommit=True) as owner:
        owner.execute("SELECT agentlab_sched.register_tasks(ARRAY['demo.echo'])")
    with roles.connect(admin_login) as conn:
        conn.execute("SET agentlab_sched.bulk_insert = 'on'")
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="bulk_insert_key"):
            conn.execute("SELECT setval('agentlab_sched.bulk_insert_key', pg_current_xact_id()::text::bigint)")
        # Through the owner's schedule(): the sequence was never set in this session, so the check refuses.
        with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState, match=r"bulk_insert_key.* is not yet defined"):
            conn.execute("SELECT agentlab_sched.schedule('bad', '0 25 * * *', 'demo.echo')")
        conn.execute("RESET agentlab_sched.bulk_insert")
        assert conn.execute("SELECT agentlab_sched.schedule_many(%s::jsonb)", [json.dumps(
            [{"name": "by-admin", "cron": "0 9 * * *", "task": "demo.echo"}])]).fetchone() == (1,)  # fmt: skip
    with psycopg.connect(db_url) as owner:
        row = owner.execute(
            """SELECT c.db_role FROM agentlab_sched.schedule_changes c WHERE c.schedule_name = 'by-admin'"""
        ).fetchone()
    assert row == (admin_login,)
