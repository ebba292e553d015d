"""Messages of the notify domain: code -> (en, zh-CN)."""

MESSAGES: dict[str, tuple[str, str]] = {}

# Terms: names rendered inside other messages.
MESSAGES.update(
    {
        "notify.field.webhook_url": ("webhook URL", "Webhook 地址"),
        "notify.field.webhook_secret": ("webhook secret", "Webhook 密钥"),
        "notify.field.webhook_format": ("webhook format", "Webhook 格式"),
        "notify.field.webhook_events": ("webhook events", "通知事件"),
        "notify.platform.generic": ("generic webhook", "通用 Webhook"),
        "notify.platform.feishu": ("Feishu/Lark", "飞书"),
        "notify.platform.wecom": ("WeCom", "企业微信"),
        "notify.platform.dingtalk": ("DingTalk", "钉钉"),
        "notify.event.finished": ("finished", "完成"),
        "notify.event.failed": ("failed", "失败"),
        "notify.event.awaiting_approval": ("awaiting approval", "等待审批"),
        "notify.address.loopback": ("a loopback address", "本机回环地址"),
        "notify.address.link_local": ("a link-local address", "链路本地地址"),
        "notify.address.private": ("a private network address", "内网地址"),
        "notify.address.reserved": ("a reserved, non-public address", "保留的非公网地址"),
    }
)

# Saving a webhook: validation and keys.
MESSAGES.update(
    {
        "notify.text.bad_char": (
            "{field} contains {char} at position {position}: remove it (such characters often come along "
            "when "
            "text is copied)",
            "{field}的第 {position} 个字符是 {char}:请删掉它(复制时常会带上这类字符)",
        ),
        "notify.url.empty": ("webhook URL is empty", "Webhook 地址为空"),
        "notify.url.scheme": (
            "webhook URL must start with http:// or https:// (scheme: {scheme})",
            "Webhook 地址必须以 http:// 或 https:// 开头(现在的协议:{scheme})",
        ),
        "notify.url.no_host": ("webhook URL has no host", "Webhook 地址缺少主机名"),
        "notify.url.idna": (
            "webhook URL host {host} is not a valid domain name ({reason})",
            "Webhook 地址的主机名 {host} 不是合法的域名({reason})",
        ),
        "notify.url.port": (
            "webhook URL port {port} is not a number from 1 to 65535",
            "Webhook 地址的端口 {port} 不是 1 到 65535 之间的数字",
        ),
        "notify.url.https_required": (
            "{platform} bot URLs must use https:// (host {host})",
            "{platform}机器人地址必须使用 https://(主机 {host})",
        ),
        "notify.url.private": (
            "webhook host {host} is {kind} ({address}): webhooks to such destinations are refused unless "
            "AGENTLAB_SCHED_WEBHOOK_ALLOW_PRIVATE=1 is set",
            "Webhook 主机 {host} 是{kind}({address}):默认不向这类地址推送,确需如此请设置 "
            "AGENTLAB_SCHED_WEBHOOK_ALLOW_PRIVATE=1",
        ),
        "notify.url.required": (
            "set a webhook URL first (--webhook-url)",
            "请先设置 Webhook 地址(--webhook-url)",
        ),
        "notify.format.unknown": (
            "webhook format {value} is not one of {choices}",
            "Webhook 格式 {value} 不在可选项 {choices} 之中",
        ),
        "notify.format.mismatch": (
            "{host} is a {platform} bot address, so the webhook format must be {expected}, not {format}; "
            "leave "
            "the format out to have it taken from the URL",
            "{host} 是{platform}机器人的地址,Webhook 格式应为 {expected},不能是 {format};不填格式时会按地址自动判断",
        ),
        "notify.format.needs_platform_host": (
            "webhook format {format} needs a {platform} bot URL (host {hosts}), but the host is {host}; "
            "use the "
            "generic format for other receivers",
            "Webhook 格式 {format} 需要{platform}机器人的地址(主机 {hosts}),而这个地址的主机是 {host};"
            "其他接收端请用 generic 格式",
        ),
        "notify.secret.not_signed": (
            "{platform} bots are not signed (the key in the URL is the credential): leave the secret out, "
            "or pass "
            "an empty one to remove it",
            "{platform}机器人不做签名(地址里的 key 就是凭证):请不要设置密钥,传空值可删除已有的密钥",
        ),
        "notify.events.unknown": (
            "webhook event {value} is not one of {choices}",
            "通知事件 {value} 不在可选项 {choices} 之中",
        ),
        "notify.no_key": (
            "no secret key is set, so a webhook cannot be stored (URLs and secrets are kept encrypted). "
            "Make a "
            "key with {command} and set it as AGENTLAB_SCHED_SECRET_KEY for every worker and for the CLI",
            "没有设置密钥,无法保存 Webhook(地址和密钥都要加密保存)。请用 {command} 生成一个密钥,"
            "设为环境变量 AGENTLAB_SCHED_SECRET_KEY(所有 worker 和命令行都要设置)",
        ),
        "notify.bad_key": (
            "AGENTLAB_SCHED_SECRET_KEY: key {position} is not a Fernet key (32 bytes, URL-safe base64); "
            "make one "
            "with {command}",
            "AGENTLAB_SCHED_SECRET_KEY 中第 {position} 个密钥不是有效的 Fernet 密钥(32 字节、URL 安全的 "
            "base64 编码);"
            "可用 {command} 生成",
        ),
        "notify.undecryptable": (
            "the webhook of schedule {schedule} cannot be decrypted with any key in "
            "AGENTLAB_SCHED_SECRET_KEY: add "
            "back the key it was saved with, or set the webhook again",
            "定时任务 {schedule} 的 Webhook 无法用 AGENTLAB_SCHED_SECRET_KEY 中的任何密钥解密:"
            "请加回保存时用的密钥,"
            "或重新设置 Webhook",
        ),
        "notify.rotate.undecryptable": (
            "nothing was re-encrypted: no key in AGENTLAB_SCHED_SECRET_KEY decrypts the webhook of "
            "{schedules}; add "
            "back the key they were saved with (after the new one), or set those webhooks again",
            "未做任何改动:AGENTLAB_SCHED_SECRET_KEY 中没有密钥能解密 {schedules} 的 Webhook;"
            "请把当初保存时用的密钥"
            "加回(放在新密钥之后),或重新设置这些 Webhook",
        ),
        "notify.bound_elsewhere": (
            "the {field} stored for schedule {schedule} was not saved for it (copied from another schedule, "
            "or saved before webhooks were bound to their schedule), so it is not used; set the webhook again "
            "with agentlab-sched schedules edit {schedule} --webhook-url URL",
            "定时任务 {schedule} 保存的{field}不是为它设置的(从别的定时任务复制而来,"
            "或保存于 Webhook 与定时任务绑定之前),"
            "因此不会使用;请用 agentlab-sched schedules edit {schedule} --webhook-url 地址 重新设置",
        ),
        "notify.keys_differ": (
            "the {field} stored for schedule {schedule} cannot be opened with the keys in "
            "AGENTLAB_SCHED_SECRET_KEY, so the webhook would be left under two different keys: add back the key "
            "it was saved with, or give the webhook URL and secret together",
            "定时任务 {schedule} 保存的{field}无法用 AGENTLAB_SCHED_SECRET_KEY 中的密钥解开,继续保存会让同一个 "
            "Webhook 用两把不同的密钥加密:请加回保存时用的密钥,或同时重新设置 Webhook 地址和密钥",
        ),
        "notify.waiting_for_key": (
            "this worker cannot decrypt the webhook of schedule {schedule} (it was saved with a key this worker "
            "does not have in AGENTLAB_SCHED_SECRET_KEY): left for a worker that has the key",
            "这个 worker 无法解密定时任务 {schedule} 的 Webhook(保存时用的密钥不在它的 AGENTLAB_SCHED_SECRET_KEY "
            "中):留给持有该密钥的 worker 发送",
        ),
        "notify.rotate.changed": (
            "nothing was re-encrypted: the webhook of schedule {schedule} changed meanwhile; run it again",
            "未做任何改动:定时任务 {schedule} 的 Webhook 在此期间被修改;请再运行一次",
        ),
        "notify.doctor.key_missing": (
            "{count} notification(s) of schedule {schedule} wait for a worker that can decrypt its webhook: it "
            "was saved with a key that AGENTLAB_SCHED_SECRET_KEY here does not have; give every worker the newest "
            "key (comma-separated, newest first)",
            "定时任务 {schedule} 有 {count} 条通知在等待能解密其 Webhook 的 worker:保存时用的密钥不在这里的 "
            "AGENTLAB_SCHED_SECRET_KEY 中;请给每个 worker 配上最新的密钥(逗号分隔,新的在前)",
        ),
        "notify.doctor.bound_elsewhere": (
            "{count} notification(s) of schedule {schedule} will not be sent: its webhook was not saved for it "
            "(copied from another schedule); set the webhook again",
            "定时任务 {schedule} 有 {count} 条通知不会发送:它的 Webhook 不是为它设置的(从别的定时任务复制而来);"
            "请重新设置 Webhook",
        ),
        "notify.doctor.no_key": (
            "{count} notification(s) of schedule {schedule} are pending; AGENTLAB_SCHED_SECRET_KEY is not set "
            "here, so this check cannot tell whether the workers can decrypt them",
            "定时任务 {schedule} 有 {count} 条通知待发送;这里没有设置 AGENTLAB_SCHED_SECRET_KEY,"
            "无法判断 worker 能否解密",
        ),
        "notify.rotate.done": (
            "schedules whose webhook was re-encrypted with the newest key: {count}",
            "已用最新的密钥重新加密 Webhook 的定时任务:{count} 个",
        ),
        "notify.no_webhook": (
            "schedule {schedule} has no webhook; set one with: agentlab-sched schedules edit {schedule} "
            "--webhook-url URL",
            "定时任务 {schedule} 没有设置 Webhook;可用 agentlab-sched schedules edit {schedule} "
            "--webhook-url 地址 设置",
        ),
    }
)

# Notification text.
MESSAGES.update(
    {
        "notify.title.finished": ("{schedule}: run #{run} finished", "{schedule}:运行 #{run} 已完成"),
        "notify.title.failed": ("{schedule}: run #{run} failed", "{schedule}:运行 #{run} 失败"),
        "notify.title.timed_out": ("{schedule}: run #{run} timed out", "{schedule}:运行 #{run} 超时"),
        "notify.title.suspended": ("{schedule}: run #{run} is suspended", "{schedule}:运行 #{run} 已挂起"),
        "notify.title.awaiting_approval": (
            "{schedule}: run #{run} is awaiting approval",
            "{schedule}:运行 #{run} 等待审批",
        ),
        "notify.line.finished": ("Status: finished.", "状态:已完成。"),
        "notify.line.failed": ("Status: failed. Reason: {error}", "状态:失败。原因:{error}"),
        "notify.line.failed_no_reason": (
            "Status: failed; no reason was recorded (see agentlab-sched runs show {run_id}).",
            "状态:失败;没有记下原因(可查看 agentlab-sched runs show {run_id})。",
        ),
        "notify.line.timed_out": (
            "Status: timed out after {timeout}; the run was stopped.",
            "状态:超时,运行超过 {timeout} 仍未结束,已被中止。",
        ),
        "notify.line.timed_out_plain": (
            "Status: timed out; the run was stopped.",
            "状态:超时,运行已被中止。",
        ),
        "notify.line.suspended": (
            "Status: suspended. The worker running it stopped, and it will not continue by itself: resume it "
            "(agentlab-sched runs resume {run_id}) or abandon it (agentlab-sched runs abandon {run_id}).",
            "状态:已挂起。运行它的 worker 中途停止,它不会自己继续:可继续运行(agentlab-sched runs resume "
            "{run_id}),"
            "或放弃(agentlab-sched runs abandon {run_id})。",
        ),
        "notify.line.awaiting": (
            "Status: awaiting approval of \u201c{step}\u201d (segment {segment}). Approve it "
            "(agentlab-sched runs "
            "approve {run_id}) or reject it (agentlab-sched runs reject {run_id}).",
            "状态:等待审批「{step}」(第 {segment} 段执行)。批准(agentlab-sched runs approve {run_id})"
            "或驳回(agentlab-sched runs reject {run_id})。",
        ),
        "notify.line.awaiting_no_step": (
            "Status: awaiting approval (segment {segment}). Approve it (agentlab-sched runs approve "
            "{run_id}) or "
            "reject it (agentlab-sched runs reject {run_id}).",
            "状态:等待审批(第 {segment} 段执行)。批准(agentlab-sched runs approve {run_id})"
            "或驳回(agentlab-sched runs reject {run_id})。",
        ),
        "notify.line.status": ("Status: {status}.", "状态:{status}。"),
        "notify.kind.scheduled": ("Due at {fire_at} ({timezone}).", "计划时间:{fire_at}({timezone})。"),
        "notify.kind.manual": (
            "Started by hand at {fire_at} ({timezone}).",
            "手动触发:{fire_at}({timezone})。",
        ),
        "notify.kind.misfire": (
            "Caught up after a miss: it was due at {fire_at} ({timezone}) and started late.",
            "错过后补发:原定 {fire_at}({timezone})。",
        ),
        "notify.kind.backfill": (
            "Backfill for {fire_at} ({timezone}).",
            "补跑:{fire_at}({timezone})的那一次。",
        ),
        "notify.times.both": (
            "Started {started_at}, ended {finished_at} ({timezone}), after {elapsed}.",
            "开始于 {started_at},结束于 {finished_at}({timezone}),用时 {elapsed}。",
        ),
        "notify.times.started": ("Started {started_at} ({timezone}).", "开始于 {started_at}({timezone})。"),
        "notify.link_markdown": ("[Open the run]({url})", "[查看运行]({url})"),
        "notify.cut": (
            "(cut to fit the {platform} size limit of {limit} bytes)",
            "(超出{platform}的长度上限 {limit} 字节,后文已截断)",
        ),
    }
)

# Test-send.
MESSAGES.update(
    {
        "notify.test.title": ("{schedule}: test message", "{schedule}:测试消息"),
        "notify.test.body": (
            "A test from agentlab-sched for schedule {schedule}, sent {time} ({timezone}). If you can read "
            "this, "
            "its notifications reach this chat.",
            "这是 agentlab-sched 为定时任务 {schedule} 发送的测试消息,发送于 {time}({timezone})。"
            "看到它说明这个定时任务的通知能送到这里。",
        ),
        "notify.test.signed_line": ("Signed with the configured secret.", "已用设置的密钥签名。"),
        "notify.test.delivered": (
            "delivered (HTTP {status}): {platform} accepted the message{signed}; check that the group received it",
            "已送达(HTTP {status}):{platform}接受了这条消息{signed};请到群里确认已收到",
        ),
        "notify.test.signature_ok": (" and its signature", ",签名校验通过"),
        "notify.test.delivered_generic": (
            "delivered (HTTP {status}): {host} answered with success{signed}; check that the receiver got it",
            "已送达(HTTP {status}):{host} 回复成功{signed};请到接收端确认已收到",
        ),
        "notify.test.signature_generic": (
            " (the request carried an X-Agentlab-Signature header; whether the receiver checks it is not proven)",
            "(请求带有 X-Agentlab-Signature 签名头;接收端是否校验了它,这次测试无法证明)",
        ),
        "notify.test.failed": ("not delivered: {problem}", "未送达:{problem}"),
        "notify.test.would_retry": (
            "Notifications retry this kind of failure with backoff.",
            "正式通知遇到这类失败会稍后自动重试。",
        ),
    }
)

# What went wrong with a delivery, and what to fix.
MESSAGES.update(
    {
        "notify.refused": (
            "{platform} refused the message (HTTP {status}, code {code}: {text}). {fix}",
            "{platform}拒收了消息(HTTP {status},错误码 {code}:{text})。{fix}",
        ),
        "notify.fix.feishu_token": (
            "The bot's webhook token is invalid or the bot was removed: copy the webhook URL from the "
            "group's bot "
            "settings again.",
            "机器人的 Webhook 令牌无效或机器人已被移除:请到群的机器人设置里重新复制 Webhook 地址。",
        ),
        "notify.fix.feishu_sign": (
            "The signature was refused: set the secret shown under the bot's signature verification "
            "(签名校验), and "
            "check that this machine's clock is within an hour of the right time.",
            "签名校验未通过:请设置机器人「签名校验」里显示的密钥,并确认本机时钟与标准时间相差不超过 1 小时。",
        ),
        "notify.fix.ip_allowlist": (
            "This machine's IP address is not on the bot's IP allow-list: add it, or turn the allow-list off.",
            "本机的 IP 不在机器人的 IP 白名单里:请把它加进白名单,或关闭 IP 白名单。",
        ),
        "notify.fix.keyword": (
            "The message lacks the bot's custom keyword: use a keyword every notification contains (the "
            "schedule's "
            "name, for example), or turn the keyword check off.",
            "消息里没有机器人设置的自定义关键词:请改用每条通知都会包含的词(例如定时任务的名字),或关闭关键词校验。",
        ),
        "notify.fix.bad_request": (
            "The platform could not read the request: please report this to the agentlab-sched developers "
            "with the "
            "platform's text.",
            "平台无法解析这个请求:请把平台返回的说明反馈给 agentlab-sched 的开发者。",
        ),
        "notify.fix.dingtalk_security": (
            "DingTalk's security check failed (its text says which: keywords, timestamp, sign or IP): set "
            "the secret "
            "shown under 加签, check this machine's clock, use a keyword the messages contain, or allow this "
            "machine's IP.",
            "钉钉安全设置校验未通过(说明里写了是关键词、时间戳、签名还是 IP):请设置「加签」里显示的密钥、"
            "校准本机时钟、改用消息里会出现的关键词,或把本机 IP 加入白名单。",
        ),
        "notify.fix.token": (
            "The bot's token does not exist, or the bot or its group is gone: copy the webhook URL from "
            "the group's "
            "bot settings again.",
            "机器人的令牌不存在,或机器人、群已被删除:请到群的机器人设置里重新复制 Webhook 地址。",
        ),
        "notify.fix.bot_disabled": (
            "The bot is disabled: enable it in the group's bot settings.",
            "机器人已被停用:请到群的机器人设置里启用它。",
        ),
        "notify.fix.wecom_key": (
            "The key in the webhook URL is wrong or the bot was removed: copy the webhook URL from the "
            "group's bot "
            "settings again.",
            "Webhook 地址里的 key 不对或机器人已被移除:请到群的机器人设置里重新复制 Webhook 地址。",
        ),
        "notify.fix.too_long": (
            "The message was too long for the platform: please report this to the agentlab-sched developers.",
            "消息超出了平台的长度限制:请反馈给 agentlab-sched 的开发者。",
        ),
        "notify.fix.platform": (
            "Look this code up in the platform's documentation.",
            "请在平台文档中查阅这个错误码。",
        ),
        "notify.problem.platform_busy": (
            "Sending too fast, or the platform was busy: it is tried again later.",
            "发送太频繁或平台繁忙:稍后会再试。",
        ),
        "notify.problem.redirect": (
            "the receiver answered with a redirect (to {location}); redirects are not followed, so save "
            "the final "
            "URL instead",
            "接收端回复了重定向(指向 {location});推送不跟随重定向,请改存最终的地址",
        ),
        "notify.problem.http_retry": (
            "the receiver answered HTTP {status}, a temporary failure",
            "接收端回复 HTTP {status},属于临时故障",
        ),
        "notify.problem.http_refused": (
            "the receiver answered HTTP {status}: check the URL and the receiver's settings",
            "接收端回复 HTTP {status}:请检查地址和接收端的设置",
        ),
        "notify.problem.undetermined": (
            "{platform} answered without the result code it always sends, so delivery cannot be confirmed "
            "(is a "
            "proxy or gateway in between?)",
            "{platform}的回复里没有它必带的结果码,无法确认是否送达(中间是否有代理或网关?)",
        ),
        "notify.problem.timeout": (
            "{host} did not answer within {seconds} seconds",
            "{host} 在 {seconds} 秒内没有回复",
        ),
        "notify.problem.network": ("{host} could not be reached: {detail}", "无法连接 {host}:{detail}"),
        "notify.problem.dns": ("{host} could not be resolved: {detail}", "无法解析 {host}:{detail}"),
        "notify.problem.bad_url": (
            "the webhook URL cannot be used: {detail}",
            "Webhook 地址无法使用:{detail}",
        ),
        "notify.retry": (
            "{problem} (attempt {attempt}; next try in {delay})",
            "{problem}(第 {attempt} 次尝试;{delay}后重试)",
        ),
        "notify.gave_up": (
            "gave up after {attempts} attempts; the last: {problem}",
            "已尝试 {attempts} 次,放弃;最后一次:{problem}",
        ),
        "notify.dropped.no_webhook": (
            "not sent: the schedule no longer has a webhook",
            "未发送:这个定时任务已不再设置 Webhook",
        ),
        "notify.dropped.unsubscribed": (
            "not sent: the schedule no longer subscribes to {event}",
            "未发送:这个定时任务已不再订阅「{event}」通知",
        ),
        "notify.interrupted": (
            "the worker stopped while waiting for the answer; the notification stays pending for the next "
            "worker "
            "(the receiver may get it twice)",
            "等待回复时 worker 停止了;这条通知留待下一个 worker 发送(接收端可能会收到两次)",
        ),
        "notify.no_key_dispatch": (
            "notifications are not sent by this worker: AGENTLAB_SCHED_SECRET_KEY is not set",
            "这个 worker 不发送通知:没有设置 AGENTLAB_SCHED_SECRET_KEY",
        ),
    }
)
