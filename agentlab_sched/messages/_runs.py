"""Messages about runs and their lifecycle (approvals, suspended runs, timeouts, retention):
code -> (en, zh-CN).

Run statuses and approval decisions are terms (``run.status.<status>``, ``approval.status.<status>``),
so a message names them in the reader's language. Run ids are shown as ``#`` + their first 6
characters, as in the ledger's overlap reasons.
"""

MESSAGES: dict[str, tuple[str, str]] = {
    "run.timed_out": (
        "timed out: still running after the schedule's timeout of {timeout}; it was aborted",
        "运行超时:超过定时任务的超时上限 {timeout}仍未结束,已中断",
    ),
}

# Run statuses and approval decisions, as message parameters (the words the UI and CLI use).
MESSAGES.update(
    {
        "run.status.queued": ("queued", "排队中"),
        "run.status.running": ("running", "运行中"),
        "run.status.awaiting_approval": ("awaiting approval", "等待审批"),
        "run.status.suspended": ("suspended", "已挂起"),
        "run.status.succeeded": ("succeeded", "已成功"),
        "run.status.failed": ("failed", "已失败"),
        "run.status.cancelled": ("cancelled", "已取消"),
        "run.status.timed_out": ("timed out", "已超时"),
        "approval.status.pending": ("pending", "待审批"),
        "approval.status.approved": ("approved", "已批准"),
        "approval.status.rejected": ("rejected", "已驳回"),
        "run.field.run_id": ("run", "运行"),
        "run.field.by": ("by", "操作人"),
        "run.field.comment": ("comment", "备注"),
        "run.field.segment": ("segment", "执行段"),
        "run.field.title": ("title", "审批标题"),
        "run.field.state": ("state", "状态数据"),
        "run.field.older_than": ("older_than", "保留时长"),
        "run.field.retention": ("AGENTLAB_SCHED_RETENTION", "AGENTLAB_SCHED_RETENTION"),
        "run.field.status": ("status", "状态"),
        "run.field.since": ("since", "起始时间"),
    }
)

# What a run's error says (runs.error): why it stopped, or why it is not going on by itself.
MESSAGES.update(
    {
        "run.timed_out_late": (
            "timed out: still running after the schedule's timeout of {timeout}; it was asked to abort, "
            "but as a synchronous task that does not check context.should_abort() it ran on for {late} more; "
            "its result was discarded",
            "运行超时:超过定时任务的超时上限 {timeout}仍未结束,已要求中断;但它是同步任务,不检查 "
            "context.should_abort(),又多运行了 {late}才结束,结果已丢弃",
        ),
        "run.ignoring_abort": (
            "still running {late} after it was aborted for the schedule's timeout of {timeout}: "
            "it is a synchronous task that does not check context.should_abort(), so it cannot be stopped until "
            "it returns; it will be recorded as timed out",
            "超过定时任务的超时上限 {timeout}后已要求中断,但 {late}后仍在运行:它是同步任务,不检查 "
            "context.should_abort(),在它自己返回之前无法停下;结束后记为超时",
        ),
        "run.suspended": (
            "suspended: the worker running it stopped (usually a restart); it will not continue by itself: "
            "resume it to run it again, or abandon it",
            "已挂起:执行它的 worker 已停止(通常是服务重启所致),它不会自己接着执行;请继续运行,或放弃这次运行",
        ),
        "run.abandoned_by": ("abandoned by {by} after it was suspended", "已挂起的运行被 {by} 放弃"),
        "run.interrupted_retried": (
            "interrupted: its worker stopped under it; running it again on another worker (attempt {attempt} of "
            "{most}, as the schedule's on_interrupt retry says)",
            "运行被中断:执行它的 worker 中途停止;按定时任务的 on_interrupt retry 设置,换一个 worker 重新执行"
            "(第 {attempt} 次,最多 {most} 次)",
        ),
        "run.suspended_after_retries": (
            "suspended: its worker stopped under it {count} times, and on_interrupt retry runs a run again at most "
            "that often; it will not continue by itself: resume it to run it again, or abandon it",
            "已挂起:执行它的 worker 已 {count} 次中途停止,on_interrupt retry 最多只重新执行这么多次;它不会自己接着执行,"
            "请继续运行,或放弃这次运行",
        ),
        "run.interrupted_abandoned": (
            "cancelled: its worker stopped under it, and the schedule's on_interrupt abandon gives such a run up; "
            "the next fire goes ahead",
            "已取消:执行它的 worker 中途停止,定时任务的 on_interrupt abandon 设置放弃这样的运行;下一次触发照常进行",
        ),
        "run.job_removed": (
            "cancelled: its Procrastinate job was removed (deleted) while it waited to start, so nothing will run it",
            "已取消:它的 Procrastinate 作业在等待开始时被删除,不会再有 worker 执行它",
        ),
        "run.job_removed_running": (
            "cancelled: its Procrastinate job was removed (deleted) while it was running, before the run middleware "
            "saw how it ended; what it did is not known",
            "已取消:它的 Procrastinate 作业在运行中被删除,运行中间件没能得知它如何结束,执行结果未知",
        ),
        "run.job_cancelled": (
            "cancelled: its Procrastinate job was cancelled or aborted outside agentlab-sched (the procrastinate "
            "command or SQL)",
            "已取消:它的 Procrastinate 作业在 agentlab-sched 之外(procrastinate 命令或 SQL)被取消或中断",
        ),
        "run.failed_without_error": (
            "failed before its task reported anything: the worker that took the job may not know the task {task} "
            "(it is not in that worker's app), or runs without the run middleware (agentlab_sched.install(app)); "
            "see that worker's log",
            "任务还没有报告任何信息就失败了:接手作业的 worker 可能不认识任务 {task}(它的 app 里没有这个任务),"
            "或者没有装运行中间件(agentlab_sched.install(app));请查看该 worker 的日志",
        ),
        "run.task_unknown": (
            "the worker that took this job does not know the task {task} (it is not in that worker's app); run it "
            "on workers whose app includes the task",
            "接手这个作业的 worker 不认识任务 {task}(它的 app 里没有这个任务);请让包含该任务的 worker 来执行",
        ),
        "run.cancelled_by": ("cancelled by {by}", "已被 {by} 取消"),
        "run.rejected_by": ("rejected by {by}", "已被 {by} 驳回"),
        "run.rejected_by_saying": ("rejected by {by}: {comment}", "已被 {by} 驳回:{comment}"),
        "run.task_not_serialisable": (
            "the task asked for approval with a state that is not JSON data ({problem}); pass dicts, lists, "
            "strings, numbers, booleans or None",
            "任务请求审批时带的状态数据不是 JSON 数据({problem});请只用字典、列表、字符串、数字、布尔值或 None",
        ),
        "run.bad_title": (
            "the approval title must be 1 to 500 characters of text",
            "审批标题必须是 1 到 500 个字符的文本",
        ),
    }
)

# Refusals of lifecycle requests: nothing was changed.
MESSAGES.update(
    {
        "run.not_found": ('no run "{run}"', "没有编号为「{run}」的运行"),
        "run.ambiguous": (
            '"{run}" names {count} runs; give more characters of the id',
            "「{run}」对应 {count} 次运行;请多写几位编号",
        ),
        "run.bad_ref": (
            '"{run}" is not a run id; give the id or its first characters (at least 4, like #1a2b3c)',
            "「{run}」不是运行编号;请写完整编号或它的前几位(至少 4 位,如 #1a2b3c)",
        ),
        "run.not_awaiting": (
            "run #{run} is not awaiting approval (it is {status}); nothing was changed",
            "运行 #{run} 没有在等待审批(当前:{status}),未做任何改动",
        ),
        "run.already_decided": (
            "run #{run}: the approval of segment {segment} was already {decision} by {by} at {at} ({timezone}); "
            "nothing was changed",
            "运行 #{run}:第 {segment} 段的审批已由 {by} 于 {at}({timezone})作出决定:{decision},未做任何改动",
        ),
        "run.stale_segment": (
            "run #{run} is waiting for the approval of segment {current}, not segment {segment}; nothing was changed",
            "运行 #{run} 正在等待第 {current} 段的审批,不是第 {segment} 段,未做任何改动",
        ),
        "run.not_suspended": (
            "run #{run} is not suspended (it is {status}); only a suspended run can be resumed or abandoned; "
            "nothing was changed",
            "运行 #{run} 没有挂起(当前:{status}),只有已挂起的运行可以继续运行或放弃,未做任何改动",
        ),
        "run.already_ended": (
            "run #{run} has already ended ({status}); nothing was changed",
            "运行 #{run} 已经结束({status}),未做任何改动",
        ),
        "run.bad_by": (
            "by: say who decides, in 1 to 200 characters",
            "操作人:请写明是谁,1 到 200 个字符",
        ),
        "run.comment_too_long": (
            "comment: {length} characters, more than the limit of {max}",
            "备注:{length} 个字符,超过上限 {max}",
        ),
        "run.bad_status": (
            'status: "{value}" is not a run status; choose one of {choices}',
            "状态:「{value}」不是运行状态;可选:{choices}",
        ),
        "fire.bad_status": (
            'status: "{value}" is not a fire status; choose one of {choices}',
            "状态:「{value}」不是触发状态;可选:{choices}",
        ),
        "run.bad_since": (
            'since: "{value}" is neither a time (like 2026-10-05 09:00, UTC unless it has an offset) nor an age '
            "(like 2h or 7d)",
            "起始时间:「{value}」既不是时间(如 2026-10-05 09:00,不写时区按 UTC),也不是时长(如 2h、7d)",
        ),
        "run.bad_segment": (
            "segment: {value} is not a segment number (1 or more)",
            "执行段:{value} 不是有效的段号(至少为 1)",
        ),
        "retention.too_short": (
            "{field}: {seconds} seconds is too short; keep at least 1 minute of history",
            "「{field}」{seconds} 秒太短;运行记录至少保留 1 分钟",
        ),
        "session.not_persistent": (
            'schedule "{name}" uses an isolated context; only a persistent context keeps a session key',
            "定时任务「{name}」使用独立上下文,只有持续上下文才保留会话键",
        ),
        "run.no_context": (
            "current_run() is only available inside a task started by agentlab-sched, on a worker whose app has "
            "the run middleware (agentlab_sched.install(app))",
            "current_run() 只能在 agentlab-sched 发起的任务中使用,且 worker 的 app 需装好运行中间件"
            "(agentlab_sched.install(app))",
        ),
    }
)

# What the CLI says after a lifecycle request.
MESSAGES.update(
    {
        "run.approved": (
            "approved run #{run} (segment {segment}); segment {next} starts as soon as a worker picks it up",
            "已批准运行 #{run}(第 {segment} 段);第 {next} 段将在 worker 接手后开始",
        ),
        "run.rejected": ("rejected run #{run}; it is cancelled", "已驳回运行 #{run},运行已取消"),
        "run.resumed": (
            "run #{run} is queued again; it starts as soon as a worker picks it up",
            "运行 #{run} 已重新排队,worker 接手后继续运行",
        ),
        "run.abandoned": ("abandoned run #{run}; it is cancelled", "已放弃运行 #{run},运行已取消"),
        "run.resumed_suspended": (
            "queued again {count} suspended runs of {scope}; they start as soon as a worker picks them up",
            "已将{scope}的 {count} 个已挂起的运行重新排队,worker 接手后继续运行",
        ),
        "run.abandoned_suspended": (
            "abandoned {count} suspended runs of {scope}; they are cancelled",
            "已放弃{scope}的 {count} 个已挂起的运行,运行已取消",
        ),
        "run.scope_all": ("every schedule", "所有定时任务"),
        "run.scope_schedule": ('schedule "{name}"', "定时任务「{name}」"),
        "run.run_or_suspended": (
            "give the run to act on, or --suspended for every suspended run (and a schedule's name to keep to it)",
            "请给出要处理的运行编号,或用 --suspended 处理所有已挂起的运行(可再给出定时任务名称只处理它的)",
        ),
        "run.cancelled": ("cancelled run #{run}", "已取消运行 #{run}"),
        "run.abort_requested": (
            "asked run #{run} to stop; it ends as cancelled when its worker aborts it (a synchronous task must "
            "check context.should_abort())",
            "已要求运行 #{run} 停止;worker 中断它后记为已取消(同步任务需自行检查 context.should_abort())",
        ),
        "run.pruned": (
            "pruned history older than {older_than}: {fires} fires, {runs} runs, {jobs} jobs, {requests} fire "
            "requests, in {partitions} whole partitions (a day still holding unfinished work is kept)",
            "已清理 {older_than} 之前的记录:触发 {fires} 条、运行 {runs} 次、作业 {jobs} 个、触发请求 {requests} 个,"
            "共 {partitions} 个整分区(仍有未结束工作的那一天保留)",
        ),
        "run.none": ("no runs", "没有运行记录"),
        "fire.none": ("no fires", "没有触发记录"),
        "run.waiting_for": (
            'awaiting approval of segment {segment}: "{title}" (since {since}); approve or reject it',
            "等待第 {segment} 段审批:「{title}」(自 {since});请批准或驳回",
        ),
        "session.renewed": (
            'schedule "{name}": a new session key; the next run starts a fresh conversation',
            "定时任务「{name}」已换用新的会话键,下一次运行将开始新的会话",
        ),
    }
)

# Singular forms (a count of 1), English only: Chinese has no plural (messages.ONE).
SINGULAR: dict[str, str] = {
    "run.suspended_after_retries": (
        "suspended: its worker stopped under it {count} time, and on_interrupt retry runs a run again at "
        "most that often; it will not continue by itself: resume it to run it again, or abandon it"
    ),
    "run.resumed_suspended": (
        "queued again {count} suspended run of {scope}; it starts as soon as a worker picks it up"
    ),
    "run.abandoned_suspended": ("abandoned {count} suspended run of {scope}; it is cancelled"),
}
