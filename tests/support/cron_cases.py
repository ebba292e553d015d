"""Cron expressions both parsers are held to (the Python one in core/cron.py and the SQL one in
sql/20_cron_fields.sql and 21_cron.sql): the refused ones with their code and words in en and zh-CN,
malformed intervals and anchors, and valid expressions; problem_of() is Python's verdict in the shape of
SQL's cron_problem."""

from __future__ import annotations

import json

from agentlab_sched.core.cron import parse
from agentlab_sched.errors import ValidationError

MALFORMED_EN = "is malformed (write a, a-b, */n, a-b/n or a/n)"


MALFORMED_ZH = "格式不对(应写作 a、a-b、*/n、a-b/n 或 a/n)"


MACROS_EN = "(known: @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly, @every)"


MACROS_ZH = "(可用:@yearly、@annually、@monthly、@weekly、@daily、@midnight、@hourly、@every)"


MISPLACED_EN = (
    "does not belong here (L, L-n, LW, nW and $ are for day-of-month; dL and d#n for day-of-week;"
    " ? for either day field)"
)


MISPLACED_ZH = "(L、L-n、LW、nW 和 $ 只用于「日」,dL 和 d#n 只用于「周」,? 只用于这两个字段)"


COMBINED_EN = "the L, W, # and $ forms stand alone, not in a range or with a step (a list is fine: 1,15,L)"


COMBINED_ZH = "L、W、# 和 $ 的写法只能单独使用,不能放进范围或加步长(可以写成列表,如 1,15,L)"


EVERY_EN = "is malformed (write @every 90m, @every 1h30m or @every 90m from 00:15; units d, h, m, s)"


EVERY_ZH = "格式不对(应写作 @every 90m、@every 1h30m 或 @every 90m from 00:15;单位为 d、h、m、s)"


ANCHOR_EN = "after from, write a time HH:MM[:SS] or a date and time YYYY-MM-DD HH:MM[:SS]"


ANCHOR_ZH = "中 from 之后应写时刻 HH:MM[:SS] 或日期时间 YYYY-MM-DD HH:MM[:SS]"


#: (expression, code, English, Chinese)
BAD: list[tuple[str, str, str, str]] = [
    # out of range, each field
    ("0 25 * * *", "cron.out_of_range", "hour: 25 is outside 0-23", "「时」的取值 25 超出 0-23"),
    ("60 * * * *", "cron.out_of_range", "minute: 60 is outside 0-59", "「分」的取值 60 超出 0-59"),
    ("0 0 0 * *", "cron.out_of_range", "day-of-month: 0 is outside 1-31", "「日」的取值 0 超出 1-31"),
    ("0 0 32 * *", "cron.out_of_range", "day-of-month: 32 is outside 1-31", "「日」的取值 32 超出 1-31"),
    ("0 0 * 0 *", "cron.out_of_range", "month: 0 is outside 1-12", "「月」的取值 0 超出 1-12"),
    ("0 0 * 13 *", "cron.out_of_range", "month: 13 is outside 1-12", "「月」的取值 13 超出 1-12"),
    ("0 0 * * 8", "cron.out_of_range", "day-of-week: 8 is outside 0-7", "「周」的取值 8 超出 0-7"),
    ("* * * * * 60", "cron.out_of_range", "second: 60 is outside 0-59", "「秒」的取值 60 超出 0-59"),
    ("0 9-24 * * *", "cron.out_of_range", "hour: 24 is outside 0-23", "「时」的取值 24 超出 0-23"),
    ("0 1,2,99 * * *", "cron.out_of_range", "hour: 99 is outside 0-23", "「时」的取值 99 超出 0-23"),
    (
        "99999999999999999999 * * * *",
        "cron.out_of_range",
        "minute: 99999999999999999999 is outside 0-59",
        "「分」的取值 99999999999999999999 超出 0-59",
    ),
    # not a number
    ("x * * * *", "cron.not_a_number", "minute: x is not a number", "「分」的取值 x 不是数字"),
    ("0 MON * * *", "cron.not_a_number", "hour: MON is not a number", "「时」的取值 MON 不是数字"),
    ("0 0 1.5 * *", "cron.not_a_number", "day-of-month: 1.5 is not a number", "「日」的取值 1.5 不是数字"),
    ("* * * * * x", "cron.not_a_number", "second: x is not a number", "「秒」的取值 x 不是数字"),
    ("０ * * * *", "cron.not_a_number", "minute: ０ is not a number", "「分」的取值 ０ 不是数字"),
    ("*-5 * * * *", "cron.not_a_number", "minute: * is not a number", "「分」的取值 * 不是数字"),
    # names
    (
        "0 0 * FOO *",
        "cron.name_unknown",
        "month: FOO is neither a number nor a known name (JAN-DEC)",
        "「月」的取值 FOO 既不是数字,也不是可用的名称(JAN-DEC)",
    ),
    (
        "0 0 * * Monday",
        "cron.name_unknown",
        "day-of-week: Monday is neither a number nor a known name (SUN-SAT)",
        "「周」的取值 Monday 既不是数字,也不是可用的名称(SUN-SAT)",
    ),
    # ranges
    (
        "30-10 * * * *",
        "cron.range_reversed",
        "minute: range 30-10 starts after it ends",
        "「分」的范围 30-10 起点大于终点",
    ),
    (
        "0 0 * * FRI-MON",
        "cron.range_reversed",
        "day-of-week: range FRI-MON starts after it ends",
        "「周」的范围 FRI-MON 起点大于终点",
    ),
    ("1-2-3 * * * *", "cron.malformed", f"minute: 1-2-3 {MALFORMED_EN}", f"「分」的 1-2-3 {MALFORMED_ZH}"),
    ("0 5- * * *", "cron.malformed", f"hour: 5- {MALFORMED_EN}", f"「时」的 5- {MALFORMED_ZH}"),
    ("0 0 * * -1", "cron.malformed", f"day-of-week: -1 {MALFORMED_EN}", f"「周」的 -1 {MALFORMED_ZH}"),
    ("/5 * * * *", "cron.malformed", f"minute: /5 {MALFORMED_EN}", f"「分」的 /5 {MALFORMED_ZH}"),
    # steps
    (
        "*/x * * * *",
        "cron.step_not_number",
        "minute: the step in */x is not a whole number",
        "「分」的 */x 中步长不是整数",
    ),
    ("0 */ * * *", "cron.step_not_number", "hour: the step in */ is not a whole number", "「时」的 */ 中步长不是整数"),
    (
        "1/2/3 * * * *",
        "cron.step_not_number",
        "minute: the step in 1/2/3 is not a whole number",
        "「分」的 1/2/3 中步长不是整数",
    ),
    ("*/0 * * * *", "cron.step_out_of_range", "minute: step 0 is outside 1-59", "「分」的步长 0 超出 1-59"),
    ("*/60 * * * *", "cron.step_out_of_range", "minute: step 60 is outside 1-59", "「分」的步长 60 超出 1-59"),
    ("0 */24 * * *", "cron.step_out_of_range", "hour: step 24 is outside 1-23", "「时」的步长 24 超出 1-23"),
    ("0 0 1-20/32 * *", "cron.step_out_of_range", "day-of-month: step 32 is outside 1-31", "「日」的步长 32 超出 1-31"),
    # lists
    ("1,,2 * * * *", "cron.list_empty_item", "minute: 1,,2 has an empty list item", "「分」的取值 1,,2 中有空的列表项"),
    (
        "0 0 * * MON,",
        "cron.list_empty_item",
        "day-of-week: MON, has an empty list item",
        "「周」的取值 MON, 中有空的列表项",
    ),
    # the day forms where they do not belong, combined, or misspelt: each names itself
    ("0 L * * *", "cron.special_misplaced", f"hour: L {MISPLACED_EN}", f"「时」中不能写 L{MISPLACED_ZH}"),
    ("0 0 * * L", "cron.special_misplaced", f"day-of-week: L {MISPLACED_EN}", f"「周」中不能写 L{MISPLACED_ZH}"),
    ("0 0 * * 15W", "cron.special_misplaced", f"day-of-week: 15W {MISPLACED_EN}", f"「周」中不能写 15W{MISPLACED_ZH}"),
    ("0 0 5#2 * *", "cron.special_misplaced", f"day-of-month: 5#2 {MISPLACED_EN}", f"「日」中不能写 5#2{MISPLACED_ZH}"),
    ("0 0 5L * *", "cron.special_misplaced", f"day-of-month: 5L {MISPLACED_EN}", f"「日」中不能写 5L{MISPLACED_ZH}"),
    ("0 0 * $ *", "cron.special_misplaced", f"month: $ {MISPLACED_EN}", f"「月」中不能写 ${MISPLACED_ZH}"),
    ("0 ? * * *", "cron.special_misplaced", f"hour: ? {MISPLACED_EN}", f"「时」中不能写 ?{MISPLACED_ZH}"),
    ("0 0 1-L * *", "cron.special_combined", f"day-of-month: 1-L: {COMBINED_EN}", f"「日」的 1-L:{COMBINED_ZH}"),
    ("0 0 L/2 * *", "cron.special_combined", f"day-of-month: L/2: {COMBINED_EN}", f"「日」的 L/2:{COMBINED_ZH}"),
    (
        "0 0 * * MON-FRI#2",
        "cron.special_combined",
        f"day-of-week: MON-FRI#2: {COMBINED_EN}",
        f"「周」的 MON-FRI#2:{COMBINED_ZH}",
    ),
    (
        "0 0 ?,1 * *",
        "cron.question_alone",
        "day-of-month: in ?,1, ? stands for the whole field (like *) and cannot be combined with other values",
        "「日」的 ?,1 中,? 表示整个字段(同 *),不能与其他值组合",
    ),
    (
        "R * * * *",
        "cron.hashed",
        "minute: R is not supported (R, a random value, is a croniter extension; write the value, or H for a"
        " value chosen by the schedule's name)",
        "「分」不支持 R(R 是 croniter 的随机取值扩展;请写出具体的值,或写 H 按计划名称选定一个值)",
    ),
    (
        "H(1-2 * * * *",
        "cron.hash_malformed",
        "minute: H(1-2 is malformed (write H, H/n, H(a-b) or H(a-b)/n)",
        "「分」的 H(1-2 格式不对(应写作 H、H/n、H(a-b) 或 H(a-b)/n)",
    ),
    (
        "0 0 L-31 * *",
        "cron.last_offset",
        "day-of-month: L-31 is malformed (write L-n with n from 1 to 30: n days before the last day of the month)",
        "「日」的 L-31 格式不对(应写作 L-n,n 取 1 到 30,表示月末前第 n 天)",
    ),
    (
        "0 0 * * 5#6",
        "cron.nth_out_of_range",
        "day-of-week: 5#6 is malformed (write d#n with n from 1 to 5: 5#2 is the second Friday of the month)",
        "「周」的 5#6 格式不对(应写作 d#n,n 取 1 到 5,如 5#2 表示当月第二个星期五)",
    ),
    (
        "0 0 * * L5",
        "cron.l_prefix",
        "day-of-week: L5 is croniter's spelling; write 5L (the last such weekday of the month)",
        "「周」的 L5 是 croniter 的写法,请写作 5L(当月最后一个该星期几)",
    ),
    (
        "0 9 W15 * *",
        "cron.w_prefix",
        "day-of-month: W15 is croniter's spelling; write 15W (the weekday nearest that day of the month)",
        "「日」的 W15 是 croniter 的写法,请写作 15W(离当月该日最近的工作日)",
    ),
    ("0 0 32W * *", "cron.out_of_range", "day-of-month: 32 is outside 1-31", "「日」的取值 32 超出 1-31"),
    ("0 0 * * 8#2", "cron.out_of_range", "day-of-week: 8 is outside 0-7", "「周」的取值 8 超出 0-7"),
    # intervals
    (
        "60 seconds",
        "cron.seconds_interval",
        "cron: 60 seconds is not an interval in seconds (pg_cron's form takes a whole number from 1 to 59,"
        " e.g. 30 seconds; for longer intervals write @every 90s)",
        "cron 表达式「60 seconds」不是有效的秒级间隔(pg_cron 的写法是 1 到 59 的整数,如 30 seconds;"
        "更长的间隔请写 @every 90s)",
    ),
    ("@every 90x", "cron.every_malformed", f"cron: @every 90x {EVERY_EN}", f"cron 表达式「@every 90x」{EVERY_ZH}"),
    (
        "@every 0s",
        "cron.every_out_of_range",
        "cron: @every 0s: the interval must be from 1 second to 366 days",
        "cron 表达式「@every 0s」的间隔应在 1 秒到 366 天之间",
    ),
    (
        "@every 90m from 25:00",
        "cron.every_anchor",
        f"cron: @every 90m from 25:00: {ANCHOR_EN}",
        f"cron 表达式「@every 90m from 25:00」{ANCHOR_ZH}",
    ),
    # days that never come
    (
        "0 0 L-30 2 *",
        "cron.day_never",
        "day-of-month: L-30 never occurs in month 2",
        "「日」的取值 L-30 在月份 2 中从不出现",
    ),
    (
        "0 0 31W 4 *",
        "cron.day_never",
        "day-of-month: 31W never occurs in month 4",
        "「日」的取值 31W 在月份 4 中从不出现",
    ),
    (
        "0 0 30 2 *",
        "cron.day_never",
        "day-of-month: 30 never occurs in month 2",
        "「日」的取值 30 在月份 2 中从不出现",
    ),
    (
        "0 0 31 APR,JUN */2",
        "cron.day_never",
        "day-of-month: 31 never occurs in month APR,JUN",
        "「日」的取值 31 在月份 APR,JUN 中从不出现",
    ),
    # the expression as a whole
    (
        "* * *",
        "cron.field_count",
        'cron: expected 5, 6 or 7 fields, got 3 in "* * *"',
        "cron 表达式应有 5、6 或 7 个字段,「* * *」有 3 个",
    ),
    (
        " 0 0 * * * * * * ",
        "cron.field_count",
        'cron: expected 5, 6 or 7 fields, got 8 in "0 0 * * * * * *"',
        "cron 表达式应有 5、6 或 7 个字段,「0 0 * * * * * *」有 8 个",
    ),
    ("", "cron.empty", "cron: the expression is empty", "cron 表达式为空"),
    (" \t ", "cron.empty", "cron: the expression is empty", "cron 表达式为空"),
    (
        "@reboot",
        "cron.macro_unknown",
        f"cron: unknown macro @reboot {MACROS_EN}",
        f"cron 表达式中的 @reboot 不是可用的宏{MACROS_ZH}",
    ),
    (
        "@daily 1",
        "cron.macro_unknown",
        f"cron: unknown macro @daily 1 {MACROS_EN}",
        f"cron 表达式中的 @daily 1 不是可用的宏{MACROS_ZH}",
    ),
]


def problem_of(expr: str) -> dict[str, object] | None:
    """What Python says about ``expr``, in the shape of SQL's ``cron_problem`` (params as JSON)."""
    try:
        parse(expr)
    except ValidationError as err:
        return {"code": err.code, "field": err.field, "params": json.loads(json.dumps(err.params))}
    return None


MALFORMED_INTERVALS = ["@every", "@every 90", "@every 1m1h", "@every 90m from", "@every 90m since 00:15", "@every -5m"]
MALFORMED_INTERVALS += ["@every 5 m", "@every 1.5h", "@every 90m 00:15"]


BAD_ANCHORS = [
    "@every 90m from 24:00",
    "@every 90m from 2026-02-29 00:00",
    "@every 90m from 0000-01-01 00:00",
    "@every 90m from 9:5",
    "@every 90m from 2026-01-05 09:00 x",
    "@every 90m from 2026-01-05t09:00",
    "@every 90m from noon",
]


GOOD_ANCHORS = ["@every 90m from 9:05", "@every 1h from 7:30:15", "@every 1d from 2028-02-29T23:59:59"]


VALID = [
    "* * * * *",
    "*/7 * * * *",
    "0 0 * * *",
    "30 2 * * *",
    "15 1,2,3 * * *",
    "0 */3 * * *",
    "*/20 9-17 * * MON-FRI",
    "0 0 1,15 * *",
    "0 12 13 * FRI",
    "0 0 29 2 *",
    "10 * * * * */15",
    "30 1 * * * 30",
    "@hourly",
    "@weekly",
    "0 0 L * *",
    "0 0 $ * *",
    "0 9 L-3 * *",
    "0 9 LW * *",
    "0 9 15W * *",
    "0 9 * * 5#2",
    "0 9 * * FRIL",
    "0 9 ? * MON",
    "0 9 * * SAT-SUN",
    "* 1-6 * * *",
    "30 1 * * *",
    "30 seconds",
    "@every 90m from 00:15",
    "@every 7d from 2026-01-05 09:00",
]
