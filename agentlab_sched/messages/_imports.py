"""Messages of the on-ramps: importing pg_cron's jobs and Procrastinate's periodic tasks, and schedules
defined in code: code -> (en, zh-CN)."""

MESSAGES: dict[str, tuple[str, str]] = {
    # pg_cron, as a whole
    "import.unschedule_needs_enable": (
        "unschedule: --unschedule removes pg_cron's jobs, so it needs --enable (the schedules made from them "
        "fire instead)",
        "unschedule:--unschedule 会删除 pg_cron 的任务,必须同时使用 --enable(改由新建的定时任务执行)",
    ),
    "import.unschedule_needs_same_database": (
        "unschedule: --unschedule works only with pg_cron in this database (one transaction removes its jobs "
        "and enables the schedules); without --from, or run the cron.unschedule() calls printed by the import "
        "in pg_cron's database once the schedules are enabled",
        "unschedule:只有 pg_cron 与本库在同一数据库时才能用 --unschedule(在同一事务中删除其任务并启用定时任务);"
        "请去掉 --from,或在定时任务启用后到 pg_cron 所在数据库执行导入时打印的 cron.unschedule() 语句",
    ),
    "import.no_pg_cron": (
        "from: pg_cron is not installed in this database (no cron.job); give the database that has it with --from URL",
        "from:此数据库没有安装 pg_cron(没有 cron.job);请用 --from URL 指定安装了它的数据库",
    ),
    "import.statement_timeout_positive": (
        "--statement-timeout: {value} is not longer than zero; give how long a command may run (such as 1h)",
        "--statement-timeout:{value} 不大于零;请给出命令最多可以运行多久(例如 1h)",
    ),
    "import.run_as_unknown": ("--run-as: there is no role {role}", "--run-as:没有角色 {role}"),
    "import.run_as_unusable": (
        "--run-as: {role} is a superuser or the owner of schema agentlab_sched, and a sql schedule may run as "
        "neither; give a role of its own (docs/security.md)",
        "--run-as:{role} 是超级用户或 agentlab_sched 模式的属主,sql 定时任务不能以这样的角色执行;"
        "请指定一个专用角色(见 docs/security.md)",
    ),
    "import.run_as_hint": (
        "{reason}; import it to run as another role with --run-as ROLE",
        "{reason};可用 --run-as 角色 以其他角色导入",
    ),
    "import.other_server": (
        "it runs in database {database} of the server pg_cron is on, not of this one; give "
        "--map-database {database}=NAME to run it in this server's database NAME",
        "它在 pg_cron 所在服务器的数据库 {database} 中执行,而不是本服务器;"
        "请用 --map-database {database}=名称 指定在本服务器的哪个数据库执行",
    ),
    "import.bad_map": (
        '--map-database: "{value}" is not SOURCE=TARGET (a database of pg_cron\'s server, one of this server)',
        "--map-database:「{value}」不是 源=目标 的形式(pg_cron 所在服务器的数据库=本服务器的数据库)",
    ),
    "import.bad_from": (
        '--from: "{value}" is not a PostgreSQL URL or connection string (such as postgresql://user@host/db)',
        "--from:「{value}」不是 PostgreSQL 的 URL 或连接串(例如 postgresql://user@host/db)",
    ),
    "import.from_env_unset": (
        "--from-env: the environment variable {name} is not set or empty; put the URL of pg_cron's database in it",
        "--from-env:环境变量 {name} 未设置或为空;请把 pg_cron 所在数据库的 URL 放在其中",
    ),
    "import.from_both": (
        "--from and --from-env: give one of them (--from-env keeps a password out of the command line)",
        "--from 与 --from-env:只能给出其中一个(--from-env 使密码不出现在命令行中)",
    ),
    "import.from_unreachable": (
        "--from: cannot connect to {url}: {error}",
        "--from:无法连接 {url}:{error}",
    ),
    "import.bad_timezone": (
        "timezone: {value} (from --timezone, or pg_cron's cron.timezone) is not a time zone agentlab-sched "
        "knows; give an IANA name with --timezone",
        "timezone:{value}(来自 --timezone 或 pg_cron 的 cron.timezone)不是可用的时区;请用 --timezone 指定 IANA 名称",
    ),
    # pg_cron, one job
    "import.name_taken": (
        "a schedule named {name} exists and was not imported from this job: not overwritten (rename one of them)",
        "已有名为 {name} 的定时任务且并非由此任务导入:未覆盖(请改名其中之一)",
    ),
    "import.other_host": (
        "it runs on another host ({host}:{port}); sql schedules run on this server only",
        "它在另一台主机上执行({host}:{port});sql 定时任务只能在本服务器执行",
    ),
    "import.paused": (
        "imported from pg_cron job {jobid}; resume it (or import again with --enable) once pg_cron no longer "
        "runs the job",
        "从 pg_cron 任务 {jobid} 导入;在 pg_cron 不再执行该任务后恢复它(或加 --enable 重新导入)",
    ),
    "import.paused_inactive": (
        "imported from pg_cron job {jobid}, which is inactive there",
        "从 pg_cron 任务 {jobid} 导入,该任务在 pg_cron 中未启用",
    ),
    # the CLI's report
    "cli.import.header": (
        "pg_cron jobs in database {database} (time zone {timezone}):",
        "数据库 {database} 中的 pg_cron 任务(时区 {timezone}):",
    ),
    "cli.import.none": ("no pg_cron jobs", "没有 pg_cron 任务"),
    "cli.import.created_paused": ("imported, paused", "已导入,已暂停"),
    "cli.import.created_enabled": ("imported, enabled", "已导入,已启用"),
    "cli.import.already": ("imported before", "此前已导入"),
    "cli.import.enabled": ("imported before, enabled now", "此前已导入,现已启用"),
    "cli.import.unscheduled": ("removed from pg_cron", "已从 pg_cron 删除"),
    "cli.import.refused": (
        "pg_cron job {jobid} ({name}) not imported: {reason}",
        "pg_cron 任务 {jobid}({name})未导入:{reason}",
    ),
    "cli.import.would_create_paused": ("would import, paused", "将导入,暂停"),
    "cli.import.would_create_enabled": ("would import, enabled", "将导入,启用"),
    "cli.import.would_enable": ("imported before, would enable", "此前已导入,将启用"),
    "cli.import.would_unschedule": ("would remove from pg_cron", "将从 pg_cron 删除"),
    "cli.import.unschedule_there": (
        "pg_cron still runs these jobs in database {database}, so both schedulers run them: run this in "
        "pg_cron's database to stop pg_cron's copies:\nSELECT {calls};",
        "pg_cron 仍在数据库 {database} 中执行这些任务,两个调度器都会执行它们:请在 pg_cron 所在数据库执行下面的语句"
        "以停止 pg_cron 中的任务:\nSELECT {calls};",
    ),
    "cli.import.unschedule_later": (
        "pg_cron still runs these jobs in database {database}; once the schedules are enabled, run this there:"
        "\nSELECT {calls};",
        "pg_cron 仍在数据库 {database} 中执行这些任务;启用定时任务后,请在该数据库执行:\nSELECT {calls};",
    ),
    "cli.col.jobid": ("jobid", "pg_cron 任务编号"),
    "cli.col.database": ("database", "数据库"),
    "cli.col.run_as": ("as", "执行角色"),
    "cli.import.dry_run": (
        "dry run: nothing was written",
        "试运行:没有写入任何内容",
    ),
    # what to run in pg_cron's database (the same in both languages: it is SQL)
    "cli.import.unschedule_call": ("cron.unschedule({jobid})", "cron.unschedule({jobid})"),
    "cli.import.next_steps": (
        "pg_cron still runs these jobs. Enable the schedules and remove the jobs in one step with: "
        "agentlab-sched import pg-cron --enable --unschedule (or, in pg_cron's database: SELECT {calls};)",
        "pg_cron 仍在执行这些任务。可用 agentlab-sched import pg-cron --enable --unschedule "
        "一步启用定时任务并删除这些任务(或在 pg_cron 所在数据库执行:SELECT {calls};)",
    ),
    # Procrastinate's periodic tasks
    "import.note_l_prefix": (
        "croniter's {old} (the last such weekday of the month) written {new}",
        "croniter 的 {old}(当月最后一个该星期几)改写为 {new}",
    ),
    "import.note_w_prefix": (
        "croniter's {old} (the weekday nearest that day) written {new}",
        "croniter 的 {old}(离该日最近的工作日)改写为 {new}",
    ),
    "import.note_wrap": (
        "the wrap-around range {old} written {new}",
        "跨越边界的范围 {old} 改写为 {new}",
    ),
    "import.note_day_or": (
        "{old}: croniter combines the two day fields with OR here; written {new} to keep that",
        "{old}:croniter 在这里以「或」组合两个日期字段;改写为 {new} 以保持原意",
    ),
    "import.croniter_and": (
        "croniter combines day-of-month {dom} and day-of-week {dow} with AND (around a W, # or L form), while "
        "this language combines two restricted day fields with OR: write the days in one of them",
        "croniter 以「且」组合日 {dom} 与周 {dow}(含 W、# 或 L 写法时),而本系统对两个都受限的日期字段取「或」:"
        "请只在其中一个字段写出日期",
    ),
    "import.paused_periodic": (
        "imported from the periodic task {task}; resume it (or import again with --enable) once its "
        "@app.periodic decorator is removed",
        "从周期任务 {task} 导入;移除其 @app.periodic 装饰器后恢复它(或加 --enable 重新导入)",
    ),
    "cli.import_periodic.header": ("periodic tasks of {app}:", "{app} 的周期任务:"),
    "cli.import_periodic.none": ("no periodic tasks", "没有周期任务"),
    "cli.import_periodic.refused": (
        "periodic task {task} ({cron}) not imported: {reason}",
        "周期任务 {task}({cron})未导入:{reason}",
    ),
    "cli.import_periodic.remove": (
        "remove @app.periodic(...) from {where}: while it is there Procrastinate defers the task too",
        "请从 {where} 移除 @app.periodic(...):它还在时 Procrastinate 也会触发该任务",
    ),
    # schedules defined in code
    "schedule.defined_in_code": (
        'name: schedule "{name}" is defined in code ({where}): change it there and deploy (here it can be '
        "paused, resumed, triggered and backfilled)",
        "名称:定时任务「{name}」定义在代码中({where}):请在代码中修改并部署(这里只能暂停、恢复、立即触发和补跑)",
    ),
    "code.sync_locked": (
        "the schedules defined in code were not synced: another sync has held its lock for 10 s ({holder}); "
        "it is tried again (a worker retries at its next registration, a minute later)",
        "代码中定义的定时任务未同步:另一个同步已持有其锁 10 秒({holder});稍后会重试(worker 在下一次注册任务时,"
        "约一分钟后重试)",
    ),
    "code.gone": (
        "no longer defined in code (it was defined in {where}): paused instead of deleted; delete it, or "
        "declare it again",
        "代码中已不再定义(原定义于 {where}):已暂停而非删除;可删除它,或在代码中重新声明",
    ),
    "code.name_taken": (
        "a schedule named {name} exists and is not defined in code: not overwritten (unschedule it, or give "
        "the declaration another name=)",
        "已有名为 {name} 的定时任务且并非定义在代码中:未覆盖(请删除它,或为声明另起 name=)",
    ),
    "code.duplicate_name": (
        "name: {name} is declared more than once in code (give each schedule of a task its own name=)",
        "名称:{name} 在代码中声明了多次(同一任务的每个定时任务请各用一个 name=)",
    ),
    "cli.sync.result": (
        "schedules defined in code (deployment {fingerprint}): {created} created, {updated} updated, "
        "{unchanged} unchanged, {gone} paused as no longer declared",
        "代码中定义的定时任务(部署 {fingerprint}):新建 {created},更新 {updated},未变 {unchanged},"
        "因不再声明而暂停 {gone}",
    ),
    "cli.sync.newer": (
        "not applied, a newer deployment defines them: {names} (run with --adopt to make this code the newest)",
        "未应用,已有更新的部署定义了它们:{names}(加 --adopt 可让这份代码成为最新部署)",
    ),
    "cli.sync.refused": ("{name} not applied: {reason}", "{name} 未应用:{reason}"),
    "code.not_syncing": (
        "name: {name}: only a sync of the code that defines schedules may mark them (agentlab-sched schedules sync)",
        "名称:{name}:只有同步代码中定义的定时任务时才能做此标记(agentlab-sched schedules sync)",
    ),
    "code.not_from_code": (
        "name: {name} was not made by code: a sync marks only the schedules it creates or that code already "
        "defines, so a schedule made by hand stays its own",
        "名称:{name} 不是由代码创建的:同步只标记它所创建或已由代码定义的定时任务,手工创建的定时任务保持不变",
    ),
}
