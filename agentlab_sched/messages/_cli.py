"""The command line's own words: usage errors, files, the app to load, the locale: code -> (en, zh-CN).

A usage error (an unknown option, a value of the wrong kind, a missing option) is said in one line in
the reader's language, never as the command-line library's English usage block. ``{option}`` is the
option as typed (``--priority``), ``{command}`` the command (``agentlab-sched schedules add``).
"""

MESSAGES: dict[str, tuple[str, str]] = {}

# Usage errors.
MESSAGES.update(
    {
        "cli.usage.not_integer": (
            '{option}: "{value}" is not a whole number (such as 5)',
            "「{option}」的取值「{value}」不是整数(例如 5)",
        ),
        "cli.usage.not_number": (
            '{option}: "{value}" is not a number (such as 2.5)',
            "「{option}」的取值「{value}」不是数字(例如 2.5)",
        ),
        "cli.usage.bad_value": (
            '{option}: "{value}" is not a valid value; see {command} --help',
            "「{option}」的取值「{value}」无效;用法见 {command} --help",
        ),
        "cli.usage.unknown_option": (
            "{command}: there is no option {option}; see {command} --help",
            "{command} 没有选项 {option};用法见 {command} --help",
        ),
        "cli.usage.unknown_option_like": (
            "{command}: there is no option {option} (did you mean {similar}?)",
            "{command} 没有选项 {option}(是不是想用 {similar}?)",
        ),
        "cli.usage.missing_option": (
            "{command}: {option} must be given; see {command} --help",
            "{command} 必须给出 {option};用法见 {command} --help",
        ),
        "cli.usage.missing_argument": (
            "{command}: the {argument} is missing; see {command} --help",
            "{command} 缺少参数 {argument};用法见 {command} --help",
        ),
        "cli.usage.needs_value": ("{option} needs a value", "{option} 后面需要跟一个值"),
        "cli.usage.takes_no_value": ("{option} takes no value", "{option} 不接受取值"),
        "cli.usage.unknown_command": (
            '"{name}" is not a command of {command}; choose one of {commands}',
            "「{name}」不是 {command} 的子命令;可选:{commands}",
        ),
        "cli.usage.extra_argument": (
            '{command}: unexpected argument "{value}"; see {command} --help',
            "{command} 多了参数「{value}」;用法见 {command} --help",
        ),
        "cli.usage.other": (
            "{command}: the command line is not right; see {command} --help",
            "{command} 的命令行有误;用法见 {command} --help",
        ),
        "cli.usage.argument.name": ("schedule name (NAME)", "定时任务名称(NAME)"),
        "cli.usage.argument.run": ("run id (RUN)", "运行编号(RUN)"),
        "cli.usage.argument.other": ("argument {name}", "参数 {name}"),
    }
)

# The locale, files, the app a worker loads.
MESSAGES.update(
    {
        "cli.bad_locale": (
            '--locale: "{value}" is not a language this tool speaks; choose one of {allowed}',
            "--locale 的取值「{value}」不是支持的语言;可选:{allowed}",
        ),
        "cli.bad_locale_env": (
            'AGENTLAB_SCHED_LOCALE: "{value}" is not a language this tool speaks; choose one of {allowed}',
            "AGENTLAB_SCHED_LOCALE 的取值「{value}」不是支持的语言;可选:{allowed}",
        ),
        "cli.file_missing": ("{field}: there is no file {path}", "「{field}」:文件 {path} 不存在"),
        "cli.file_is_directory": ("{field}: {path} is a directory, not a file", "「{field}」:{path} 是目录,不是文件"),
        "cli.file_unreadable": (
            "{field}: the file {path} cannot be read (permission denied)",
            "「{field}」:没有权限读取文件 {path}",
        ),
        "cli.file_not_text": (
            "{field}: the file {path} is not UTF-8 text",
            "「{field}」:文件 {path} 不是 UTF-8 文本",
        ),
        "cli.app_bad_path": (
            '--app: "{path}" is not a dotted path; write it as module.attribute, such as agentlab_sched.demo.app',
            "--app 的取值「{path}」不是点分路径;请写成 模块.属性 的形式,例如 agentlab_sched.demo.app",
        ),
        "cli.app_no_module": (
            "--app {path}: there is no module {module}; run the command from the directory that holds it, or add "
            "that directory to PYTHONPATH (the demo app is agentlab_sched.demo.app)",
            "--app {path}:找不到模块 {module};请在包含它的目录下运行命令,或把该目录加入 PYTHONPATH"
            "(演示应用是 agentlab_sched.demo.app)",
        ),
        "cli.app_no_attribute": (
            "--app {path}: the module {module} has no {attribute}",
            "--app {path}:模块 {module} 里没有 {attribute}",
        ),
        "cli.app_module_many": (
            "--app {path}: this module holds several procrastinate.App objects; name one: {names}",
            "--app {path}:这个模块里有多个 procrastinate.App;请指定其中一个:{names}",
        ),
        "cli.app_module_none": (
            "--app {path}: this module holds no procrastinate.App (did you mean {example}?)",
            "--app {path}:这个模块里没有 procrastinate.App(是不是想用 {example}?)",
        ),
        "cli.app_not_app": (
            "--app {path}: this is a {kind}, not a procrastinate.App",
            "--app {path}:它是 {kind},不是 procrastinate.App",
        ),
        "cli.app_import_failed": (
            "--app {path}: importing {module} failed: {error}",
            "--app {path}:导入 {module} 时出错:{error}",
        ),
    }
)

# The database: url, psql, stop.
MESSAGES.update(
    {
        "cli.db_not_running": (
            "the embedded PostgreSQL in {dir} was not running; nothing to stop",
            "{dir} 中的内置 PostgreSQL 本来就没有运行,无需停止",
        ),
        "cli.db_removed_not_running": (
            "removed the embedded PostgreSQL in {dir} (it was not running)",
            "已删除内置 PostgreSQL({dir});它本来就没有运行",
        ),
        "cli.db_remove_confirm": (
            "delete {dir} with every schedule, fire and run in it? This cannot be undone. [y/N] ",
            "要删除 {dir} 及其中所有定时任务、触发记录和运行记录吗?删除后无法恢复。[y/N] ",
        ),
        "cli.db_remove_needs_yes": (
            "db stop --remove deletes {dir} and all its data: answer y when asked, or add --yes (nothing was "
            "answered: there is no input)",
            "db stop --remove 会删除 {dir} 及其全部数据:请在提问时回答 y,或加上 --yes(没有收到回答:没有输入)",
        ),
        "cli.db_stop_failed": (
            "the embedded PostgreSQL in {dir} did not stop (pg_ctl failed); its log is {log}",
            "{dir} 中的内置 PostgreSQL 没有停止(pg_ctl 失败);日志见 {log}",
        ),
        "cli.db_remove_declined": ("nothing was stopped or removed ({dir})", "未停止也未删除任何内容({dir})"),
        "cli.psql_missing": (
            "there is no psql on this machine: install the PostgreSQL client (Debian and Ubuntu: apt install "
            "postgresql-client; macOS: brew install libpq), then run psql with the URL printed above",
            "本机没有 psql:请安装 PostgreSQL 客户端(Debian、Ubuntu:apt install postgresql-client;"
            "macOS:brew install libpq),再用上面打印的 URL 运行 psql",
        ),
    }
)

# worker options.
MESSAGES.update(
    {
        "cli.metrics_port": (
            "--metrics-port {port}: cannot serve metrics there (the port is in use or not allowed); choose another, "
            "or 0 for any free port",
            "--metrics-port {port}:无法在该端口提供指标(端口已被占用或没有权限);请换一个端口,或用 0 自动选择空闲端口",
        ),
        "cli.log_format": (
            '--log-format: "{value}" is not a format; choose one of {allowed}',
            "--log-format 的取值「{value}」不是支持的格式;可选:{allowed}",
        ),
    }
)

# Table headers and the labels of `show`: cli.col.<name>.
MESSAGES.update(
    {
        "cli.col.name": ("name", "名称"),
        "cli.col.id": ("id", "编号"),
        "cli.col.cron": ("cron", "cron 表达式"),
        "cli.col.timezone": ("timezone", "时区"),
        "cli.col.task": ("task", "任务"),
        "cli.col.inputs": ("inputs", "输入"),
        "cli.col.enabled": ("enabled", "启用"),
        "cli.col.next_run": ("next run", "下次执行"),
        "cli.col.paused": ("paused", "暂停"),
        "cli.col.queue": ("queue", "队列"),
        "cli.col.priority": ("priority", "优先级"),
        "cli.col.overlap": ("overlap", "重叠策略"),
        "cli.col.misfire_grace": ("misfire_grace", "错过后的补跑宽限"),
        "cli.col.timeout": ("timeout", "超时"),
        "cli.col.catchup": ("catchup", "补跑方式"),
        "cli.col.starts_at": ("starts_at", "开始时间"),
        "cli.col.ends_at": ("ends_at", "结束时间"),
        "cli.col.remaining_runs": ("remaining_runs", "剩余执行次数"),
        "cli.col.pause_after_failures": ("pause_after_failures", "连续失败多少次后暂停"),
        "cli.col.consecutive_failures": ("consecutive_failures", "连续失败次数"),
        "cli.col.context": ("context", "上下文"),
        "cli.col.dst": ("dst", "夏令时策略"),
        "cli.col.defined_in": ("defined in code", "代码中的定义"),
        "cli.col.imported_from": ("imported from", "导入自"),
        "cli.col.webhook": ("webhook", "通知"),
        "cli.col.last_fire": ("last fire", "上次触发"),
        "cli.col.last_run": ("last run", "上次运行"),
        "cli.col.version": ("version", "版本"),
        "cli.col.updated": ("updated", "更新时间"),
        "cli.col.failures": ("failures", "连续失败"),
        "cli.col.fire_at": ("fire at", "触发时间"),
        "cli.col.schedule": ("schedule", "定时任务"),
        "cli.col.kind": ("kind", "类型"),
        "cli.col.status": ("status", "状态"),
        "cli.col.run": ("run", "运行"),
        "cli.col.reason": ("reason", "原因"),
        "cli.col.segment": ("segment", "执行段"),
        "cli.col.created": ("created", "创建时间"),
        "cli.col.finished": ("finished", "结束时间"),
        "cli.col.note": ("note", "备注"),
        "cli.col.fire": ("fire", "触发"),
        "cli.col.started_by": ("started by", "发起者"),
        "cli.col.started": ("started", "开始时间"),
        "cli.col.deadline": ("deadline", "截止时间"),
        "cli.col.session_key": ("session key", "会话键"),
        "cli.col.result": ("result", "结果"),
        "cli.col.job": ("job", "作业"),
        "cli.col.title": ("title", "标题"),
        "cli.col.by": ("by", "操作人"),
        "cli.col.at": ("at", "时间"),
        "cli.col.comment": ("comment", "备注"),
        "cli.col.approvals": ("approvals", "审批"),
        "cli.col.number": ("#", "#"),
        "cli.col.utc": ("UTC", "UTC"),
        "cli.col.local": ("local ({timezone})", "本地时间({timezone})"),
        "cli.webhook_text": ("{format} {host} events: {events}{secret}", "{format} {host},事件:{events}{secret}"),
        "cli.webhook_secret_set": (" secret set", ",已设置密钥"),
        "cli.catchup_text": ("{catchup} (max {max})", "{catchup}(最多 {max} 次)"),
        "cli.last_fire_text": ("{when} {kind} {status}", "{when} {kind} {status}"),
        "cli.last_run_text": ("{status} (#{run})", "{status}(#{run})"),
        "cli.fire_text": ("{when} ({timezone}) {kind}", "{when}({timezone}){kind}"),
        "cli.when_zone": ("{when} ({timezone})", "{when}({timezone})"),
    }
)

MESSAGES.update(
    {
        "cli.schema_outdated": (
            "this database's agentlab-sched schema is older than this version; run agentlab-sched migrate",
            "该数据库中的 agentlab-sched 表结构比当前版本旧;请运行 agentlab-sched migrate",
        ),
    }
)

# The line every command prints about its database (stderr).
MESSAGES.update(
    {
        "cli.database_line": ("database: {url} ({origin})", "数据库:{url}({origin})"),
        "cli.origin_embedded": ("embedded PostgreSQL ({dir})", "内置 PostgreSQL,{dir}"),
    }
)

# A missing privilege (SQLSTATE 42501): what was refused, who asked, and what has the right (docs/security.md).
MESSAGES.update(
    {
        "cli.denied": (
            "refused: the role {role} may not {what}; that needs {needs}",
            "已拒绝:角色 {role} 无权{what};需要{needs}",
        ),
        "cli.denied.function": ("call agentlab_sched.{name}()", "调用 agentlab_sched.{name}()"),
        "cli.denied.table": ("read {name}", "读取 {name}"),
        "cli.denied.schema": ("use schema {name}", "使用模式 {name}"),
        "cli.denied.database": (
            "create the schema in database {name} (migrate)",
            "在数据库 {name} 中创建模式(migrate)",
        ),
        "cli.denied.create_role": ("create roles", "创建角色"),
        "cli.denied.migrate": (
            "run migrate (it changes schema agentlab_sched)",
            "运行 migrate(它会修改 agentlab_sched 模式)",
        ),
        "cli.denied.other": ("do this ({detail})", "执行此操作({detail})"),
        "cli.needs.role": (
            "the {kind} role ({role}, made by agentlab-sched roles create)",
            "{kind} 角色({role},由 agentlab-sched roles create 创建)",
        ),
        "cli.needs.trigger_now": (
            "the admin role ({role}) or GRANT EXECUTE ON FUNCTION agentlab_sched.trigger_now(text, boolean)",
            "admin 角色({role})或 GRANT EXECUTE ON FUNCTION agentlab_sched.trigger_now(text, boolean)",
        ),
        "cli.needs.schedule_sql": (
            "EXECUTE on agentlab_sched.schedule_sql, which only the schema's owner grants (docs/security.md)",
            "agentlab_sched.schedule_sql 的 EXECUTE 权限,只能由模式的所有者授予(见 docs/security.md)",
        ),
        "cli.needs.owner": (
            "the owner of schema agentlab_sched (the role that runs migrate, with CREATE on the database)",
            "模式 agentlab_sched 的所有者(运行 migrate 的角色,且对数据库有 CREATE 权限)",
        ),
        "cli.needs.createrole": (
            "the schema's owner with the CREATEROLE attribute (or a superuser)",
            "具有 CREATEROLE 属性的模式所有者(或超级用户)",
        ),
        "cli.needs.grant": (
            "a grant from the schema's owner (docs/security.md)",
            "模式所有者授予的权限(见 docs/security.md)",
        ),
    }
)

# doctor: what a role could not see, what keeps failing, the embedded server's set-up.
MESSAGES.update(
    {
        "doctor.unseen_webhooks": (
            "webhook keys: not checked (this role may not read the stored webhooks; the admin may)",
            "通知密钥:未检查(此角色无权读取保存的通知地址;admin 角色可以)",
        ),
        "doctor.unseen_waiting_jobs": (
            "waiting jobs: not checked (this role may not read Procrastinate's events; the worker role may)",
            "等待中的任务:未检查(此角色无权读取 Procrastinate 的事件;worker 角色可以)",
        ),
        "doctor.unseen_roles": (
            "roles: not checked (this role may not read the scheduler's configuration)",
            "角色:未检查(此角色无权读取调度器的配置)",
        ),
        "doctor.embedded_superuser_owner": (
            "schema agentlab_sched is owned by superuser {owner}, as on every embedded server; a production "
            "database should have an owner role that is no superuser (docs/security.md)",
            "agentlab_sched 模式的属主是超级用户 {owner},内嵌服务器都是如此;生产数据库应使用非超级用户的属主角色"
            "(见 docs/security.md)",
        ),
        "doctor.failing": (
            "failing: {name} failed {failures} times in a row; last error: {error}",
            "持续失败:{name} 已连续失败 {failures} 次;最近的错误:{error}",
        ),
        "doctor.fires_refused": (
            "refused: every recent fire of {name} was refused; last reason: {reason}",
            "被拒绝:{name} 最近的每次触发都被拒绝;最近的原因:{reason}",
        ),
        "doctor.pg_cron_double": (
            "runs twice: pg_cron job {jobid} is still active and so is schedule {schedule} imported from it; "
            "run SELECT cron.unschedule({jobid}); (or pause the schedule)",
            "重复执行:pg_cron 任务 {jobid} 仍然启用,由它导入的定时任务 {schedule} 也已启用;"
            "请执行 SELECT cron.unschedule({jobid});(或暂停该定时任务)",
        ),
        "doctor.unseen_pg_cron": (
            "pg_cron: not checked (this role may not read cron.job)",
            "pg_cron:未检查(此角色无权读取 cron.job)",
        ),
        "doctor.tasks_no_worker": (
            "tasks: not checked (no live worker; what stopped workers registered does not count)",
            "任务:未检查(没有在线 worker;已停止的 worker 注册的任务不算)",
        ),
    }
)

# A job refused by one of our errors, as any Procrastinate worker of an installed app logs it (one line).
MESSAGES.update(
    {
        "event.job_error": ("job {task} #{job} failed: {error}", "任务 {task} #{job} 失败:{error}"),
        "event.job_error_retry": (
            "job {task} #{job} failed, to be retried: {error}",
            "任务 {task} #{job} 失败,将重试:{error}",
        ),
    }
)

# Values too large for what holds them.
MESSAGES.update(
    {
        "duration.too_long": (
            '{field}: "{value}" is longer than any duration agentlab-sched can hold',
            "「{field}」的取值「{value}」超出了可以表示的时长",
        ),
        "cli.number_out_of_range": (
            "refused: a number given is too large for the database ({detail}); give a smaller one",
            "已拒绝:给出的数字超出了数据库的范围({detail});请给一个较小的值",
        ),
    }
)

# A Procrastinate app on a connector the scheduler cannot run on.
MESSAGES.update(
    {
        "worker.connector_unsupported": (
            "the app's connector is {connector}; the scheduler runs on {supported} only (psycopg 3: its tick, "
            "housekeeping and run bookkeeping use a psycopg 3 pool). Give the app a procrastinate.PsycopgConnector",
            "应用的连接器是 {connector};调度器只支持 {supported}(psycopg 3:tick、日常维护和运行记录都使用 psycopg 3 "
            "连接池)。请为应用使用 procrastinate.PsycopgConnector",
        ),
    }
)

# runs resume|abandon --suspended NAME: the argument is a schedule.
MESSAGES.update(
    {
        "run.suspended_takes_schedule": (
            'no schedule named "{value}": with --suspended the argument is a schedule\'s name; to settle the run '
            "{value}, leave out --suspended",
            "没有名为「{value}」的定时任务:使用 --suspended 时参数是定时任务名称;要处理运行 {value},请去掉 --suspended",
        ),
    }
)

# roles create: a name it cannot use.
MESSAGES.update(
    {
        "roles.bad_name": (
            '{option}: "{value}" is not a role name roles create uses: letters, digits and _ (not starting with a '
            "digit), such as ops or sched_prod",
            "{option}:「{value}」不能用作角色名:只能包含字母、数字和下划线(不以数字开头),例如 ops 或 sched_prod",
        ),
    }
)

# fires / runs list a page at a time: the next page's option, and a --before that names nothing.
MESSAGES.update(
    {
        "cli.history_more": ("the next page: --before {key}", "下一页:--before {key}"),
        "cli.before_bad_run": (
            '--before: "{value}" is not a run id; give the id or its first characters (at least 4, like 1a2b3c)',
            "--before 的取值「{value}」不是运行编号;请写完整编号或它的前几位(至少 4 位,如 1a2b3c)",
        ),
        "cli.before_no_run": ('--before: there is no run "{value}"', "--before 的取值「{value}」:没有这个编号的运行"),
        "cli.before_ambiguous_run": (
            '--before: "{value}" names {count} runs; give more characters of the id',
            "--before 的取值「{value}」对应 {count} 次运行;请多写几位编号",
        ),
        "cli.before_bad_fire": (
            '--before: "{value}" is not a fire id; give the number in the first column of fires (like 1234)',
            "--before 的取值「{value}」不是触发编号;请写触发记录第一列中的数字(如 1234)",
        ),
        "cli.before_no_fire": (
            "--before: there is no fire {value} (never written, or pruned)",
            "--before 的取值「{value}」:没有这个编号的触发记录(从未写入,或已被清理)",
        ),
    }
)
