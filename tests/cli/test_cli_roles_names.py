"""`roles create --prefix 'bad name'` is refused as a role name (with an example of one), not as a task."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from agentlab_sched.cli import app

ENV = {"AGENTLAB_SCHED_LOCALE": None, "AGENTLAB_SCHED_DATABASE_URL": None, "AGENTLAB_SCHED_SECRET_KEY": None}


@pytest.mark.parametrize(
    ("args", "locale", "line"),
    [
        (["--prefix", "bad name"], "en", '--prefix: "bad name" is not a role name roles create uses: letters, '
                                         "digits and _ (not starting with a digit), such as ops or sched_prod"),
        (["--admin", "9ops"], "zh-CN", "--admin:「9ops」不能用作角色名:只能包含字母、数字和下划线(不以数字开头),"
                                       "例如 ops 或 sched_prod"),
    ],
)  # fmt: skip
def test_a_bad_role_name_is_refused_as_one(db_url: str, args: list[str], locale: str, line: str) -> None:
    result = CliRunner(env={**ENV, "AGENTLAB_SCHED_LOCALE": locale}).invoke(
        app, ["--database-url", db_url, "roles", "create", *args]
    )
    assert result.exit_code == 2, result.output
    assert [x for x in result.stderr.splitlines() if x.strip()] == [line]
    assert "demo.echo" not in result.output
