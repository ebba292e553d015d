"""A role that lacks a privilege gets one line saying what was refused and what has the right (exit 2, en
and zh-CN, never a traceback), and `doctor` works for the reader and the admin, saying what they could not
check."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass

import psycopg
import pytest
from psycopg import conninfo, sql
from typer.testing import CliRunner, Result

from agentlab_sched.cli import app
from agentlab_sched.database.roles import RoleNames, create_roles
from tests.support.cli import is_database_line

ENV = {"AGENTLAB_SCHED_LOCALE": None, "AGENTLAB_SCHED_DATABASE_URL": None, "AGENTLAB_SCHED_SECRET_KEY": None}
PASSWORD = "agentlab-test"
CJK = re.compile(r"[\u4e00-\u9fff]")


@dataclass(frozen=True)
class Logins:
    """Login roles on one database: a reader and an admin (members of the roles `roles create` made)."""

    owner: str
    reader: str
    admin: str
    groups: RoleNames

    def url(self, who: str) -> str:
        return conninfo.make_conninfo(self.owner, user=who, password=PASSWORD)


@pytest.fixture(scope="module")
def logins(pg_server: str, template_db: str) -> Iterator[Logins]:
    name = f"priv_{os.getpid()}"
    with psycopg.connect(pg_server, autocommit=True) as server:
        server.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template_db}"')
    url = conninfo.make_conninfo(pg_server, dbname=name)
    prefix = f"pv{os.getpid()}"
    groups = RoleNames.with_prefix(prefix)
    reader, admin = f"{prefix}_rd", f"{prefix}_ad"
    with psycopg.connect(url, autocommit=True) as conn:
        create_roles(conn, groups)
        for login, group in ((reader, groups.reader), (admin, groups.admin)):
            conn.execute(sql.SQL("CREATE ROLE {} LOGIN PASSWORD {} IN ROLE {}").format(
                sql.Identifier(login), PASSWORD, sql.Identifier(group)))  # fmt: skip
        conn.execute("SELECT agentlab_sched.schedule('daily', '0 9 * * *', 'demo.echo')")
    try:
        yield Logins(url, reader, admin, groups)
    finally:
        with psycopg.connect(pg_server, autocommit=True) as server:
            server.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            for role in (reader, admin, groups.worker, groups.admin, groups.reader):
                server.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))


def invoke(url: str, args: list[str], locale: str = "en") -> Result:
    result = CliRunner(env={**ENV, "AGENTLAB_SCHED_LOCALE": locale}).invoke(app, ["--database-url", url, *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    return result


def refusal_line(url: str, args: list[str], locale: str) -> str:
    result = invoke(url, args, locale)
    assert result.exit_code == 2, (args, result.output)
    assert result.stdout == ""
    lines = [line for line in result.stderr.splitlines() if line.strip() and not is_database_line(line)]
    assert len(lines) == 1, result.stderr
    return lines[0]


#: (login, arguments, the English line, the Chinese line); {admin} is the admin group role's name.
REFUSALS = [
    ("reader", ["schedules", "pause", "daily"],
     "refused: the role {login} may not call agentlab_sched.pause(); that needs the admin role ({admin}, made by "
     "agentlab-sched roles create)",
     "已拒绝:角色 {login} 无权调用 agentlab_sched.pause();需要admin 角色({admin},由 agentlab-sched roles create 创建)"),
    ("reader", ["schedules", "add", "x", "--cron", "0 9 * * *", "--task", "demo.echo"],
     "refused: the role {login} may not call agentlab_sched.schedule(); that needs the admin role ({admin}, made by "
     "agentlab-sched roles create)", None),
    ("reader", ["schedules", "trigger", "daily"],
     "refused: the role {login} may not call agentlab_sched.trigger_now(); that needs the admin role ({admin}) or "
     "GRANT EXECUTE ON FUNCTION agentlab_sched.trigger_now(text, boolean)", None),
    ("reader", ["migrate"],
     "refused: the role {login} may not run migrate (it changes schema agentlab_sched); that needs the owner of "
     "schema agentlab_sched (the role that runs migrate, with CREATE on the database)",
     "已拒绝:角色 {login} 无权运行 migrate(它会修改 agentlab_sched 模式);"
     "需要模式 agentlab_sched 的所有者(运行 migrate 的角色,且对数据库有 CREATE 权限)"),
    ("admin", ["migrate"],
     "refused: the role {login} may not run migrate (it changes schema agentlab_sched); that needs the owner of "
     "schema agentlab_sched (the role that runs migrate, with CREATE on the database)", None),
    ("admin", ["roles", "create"],
     "refused: the role {login} may not create roles; that needs the schema's owner with the CREATEROLE attribute "
     "(or a superuser)", "已拒绝:角色 {login} 无权创建角色;需要具有 CREATEROLE 属性的模式所有者(或超级用户)"),
    ("admin", ["schedules", "add-sql", "y", "--cron", "0 9 * * *", "--command", "SELECT 1"],
     "refused: the role {login} may not call agentlab_sched.schedule_sql(); that needs EXECUTE on "
     "agentlab_sched.schedule_sql, which only the schema's owner grants (docs/security.md)", None),
]  # fmt: skip


@pytest.mark.parametrize(
    ("who", "args", "english", "chinese"), REFUSALS, ids=lambda v: " ".join(v) if isinstance(v, list) else None
)
def test_a_missing_privilege_is_one_line_naming_what_has_it(
    logins: Logins, who: str, args: list[str], english: str, chinese: str | None
) -> None:
    login = getattr(logins, who)
    names = {"login": login, "admin": logins.groups.admin,
             "database": conninfo.conninfo_to_dict(logins.owner)["dbname"]}  # fmt: skip
    assert refusal_line(logins.url(login), args, "en") == english.format(**names)
    zh = refusal_line(logins.url(login), args, "zh-CN")
    if chinese is not None:
        assert zh == chinese.format(**names)
    assert CJK.search(zh), zh


@pytest.mark.parametrize("locale", ["en", "zh-CN"])
def test_roles_create_by_a_non_owner_is_refused_when_the_roles_already_exist(logins: Logins, locale: str) -> None:
    # Roles are the cluster's: another install may have made them. The admin is still told it may not create
    # roles, not refused later at some table, and nothing is recorded.
    prefix = logins.groups.reader.removesuffix("_reader")
    line = refusal_line(logins.url(logins.admin), ["roles", "create", "--prefix", prefix], locale)
    expected = REFUSALS[[r[1] for r in REFUSALS].index(["roles", "create"])][2 if locale == "en" else 3]
    assert line == str(expected).format(login=logins.admin)
    with psycopg.connect(logins.owner) as conn:
        rows = conn.execute("SELECT key, value FROM agentlab_sched.config WHERE key LIKE 'role.%' ORDER BY key")
        assert rows.fetchall() == [("role.admin", logins.groups.admin), ("role.reader", logins.groups.reader),
                                   ("role.worker", logins.groups.worker)]  # fmt: skip


@pytest.mark.parametrize("who", ["reader", "admin"])
def test_doctor_runs_as_the_reader_and_the_admin(logins: Logins, who: str) -> None:
    result = invoke(logins.url(getattr(logins, who)), ["doctor"])
    assert result.exit_code == 1, result.output  # no worker runs: that needs a person
    assert "✗ workers: none running, and 1 enabled schedule waits to fire" in result.stdout
    assert "✓ schema: up to date" in result.stdout
    unseen = "· webhook keys: not checked (this role may not read the stored webhooks; the admin may)"
    assert (unseen in result.stdout) == (who == "reader"), result.stdout
    zh = invoke(logins.url(getattr(logins, who)), ["doctor"], "zh-CN")
    assert zh.exit_code == 1 and "worker:没有在运行" in zh.stdout


def test_doctor_as_the_admin_says_it_could_not_see_waiting_jobs(logins: Logins) -> None:
    with psycopg.connect(logins.owner, autocommit=True) as conn:  # a live plain worker, so the check is reached
        conn.execute("INSERT INTO procrastinate_workers DEFAULT VALUES")
    try:
        result = invoke(logins.url(logins.admin), ["doctor"])
        assert "· waiting jobs: not checked (this role may not read Procrastinate's events; the worker role may)" in (
            result.stdout
        ), result.stdout
    finally:
        with psycopg.connect(logins.owner, autocommit=True) as conn:
            conn.execute("DELETE FROM procrastinate_workers")


@pytest.mark.parametrize(
    ("value", "locale", "line"),
    [
        ("not a url", "en", '--from: "not a url" is not a PostgreSQL URL or connection string (such as '
                             "postgresql://user@host/db)"),
        ("not a url", "zh-CN", "--from:「not a url」不是 PostgreSQL 的 URL 或连接串(例如 postgresql://user@host/db)"),
    ],
)  # fmt: skip
def test_import_pg_cron_from_a_bad_url_names_the_option(logins: Logins, value: str, locale: str, line: str) -> None:
    assert refusal_line(logins.owner, ["import", "pg-cron", "--from", value], locale) == line


def test_import_pg_cron_from_an_unreachable_server_names_the_option(logins: Logins) -> None:
    line = refusal_line(logins.owner, ["import", "pg-cron", "--from", "postgresql://nobody@127.0.0.1:1/x"], "en")
    assert line.startswith("--from: cannot connect to postgresql://nobody@127.0.0.1:1/x: "), line
