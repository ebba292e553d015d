"""Messages of the cron domain: code -> (en, zh-CN)."""

MESSAGES: dict[str, tuple[str, str]] = {}
