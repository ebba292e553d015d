"""Messages of the built-in sql task: code -> (en, zh-CN).

Refusals of a sql schedule's inputs (``sql/32_sql_task.sql``: who may run SQL as whom, what the inputs
are) and the errors a worker records on a run of the task (``tasks/sql.py``).
"""

MESSAGES: dict[str, tuple[str, str]] = {
    "sql.unknown_input": (
        "inputs: {value} is not an input of the sql task (it takes command, database, username and statement_timeout)",
        "「输入」中的 {value} 不是 sql 任务的输入(只有 command、database、username 和 statement_timeout)",
    ),
    "sql.not_text": (
        "{field}: must be text, not {type}",
        "「{field}」必须是文本,而不是{type}",
    ),
    "sql.bad_timeout": (
        "statement_timeout: {value} is not a duration of more than 0 and at most 24 hours (e.g. 5 minutes)",
        "「语句超时」{value} 不是大于 0、不超过 24 小时的时长(例如 5 minutes)",
    ),
    "sql.no_database": (
        "database: there is no database named {value} on this server",
        "「数据库」:本服务器上没有名为 {value} 的数据库",
    ),
    "sql.no_role": (
        "username: there is no role named {value}",
        "「执行角色」:没有名为 {value} 的角色",
    ),
    "sql.not_allowed": (
        "username: {user} may not schedule SQL to run as {value}: {why} (docs/security.md)",
        "「执行角色」:{user} 无权安排以 {value} 身份执行的 SQL:{why}(见 docs/security.md)",
    ),
    # Which condition failed (agentlab_sched.sql_schedule_problem), the first in this order.
    "sql.not_allowed.no_role": ("there is no role named {value}", "没有名为 {value} 的角色"),
    "sql.not_allowed.superuser": (
        "{value} is a superuser, and a SQL schedule never runs as one; give a role of its own "
        "(agentlab-sched schedules add-sql --username ROLE, or username => in schedule_sql)",
        "{value} 是超级用户,SQL 定时任务从不以超级用户身份执行;请指定一个专用角色"
        "(agentlab-sched schedules add-sql --username 角色,或 schedule_sql 的 username =>)",
    ),
    "sql.not_allowed.owner": (
        "{value} owns schema agentlab_sched, and a SQL schedule never runs as its owner; give another role "
        "(agentlab-sched schedules add-sql --username ROLE, or username => in schedule_sql)",
        "{value} 是 agentlab_sched 模式的所有者,SQL 定时任务从不以它的身份执行;请指定另一个角色"
        "(agentlab-sched schedules add-sql --username 角色,或 schedule_sql 的 username =>)",
    ),
    "sql.not_allowed.no_user": ("there is no role named {user}", "没有名为 {user} 的角色"),
    "sql.not_allowed.no_execute": (
        "{user} has no EXECUTE on agentlab_sched.schedule_sql, the privilege the schema's owner grants "
        "(GRANT EXECUTE ON FUNCTION agentlab_sched.schedule_sql TO {user})",
        "{user} 没有 agentlab_sched.schedule_sql 的 EXECUTE 权限,该权限由模式所有者授予"
        "(GRANT EXECUTE ON FUNCTION agentlab_sched.schedule_sql TO {user})",
    ),
    "sql.not_allowed.not_member": (
        "{user} is not a member of {value}, and nobody gains a role through a schedule (GRANT {value} TO {user})",
        "{user} 不是 {value} 的成员,任何人都不能借定时任务获得一个角色(GRANT {value} TO {user})",
    ),
    "sql.failed": (
        "sql: {message} (SQLSTATE {sqlstate}) in database {database} as {username}",
        "sql:{message}(SQLSTATE {sqlstate}),数据库 {database},角色 {username}",
    ),
    "sql.cannot_connect": (
        "sql: the worker cannot connect to database {database} as {username}: {message}. The command runs on a "
        "connection made as {username}: the role needs LOGIN and CONNECT on {database}, and the worker's host a "
        "way to log in as it: a line for {username} in the worker's passfile (PGPASSFILE or ~/.pgpass: "
        "host:port:{database}:{username}:password), or a trust, peer or cert rule for it in pg_hba.conf "
        "(docs/security.md)",
        "sql:worker 无法以 {username} 身份连接数据库 {database}:{message}。命令在以 {username} 身份建立的连接上"
        "执行:该角色需要 LOGIN 权限和数据库 {database} 的 CONNECT 权限,worker 所在主机还需要能以它的身份登录:"
        "在 worker 的 passfile(PGPASSFILE 或 ~/.pgpass,格式 host:port:{database}:{username}:password)中为 "
        "{username} 写一行,或在 pg_hba.conf 中为它配置 trust、peer 或 cert 规则(见 docs/security.md)",
    ),
    "sql.timed_out": (
        "sql: the command ran longer than its statement_timeout ({timeout}) and the worker stopped it "
        "(SQLSTATE 57014) in database {database} as {username}",
        "sql:命令运行超过语句超时({timeout}),已被 worker 中止(SQLSTATE 57014),数据库 {database},角色 {username}",
    ),
    "sql.cannot_login": (
        "username: {value} may not log in, and a SQL schedule's command runs on a connection made as its role: "
        "ALTER ROLE {value} LOGIN, and give the worker's host a way to log in as it (a passfile line, or a "
        "trust, peer or cert rule in pg_hba.conf: docs/security.md)",
        "「执行角色」:{value} 不能登录,而 SQL 任务的命令在以该角色身份建立的连接上执行:请执行 ALTER ROLE {value} "
        "LOGIN,并让 worker 所在主机能以它的身份登录(passfile 中的一行,或 pg_hba.conf 中的 trust、peer 或 cert "
        "规则;见 docs/security.md)",
    ),
    "sql.no_connect": (
        "database: {who} may not connect to database {value} (it needs CONNECT: GRANT CONNECT ON DATABASE "
        "{value} TO {who})",
        "「数据库」:{who} 无权连接数据库 {value}(需要 CONNECT 权限:GRANT CONNECT ON DATABASE {value} TO {who})",
    ),
    "sql.runs_as": (
        "the worker runs it on a connection made as {username} to database {database}: {username} needs LOGIN, "
        "and each worker's host a way to log in as it, configured by the operator (a line "
        "host:port:{database}:{username}:password in the worker's passfile, PGPASSFILE or ~/.pgpass, or a trust, "
        "peer or cert rule in pg_hba.conf); without one the run fails saying so (docs/security.md)",
        "worker 会以 {username} 身份连接数据库 {database} 来执行它:{username} 需要 LOGIN 权限,且每台 worker 主机"
        "需要由运维配置以它的身份登录的方式(在 worker 的 passfile(PGPASSFILE 或 ~/.pgpass)中写一行 "
        "host:port:{database}:{username}:password,或在 pg_hba.conf 中配置 trust、peer 或 cert 规则);"
        "没有配置时运行失败并说明原因(见 docs/security.md)",
    ),
    "sql.unsafe_value": (
        "command: the value of {placeholder} stands inside quotes, a dollar-quoted body or a comment of the command "
        "and holds a character that could end it (' \" \\ $, a line break, /* or */); put the placeholder in the "
        "SQL itself, where its value becomes a SQL literal (WHERE name = {placeholder})",
        "「命令」:{placeholder} 位于命令的引号、美元符号引用的正文或注释之内,而它的值含有可能使其提前结束的字符"
        "(' \" \\ $、换行、/* 或 */);请把占位符直接写在 SQL 中,其值会成为 SQL 字面量(WHERE name = {placeholder})",
    ),
}
