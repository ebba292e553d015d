"""The dashboard's run pages give a run's error in the page's language, whatever the locale of the
session that wrote it."""

from __future__ import annotations

import html

from tests.support.web import Web


def test_a_run_error_written_in_chinese_reads_in_english_on_an_english_page(web: Web) -> None:
    web.schedule("report")
    run_id = web.launch("report")
    with web.owner() as conn:
        conn.execute("SELECT set_config('agentlab_sched.locale', 'zh-CN', false)")
        conn.execute("SELECT agentlab_sched.cancel_run(%s, 'dave')", (run_id,))
    client = web.signed_in(web.reader)
    for lang, words in (("en", "cancelled by dave"), ("zh-CN", "已被 dave 取消")):
        for path in (f"/runs/{run_id}?lang={lang}", f"/runs?lang={lang}"):
            page = client.get(path)
            assert page.status_code == 200, path
            assert words in html.unescape(page.text), path
