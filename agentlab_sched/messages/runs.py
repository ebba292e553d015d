"""Messages about runs: code -> (en, zh-CN)."""

MESSAGES: dict[str, tuple[str, str]] = {
    "run.timed_out": (
        "timed out: still running after the schedule's timeout of {timeout} seconds; it was aborted",
        "运行超时:超过定时任务的超时上限 {timeout} 秒仍未结束,已中断",
    ),
}
