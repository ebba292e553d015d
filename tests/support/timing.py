"""Wall-clock promises on a busy machine: how much slower than its best this machine ran meanwhile.

A test of a promise in seconds (a worker stops within 3 s; the first job after an outage starts within 2 s)
measures the product plus the machine: on two cores shared with three other test processes, a stop that
takes 2.7 s of the worker's own waiting can take 3.3 s of wall time. `Slowdown` samples, while a block
runs, how late a thread of its own wakes and does a fixed piece of CPU work; the ratio of the typical sample
to the fastest is how much the machine stretched time for runnable work then. ``bound(promise)`` is the promise
on an idle machine (ratio about 1) and at most twice the promise on a saturated one, so a regression to
several times the promise (the job listener's pause that doubled up to 10 s) still fails.
"""

from __future__ import annotations

import statistics
import threading
import time
from types import TracebackType

#: Seconds between two samples, and the most a bound is stretched (a factor of the promise).
EVERY = 0.02
MOST = 2.0


def _work() -> None:
    """About a millisecond of pure-Python work on an idle machine: the same work for every sample."""
    total = 0
    for i in range(20_000):
        total += i * i
    if total < 0:  # never: keeps the loop from being dropped
        raise AssertionError


def stretch(samples: list[float]) -> float:
    """The typical sample over the fastest, between 1 and `MOST` (1 with too few samples to say)."""
    if len(samples) < 5:
        return 1.0
    return max(1.0, min(MOST, statistics.median(samples) / min(samples)))


class Slowdown:
    """While the block runs, how much slower than its best a fixed piece of CPU work ran (a factor >= 1)."""

    def __init__(self) -> None:
        self._samples: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="slowdown-sampler", daemon=True)

    def _sample(self) -> None:
        while True:
            due = time.perf_counter() + EVERY
            if self._stop.wait(EVERY):
                return
            _work()  # a sample: how late it woke, and how long the same work took
            self._samples.append(time.perf_counter() - due)

    def __enter__(self) -> Slowdown:
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def factor(self) -> float:
        """How much slower than its best the machine ran (see `stretch`)."""
        return stretch(self._samples)

    def bound(self, promise: float) -> float:
        """``promise`` stretched by how busy the machine was while the block ran."""
        return promise * self.factor

    def __str__(self) -> str:
        return f"the machine ran {self.factor:.2f} times slower than its best meanwhile"
