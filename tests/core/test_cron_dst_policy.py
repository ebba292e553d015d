"""An unknown DST policy given to the cron core is a refusal naming the option and the value."""

from __future__ import annotations

from typing import Any

import pytest

from agentlab_sched import messages
from agentlab_sched.core import cron
from agentlab_sched.errors import ValidationError


@pytest.mark.parametrize(
    ("kwargs", "field", "en"),
    [
        ({"dst_gap": "later"}, "dst_gap", 'dst_gap: "later" is not allowed; choose one of shift, skip'),
        ({"dst_repeat": "never"}, "dst_repeat", 'dst_repeat: "never" is not allowed; choose one of first, last, both'),
    ],
)
def test_unknown_dst_policy_is_named(kwargs: dict[str, Any], field: str, en: str) -> None:
    with pytest.raises(ValidationError) as caught:
        cron.parse("0 9 * * *", **kwargs)
    assert (caught.value.code, caught.value.field) == ("schedule.unknown_value", field)
    assert caught.value.message("en") == en
    assert messages.CATALOG["schedule.unknown_value"]["zh-CN"].startswith("「{field}」")
