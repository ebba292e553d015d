"""Messages of the validation domain: code -> (en, zh-CN)."""

MESSAGES: dict[str, tuple[str, str]] = {}
MESSAGES.update({
    "migrate.changed": (
        "migration {file} was changed after it was applied; restore it and add a new migration instead",
        "迁移文件 {file} 在执行后被改动过;请恢复原样,改动请写成新的迁移文件",
    ),
})
