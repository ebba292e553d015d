"""Messages of the firing engine (ledger reasons): code -> (en, zh-CN)."""

MESSAGES: dict[str, tuple[str, str]] = {
    "misfire.backlog": (
        "missed {first} to {last} ({timezone}) while no worker was firing; only the latest due time is caught up",
        "{first} 至 {last}({timezone})期间没有调度在运行,错过的触发不再补发,只补最近的一次",
    ),
    "misfire.backlog_one": (
        "missed {first} ({timezone}) while no worker was firing; only the latest due time is caught up",
        "{first}({timezone})时没有调度在运行,错过的这次不再补发,只补最近的一次",
    ),
    "misfire.backlog_locked": (
        "missed {first} to {last} ({timezone}) while another session held this schedule (a long transaction, "
        "a migration) and other schedules fired; only the latest due time is caught up",
        "{first} 至 {last}({timezone})期间此定时任务被另一个会话占用(长事务或迁移),其他定时任务照常触发;"
        "错过的触发不再补发,只补最近的一次",
    ),
    "misfire.backlog_locked_one": (
        "missed {first} ({timezone}) while another session held this schedule (a long transaction, a migration) "
        "and other schedules fired; only the latest due time is caught up",
        "{first}({timezone})时此定时任务被另一个会话占用(长事务或迁移),其他定时任务照常触发;"
        "错过的这次不再补发,只补最近的一次",
    ),
    "misfire.beyond_grace": (
        "missed {first} to {last} ({timezone}), more than the misfire grace of {grace} ago; not caught up",
        "错过了 {first} 至 {last}({timezone})的触发,已超过补发宽限 {grace},不再补发",
    ),
    "misfire.beyond_grace_one": (
        "missed {first} ({timezone}), more than the misfire grace of {grace} ago; not caught up",
        "错过了 {first}({timezone})的触发,已超过补发宽限 {grace},不再补发",
    ),
    "misfire.no_catchup": (
        "missed {first} to {last} ({timezone}); this schedule does not catch up missed fires",
        "错过了 {first} 至 {last}({timezone})的触发;此定时任务设置为不补发",
    ),
    "misfire.no_catchup_one": (
        "missed {first} ({timezone}); this schedule does not catch up missed fires",
        "错过了 {first}({timezone})的触发;此定时任务设置为不补发",
    ),
    "fire.cron_invalid": (
        "the cron expression no longer parses ({problem}); the schedule is stopped until it is fixed",
        "cron 表达式无法解析({problem}),定时任务已停止,修正后才会继续",
    ),
    "overlap.in_progress": (
        "the previous run #{run} is still in progress; this fire was skipped",
        "上一次运行 #{run} 仍在进行中,本次触发已跳过",
    ),
    "overlap.awaiting_approval": (
        "the previous run #{run} is awaiting approval; this fire was skipped",
        "上一次运行 #{run} 正在等待审批,本次触发已跳过",
    ),
    "overlap.suspended": (
        "the previous run #{run} is suspended (usually after a worker restart): resume or abandon it in the "
        "run history; this fire was skipped",
        "上一次运行 #{run} 已挂起(通常是服务重启所致),请在运行记录中继续运行或放弃这次运行,本次触发已跳过",
    ),
    "overlap.one_waiting": (
        "a run of this schedule is already waiting to start (overlap buffer_one); this fire was skipped",
        "已有一次运行在排队等待开始(重叠策略 buffer_one),本次触发已跳过",
    ),
    "launch.unknown_task": (
        "no live worker has registered the task {task}; start a worker that includes it",
        "没有在线的 worker 注册过任务 {task},请启动包含该任务的 worker",
    ),
    "launch.error": (
        "the run could not be started because of an internal error; details are in the worker log",
        "因内部错误未能发起运行,详情请查看 worker 日志",
    ),
    "launch.bad_inputs": (
        "inputs: {problem}",
        "输入参数:{problem}",
    ),
    "inputs.unknown_placeholder": (
        "unknown placeholder {placeholder}; known: {known}",
        "不认识的占位符 {placeholder};可用的有:{known}",
    ),
    "launch.no_runs_left": (
        "the schedule has no runs left (remaining_runs is 0)",
        "定时任务的剩余运行次数已用完(remaining_runs 为 0)",
    ),
    "request.ended": (
        "the schedule has ended (ends_at is past); nothing was fired",
        "定时任务已过结束时间(ends_at),未触发",
    ),
    "request.bad_times": (
        "times: the due times given for request {id} are not its own (a manual request fires at the instant it "
        "asked for; a backfill at distinct times, ascending, inside its range)",
        "times:为请求 {id} 给出的触发时间不是它自己的(手动请求在它请求的时刻触发;"
        "补跑在其范围内、按升序、互不相同的时刻触发)",
    ),
    "request.refusal_not_allowed": (
        "refusals: {user} may not record refusals of a fire: only a worker's login records a resolver's refusal "
        "(launch.refused, launch.resolver_timeout or launch.error), in the system's words",
        "refusals:{user} 无权记录触发的拒绝:只有 worker 的登录角色才能记录解析器的拒绝(launch.refused、"
        "launch.resolver_timeout 或 launch.error),文字由系统生成",
    ),
    "backfill.too_many": (
        "backfill: the range {start} to {end} holds more than {limit} due times, the most one backfill fires; "
        "choose a shorter range",
        "补跑:{start} 至 {end} 之间的触发时间超过 {limit} 个(一次补跑的上限),请缩短范围",
    ),
    "backfill.out_of_range": (
        "backfill: {field} {value} is outside the range a backfill can cover ({min} to {max}, UTC)",
        "补跑:「{field}」{value} 超出补跑可覆盖的范围({min} 至 {max},UTC)",
    ),
    "trigger.no_free_instant": (
        'schedule "{name}": no free instant for a manual fire after {tries} tries; a trigger on '
        "agentlab_sched.fire_requests that sets fire_at would do that (each request needs an instant of its own)",
        "定时任务「{name}」:尝试 {tries} 次仍找不到可用的手动触发时刻;agentlab_sched.fire_requests 上修改 fire_at "
        "的触发器会导致这种情况(每个请求需要各自的时刻)",
    ),
    "trigger.paused": (
        'schedule "{name}" is paused; resume it first, or fire it anyway with even_if_paused (CLI: --even-if-paused)',
        "定时任务「{name}」已暂停;请先恢复,或明确要求暂停时也触发(even_if_paused,命令行 --even-if-paused)",
    ),
    "trigger.not_carried_out": (
        "fire request #{request} was recorded, but no worker carried it out within {seconds} seconds (this "
        "role may not carry requests out itself); fire_history shows its outcome once one does",
        "已记录触发请求 #{request},但 {seconds} 秒内没有 worker 执行(这个角色不能自己执行请求);"
        "执行后可在 fire_history 中查看结果",
    ),
    "trigger.fired_while_paused": (
        'note: schedule "{name}" is paused; it was fired anyway (even_if_paused) and stays paused',
        "注意:定时任务「{name}」已暂停;按要求仍然触发了一次(even_if_paused),定时任务仍保持暂停",
    ),
    "request.duplicate": (
        "a manual fire at {at} ({timezone}) is already recorded; this request fired nothing",
        "{at}({timezone})的手动触发已有记录,本次请求没有触发",
    ),
    "request.error": (
        "the request could not be carried out because of an internal error; details are in the worker log",
        "因内部错误未能执行该请求,详情请查看 worker 日志",
    ),
    "launch.refused_no_reason": (
        "the task's resolver refused this fire without saying why",
        "任务的启动检查(resolver)拒绝了本次触发,但没有说明原因",
    ),
    "launch.resolver_timeout": (
        "the resolver of task {task} did not answer within {timeout}; this fire was not started",
        "任务 {task} 的启动检查(resolver)未在 {timeout} 内返回,本次未启动",
    ),
    "backfill.bad_range": (
        "backfill: the start {start} must be before the end {end}",
        "补跑:开始时间 {start} 必须早于结束时间 {end}",
    ),
}

MESSAGES.update(
    {
        "schedule.paused_after_failures": (
            "paused after {count} consecutive failures (since {since}, {timezone}); fix the cause, then resume it",
            "连续失败 {count} 次后已自动暂停(自 {since},{timezone});排除原因后请恢复",
        ),
        "overlap.cancelled_by_newer": (
            "cancelled: a newer fire of this schedule started (overlap cancel_other)",
            "已取消:该定时任务的新一次触发已开始(重叠策略 cancel_other)",
        ),
    }
)

MESSAGES.update(
    {
        "launch.refused": ("{reason}", "{reason}"),
    }
)

MESSAGES.update(
    {
        "cli.backfill_all_launched": (
            "backfill: all {count} fires launched",
            "补跑:{count} 次触发全部已启动",
        ),
        "cli.backfill_some_not_launched": (
            "backfill: {launched} of {total} fires launched; not launched: {details}",
            "补跑:{total} 次触发中 {launched} 次已启动;未启动:{details}",
        ),
    }
)

# Fire statuses and kinds, as message parameters (the words tables and lines use). English shows the values
# themselves: they are what --status, --json and SQL take.
MESSAGES.update(
    {
        "fire.status.started": ("started", "已发起"),
        "fire.status.skipped_overlap": ("skipped_overlap", "因重叠跳过"),
        "fire.status.skipped_misfire": ("skipped_misfire", "错过未补"),
        "fire.status.failed_to_start": ("failed_to_start", "未能发起"),
        "fire.kind.scheduled": ("scheduled", "定时"),
        "fire.kind.misfire": ("misfire", "补发"),
        "fire.kind.manual": ("manual", "手动"),
        "fire.kind.backfill": ("backfill", "补跑"),
    }
)

# Singular forms (a count of 1), English only: Chinese has no plural (messages.ONE).
SINGULAR: dict[str, str] = {
    "schedule.paused_after_failures": (
        "paused after {count} failure (since {since}, {timezone}); fix the cause, then resume it"
    ),
    "cli.backfill_all_launched": ("backfill: the {count} fire launched"),
}
