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
        "username: {user} may not schedule SQL to run as {value} (that needs EXECUTE on "
        "agentlab_sched.schedule_sql and membership of {value}, and {value} may be neither a superuser nor "
        "the owner of schema agentlab_sched: docs/security.md)",
        "「执行角色」:{user} 无权安排以 {value} 身份执行的 SQL(需要 agentlab_sched.schedule_sql 的 EXECUTE "
        "权限并且是 {value} 的成员;{value} 不能是超级用户,也不能是 agentlab_sched 模式的所有者;"
        "见 docs/security.md)",
    ),
    "sql.failed": (
        "sql: {message} (SQLSTATE {sqlstate}) in database {database} as {username}",
        "sql:{message}(SQLSTATE {sqlstate}),数据库 {database},角色 {username}",
    ),
    "sql.cannot_connect": (
        "sql: cannot connect to database {database} as the worker's role: {message}",
        "sql:无法以 worker 的角色连接数据库 {database}:{message}",
    ),
    "sql.cannot_set_role": (
        "sql: the worker's role {worker} cannot act as {username} ({message}); grant it: GRANT {username} TO {worker}",
        "sql:worker 的角色 {worker} 无法切换为 {username}({message});请授权:GRANT {username} TO {worker}",
    ),
}
