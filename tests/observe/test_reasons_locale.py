"""Ledger reasons are rendered when read, in the reader's language (the session's agentlab_sched.locale), from
their code and parameters: one ledger written by workers in different locales reads in one language."""

from __future__ import annotations

from typer.testing import CliRunner

from agentlab_sched import database as db
from agentlab_sched.cli import app
from tests.support.rows import SyncConn, fetched

S = "agentlab_sched"
ENV = {"AGENTLAB_SCHED_LOCALE": None, "AGENTLAB_SCHED_DATABASE_URL": None, "AGENTLAB_SCHED_SECRET_KEY": None}
EN = "the previous run #1a2b3c is still in progress; this fire was skipped"
ZH = "上一次运行 #1a2b3c 仍在进行中,本次触发已跳过"


def _schedule(conn: SyncConn) -> int:
    conn.execute(f"SELECT {S}.register_tasks(ARRAY['demo.echo'])")
    return fetched(conn.execute(f"SELECT {S}.schedule('daily', '0 9 * * *', 'demo.echo')").fetchone())["schedule"]


def _reasons(url: str, locale: str) -> list[tuple[str | None, str | None]]:
    with db.connect_sync(url, locale=locale) as conn:
        rows = conn.execute(f"SELECT reason, reason_recorded FROM {S}.fire_history ORDER BY fire_at").fetchall()
    return [(r["reason"], r["reason_recorded"]) for r in rows]


def test_a_reason_written_in_one_language_reads_in_the_other(db_url: str) -> None:
    with db.connect_sync(db_url, locale="zh-CN") as writer:  # a worker whose locale is zh-CN
        sid = _schedule(writer)
        writer.execute(
            f"""SELECT {S}.record_fire(%s, '2026-03-01 01:00+00', 'scheduled', 'skipped_overlap',
                                       'overlap.in_progress', '{{"run": "1a2b3c"}}', NULL)""",
            (sid,),
        )
    assert _reasons(db_url, "en") == [(EN, ZH)]
    assert _reasons(db_url, "zh-CN") == [(ZH, ZH)]
    with db.connect_sync(db_url, locale="en") as reader:
        status = fetched(reader.execute(f"SELECT last_fire_reason FROM {S}.schedule_status").fetchone())
        assert status["last_fire_reason"] == EN
    # The CLI reads in its own locale.
    for locale, words in (("en", EN), ("zh-CN", ZH)):
        result = CliRunner(env=ENV).invoke(app, ["--database-url", db_url, "--locale", locale, "fires", "daily"])
        assert result.exit_code == 0, result.output
        assert words in result.stdout
        shown = CliRunner(env=ENV).invoke(app, ["--database-url", db_url, "--locale", locale, "schedules", "show",
                                                "daily"])  # fmt: skip
        assert words in shown.stdout


def test_a_refused_launch_of_bad_inputs_keeps_the_refusal_as_a_code(db_url: str) -> None:
    with db.connect_sync(db_url, locale="en") as writer:
        sid = _schedule(writer)
        writer.execute(
            f"""SELECT {S}.launch(s, '2026-03-01 01:00+00', 'manual', '{{"day": "{{{{ schedule.nope }}}}"}}'::jsonb)
                FROM {S}.schedules s WHERE s.id = %s""",
            (sid,),
        )
        row = fetched(writer.execute(f"SELECT status, reason_code, reason_params FROM {S}.fires").fetchone())
    assert (row["status"], row["reason_code"]) == ("failed_to_start", "launch.bad_inputs")
    assert row["reason_params"]["problem"]["msg"] == "inputs.unknown_placeholder"
    [(en, _)] = _reasons(db_url, "en")
    [(zh, _)] = _reasons(db_url, "zh-CN")
    assert en is not None and en.startswith("inputs: unknown placeholder {{ schedule.nope }}; known: schedule.date")
    assert zh is not None and zh.startswith("输入参数:不认识的占位符 {{ schedule.nope }};可用的有:schedule.date")


def test_a_resolver_refusal_reads_as_written_and_rows_without_a_code_keep_their_text(db_url: str) -> None:
    with db.connect_sync(db_url, locale="en") as writer:
        sid = _schedule(writer)
        for day, code, params, text in (
            ("01", "launch.refused", '{"reason": "the warehouse is closed today"}', "the warehouse is closed today"),
            ("02", None, None, "written by hand"),
            ("03", "launch.refused", "{}", "an older row"),
        ):
            writer.execute(
                f"SELECT {S}.record_fire(%s, %s, 'scheduled', 'failed_to_start', %s, %s, %s)",
                (sid, f"2026-03-{day} 01:00+00", code, params, text),
            )
    expected = ["the warehouse is closed today", "written by hand", "an older row"]
    assert [r for r, _ in _reasons(db_url, "zh-CN")] == expected
    assert [r for r, _ in _reasons(db_url, "en")] == expected


def test_a_pause_reason_the_system_wrote_reads_in_the_readers_language(db_url: str) -> None:
    """Paused after failures by a zh-CN worker: an English reader reads it in English (the view, admin.get,
    the CLI), a Chinese one in Chinese; a person's own words stay as written; resume clears both."""
    with db.connect_sync(db_url, locale="zh-CN") as writer:
        sid = _schedule(writer)
        writer.execute(f"UPDATE {S}.schedules SET pause_after_failures = 1 WHERE id = %s", (sid,))
        writer.execute(f"SELECT {S}.count_failure(%s, '2026-03-01 01:00+00')", (sid,))
        stored = writer.execute(
            f"SELECT enabled, paused_reason, paused_reason_code, paused_reason_params FROM {S}.schedules"
        ).fetchone()
    assert stored == {
        "enabled": False, "paused_reason": None, "paused_reason_code": "schedule.paused_after_failures",
        "paused_reason_params": {"count": 1, "since": "2026-03-01 01:00", "timezone": "UTC"},
    }  # fmt: skip
    en = "paused after 1 failure (since 2026-03-01 01:00, UTC); fix the cause, then resume it"
    zh = "连续失败 1 次后已自动暂停(自 2026-03-01 01:00,UTC);排除原因后请恢复"
    for locale, words in (("en", en), ("zh-CN", zh)):
        with db.connect_sync(db_url, locale=locale) as reader:
            row = fetched(reader.execute(f"SELECT paused_reason FROM {S}.schedule_status").fetchone())
            assert row["paused_reason"] == words
        shown = CliRunner(env=ENV).invoke(app, ["--database-url", db_url, "--locale", locale, "schedules", "show",
                                                "daily"])  # fmt: skip
        assert words in shown.stdout, shown.stdout
    with db.connect_sync(db_url, locale="en") as person:
        person.execute(f"SELECT {S}.resume('daily')")
        person.execute(f"SELECT {S}.pause('daily', 'holiday')")
        person_row = person.execute(f"SELECT paused_reason, paused_reason_code FROM {S}.schedules").fetchone()
        assert person_row == {"paused_reason": "holiday", "paused_reason_code": None}
    with db.connect_sync(db_url, locale="zh-CN") as reader:
        shown_reason = fetched(reader.execute(f"SELECT paused_reason FROM {S}.schedule_status").fetchone())
        assert shown_reason["paused_reason"] == "holiday"
