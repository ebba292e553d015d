"""One error registry (agentlab_sched/errors.py): message code -> class and SQLSTATE, the same from SQL and
Python; one translation helper; the exception tree drawn in the module's docstring."""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path

import psycopg
import pytest
from psycopg.rows import DictRow

import agentlab_sched
from agentlab_sched import errors, messages
from agentlab_sched.errors import REGISTRY, Conflict, NotFound, SchedError, ValidationError
from agentlab_sched.firing.hooks import LaunchRefused
from agentlab_sched.runs.context import NoRunContext

SQL_DIR = Path(agentlab_sched.__file__).parent / "database" / "sql"


def _fail_calls(text: str) -> list[str]:
    """The argument lists of every agentlab_sched.fail(...) call in a SQL text (parentheses balanced)."""
    calls = []
    for m in re.finditer(r"agentlab_sched\.fail\(", text):
        depth, i = 1, m.end()
        while depth:
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            i += 1
        calls.append(text[m.end() : i - 1])
    return calls


def test_every_registered_code_has_a_message_and_a_sqlstate() -> None:
    for code, entry in REGISTRY.items():
        assert code == entry.code and code in messages.CATALOG, code
        assert re.fullmatch(r"[0-9A-Z]{5}", entry.sqlstate) and entry.sqlstate != "22023", code
        assert issubclass(entry.kind, SchedError) and entry.kind is not ValidationError, code


def test_the_database_raises_each_code_with_the_registry_sqlstate(sync_conn: psycopg.Connection[DictRow]) -> None:
    copied = sync_conn.execute("SELECT code, sqlstate FROM agentlab_sched.error_codes ORDER BY code").fetchall()
    assert [(r["code"], r["sqlstate"]) for r in copied] == sorted(errors.registry_rows())
    for code, entry in [*REGISTRY.items(), ("schedule.required", errors.DEFAULT)]:
        with pytest.raises(psycopg.Error) as raised:
            sync_conn.execute("SELECT agentlab_sched.fail(%s, 'name', '{\"name\": \"x\"}')", (code,))
        assert raised.value.sqlstate == entry.sqlstate, code
        err = errors.from_database(raised.value)
        assert type(err) is entry.kind and err.code == code and err.field == "name", code


def test_sql_never_spells_a_sqlstate_the_registry_gives() -> None:
    explicit = []
    for path in sorted(SQL_DIR.glob("*.sql")):
        for call in _fail_calls(path.read_text(encoding="utf-8")):
            if re.search(r",\s*'[0-9A-Z]{5}'\s*$", call):
                explicit.append(f"{path.name}: fail({call.strip()[:80]}...)")
            m = re.match(r"\s*'([a-z_.]+)'", call)
            if m:
                assert m[1] in messages.CATALOG, f"{path.name}: fail('{m[1]}') has no message in the catalogue"
    assert explicit == [], "let agentlab_sched.fail() take the SQLSTATE from errors.REGISTRY:\n" + "\n".join(explicit)


async def test_translated_turns_the_database_refusal_into_its_class(conn: psycopg.AsyncConnection[DictRow]) -> None:
    with pytest.raises(NotFound) as not_found:
        async with conn.transaction(), errors.translated():
            await conn.execute("SELECT agentlab_sched.pause('nope')")
    assert (not_found.value.code, not_found.value.field) == ("schedule.not_found", "name")
    assert isinstance(not_found.value.__cause__, psycopg.errors.NoDataFound)
    await conn.execute("SELECT agentlab_sched.schedule('a', '0 9 * * *', 'demo.echo')")
    with pytest.raises(Conflict) as stale:
        with errors.translated():
            await conn.execute("SELECT agentlab_sched.alter_schedule('a', cron => '0 10 * * *', expected_version => 7)")
    assert stale.value.code == "schedule.stale_version"
    assert stale.value.message("en") == (
        'schedule "a" was changed meanwhile (it is at version 1, you expected 7); reload it and try again'
    )
    with pytest.raises(ValidationError) as bad:
        with errors.translated():
            await conn.execute("SELECT agentlab_sched.alter_schedule('a', overlap => 'never')")
    assert (bad.value.code, bad.value.field) == ("schedule.unknown_value", "overlap")
    # Anything else goes on as it is.
    with pytest.raises(psycopg.errors.UndefinedTable):
        with errors.translated():
            await conn.execute("SELECT * FROM no_such_table")
    with pytest.raises(KeyError):
        with errors.translated():
            raise KeyError("x")


def test_error_builds_the_registered_class() -> None:
    assert type(errors.error("run.not_awaiting", "run_id", run="ab12", status="x")) is Conflict
    assert type(errors.error("schedule.not_found", "name", name="x")) is NotFound
    assert type(errors.error("schedule.required", "cron", field="cron")) is ValidationError


def test_classes_that_always_mean_one_thing_need_no_arguments() -> None:
    assert NoRunContext().code == "run.no_context" and isinstance(NoRunContext(), LookupError)
    assert LaunchRefused().reason == "The task's resolver refused this fire."
    assert LaunchRefused("closed today").reason == "closed today"
    with pytest.raises(TypeError):
        SchedError()


def test_the_docstring_draws_every_error_class_of_the_package() -> None:
    for info in pkgutil.walk_packages(agentlab_sched.__path__, "agentlab_sched."):
        if not info.name.startswith(("agentlab_sched.demo", "agentlab_sched.cli")):
            importlib.import_module(info.name)

    def subclasses(cls: type[BaseException]) -> set[type[BaseException]]:
        return {cls} | {s for sub in cls.__subclasses__() for s in subclasses(sub)}

    ours = [c for c in subclasses(Exception) if c.__module__.startswith("agentlab_sched")]
    assert {c.__name__ for c in ours} >= {"SchedError", "NoRunContext", "LaunchRefused", "AwaitApproval"}
    doc = errors.__doc__ or ""
    missing = [c.__name__ for c in ours if not re.search(rf"[─ ]{c.__name__}\b", doc)]
    assert missing == [], f"draw these in the exception tree of errors.py: {missing}"
