"""Messages of the notify domain: code -> (en, zh-CN)."""

MESSAGES: dict[str, tuple[str, str]] = {}
