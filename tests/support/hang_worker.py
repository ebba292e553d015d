"""A worker subprocess for tests that kill one: ``python -m tests.support.hang_worker URL hang|finish``.

It runs the demo app with one more task, ``t.hang``, and no scheduler (only what a test queues runs). With
``hang`` the task never returns (the test kills the worker mid-run); with ``finish`` it returns its inputs
at once (the worker that takes the run over after a resume).
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from agentlab_sched.demo import make_app
from agentlab_sched.settings import Settings
from agentlab_sched.worker.process import run_worker

#: The task's name, the same in both modes (the resumed run's job keeps it).
TASK = "t.hang"


def main(url: str, mode: str) -> None:
    app = make_app(url)

    @app.task(name=TASK)
    async def hang(**inputs: Any) -> dict[str, Any]:
        if mode == "hang":
            await asyncio.sleep(3600)
        return {"resumed": inputs}

    asyncio.run(run_worker(app, url, settings=Settings(locale="en", scheduler=False)))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
