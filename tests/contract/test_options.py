"""The schedule options are defined once (agentlab_sched/core/options.py); every other place that
spells them is checked here against that table, so an option missing or different anywhere fails with a
message that says where (see "How to add an option" in options.py).

The static checks are functions returning the problems they find; the last test feeds them a table with
one option more and checks that each place is reported.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import typing
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
import typer
from psycopg.rows import DictRow
from typer.testing import CliRunner

from agentlab_sched import messages
from agentlab_sched.cli import app
from agentlab_sched.core import planner
from agentlab_sched.core.options import CLEARABLE, OPTIONS, Option, catalog_rows
from agentlab_sched.database import queries
from agentlab_sched.schedules import admin

DOCS = Path(__file__).resolve().parents[2] / "docs"

#: What information_schema calls each SQL type (data_type) and pg_get_function_arguments spells it.
SQL_NAMES = {
    "text": "text",
    "integer": "integer",
    "interval": "interval",
    "boolean": "boolean",
    "timestamptz": "timestamp with time zone",
}


# ------------------------------------------------------------------------------------------ checks


def table_problems(conn: psycopg.Connection[DictRow], options: tuple[Option, ...]) -> list[str]:
    """The agentlab_sched.schedules columns: type, NOT NULL, default; a CHECK for each choice."""
    problems = []
    columns = {
        r["column_name"]: r
        for r in conn.execute(
            """SELECT column_name, data_type, is_nullable, column_default FROM information_schema.columns
               WHERE table_schema = 'agentlab_sched' AND table_name = 'schedules'"""
        ).fetchall()
    }
    checks = [
        r["def"]
        for r in conn.execute(
            """SELECT pg_get_constraintdef(oid) AS def FROM pg_constraint
               WHERE conrelid = 'agentlab_sched.schedules'::regclass AND contype = 'c'"""
        ).fetchall()
    ]
    for o in options:
        where = f"option {o.name}: the column agentlab_sched.schedules.{o.name} (a migration)"
        col = columns.get(o.name)
        if col is None:
            problems.append(f"{where} is missing")
            continue
        if col["data_type"] != SQL_NAMES[o.sql_type]:
            problems.append(f"{where} is {col['data_type']}, the table says {SQL_NAMES[o.sql_type]}")
        if (col["is_nullable"] == "NO") != o.required:
            problems.append(f"{where} must be {'NOT NULL' if o.required else 'nullable'}")
        if col["column_default"] is None:
            default = None
        else:
            row = conn.execute(f"SELECT {col['column_default']} AS v").fetchone()
            default = row["v"] if row else None
        if default != o.default:
            problems.append(f"{where} defaults to {default!r}, the table says {o.default!r}")
        if o.choices:
            allowed = [
                re.findall(r"'([^']*)'::text", d) for d in checks if re.search(rf"\b{o.name} = ANY \(ARRAY\[", d)
            ]
            if not any(sorted(a) == sorted(o.choices) for a in allowed):
                problems.append(f"{where}: no CHECK constraint allows exactly {', '.join(o.choices)} (found {allowed})")
    return problems


def _function_arguments(conn: psycopg.Connection[DictRow], name: str) -> list[dict[str, str]]:
    rows = conn.execute(
        """SELECT pg_get_function_arguments(p.oid) AS args FROM pg_proc p
           JOIN pg_namespace n ON n.oid = p.pronamespace
           WHERE n.nspname = 'agentlab_sched' AND p.proname = %s""",
        (name,),
    ).fetchall()
    assert len(rows) == 1, f"agentlab_sched.{name}() has {len(rows)} overloads: drop the old signature"
    args = []
    for part in re.split(r",\s*(?![^()]*\))", rows[0]["args"]):
        m = re.fullmatch(r"(\w+) (.+?)(?: DEFAULT (.+))?", part.strip())
        assert m, part
        args.append({"name": m[1], "type": m[2], "default": m[3] or ""})
    return args


def sql_function_problems(conn: psycopg.Connection[DictRow], options: tuple[Option, ...]) -> list[str]:
    """The arguments of schedule() and alter_schedule(): each option, of its type, DEFAULT NULL."""
    problems = []
    for function in ("schedule", "alter_schedule"):
        args = {a["name"]: a for a in _function_arguments(conn, function)}
        where = f"the arguments of agentlab_sched.{function}() (sql/30_schedules.sql)"
        for o in options:
            arg = args.get(o.name)
            if arg is None:
                problems.append(f"option {o.name}: missing from {where}")
                continue
            if arg["type"] != SQL_NAMES[o.sql_type]:
                problems.append(f"option {o.name}: is {arg['type']} in {where}, the table says {o.sql_type}")
            if not arg["default"].startswith("NULL"):
                problems.append(f"option {o.name}: must be DEFAULT NULL in {where} (NULL = not given)")
    return problems


def query_problems(options: tuple[Option, ...]) -> list[str]:
    """The named queries admin sends (database/queries/schedules.sql) pass every option on."""
    problems = []
    where = "the named query {} (database/queries/schedules.sql)"
    for o in options:
        for name in ("schedule", "alter_schedule"):
            if f"{o.name} => %({o.name})s::{o.sql_type}" not in queries.text(name):
                problems.append(f"option {o.name}: no `{o.name} => %({o.name})s::{o.sql_type}` in {where.format(name)}")
    return problems


def python_problems(options: tuple[Option, ...]) -> list[str]:
    """admin.schedule / admin.alter keyword arguments, admin.Schedule fields, the catalogue's field name."""
    problems = []
    for function in (admin.schedule, admin.alter):
        where = f"the keyword arguments of admin.{function.__name__}() (schedules/admin.py)"
        params = inspect.signature(function).parameters
        hints = typing.get_type_hints(function)
        for o in options:
            p = params.get(o.name)
            if p is None:
                problems.append(f"option {o.name}: missing from {where}")
                continue
            if p.kind is not inspect.Parameter.KEYWORD_ONLY or p.default is not None:
                problems.append(f"option {o.name}: must be keyword-only with default None in {where}")
            if hints.get(o.name) != o.py_type | None:
                problems.append(f"option {o.name}: is {hints.get(o.name)} in {where}, not {o.py_type.__name__} | None")
    fields = {f.name: f for f in dataclasses.fields(admin.Schedule)}
    hints = typing.get_type_hints(admin.Schedule)
    for o in options:
        where = "the fields of admin.Schedule (schedules/admin.py)"
        if o.name not in fields:
            problems.append(f"option {o.name}: missing from {where}")
        elif hints[o.name] != (o.py_type if o.required else o.py_type | None):
            problems.append(f"option {o.name}: is {hints[o.name]} in {where}")
        if f"schedule.field.{o.name}" not in messages.CATALOG:
            problems.append(f"option {o.name}: no field name schedule.field.{o.name} in the catalogue (messages/)")
    return problems


def _cli_command(name: str) -> Any:
    """The click command typer builds for `agentlab-sched schedules <name>`."""
    group: Any = typer.main.get_command(app)
    return group.commands["schedules"].commands[name]


def cli_problems(options: tuple[Option, ...]) -> list[str]:
    """The options of `agentlab-sched schedules add` and `edit`."""
    problems = []
    for command in ("add", "edit"):
        params = {p.name: p for p in _cli_command(command).params}
        where = f"the options of `agentlab-sched schedules {command}` (cli/schedules.py)"
        for o in options:
            p = params.get(o.name)
            if p is None:
                problems.append(f"option {o.name}: missing from {where}")
                continue
            spelled = [*p.opts, *p.secondary_opts]
            if set(o.flag.replace("/", " ").split()) != set(spelled):
                problems.append(f"option {o.name}: is {'/'.join(spelled)} in {where}, the table says {o.flag}")
    return problems


def planner_problems(options: tuple[Option, ...]) -> list[str]:
    """planner.ScheduleState: a field for each option the planner reads (planning=True), defaults alike."""
    problems = []
    known = {o.name for o in options}
    fields = {f.name: f for f in dataclasses.fields(planner.ScheduleState)}
    where = "the fields of planner.ScheduleState (core/planner.py)"
    for o in options:
        f = fields.get(o.name)
        if o.planning and f is None:
            problems.append(f"option {o.name}: planning=True but missing from {where}")
        elif not o.planning and f is not None:
            problems.append(f"option {o.name}: in {where} but planning=False in the table")
        elif f is not None and f.default is not dataclasses.MISSING and f.default != o.default:
            problems.append(f"option {o.name}: defaults to {f.default!r} in {where}, the table says {o.default!r}")
    fields_known = {name for name in fields if name in known}
    assert fields_known <= known
    return problems


def docs_problems(options: tuple[Option, ...]) -> list[str]:
    """docs/sql.md's argument table names each option; docs/cli.md's add and edit synopses its flag."""
    problems = []
    sql_md = (DOCS / "sql.md").read_text(encoding="utf-8")
    first_cells = re.findall(r"^\| ([^|]+) \|", sql_md, flags=re.M)
    cli_md = (DOCS / "cli.md").read_text(encoding="utf-8")
    synopses = {
        command: re.search(rf"## schedules {command}\n+```\n(.*?)```", cli_md, flags=re.S)
        for command in ("add", "edit")
    }
    for o in options:
        if not any(f"`{o.name}`" in cell for cell in first_cells):
            problems.append(f"option {o.name}: not in the argument table of docs/sql.md (## schedule)")
        for command, m in synopses.items():
            flags = o.flag.split("/")
            if m is None or not any(f in m[1] for f in flags):
                problems.append(f"option {o.name}: {o.flag} not in the synopsis of schedules {command} in docs/cli.md")
    return problems


# ----------------------------------------------------------------------------------- the real table


def test_the_table_holds_together() -> None:
    for o in OPTIONS:
        assert o.example != o.default and isinstance(o.example, o.py_type), o.name
        assert not (o.clearable and o.required), f"{o.name}: only an option that may be not set is clearable"
        assert not o.choices or (o.sql_type == "text" and (o.default is None or o.default in o.choices)), o.name
        assert not o.choices or o.example in o.choices, o.name
    assert admin.OPTIONS == tuple(o.name for o in OPTIONS)
    assert admin.CLEARABLE == CLEARABLE


def test_the_database_has_every_option(sync_conn: psycopg.Connection[DictRow]) -> None:
    assert table_problems(sync_conn, OPTIONS) == []
    assert sql_function_problems(sync_conn, OPTIONS) == []
    copied = sync_conn.execute(
        """SELECT position, name, sql_type, default_value, required, clearable, choices, min_value, max_value,
                  max_length, one_word, positive
           FROM agentlab_sched.schedule_options ORDER BY position"""
    ).fetchall()
    assert [tuple(r.values()) for r in copied] == [tuple(r) for r in catalog_rows()]


def test_the_python_api_cli_planner_and_docs_have_every_option() -> None:
    assert python_problems(OPTIONS) == []
    assert query_problems(OPTIONS) == []
    assert cli_problems(OPTIONS) == []
    assert planner_problems(OPTIONS) == []
    assert docs_problems(OPTIONS) == []


def test_a_new_option_missing_everywhere_is_reported_for_every_place(sync_conn: psycopg.Connection[DictRow]) -> None:
    colour = Option("colour", "text", "blue", "The colour.", "red", choices=("blue", "red"), planning=True)
    problems = [
        *table_problems(sync_conn, (colour,)),
        *sql_function_problems(sync_conn, (colour,)),
        *python_problems((colour,)),
        *query_problems((colour,)),
        *cli_problems((colour,)),
        *planner_problems((colour,)),
        *docs_problems((colour,)),
    ]
    places = [
        "agentlab_sched.schedules.colour (a migration) is missing",
        "agentlab_sched.schedule() (sql/30_schedules.sql)",
        "agentlab_sched.alter_schedule() (sql/30_schedules.sql)",
        "admin.schedule() (schedules/admin.py)",
        "the named query schedule (database/queries/schedules.sql)",
        "the named query alter_schedule (database/queries/schedules.sql)",
        "admin.alter() (schedules/admin.py)",
        "admin.Schedule (schedules/admin.py)",
        "schedule.field.colour in the catalogue",
        "`agentlab-sched schedules add` (cli/schedules.py)",
        "`agentlab-sched schedules edit` (cli/schedules.py)",
        "planner.ScheduleState (core/planner.py)",
        "docs/sql.md",
        "schedules add in docs/cli.md",
        "schedules edit in docs/cli.md",
    ]
    for place in places:
        assert any(place in p for p in problems), (place, problems)
    assert all(p.startswith("option colour: ") for p in problems)


def test_a_changed_default_or_choice_is_reported(sync_conn: psycopg.Connection[DictRow]) -> None:
    overlap = dataclasses.replace(next(o for o in OPTIONS if o.name == "overlap"), default="allow_all")
    catchup = dataclasses.replace(next(o for o in OPTIONS if o.name == "catchup"), choices=("latest", "none"))
    problems = table_problems(sync_conn, (overlap, catchup))
    assert any("overlap" in p and "defaults to 'skip'" in p for p in problems), problems
    assert any("catchup" in p and "no CHECK constraint allows exactly latest, none" in p for p in problems), problems


# ------------------------------------------------------------------------- every path sets every option


def _cli_text(o: Option, value: object) -> list[str]:
    if isinstance(value, bool):
        return [o.flag.split("/")[0 if value else 1]]
    if isinstance(value, timedelta):
        return [o.flag, f"{int(value.total_seconds())}s"]
    if isinstance(value, datetime):
        return [o.flag, value.isoformat()]
    return [o.flag, str(value)]


def _row(conn: psycopg.Connection[DictRow], name: str) -> dict[str, Any]:
    row = conn.execute("SELECT * FROM agentlab_sched.schedules WHERE name = %s", (name,)).fetchone()
    assert row is not None
    return row


def _param(o: Option) -> str:
    """The named placeholder of an option's value, cast to its type."""
    return f"%({o.name})s::{o.sql_type}"


def test_sql_schedule_and_alter_schedule_set_and_clear_every_option(sync_conn: psycopg.Connection[DictRow]) -> None:
    sync_conn.execute("SELECT agentlab_sched.schedule('plain', '0 9 * * *', 'demo.echo')")
    row = _row(sync_conn, "plain")
    assert {o.name: row[o.name] for o in OPTIONS} == {o.name: o.default for o in OPTIONS}, "schedule() defaults"

    args = ", ".join(f"{o.name} => {_param(o)}" for o in OPTIONS)
    examples = {o.name: o.example for o in OPTIONS}
    sync_conn.execute(f"SELECT agentlab_sched.schedule('full', '0 9 * * *', 'demo.echo', {args})", examples)
    row = _row(sync_conn, "full")
    assert {o.name: row[o.name] for o in OPTIONS} == examples, "schedule() on create"

    for o in OPTIONS:
        name = f"one_{o.name}"
        sync_conn.execute("SELECT agentlab_sched.schedule(%s, '0 9 * * *', 'demo.echo')", (name,))
        sync_conn.execute(
            f"SELECT agentlab_sched.schedule(%(n)s, '0 9 * * *', 'demo.echo', {o.name} => {_param(o)})",
            {"n": name, o.name: o.example},
        )
        assert _row(sync_conn, name)[o.name] == o.example, f"schedule() on update does not pass {o.name} on"
        sync_conn.execute(
            f"SELECT agentlab_sched.alter_schedule(%(n)s, {o.name} => {_param(o)})",
            {"n": name, o.name: o.default if o.default is not None else o.example},
        )
        if o.default is not None:
            assert _row(sync_conn, name)[o.name] == o.default, f"alter_schedule() does not set {o.name}"
        if o.clearable:
            with pytest.raises(psycopg.errors.InvalidParameterValue) as err:
                sync_conn.execute(
                    f"SELECT agentlab_sched.alter_schedule(%(n)s, {o.name} => {_param(o)}, clear => %(c)s)",
                    {"n": name, o.name: o.example, "c": [o.name]},
                )
            assert '"code": "schedule.clear_conflict"' in (err.value.diag.message_detail or "")
            sync_conn.execute("SELECT agentlab_sched.alter_schedule(%s, clear => %s)", (name, [o.name]))
            assert _row(sync_conn, name)[o.name] is None, f"alter_schedule(clear => ...) does not reset {o.name}"


def test_every_choice_and_bound_is_validated_naming_the_field(sync_conn: psycopg.Connection[DictRow]) -> None:
    sync_conn.execute("SELECT agentlab_sched.schedule('v', '0 9 * * *', 'demo.echo')")
    bad: list[tuple[Option, object, str]] = []
    for o in OPTIONS:
        if o.choices:
            bad.append((o, "bogus", "schedule.unknown_value"))
        if o.minimum is not None:
            bad.append((o, o.minimum - 1, "schedule.out_of_range" if o.maximum is not None else "schedule.too_small"))
        if o.maximum is not None:
            bad.append((o, o.maximum + 1, "schedule.out_of_range"))
        if o.sql_type == "interval":
            bad.append((o, timedelta(seconds=-1), "schedule.negative"))
        if o.positive:
            bad.append((o, timedelta(0), "schedule.not_positive"))
        if o.max_length is not None:
            bad.append((o, "x" * (o.max_length + 1), "schedule.too_long"))
        if o.one_word:
            bad.append((o, "two words", "schedule.inner_space"))
    assert {o.name for o, _, _ in bad} >= {"overlap", "catchup", "context", "max_catchup", "timeout", "queue"}
    for o, value, code in bad:
        with pytest.raises(psycopg.Error) as err:
            sync_conn.execute(f"SELECT agentlab_sched.alter_schedule('v', {o.name} => %s::{o.sql_type})", (value,))
        detail = err.value.diag.message_detail or ""
        assert f'"code": "{code}"' in detail and f'"field": "{o.name}"' in detail, (o.name, value, detail)
        assert err.value.diag.column_name == o.name


async def test_admin_sets_every_option(conn: psycopg.AsyncConnection[DictRow]) -> None:
    now = datetime(2026, 3, 1, tzinfo=UTC)
    examples: dict[str, Any] = {o.name: o.example for o in OPTIONS}  # each option's own type
    created = await admin.create(conn, "c", "0 9 * * *", "demo.echo", now=now, **examples)
    assert {k: getattr(created, k) for k in examples} == examples, "admin.create()"
    declared = await admin.schedule(conn, "s", "0 9 * * *", "demo.echo", now=now, **examples)
    assert {k: getattr(declared, k) for k in examples} == examples, "admin.schedule()"
    await admin.schedule(conn, "a", "0 9 * * *", "demo.echo", now=now)
    for o in OPTIONS:
        change: dict[str, Any] = {o.name: o.example}
        changed = await admin.alter(conn, "a", now=now, **change)
        assert getattr(changed, o.name) == o.example, f"admin.alter() does not set {o.name}"
    cleared = await admin.alter(conn, "a", clear=CLEARABLE, now=now)
    assert all(getattr(cleared, name) is None for name in CLEARABLE)


def test_the_cli_sets_every_option(db_url: str) -> None:
    def cli(*args: str) -> None:
        result = CliRunner(env={"AGENTLAB_SCHED_LOCALE": "en"}).invoke(app, ["--database-url", db_url, *args])
        assert result.exit_code == 0, result.output

    cli("schedules", "add", "plain", "--cron", "0 9 * * *", "--task", "demo.echo")
    every = [arg for o in OPTIONS for arg in _cli_text(o, o.example)]
    cli("schedules", "add", "full", "--cron", "0 9 * * *", "--task", "demo.echo", *every)
    with psycopg.connect(db_url, row_factory=psycopg.rows.dict_row) as c:
        assert {o.name: _row(c, "plain")[o.name] for o in OPTIONS} == {o.name: o.default for o in OPTIONS}
        assert {o.name: _row(c, "full")[o.name] for o in OPTIONS} == {o.name: o.example for o in OPTIONS}
    for o in OPTIONS:
        value = o.default if o.default is not None else o.example
        cli("schedules", "edit", "full", *_cli_text(o, value))
        with psycopg.connect(db_url, row_factory=psycopg.rows.dict_row) as c:
            if o.default is not None:
                assert _row(c, "full")[o.name] == o.default, f"schedules edit {o.flag} does not set {o.name}"
    cli("schedules", "edit", "full", *[a for name in CLEARABLE for a in ("--clear", name)])
    with psycopg.connect(db_url, row_factory=psycopg.rows.dict_row) as c:
        assert all(_row(c, "full")[name] is None for name in CLEARABLE)
