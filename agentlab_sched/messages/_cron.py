"""Messages of the cron domain: code -> (en, zh-CN).

Cron errors carry ``field`` (a term naming the cron field, e.g. ``cron.field.hour``) and ``value`` (the
text as written); the SQL validator (``sql/20_cron.sql``) builds the very same codes and parameters.
"""

MESSAGES: dict[str, tuple[str, str]] = {
    # Names of the cron fields, used as terms inside the messages below.
    "cron.field.minute": ("minute", "分"),
    "cron.field.hour": ("hour", "时"),
    "cron.field.day-of-month": ("day-of-month", "日"),
    "cron.field.month": ("month", "月"),
    "cron.field.day-of-week": ("day-of-week", "周"),
    "cron.field.second": ("second", "秒"),
    # The expression as a whole.
    "cron.empty": (
        "cron: the expression is empty",
        "cron 表达式为空",
    ),
    "cron.field_count": (
        'cron: expected 5 or 6 fields, got {count} in "{expr}"',
        "cron 表达式应有 5 或 6 个字段,「{expr}」有 {count} 个",
    ),
    "cron.macro_unknown": (
        "cron: unknown macro {value} (known: @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly)",
        "cron 表达式中的 {value} 不是可用的宏(可用:@yearly、@annually、@monthly、@weekly、@daily、@midnight、@hourly)",
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
    "cron.unsupported": (
        "{field}: {value} is not supported (L, W, # and ? are not part of this cron language; "
        "use numbers, names, ranges, lists and steps)",
        "「{field}」不支持 {value}(本系统的 cron 不支持 L、W、# 和 ?,请使用数字、名称、范围、列表和步长)",
    ),
    "cron.day_never": (
        "{field}: {value} never occurs in month {month}",
        "「{field}」的取值 {value} 在月份 {month} 中从不出现",
    ),
    # Time zones.
    "timezone.unknown": (
        "timezone: {value} is not a known time zone (use an IANA name such as Asia/Shanghai or America/New_York)",
        "时区 {value} 不是可用的时区(请使用 IANA 名称,例如 Asia/Shanghai、America/New_York)",
    ),
}
