"""Messages of the firing domain: code -> (en, zh-CN)."""

MESSAGES: dict[str, tuple[str, str]] = {}
