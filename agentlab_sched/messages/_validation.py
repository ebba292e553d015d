"""Messages of the validation domain: code -> (en, zh-CN).

Schedules (``schedule.*``: field names, refusals of bad input, lookups) and the words the CLI prints
around them (``cli.*``). Values in quotes are shown as given; a ``{field}`` is a term
(``messages.term("schedule.field.<column>")``) so it reads in the reader's language.
"""

MESSAGES: dict[str, tuple[str, str]] = {}
MESSAGES.update(
    {
        "migrate.changed": (
            "migration {file} was changed after it was applied; restore it and add a new migration instead",
            "迁移文件 {file} 在执行后被改动过;请恢复原样,改动请写成新的迁移文件",
        ),
    }
)

# The fields of a schedule, as message parameters.
MESSAGES.update(
    {
        "schedule.field.name": ("name", "名称"),
        "schedule.field.new_name": ("new_name", "新名称"),
        "schedule.field.cron": ("cron", "cron 表达式"),
        "schedule.field.timezone": ("timezone", "时区"),
        "schedule.field.task": ("task", "任务"),
        "schedule.field.inputs": ("inputs", "输入"),
        "schedule.field.queue": ("queue", "队列"),
        "schedule.field.priority": ("priority", "优先级"),
        "schedule.field.overlap": ("overlap", "重叠策略"),
        "schedule.field.misfire_grace": ("misfire_grace", "错过后的补跑宽限"),
        "schedule.field.timeout": ("timeout", "超时"),
        "schedule.field.enabled": ("enabled", "启用"),
        "schedule.field.catchup": ("catchup", "补跑方式"),
        "schedule.field.max_catchup": ("max_catchup", "最多补跑次数"),
        "schedule.field.starts_at": ("starts_at", "开始时间"),
        "schedule.field.ends_at": ("ends_at", "结束时间"),
        "schedule.field.remaining_runs": ("remaining_runs", "剩余执行次数"),
        "schedule.field.pause_after_failures": ("pause_after_failures", "连续失败多少次后暂停"),
        "schedule.field.context": ("context", "上下文"),
        "schedule.field.dst_gap": ("dst_gap", "夏令时跳过的时刻"),
        "schedule.field.dst_repeat": ("dst_repeat", "夏令时重复的时段"),
        "schedule.field.on_interrupt": ("on_interrupt", "中断后的处理"),
        "schedule.field.command": ("command", "SQL 命令"),
        "schedule.field.database": ("database", "数据库"),
        "schedule.field.username": ("username", "执行角色"),
        "schedule.field.statement_timeout": ("statement_timeout", "语句超时"),
        "schedule.field.session_key": ("session_key", "会话键"),
        "schedule.field.paused_reason": ("paused_reason", "暂停原因"),
        "schedule.field.expected_version": ("expected_version", "期望版本"),
        "schedule.field.clear": ("clear", "清空"),
        "schedule.field.webhook_format": ("webhook_format", "通知格式"),
        "schedule.field.webhook_events": ("webhook_events", "通知事件"),
        "schedule.field.webhook_url": ("webhook_url", "通知地址"),
        "schedule.field.webhook_secret": ("webhook_secret", "通知密钥"),
        "schedule.field.webhook_url_hint": ("webhook_url_hint", "通知地址提示"),
        "schedule.field.count": ("count", "数量"),
        "schedule.field.if_exists": ("if_exists", "已存在时"),
        "schedule.field.requested_by": ("requested_by", "触发人"),
        "schedule.field.reader": ("reader", "只读角色"),
        "schedule.field.admin": ("admin", "管理角色"),
        "schedule.field.worker": ("worker", "worker 角色"),
        "schedule.field.version": ("version", "版本"),
        "schedule.field.created_at": ("created_at", "创建时间"),
        "schedule.field.from": ("from", "起始时间"),
        "schedule.field.to": ("to", "截止时间"),
    }
)

# JSON value kinds, for "must be a JSON object, not ...".
MESSAGES.update(
    {
        "schedule.json.array": ("an array", "数组"),
        "schedule.json.string": ("a string", "字符串"),
        "schedule.json.number": ("a number", "数字"),
        "schedule.json.boolean": ("true or false", "布尔值"),
        "schedule.json.null": ("null", "null"),
    }
)

# Refusals of bad input: SQLSTATE 22023 from SQL, ValidationError in Python.
MESSAGES.update(
    {
        "schedule.required": ("{field}: must be given", "「{field}」必须填写"),
        "schedule.empty": ("{field}: must not be empty", "「{field}」不能为空"),
        "schedule.too_long": (
            "{field}: {length} characters is more than the {max} allowed",
            "「{field}」有 {length} 个字符,超过上限 {max}",
        ),
        "schedule.too_large": (
            "{field}: {size} bytes is more than the {max} allowed",
            "「{field}」有 {size} 字节,超过上限 {max}",
        ),
        "schedule.control_char": (
            "{field}: character {position} is an invisible control character ({char}); remove it",
            "「{field}」的第 {position} 个字符是不可见的控制字符({char}),请删除",
        ),
        "schedule.outer_space": (
            '{field}: "{value}" begins or ends with a space; remove it',
            "「{field}」「{value}」的开头或结尾有空格,请删除",
        ),
        "schedule.inner_space": (
            '{field}: "{value}" contains a space; write it as one word, such as demo.echo',
            "「{field}」「{value}」含有空格;请写成一个词,例如 demo.echo",
        ),
        "schedule.not_object": (
            "{field}: must be a JSON object (names and values), not {type}",
            "「{field}」必须是 JSON 对象(名称和值),而不是{type}",
        ),
        "schedule.unknown_value": (
            '{field}: "{value}" is not allowed; choose one of {allowed}',
            "「{field}」的取值「{value}」无效;可选:{allowed}",
        ),
        "schedule.negative": (
            "{field}: {value} is negative; give 0 or more",
            "「{field}」的取值 {value} 是负数;请填 0 或更大的值",
        ),
        "schedule.not_positive": (
            "{field}: must be more than 0 (leave it unset for none), not {value}",
            "「{field}」必须大于 0(不需要时请不填),而不是 {value}",
        ),
        "schedule.out_of_range": (
            "{field}: {value} is outside {min}-{max}",
            "「{field}」的取值 {value} 超出 {min}-{max}",
        ),
        "schedule.too_small": ("{field}: {value} is less than {min}", "「{field}」的取值 {value} 小于 {min}"),
        "schedule.window": (
            "ends_at: {ends_at} is not after starts_at {starts_at} ({timezone})",
            "「结束时间」{ends_at} 不晚于「开始时间」{starts_at}({timezone})",
        ),
        "schedule.plaintext_secret": (
            "{field}: refused, the database stores only encrypted webhook URLs and secrets and does not hold "
            "the key; set it with agentlab-sched schedules edit NAME --webhook-url URL (or the Python API)",
            "「{field}」被拒绝:数据库只保存加密后的通知地址和密钥,且不持有密钥;"
            "请用 agentlab-sched schedules edit 名称 --webhook-url 地址(或 Python API)设置",
        ),
        "schedule.clear_unknown": (
            'clear: "{value}" cannot be cleared; only {allowed} can',
            "「清空」不能清空「{value}」;可清空的只有 {allowed}",
        ),
        "schedule.clear_conflict": (
            "{field}: given a value and also asked to clear it; do one or the other",
            "「{field}」既给了新值又要求清空;只能二选一",
        ),
        "schedule.unknown_argument": (
            "{function}() has no argument {name}; its arguments are {allowed}",
            "{function}() 没有参数 {name};可用的参数有:{allowed}",
        ),
        "schedule.wrong_type": (
            "{field}: {value} is {given}, not {expected}",
            "「{field}」的取值 {value} 是{given},而不是{expected}",
        ),
        "schedule.naive_time": (
            "{field}: {value} has no time zone; give an aware datetime, such as "
            'datetime(2026, 3, 1, 9, tzinfo=ZoneInfo("Asia/Shanghai"))',
            "「{field}」的取值 {value} 没有时区;请给出带时区的 datetime,例如 "
            'datetime(2026, 3, 1, 9, tzinfo=ZoneInfo("Asia/Shanghai"))',
        ),
        "schedule.type.str": ("text (str)", "文本(str)"),
        "schedule.type.int": ("a whole number (int)", "整数(int)"),
        "schedule.type.bool": ("true or false (bool)", "布尔值(bool)"),
        "schedule.type.float": ("a number (float)", "小数(float)"),
        "schedule.type.timedelta": ("a duration (datetime.timedelta)", "时长(datetime.timedelta)"),
        "schedule.type.datetime": ("a date and time (datetime.datetime)", "日期时间(datetime.datetime)"),
        "schedule.type.Mapping": ("names and values (a dict)", "名称和值(dict)"),
        "schedule.type.list": ("a list", "列表(list)"),
        "schedule.type.tuple": ("a tuple", "元组(tuple)"),
        "schedule.type.other": ("a {name}", "{name}"),
        "schedule.task_not_registered": (
            "warning: the task {task} is not known to any live worker; the schedule is saved, but its fires are "
            "refused until a worker whose app has this task runs (agentlab-sched doctor lists such schedules)",
            "注意:没有在线的 worker 注册过任务 {task};定时任务已保存,但在包含该任务的 worker 运行之前,它的触发会被拒绝"
            "(agentlab-sched doctor 会列出这类定时任务)",
        ),
        "schedule.read_only": (
            "{field}: cannot be set (asked for {value}); agentlab-sched keeps it: the version goes up by one with "
            "every change, created_at is when the schedule was made",
            "「{field}」不能直接设置(收到 {value}):它由 agentlab-sched 维护,版本随每次修改自动加一,创建时间是定时任务"
            "创建的时刻",
        ),
        "schedule.bad_json": (
            "{field}: not valid JSON (line {line}, column {column})",
            "「{field}」不是有效的 JSON(第 {line} 行第 {column} 列)",
        ),
        "schedule.bad_duration": (
            '{field}: "{value}" is not a duration; write it like 90s, 10m, 1h30m, 2d or 0',
            "「{field}」「{value}」不是时长;请写成 90s、10m、1h30m、2d 或 0 这样的形式",
        ),
        "schedule.bad_time": (
            '{field}: "{value}" is not a date and time; write it like 2026-03-01 09:00 (in the schedule\'s '
            "time zone) or 2026-03-01T09:00+08:00",
            "「{field}」「{value}」不是日期时间;请写成 2026-03-01 09:00(按定时任务的时区)"
            "或 2026-03-01T09:00+08:00 这样的形式",
        ),
    }
)

# Lookups and concurrent changes.
MESSAGES.update(
    {
        "schedule.not_found": ('no schedule named "{name}"', "没有名为「{name}」的定时任务"),
        "schedule.name_taken": ('a schedule named "{name}" already exists', "已有名为「{name}」的定时任务"),
        "schedule.stale_version": (
            'schedule "{name}" was changed meanwhile (it is at version {actual}, you expected {expected}); '
            "reload it and try again",
            "定时任务「{name}」已被他人修改(当前版本 {actual},你基于的版本是 {expected});请重新读取后再改",
        ),
    }
)

# The CLI's own words.
MESSAGES.update(
    {
        "cli.exists": (
            'a schedule named "{name}" already exists; change it with schedules edit, or add --update',
            "已有名为「{name}」的定时任务;请用 schedules edit 修改,或加上 --update",
        ),
        "cli.nothing_to_change": (
            "nothing to change: give at least one option, such as --cron",
            "没有要修改的内容:请至少给出一个选项,例如 --cron",
        ),
        "cli.not_migrated": (
            "this database has no agentlab-sched schema yet; run agentlab-sched migrate first",
            "该数据库里还没有 agentlab-sched 的表;请先运行 agentlab-sched migrate",
        ),
        "cli.standby": (
            "this database is a read-only hot standby (in recovery): this command writes, so run it against the "
            "primary",
            "该数据库是只读的热备库(正在恢复中):这个命令需要写入,请对主库运行",
        ),
        "cli.read_only": (
            "this database refuses writes (a read-only transaction: default_transaction_read_only?): this command "
            "writes; run it where writes are allowed",
            "该数据库拒绝写入(只读事务:default_transaction_read_only?):这个命令需要写入,请在允许写入的数据库上运行",
        ),
        "cli.cannot_connect": ("cannot connect to the database: {error}", "无法连接数据库:{error}"),
        "cli.added": (
            'added schedule "{name}" (id {id}); next run: {next}',
            "已添加定时任务「{name}」(编号 {id});下次执行:{next}",
        ),
        "cli.updated": (
            'updated schedule "{name}" (version {version}); next run: {next}',
            "已更新定时任务「{name}」(版本 {version});下次执行:{next}",
        ),
        "cli.unchanged": (
            'schedule "{name}" is unchanged (version {version})',
            "定时任务「{name}」没有变化(版本 {version})",
        ),
        "cli.removed": ('removed schedule "{name}"', "已删除定时任务「{name}」"),
        "cli.imported": ("created {count} schedules from {path}", "已从 {path} 创建 {count} 个定时任务"),
        "cli.import_unreadable": ("cannot read {path}: {reason}", "无法读取 {path}:{reason}"),
        "cli.import_bad_line": (
            "{path}, line {line}: not a JSON object ({reason})",
            "{path} 第 {line} 行不是 JSON 对象({reason})",
        ),
        "cli.import_bad_cell": (
            "{path}, line {line}: the {column} column is not JSON ({reason})",
            "{path} 第 {line} 行的 {column} 列不是 JSON({reason})",
        ),
        "cli.paused": ('paused schedule "{name}"', "已暂停定时任务「{name}」"),
        "cli.already_paused": ('schedule "{name}" was already paused', "定时任务「{name}」本来就已暂停"),
        "cli.resumed": (
            'resumed schedule "{name}"; next run: {next}',
            "已恢复定时任务「{name}」;下次执行:{next}",
        ),
        "cli.already_running": (
            'schedule "{name}" was not paused; next run: {next}',
            "定时任务「{name}」并未暂停;下次执行:{next}",
        ),
        "cli.not_planned": (
            "not planned yet (a worker plans it within a tick)",
            "尚未排期(worker 会在一个 tick 内排好)",
        ),
        "cli.no_next": ("none", "无"),
        "cli.no_schedules": (
            "no schedules yet; add one with agentlab-sched schedules add",
            "还没有定时任务;可用 agentlab-sched schedules add 添加",
        ),
        "cli.no_schedules_after": ("no schedules after {name}", "{name} 之后没有定时任务"),
        "cli.schedules_more": (
            "{shown} of {total} schedules shown; the next page: --after {name}",
            "显示了 {total} 个定时任务中的 {shown} 个;下一页:--after {name}",
        ),
        "cli.schedules_more_estimated": (
            "{shown} of about {total} schedules shown (an estimate); the next page: --after {name}",
            "显示了约 {total} 个定时任务(估计值)中的 {shown} 个;下一页:--after {name}",
        ),
        "cli.paused_note": ("paused", "已暂停"),
        "cli.note_dst_gap": (
            "moved: this time does not exist on that day (DST gap)",
            "顺延:当天因夏令时跳过了这个时刻",
        ),
        "cli.note_dst_repeat": (
            "repeated hour (DST): fires once, the first time",
            "重复的时段(夏令时):只在第一次出现时执行",
        ),
        "cli.note_dst_skipped": (
            "not fired: {time} does not exist on that day (DST gap, dst_gap = skip)",
            "不执行:当天因夏令时没有 {time} 这个时刻(dst_gap = skip)",
        ),
        "cli.note_dst_repeat_last": (
            "repeated hour (DST): fires once, the second time (dst_repeat = last)",
            "重复的时段(夏令时):只在第二次出现时执行(dst_repeat = last)",
        ),
        "cli.note_dst_repeat_both_first": (
            "repeated hour (DST): the first of two fires (dst_repeat = both)",
            "重复的时段(夏令时):两次执行中的第一次(dst_repeat = both)",
        ),
        "cli.note_dst_repeat_both_second": (
            "repeated hour (DST): the second of two fires (dst_repeat = both)",
            "重复的时段(夏令时):两次执行中的第二次(dst_repeat = both)",
        ),
        "cli.note_dst_repeat_copy_first": (
            "repeated hour (DST): its first copy; a schedule firing more often than hourly runs through both",
            "重复的时段(夏令时):第一遍;比每小时更频繁的定时任务两遍都会执行",
        ),
        "cli.note_dst_repeat_copy_second": (
            "repeated hour (DST): its second copy",
            "重复的时段(夏令时):第二遍",
        ),
        "cli.cron_compat_skipped": (
            "pg_cron's monitoring views were not made in schema {schema} ({owner} is there); set "
            "AGENTLAB_SCHED_CRON_SCHEMA to another schema name (or off) and migrate again",
            "未在模式 {schema} 中创建 pg_cron 兼容视图({owner} 占用了该模式);请把 AGENTLAB_SCHED_CRON_SCHEMA "
            "设为其他模式名(或 off)后重新迁移",
        ),
        "cli.dst_policy": (
            "DST: dst_gap = {gap}, dst_repeat = {repeat} (docs/cron.md)",
            "夏令时:dst_gap = {gap},dst_repeat = {repeat}(见 docs/cron.md)",
        ),
        "cli.db_stopped": ("stopped the embedded PostgreSQL in {dir}", "已停止内置 PostgreSQL({dir})"),
        "cli.db_removed": (
            "stopped and removed the embedded PostgreSQL in {dir}",
            "已停止并删除内置 PostgreSQL({dir})",
        ),
        "cli.db_none": ("no embedded PostgreSQL in {dir}", "{dir} 中没有内置 PostgreSQL"),
        "cli.migrated": ("migrated: {applied}", "已迁移:{applied}"),
        "cli.up_to_date": ("the database is up to date", "数据库已是最新"),
    }
)

# Roles and privileges (agentlab-sched roles create, doctor; docs/security.md).
MESSAGES.update(
    {
        "roles.same_name": (
            "reader, admin and worker must be three different roles (given: {reader}, {admin}, {worker})",
            "只读、管理和 worker 必须是三个不同的角色(现在是:{reader}、{admin}、{worker})",
        ),
        "roles.too_powerful": (
            "{field}: role {name} is a superuser or owns schema agentlab_sched, so it cannot be limited to what "
            "this role may do; choose another name",
            "「{field}」:角色 {name} 是超级用户或 agentlab_sched 模式的属主,无法限制到这个角色应有的权限;请换一个名字",
        ),
        "migrate.citus_coordinator": (
            "migrate did not change the database: the citus extension is installed but the coordinator is not "
            "in Citus's node list; run SELECT citus_set_coordinator_host('<host>', <port>) and migrate again",
            "migrate 未改动数据库:已安装 citus 扩展,但协调节点不在 Citus 的节点列表中;请先运行 SELECT "
            "citus_set_coordinator_host('<host>', <port>),再运行 migrate",
        ),
        "migrate.hold_too_long": (
            "migrate did not change the database: partitioning its history ({rows} rows) would hold firing for "
            "about {seconds} s, longer than --max-hold {max_hold} s; run migrate at a quiet hour (without "
            "--max-hold, or with a longer one), or shrink the history first with prune",
            "migrate 未改动数据库:将历史记录({rows} 行)改为分区表会让触发暂停约 {seconds} 秒,超过 --max-hold "
            "{max_hold} 秒;请在空闲时段运行 migrate(不带 --max-hold,或给更长的值),或先用 prune 缩减历史记录",
        ),
        "migrate.max_hold": (
            "max_hold: {value} is not a number of seconds of at least 0",
            "max_hold:{value} 不是不小于 0 的秒数",
        ),
        "migrate.plan_pending": ("migrate would apply: {pending}", "migrate 将执行:{pending}"),
        "migrate.plan_hold": (
            "partitioning the history ({rows} rows: {tables}) holds firing for about {seconds} s while migrate "
            "runs (about {per_million} s a million rows). To run it later, keep this database on the version it "
            "runs until a quiet hour, then run agentlab-sched migrate; --max-hold SECONDS makes migrate refuse, "
            "changing nothing, when firing would wait longer",
            "将历史记录改为分区表({rows} 行:{tables})会在 migrate 运行期间让触发暂停约 {seconds} 秒(每百万行约 "
            "{per_million} 秒)。如需稍后执行:在空闲时段之前让数据库继续使用当前运行的版本,届时再运行 "
            "agentlab-sched migrate;--max-hold 秒数 可让 migrate 在触发等待会更久时拒绝执行,不做任何改动",
        ),
        "migrate.locked": (
            "migrate did not start: another session has held migrate's lock for 10 s ({holder}); let it finish "
            "(or end it: SELECT pg_terminate_backend(pid)) and run migrate again",
            "migrate 未开始:另一个会话已持有 migrate 的锁 10 秒({holder});请等它结束(或结束它:SELECT "
            "pg_terminate_backend(pid))后再运行 migrate",
        ),
        "roles.done": (
            "roles created: {created}; already there: {existing}; privileges granted. Give them to login roles, "
            "e.g. CREATE ROLE alice LOGIN PASSWORD '...' IN ROLE {admin}. A SQL schedule's command runs on a "
            "connection the worker makes as the schedule's role: such roles need LOGIN, and the worker's host a "
            "way to log in as them (its passfile, or a trust, peer or cert rule: docs/security.md)",
            "已创建角色:{created};已存在:{existing};权限已授予。请把它们授予登录角色,例如 "
            "CREATE ROLE alice LOGIN PASSWORD '...' IN ROLE {admin}。SQL 定时任务的命令在 worker 以该任务的角色身份"
            "建立的连接上执行:这些角色需要 LOGIN 权限,worker 所在主机也需要能以它们的身份登录(passfile,或 trust、"
            "peer、cert 规则;见 docs/security.md)",
        ),
        "setup.public_writable": (
            "database: {who} may create objects in schema public, where Procrastinate lives, and could plant "
            "functions that Procrastinate's functions would call with the scheduler's rights; the scheduler does "
            "not fire until it cannot. Run: REVOKE CREATE ON SCHEMA public FROM PUBLIC (and from each role named)",
            "database:{who} 可以在 Procrastinate 所在的 public 模式中创建对象,可能植入会被 Procrastinate 函数以调度器"
            "权限调用的函数;在此之前调度器不会触发。请执行:REVOKE CREATE ON SCHEMA public FROM PUBLIC"
            "(并对列出的每个角色执行)",
        ),
        "setup.public_planted": (
            "database: schema public, where Procrastinate lives, holds functions or operators of another role "
            "({objects}) that Procrastinate's functions could call with the scheduler's rights; the scheduler does "
            "not fire until they are dropped or owned by a trusted role",
            "database:Procrastinate 所在的 public 模式中有其他角色的函数或运算符({objects}),"
            "Procrastinate 的函数可能以调度器权限调用它们;在删除它们或交给可信角色之前调度器不会触发",
        ),
        "roles.public_create": (
            "warning: {who} may create objects in schema public, where Procrastinate lives; such a role can plant "
            "operators that Procrastinate's functions would call. Run: REVOKE CREATE ON SCHEMA public FROM PUBLIC "
            "(PostgreSQL 15 and later do this by default)",
            "警告:{who} 可以在 Procrastinate 所在的 public 模式中创建对象,这样的角色可以植入会被 Procrastinate "
            "函数调用的运算符。请执行:REVOKE CREATE ON SCHEMA public FROM PUBLIC(PostgreSQL 15 起默认如此)",
        ),
        "roles.unpinned": (
            "warning: Procrastinate's function {name} has no pinned search_path (it is owned by {owner}, so migrate "
            "could not set it); run agentlab-sched migrate as {owner}",
            "警告:Procrastinate 的函数 {name} 没有固定 search_path(它的属主是 {owner},migrate 无法设置);"
            "请以 {owner} 身份运行 agentlab-sched migrate",
        ),
        "roles.superuser_owner": (
            "warning: schema agentlab_sched is owned by superuser {owner}, so its SECURITY DEFINER functions run "
            "with superuser rights; run migrate as a dedicated owner role that is no superuser",
            "警告:agentlab_sched 模式的属主 {owner} 是超级用户,其 SECURITY DEFINER 函数会以超级用户权限运行;"
            "请用一个非超级用户的专用属主角色运行 migrate",
        ),
        "roles.nothing": ("none", "无"),
        "roles.none": (
            "roles: none set up yet (agentlab-sched roles create)",
            "角色:尚未设置(agentlab-sched roles create)",
        ),
        "roles.configured": (
            "roles: reader {reader}, admin {admin}, worker {worker}",
            "角色:只读 {reader},管理 {admin},worker {worker}",
        ),
    }
)

# Many schedules at once (schedule_many, schedules import): the definition that failed, by its place.
MESSAGES.update(
    {
        "schedule.bulk_row": (
            "definition {row} ({name}): {problem}",
            "第 {row} 条定义({name}):{problem}",
        ),
        "schedule.bulk_not_array": (
            "the definitions must be a JSON array of objects, not {type}",
            "定义必须是由对象组成的 JSON 数组,而不是{type}",
        ),
        "schedule.bulk_not_object": (
            "a definition must be a JSON object (the arguments of schedule() by name), not {type}",
            "每条定义必须是 JSON 对象(以名称给出 schedule() 的参数),而不是{type}",
        ),
        "schedule.bulk_unknown_field": (
            "{key} is not an argument of schedule() (known: {known})",
            "{key} 不是 schedule() 的参数(可用:{known})",
        ),
        "schedule.bulk_bad_value": (
            "{key}: {value} is not a valid value ({reason})",
            "{key} 的值 {value} 无效({reason})",
        ),
        "schedule.bulk_duplicate": (
            'the name "{name}" is also given in definition {first}',
            "名称「{name}」在第 {first} 条定义中也出现了",
        ),
    }
)

# Singular forms (a count of 1), English only: Chinese has no plural (messages.ONE).
SINGULAR: dict[str, str] = {
    "cli.imported": ("created {count} schedule from {path}"),
}
