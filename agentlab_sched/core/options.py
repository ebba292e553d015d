"""The one definition of the schedule options: what each is, its type, its default and its rules.

An *option* is a field of a schedule that a caller may set but need not (``queue``, ``overlap``,
``timeout``, ...); the fields every call names (``name``, ``cron``, ``task``, ``inputs``,
``timezone``) are not options. :data:`OPTIONS` is the table; everything else is derived from it or
checked against it:

Derived (nothing to write by hand):
    - ``admin``: the casts of the SQL arguments, :data:`NAMES` (``admin.OPTIONS``) and
      :data:`CLEARABLE` (``admin.CLEARABLE``).
    - The CLI: the ``--flag`` options of ``agentlab-sched schedules add`` and ``edit``, their help
      and how their text is read (durations, times in the schedule's zone).
    - The database: ``agentlab-sched migrate`` copies the table into ``agentlab_sched.schedule_options``
      (as it copies the message catalogue). The validation trigger checks every option by its row
      (choices, range, length), ``schedule()`` takes the defaults from it and ``alter_schedule()`` the
      list of fields ``clear`` may reset.
    - The planner: the defaults of ``planner.ScheduleState``.

Checked by ``tests/contract/test_options.py`` (each failure names the place to change):
    - the ``agentlab_sched.schedules`` column: its type, its default, NOT NULL unless the default is
      "not set"; for a choice, a CHECK constraint allowing exactly those values;
    - the arguments of the SQL functions ``schedule()`` and ``alter_schedule()`` (type, ``DEFAULT
      NULL``), and that each really sets the option (and that ``clear`` resets a clearable one);
    - the keyword arguments of ``admin.schedule`` / ``admin.alter`` and the field of ``admin.Schedule``;
    - the named queries ``schedule`` and ``alter_schedule`` pass it on;
    - the CLI options of ``schedules add`` / ``edit`` (and that ``edit --flag`` stores the example);
    - ``planner.ScheduleState`` has a field for each option with ``planning=True`` (and only those);
    - ``docs/sql.md`` and ``docs/cli.md`` mention the option and its flag.

How to add an option (say ``on_interrupt``, a choice):

1. Add an :class:`Option` row to :data:`OPTIONS` below, in the order it should appear in help and
   signatures: SQL type, default (``None`` = not set), ``choices`` or ``minimum``/``maximum`` or
   ``max_length``, ``clearable`` (only for a nullable option), ``planning`` when the planner reads it,
   a valid non-default ``example`` and the CLI ``help``. Its localised field name goes in the
   catalogue as ``schedule.field.<name>`` (``messages/_validation.py``).
2. A new migration file ``migrations/00NN_<what>.sql``: ``ALTER TABLE agentlab_sched.schedules ADD
   COLUMN <name> <type> [NOT NULL] DEFAULT <default>`` and, for a choice, a CHECK constraint
   ``schedules_<name>_check CHECK (<name> IN (...))``.
3. ``sql/30_schedules.sql``: drop the old ``schedule()`` and ``alter_schedule()`` signatures (``DROP
   FUNCTION IF EXISTS`` with the old argument types), add the argument ``<name> <type> DEFAULT NULL``
   to both, add ``<name> => <name>`` to the ``alter_schedule`` call inside ``schedule()``, the column to
   its INSERT (``coalesce(<name>, d.<name>)``), and a line to the UPDATE of ``alter_schedule()`` (and
   to its ``given`` object when clearable).
4. ``schedules/admin.py``: the keyword argument of ``schedule()`` and ``alter()`` and the field of
   ``Schedule``; ``database/queries/schedules.sql``: the argument ``<name> => %(<name>)s::<type>`` of the
   queries ``schedule`` and ``alter_schedule``; the column in ``get_schedule``.
   ``core/planner.py``: the ``ScheduleState`` field when ``planning=True``.
5. ``docs/sql.md`` (the options table) and ``docs/cli.md`` (the flag).

Run ``pytest tests/contract/test_options.py``: it lists every place still missing.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal

from agentlab_sched.core.cron import DST_GAP, DST_REPEAT

#: What a run does when its worker stops under it (docs/runs.md): the first is the default.
ON_INTERRUPT = ("suspend", "retry", "abandon")

__all__ = ["CLEARABLE", "DEFAULTS", "NAMES", "OPTIONS", "PY_TYPES", "Option", "SqlType", "by_name", "sql_text"]

SqlType = Literal["text", "integer", "interval", "boolean", "timestamptz"]

#: The Python type of a value of each SQL type (what admin takes and returns).
PY_TYPES: dict[str, type] = {
    "text": str,
    "integer": int,
    "interval": timedelta,
    "boolean": bool,
    "timestamptz": datetime,
}


@dataclass(frozen=True)
class Option:
    """One schedule option: a column of ``agentlab_sched.schedules`` a caller may leave out."""

    name: str
    sql_type: SqlType
    #: The column default as a Python value; None means "not set" (the column is nullable).
    default: object
    #: The CLI help of its flag (for a choice, the values are appended: see :attr:`help_text`).
    help: str
    #: A valid value other than the default (docs and the consistency test use it).
    example: object
    #: For a choice: the allowed values, in the order messages list them.
    choices: tuple[str, ...] = ()
    #: For an integer: the smallest and largest allowed value (None: no bound).
    minimum: int | None = None
    maximum: int | None = None
    #: For free text: the longest allowed value, and whether spaces are refused.
    max_length: int | None = None
    one_word: bool = False
    #: For an interval: whether 0 is refused too (a negative interval always is).
    positive: bool = False
    #: ``alter(clear=[...])`` may reset it to "not set" (only an option whose default is None).
    clearable: bool = False
    #: The planner reads it (a field of ``planner.ScheduleState``).
    planning: bool = False
    #: The CLI flag; ``--<name with dashes>`` unless given.
    cli_flag: str | None = None

    @property
    def py_type(self) -> type:
        return PY_TYPES[self.sql_type]

    @property
    def required(self) -> bool:
        """Never "not set": NOT NULL in the table."""
        return self.default is not None

    @property
    def help_text(self) -> str:
        """The CLI help: ``help``, then for a choice its values, the default marked."""
        if not self.choices:
            return self.help
        values = [f"{c} (default)" if c == self.default else c for c in self.choices]
        return f"{self.help} {', '.join(values[:-1])} or {values[-1]}."

    @property
    def flag(self) -> str:
        return self.cli_flag or "--" + self.name.replace("_", "-")


OPTIONS: tuple[Option, ...] = (
    Option("queue", "text", "default", "Procrastinate queue for the runs.", "reports", max_length=200, one_word=True),
    Option("priority", "integer", 0, "Procrastinate job priority.", 5),
    Option(
        "overlap",
        "text",
        "skip",
        "What a fire does while the last run is still going:",
        "allow_all",
        choices=("skip", "buffer_one", "buffer_all", "allow_all", "cancel_other"),
    ),
    Option(
        "misfire_grace",
        "interval",
        timedelta(hours=1),
        "How late a missed fire may still run: 90s, 10m, 1h.",
        timedelta(minutes=10),
        planning=True,
    ),
    Option(
        "timeout",
        "interval",
        None,
        "Abort a run still going after this long: 30m, 2h.",
        timedelta(minutes=30),
        positive=True,
        clearable=True,
    ),
    Option(
        "enabled",
        "boolean",
        True,
        "Create or keep it firing (--disabled: paused).",
        False,
        planning=True,
        cli_flag="--enabled/--disabled",
    ),
    Option(
        "catchup",
        "text",
        "latest",
        "Which missed fires a late tick still launches:",
        "all",
        choices=("latest", "none", "all"),
        planning=True,
    ),
    Option(
        "max_catchup",
        "integer",
        10,
        "With --catchup all: at most this many.",
        3,
        minimum=1,
        maximum=1000,
        planning=True,
    ),
    Option(
        "starts_at",
        "timestamptz",
        None,
        "Nothing fires before: 2026-03-01 09:00.",
        datetime(2030, 1, 1, 9, 0, tzinfo=UTC),
        clearable=True,
        planning=True,
    ),
    Option(
        "ends_at",
        "timestamptz",
        None,
        "Nothing fires after: 2026-12-31 18:00.",
        datetime(2031, 1, 1, 18, 0, tzinfo=UTC),
        clearable=True,
        planning=True,
    ),
    Option(
        "remaining_runs", "integer", None, "Stop after this many runs.", 7, minimum=0, clearable=True, planning=True
    ),
    Option(
        "pause_after_failures",
        "integer",
        None,
        "Pause after this many failures in a row.",
        3,
        minimum=1,
        clearable=True,
    ),
    Option(
        "context",
        "text",
        "isolated",
        "Whether a run sees the state the last run left:",
        "persistent",
        choices=("isolated", "persistent"),
    ),
    Option(
        "dst_gap",
        "text",
        DST_GAP[0],
        "A fixed time that a DST gap skips fires at the first instant after the jump or not at all:",
        "skip",
        choices=DST_GAP,
        planning=True,
    ),
    Option(
        "dst_repeat",
        "text",
        DST_REPEAT[0],
        "A once-an-hour fixed time in a repeated DST hour fires at its first occurrence, its last, or both:",
        "both",
        choices=DST_REPEAT,
        planning=True,
    ),
    Option(
        "on_interrupt",
        "text",
        ON_INTERRUPT[0],
        "A run whose worker stopped under it (a deploy, a crash) waits to be resumed or abandoned, runs again "
        "on another worker (a few times, then waits), or ends cancelled so that the next fire goes ahead:",
        "retry",
        choices=ON_INTERRUPT,
    ),
)

#: The option names, in table order (``admin.OPTIONS``).
NAMES: tuple[str, ...] = tuple(o.name for o in OPTIONS)
#: The options ``alter(clear=[...])`` may reset (``admin.CLEARABLE``).
CLEARABLE: tuple[str, ...] = tuple(o.name for o in OPTIONS if o.clearable)
#: The default of each option (None: not set).
DEFAULTS: dict[str, object] = {o.name: o.default for o in OPTIONS}

_BY_NAME = {o.name: o for o in OPTIONS}


def by_name(name: str) -> Option:
    """The option called ``name``; KeyError when there is none."""
    return _BY_NAME[name]


def sql_text(value: object) -> str | None:
    """A value as PostgreSQL reads it back with a cast to the option's type (None stays None)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
        return f"{int(seconds) if seconds.is_integer() else seconds} seconds"
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value)


def catalog_rows() -> list[tuple[object, ...]]:
    """The rows of ``agentlab_sched.schedule_options`` (written by migrate)."""
    return [
        (
            position,
            o.name,
            o.sql_type,
            sql_text(o.default),
            o.required,
            o.clearable,
            list(o.choices) or None,
            o.minimum,
            o.maximum,
            o.max_length,
            o.one_word,
            o.positive,
        )
        for position, o in enumerate(OPTIONS, 1)
    ]
