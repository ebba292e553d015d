"""--log-format json writes no character a terminal or log viewer acts on: C1 and bidi controls, line and
paragraph separators are \\u escapes, and the line is the same JSON."""

from __future__ import annotations

import json
import logging

from agentlab_sched.observe.output import JsonFormatter


def test_json_lines_escape_c1_and_bidi_controls() -> None:
    name = "pay\u202eroll \x85\x9b31m \u2028 \u2066x\u2069 \ufeff"
    record = logging.LogRecord("agentlab_sched", logging.WARNING, "", 0, "schedule %s", (name,), None)
    record.schedule = name
    line = JsonFormatter().format(record)
    assert all(ord(c) < 0x80 or (c.isprintable() and c not in "\u2028\u2029") for c in line)
    for raw in ("\u202e", "\x85", "\x9b", "\u2028", "\u2066", "\u2069", "\ufeff"):
        assert raw not in line and f"\\u{ord(raw):04x}" in line
    data = json.loads(line)
    assert (data["message"], data["schedule"]) == (f"schedule {name}", name)
    assert "\\u" not in JsonFormatter().format(logging.LogRecord("x", logging.INFO, "", 0, "日本 ok", (), None))
