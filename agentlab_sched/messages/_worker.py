"""What a worker, `dev` and `doctor` say to a person: code -> (en, zh-CN).

The worker's lines (``event.*``) are rendered from the fields of its log records, so the same record
reads in either language; `doctor`'s findings are ``doctor.*``.
"""

MESSAGES: dict[str, tuple[str, str]] = {}

# The worker's lines: ready, one per fire recorded and per run change, stopped.
MESSAGES.update(
    {
        "event.fire": ("{time} {schedule} {kind} fire: {status}", "{time} {schedule} {kind}触发:{status}"),
        "event.fire_run": (
            "{time} {schedule} {kind} fire: {status}, run #{run}",
            "{time} {schedule} {kind}触发:{status},运行 #{run}",
        ),
        "event.run": ("{schedule} run #{run}: {status}", "{schedule} 运行 #{run}:{status}"),
        "event.because": ("{line}: {why}", "{line}:{why}"),
        "event.ready": (
            "ready: database {database}; queues: {queues}; {tasks} tasks ({task_names}); {concurrency} jobs at "
            "once; {fires}; {notifies}; {metrics}",
            "已就绪:数据库 {database};队列:{queues};{tasks} 个任务({task_names});同时运行 {concurrency} 个作业;"
            "{fires};{notifies};{metrics}",
        ),
        "event.all_queues": ("all", "全部"),
        "event.fires_yes": ("fires schedules", "负责触发定时任务"),
        "event.fires_no": (
            "does not fire schedules (AGENTLAB_SCHED_SCHEDULER=0)",
            "不触发定时任务(AGENTLAB_SCHED_SCHEDULER=0)",
        ),
        "event.notifies_yes": ("sends notifications", "发送通知"),
        "event.notifies_no": (
            "sends no notifications (no usable AGENTLAB_SCHED_SECRET_KEY)",
            "不发送通知(没有可用的 AGENTLAB_SCHED_SECRET_KEY)",
        ),
        "event.metrics": ("metrics on port {port}", "指标端口 {port}"),
        "event.no_metrics": ("no metrics (--metrics-port)", "不提供指标(--metrics-port)"),
        "event.stopped": ("stopped", "已停止"),
        "event.retrying": ("retrying", "将重试"),
    }
)

# `agentlab-sched dev`.
MESSAGES.update(
    {
        "dev.banner": (
            "agentlab-sched dev: the demo runs in its own database, {database}, on the embedded PostgreSQL, apart "
            "from your own schedules",
            "agentlab-sched dev:演示在独立的数据库 {database}(内置 PostgreSQL)中运行,不影响你自己的定时任务",
        ),
        "dev.banner_url": (
            "agentlab-sched dev: the demo runs in the database given by --database-url, {database}",
            "agentlab-sched dev:演示在 --database-url 指定的数据库 {database} 中运行",
        ),
        "dev.connect": (
            'connect to it: agentlab-sched db psql{flag}, or psql "{url}"',
            '连接它:agentlab-sched db psql{flag},或 psql "{url}"',
        ),
        "dev.seeded": ("migrated; demo schedules: {names}", "已迁移;演示定时任务:{names}"),
        "dev.keeps_running": (
            "Ctrl-C stops the demo; the embedded PostgreSQL keeps running for the next commands "
            "(agentlab-sched db stop stops it)",
            "按 Ctrl-C 停止演示;内置 PostgreSQL 会继续运行,供后续命令使用(用 agentlab-sched db stop 停止它)",
        ),
        "dev.ctrl_c": ("Ctrl-C stops the demo", "按 Ctrl-C 停止演示"),
        "dev.stopped": (
            "the demo stopped (its worker and its dashboard); its schedules, fires and runs are kept in database "
            "{database}, and the next agentlab-sched dev goes on from them; the embedded PostgreSQL is still "
            "running: agentlab-sched db stop stops it, db stop --remove also deletes its data",
            "演示已停止(它的 worker 和控制台);它的定时任务、触发记录和运行保留在数据库 {database} 中,"
            "下次 agentlab-sched dev 会接着使用;内置 PostgreSQL 仍在运行:agentlab-sched db stop 停止它,"
            "db stop --remove 还会删除其数据",
        ),
        "dev.stopped_url": (
            "the demo stopped (its worker and its dashboard); its schedules, fires and runs are kept in database "
            "{database}",
            "演示已停止(它的 worker 和控制台);它的定时任务、触发记录和运行保留在数据库 {database} 中",
        ),
        # What a run in progress becomes when its worker stops (the schedule's on_interrupt says which).
        "run.worker_stopped.queued": (
            "the worker stopped under it; it is back in the queue and runs again when a worker is up "
            "(on_interrupt retry)",
            "执行它的 worker 已停止;它已重新排队,有 worker 运行时会再次执行(on_interrupt retry)",
        ),
        "run.worker_stopped.suspended": (
            "the worker stopped under it; it waits for a person: agentlab-sched runs resume RUN or runs abandon RUN",
            "执行它的 worker 已停止;它等待人工处理:agentlab-sched runs resume 编号 或 runs abandon 编号",
        ),
        "run.worker_stopped.cancelled": (
            "the worker stopped under it; it is given up (on_interrupt abandon), the next fire goes ahead",
            "执行它的 worker 已停止;它已被放弃(on_interrupt abandon),下一次触发照常进行",
        ),
    }
)

# `agentlab-sched doctor`: one line per finding.
MESSAGES.update(
    {
        "doctor.database": ("database: {database} (PostgreSQL {version})", "数据库:{database}(PostgreSQL {version})"),
        "doctor.migrations_ok": (
            "schema: up to date ({count} migrations applied)",
            "表结构:已是最新(已执行 {count} 个迁移)",
        ),
        "doctor.migrations_pending": (
            "schema: not up to date ({pending}); run agentlab-sched migrate",
            "表结构:不是最新({pending});请运行 agentlab-sched migrate",
        ),
        "doctor.workers_none_idle": (
            "workers: none running (no schedule is enabled, so nothing waits for one)",
            "worker:没有在运行(没有启用的定时任务,暂时不需要)",
        ),
        "doctor.workers_none": (
            "workers: none running, and {count} enabled schedules wait to fire; start one: agentlab-sched worker "
            "--app APP (or procrastinate --app APP worker)",
            "worker:没有在运行,而有 {count} 个启用的定时任务等待触发;请启动一个:agentlab-sched worker --app APP"
            "(或 procrastinate --app APP worker)",
        ),
        "doctor.workers": (
            "workers: {count} alive ({unreported} not yet described: they have run no agentlab-sched job)",
            "worker:{count} 个在线(其中 {unreported} 个尚无详情:它们还没有运行过 agentlab-sched 的作业)",
        ),
        "doctor.worker_item": (
            "{kind} {name}: queues {queues}; {concurrency} jobs at once; {fires}; {notifies}",
            "{kind} {name}:队列 {queues};同时运行 {concurrency} 个作业;{fires};{notifies}",
        ),
        "doctor.kind.agentlab-sched": ("agentlab-sched worker", "agentlab-sched worker"),
        "doctor.kind.procrastinate": ("procrastinate worker", "procrastinate worker"),
        "doctor.fires": (
            "firing: {count} live workers can fire schedules",
            "触发:{count} 个在线 worker 可以触发定时任务",
        ),
        "doctor.fires_precise": ("fires on time (precise loop)", "准时触发(精确循环)"),
        "doctor.fires_tick": ("fires through the tick (queue {queue})", "通过 tick 触发(队列 {queue})"),
        "doctor.fires_none": ("does not fire", "不触发"),
        "doctor.nothing_fires": (
            "firing: no live worker fires schedules; an agentlab-sched worker fires unless AGENTLAB_SCHED_SCHEDULER=0, "
            "a procrastinate worker only when it takes the tick's queue {queue}",
            "触发:没有在线的 worker 触发定时任务;agentlab-sched worker 默认会触发(除非 AGENTLAB_SCHED_SCHEDULER=0),"
            "procrastinate worker 只有在处理 tick 所在的队列 {queue} 时才会触发",
        ),
        "doctor.never_fires": (
            "worker {name} takes only the queues {queues}: it never runs the tick (queue {queue}), so it fires nothing",
            "worker {name} 只处理队列 {queues}:它不会运行 tick(队列 {queue}),因此不会触发任何定时任务",
        ),
        "doctor.one_at_a_time": (
            "worker {name} runs one job at a time (the procrastinate worker's default): a long task delays the tick "
            "and fires come late; run it with --concurrency 10 or more",
            "worker {name} 一次只运行一个作业(procrastinate worker 的默认值):耗时长的任务会推迟 tick,触发随之延迟;"
            "请用 --concurrency 10 或更大的值运行",
        ),
        "doctor.jobs_waiting": (
            "the scheduler's job {task} has waited in queue {queue} for {waiting}: no live worker takes that queue",
            "调度器的作业 {task} 已在队列 {queue} 中等待 {waiting}:没有在线的 worker 处理这个队列",
        ),
        "doctor.ahead": ("ahead of", "快于"),
        "doctor.behind": ("behind", "慢于"),
        "doctor.clock_ok": (
            "clocks: every live worker within {max} of the database's",
            "时钟:所有在线 worker 与数据库的时间相差都在 {max} 以内",
        ),
        "doctor.clock_worker": (
            "clock: worker {name} is {skew} {direction} the database; fix its time (NTP)",
            "时钟:worker {name} 比数据库{direction} {skew};请校准它的时间(NTP)",
        ),
        "doctor.clock_here": (
            "clock: this machine is {skew} {direction} the database; fix its time (NTP)",
            "时钟:本机比数据库{direction} {skew};请校准时间(NTP)",
        ),
        "doctor.overdue_none": ("overdue schedules: none", "逾期的定时任务:无"),
        # A long list in a finding: its first items, then how many are not shown (messages.shown).
        "doctor.and_more": ("{items} and {count} more", "{items} 及另外 {count} 项"),
        "doctor.overdue": (
            "overdue schedules: {count} ({names}): nothing fired them on time",
            "逾期的定时任务:{count} 个({names}):没有按时触发",
        ),
        "doctor.stopped": (
            "stopped schedules: {names}: enabled, but nothing is planned (see agentlab-sched fires NAME); fix them "
            "with schedules edit",
            "已停止的定时任务:{names}:已启用但没有排期(原因见 agentlab-sched fires 名称);请用 schedules edit 修正",
        ),
        "doctor.paused_after_failures": (
            "paused after failures: {names}; fix the cause, then agentlab-sched schedules resume NAME",
            "因连续失败而暂停:{names};排除原因后请运行 agentlab-sched schedules resume 名称",
        ),
        "doctor.paused": ("paused by a person: {count}", "手动暂停:{count} 个"),
        "doctor.unregistered": (
            "tasks no live worker has registered: {tasks} (schedules {names}); their fires are refused until a "
            "worker whose app has them runs",
            "没有在线 worker 注册过的任务:{tasks}(定时任务 {names});"
            "在包含这些任务的 worker 运行之前,它们的触发都会被拒绝",
        ),
        "doctor.tasks_ok": (
            "tasks: every enabled schedule's task is registered by a live worker",
            "任务:所有启用的定时任务的任务都已由在线 worker 注册",
        ),
        "doctor.suspended_none": ("suspended runs: none", "已挂起的运行:无"),
        "doctor.suspended": (
            "suspended runs: {count} ({runs}): resume or abandon them (agentlab-sched runs resume RUN, runs "
            "abandon RUN; all at once: runs resume --suspended [SCHEDULE]); or set the schedule's on_interrupt",
            "已挂起的运行:{count} 个({runs}):请继续运行或放弃(agentlab-sched runs resume 编号,runs abandon 编号;"
            "一次处理全部:runs resume --suspended [定时任务]);或设置定时任务的 on_interrupt",
        ),
        "doctor.default_partition_rows": (
            "history rows in a default partition (their period has no partition yet): {count} ({tables}); "
            "housekeeping moves them into partitions of their own",
            "位于默认分区中的历史记录(其时段尚无分区):{count} 条({tables});housekeeping 会把它们移入各自的分区",
        ),
        "doctor.failed_requests": (
            "fire requests that failed in the last day: {count} ({details})",
            "最近一天失败的触发请求:{count} 个({details})",
        ),
        "doctor.waiting_requests": (
            "fire requests not carried out for more than a minute: {count} ({names}); no worker fires them",
            "超过一分钟仍未执行的触发请求:{count} 个({names});没有 worker 在触发",
        ),
        "doctor.notifications_ok": ("notifications: none waiting or failing", "通知:没有积压或失败"),
        "doctor.notifications_failing": (
            "notifications failing: {count} ({details})",
            "发送失败的通知:{count} 条({details})",
        ),
        "doctor.outbox_stuck": (
            "notifications: {count} not sent, the oldest for {oldest}; is a worker with AGENTLAB_SCHED_SECRET_KEY "
            "running?",
            "通知:{count} 条未发送,最早的已等待 {oldest};是否有设置了 AGENTLAB_SCHED_SECRET_KEY 的 worker 在运行?",
        ),
        "doctor.outbox_pending": ("notifications: {count} being sent", "通知:{count} 条正在发送"),
        "doctor.keys_no_webhooks": ("webhook keys: no webhooks stored", "通知密钥:没有保存任何通知地址"),
        "doctor.keys_not_here": (
            "webhook keys: {count} webhooks are stored, but AGENTLAB_SCHED_SECRET_KEY is not set here, so they "
            "cannot be checked",
            "通知密钥:保存了 {count} 个通知地址,但这里没有设置 AGENTLAB_SCHED_SECRET_KEY,无法检查",
        ),
        "doctor.keys_malformed": ("webhook keys: {problem}", "通知密钥:{problem}"),
        "doctor.keys_cannot_decrypt": (
            "webhook keys: the key here cannot decrypt the webhooks of {names}; set the key they were saved with "
            "(AGENTLAB_SCHED_SECRET_KEY, newest first, comma-separated)",
            "通知密钥:这里的密钥无法解密 {names} 的通知地址;请设置保存时所用的密钥"
            "(AGENTLAB_SCHED_SECRET_KEY,最新的在前,用逗号分隔)",
        ),
        "doctor.keys_ok": ("webhook keys: all {count} webhooks decrypt", "通知密钥:全部 {count} 个通知地址都能解密"),
        "doctor.healthy": ("nothing needs attention", "一切正常"),
        "doctor.needs_attention": ("findings that need attention: {count}", "需要处理的问题:{count} 项"),
        "log.debug": ("debug", "调试"),
        "log.info": ("info", "信息"),
        "log.warning": ("warning", "警告"),
        "log.error": ("error", "错误"),
        "log.critical": ("critical", "严重错误"),
        "worker.standby": (
            "the database ({database}) is a read-only hot standby (in recovery): a worker writes (it fires, runs "
            "jobs and reports itself), so run it against the primary",
            "数据库({database})是只读的热备库(正在恢复中):worker 需要写入(触发、运行作业、上报自身),请让它连接主库",
        ),
        "worker.listen_pooled": (
            "the worker's LISTEN connection ({url}) hears no NOTIFY: it goes through a transaction pooler "
            "(PgBouncer with pool_mode = transaction?), where LISTEN never wakes anyone. Give the worker a direct "
            "connection to PostgreSQL to listen on: AGENTLAB_SCHED_LISTEN_URL or --listen-url (docs/operations.md, "
            "PgBouncer)",
            "worker 的 LISTEN 连接({url})收不到 NOTIFY:它经过了事务级连接池(PgBouncer 的 pool_mode = "
            "transaction?),在那里 LISTEN 永远不会被唤醒。请为 worker 提供一个直连 PostgreSQL 的监听连接:"
            "AGENTLAB_SCHED_LISTEN_URL 或 --listen-url(见 docs/operations.md 的 PgBouncer 一节)",
        ),
        "worker.procrastinate_changed": (
            "this Procrastinate ({version}) changed what agentlab-sched worker relies on: {problems}. Install a "
            "Procrastinate it was checked against ({checked}), or run a plain `procrastinate worker`",
            "当前的 Procrastinate({version})改动了 agentlab-sched worker 所依赖的内部接口:{problems}。"
            "请安装经过验证的 Procrastinate 版本({checked}),或改用普通的 `procrastinate worker`",
        ),
    }
)

# Singular forms (a count of 1), English only: Chinese has no plural (messages.ONE).
SINGULAR: dict[str, str] = {
    "doctor.workers_none": (
        "workers: none running, and {count} enabled schedule waits to fire; start one: agentlab-sched worker "
        "--app APP (or procrastinate --app APP worker)"
    ),
    "doctor.fires": ("firing: {count} live worker can fire schedules"),
    "doctor.keys_not_here": (
        "webhook keys: {count} webhook is stored, but AGENTLAB_SCHED_SECRET_KEY is not set here, so it "
        "cannot be checked"
    ),
    "doctor.keys_ok": ("webhook keys: the {count} webhook decrypts"),
    "doctor.migrations_ok": ("schema: up to date ({count} migration applied)"),
}
