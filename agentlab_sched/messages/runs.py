"""Messages of the runs domain: code -> (en, zh-CN)."""

MESSAGES: dict[str, tuple[str, str]] = {}
