"""Messages of the cron domain: code -> (en, zh-CN).

Cron errors carry ``field`` (a term naming the cron field, e.g. ``cron.field.hour``) and ``value`` (the
text as written); the SQL validator (``sql/20_cron_fields.sql, 21_cron.sql``) builds the very same codes and parameters.
"""

MESSAGES: dict[str, tuple[str, str]] = {
    # Names of the cron fields, used as terms inside the messages below.
    "cron.field.minute": ("minute", "分"),
    "cron.field.hour": ("hour", "时"),
    "cron.field.day-of-month": ("day-of-month", "日"),
    "cron.field.month": ("month", "月"),
    "cron.field.day-of-week": ("day-of-week", "周"),
    "cron.field.second": ("second", "秒"),
    "cron.field.year": ("year", "年"),
    # The expression as a whole.
    "cron.empty": (
        "cron: the expression is empty",
        "cron 表达式为空",
    ),
    "cron.field_count": (
        'cron: expected 5, 6 or 7 fields, got {count} in "{expr}"',
        "cron 表达式应有 5、6 或 7 个字段,「{expr}」有 {count} 个",
    ),
    "cron.macro_unknown": (
        "cron: unknown macro {value} (known: @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly, "
        "@every)",
        "cron 表达式中的 {value} 不是可用的宏(可用:@yearly、@annually、@monthly、@weekly、@daily、@midnight、"
        "@hourly、@every)",
    ),
    # One field.
    "cron.out_of_range": (
        "{field}: {value} is outside {min}-{max}",
        "「{field}」的取值 {value} 超出 {min}-{max}",
    ),
    "cron.not_a_number": (
        "{field}: {value} is not a number",
        "「{field}」的取值 {value} 不是数字",
    ),
    "cron.name_unknown": (
        "{field}: {value} is neither a number nor a known name ({names})",
        "「{field}」的取值 {value} 既不是数字,也不是可用的名称({names})",
    ),
    "cron.range_reversed": (
        "{field}: range {value} starts after it ends",
        "「{field}」的范围 {value} 起点大于终点",
    ),
    "cron.malformed": (
        "{field}: {value} is malformed (write a, a-b, */n, a-b/n or a/n)",
        "「{field}」的 {value} 格式不对(应写作 a、a-b、*/n、a-b/n 或 a/n)",
    ),
    "cron.step_not_number": (
        "{field}: the step in {value} is not a whole number",
        "「{field}」的 {value} 中步长不是整数",
    ),
    "cron.step_out_of_range": (
        "{field}: step {value} is outside {min}-{max}",
        "「{field}」的步长 {value} 超出 {min}-{max}",
    ),
    "cron.list_empty_item": (
        "{field}: {value} has an empty list item",
        "「{field}」的取值 {value} 中有空的列表项",
    ),
    "cron.special_misplaced": (
        "{field}: {value} does not belong here (L, L-n, LW, nW and $ are for day-of-month; dL and d#n for "
        "day-of-week; ? for either day field)",
        "「{field}」中不能写 {value}(L、L-n、LW、nW 和 $ 只用于「日」,dL 和 d#n 只用于「周」,? 只用于这两个字段)",
    ),
    "cron.special_combined": (
        "{field}: {value}: the L, W, # and $ forms stand alone, not in a range or with a step (a list is fine: 1,15,L)",
        "「{field}」的 {value}:L、W、# 和 $ 的写法只能单独使用,不能放进范围或加步长(可以写成列表,如 1,15,L)",
    ),
    "cron.question_alone": (
        "{field}: in {value}, ? stands for the whole field (like *) and cannot be combined with other values",
        "「{field}」的 {value} 中,? 表示整个字段(同 *),不能与其他值组合",
    ),
    "cron.hashed": (
        "{field}: {value} is not supported (R, a random value, is a croniter extension; write the value, or H "
        "for a value chosen by the schedule's name)",
        "「{field}」不支持 {value}(R 是 croniter 的随机取值扩展;请写出具体的值,或写 H 按计划名称选定一个值)",
    ),
    "cron.hash_malformed": (
        "{field}: {value} is malformed (write H, H/n, H(a-b) or H(a-b)/n)",
        "「{field}」的 {value} 格式不对(应写作 H、H/n、H(a-b) 或 H(a-b)/n)",
    ),
    "cron.last_offset": (
        "{field}: {value} is malformed (write L-n with n from 1 to 30: n days before the last day of the month)",
        "「{field}」的 {value} 格式不对(应写作 L-n,n 取 1 到 30,表示月末前第 n 天)",
    ),
    "cron.nth_out_of_range": (
        "{field}: {value} is malformed (write d#n with n from 1 to 5: 5#2 is the second Friday of the month)",
        "「{field}」的 {value} 格式不对(应写作 d#n,n 取 1 到 5,如 5#2 表示当月第二个星期五)",
    ),
    "cron.l_prefix": (
        "{field}: {value} is croniter's spelling; write {suggestion} (the last such weekday of the month)",
        "「{field}」的 {value} 是 croniter 的写法,请写作 {suggestion}(当月最后一个该星期几)",
    ),
    "cron.w_prefix": (
        "{field}: {value} is croniter's spelling; write {suggestion} (the weekday nearest that day of the month)",
        "「{field}」的 {value} 是 croniter 的写法,请写作 {suggestion}(离当月该日最近的工作日)",
    ),
    "cron.day_never": (
        "{field}: {value} never occurs in month {month}",
        "「{field}」的取值 {value} 在月份 {month} 中从不出现",
    ),
    # Intervals.
    "cron.seconds_interval": (
        "cron: {value} is not an interval in seconds (pg_cron's form takes a whole number from 1 to 59, "
        "e.g. 30 seconds; for longer intervals write @every 90s)",
        "cron 表达式「{value}」不是有效的秒级间隔(pg_cron 的写法是 1 到 59 的整数,如 30 seconds;"
        "更长的间隔请写 @every 90s)",
    ),
    "cron.every_malformed": (
        "cron: {value} is malformed (write @every 90m, @every 1h30m or @every 90m from 00:15; units d, h, m, s)",
        "cron 表达式「{value}」格式不对(应写作 @every 90m、@every 1h30m 或 @every 90m from 00:15;单位为 d、h、m、s)",
    ),
    "cron.every_out_of_range": (
        "cron: {value}: the interval must be from 1 second to 366 days",
        "cron 表达式「{value}」的间隔应在 1 秒到 366 天之间",
    ),
    "cron.every_anchor": (
        "cron: {value}: after from, write a time HH:MM[:SS] or a date and time YYYY-MM-DD HH:MM[:SS]",
        "cron 表达式「{value}」中 from 之后应写时刻 HH:MM[:SS] 或日期时间 YYYY-MM-DD HH:MM[:SS]",
    ),
    # Time zones.
    "timezone.unknown": (
        "timezone: {value} is not a known time zone (use an IANA name such as Asia/Shanghai or America/New_York)",
        "时区 {value} 不是可用的时区(请使用 IANA 名称,例如 Asia/Shanghai、America/New_York)",
    ),
}
