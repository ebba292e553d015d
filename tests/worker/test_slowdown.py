"""The allowance that the worker's wall-clock promises get on a busy machine (tests/support/timing.py):
none on an idle one, at most the promise again on a saturated one."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from tests.support.timing import Slowdown, stretch


@pytest.mark.parametrize(
    "samples, factor",
    [
        ([0.001] * 10, 1.0),  # an idle machine: every sample as fast as the best
        ([0.001] * 4 + [0.0015] * 6, 1.5),  # the typical sample half as long again
        ([0.001] + [0.010] * 9, 2.0),  # ten times: the bound is at most twice the promise
        ([0.001, 0.009, 0.009, 0.009], 1.0),  # too few samples to say
    ],
)
def test_the_factor_is_the_typical_sample_over_the_best_capped_at_two(samples: list[float], factor: float) -> None:
    assert stretch(samples) == pytest.approx(factor)


def test_processes_competing_for_the_cores_stretch_a_promise_at_most_twofold() -> None:
    rivals: list[subprocess.Popen[bytes]] = []
    try:
        with Slowdown() as slowdown:
            time.sleep(0.4)  # the best samples, before the competition starts
            # Four busy processes per core. As many as there are cores is not enough to see: the kernel
            # favours a thread that has slept, and the sampler sleeps between samples (1.05 measured on two).
            busy = 4 * (os.cpu_count() or 2)
            rivals = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(busy)]
            time.sleep(1.0)
    finally:
        for rival in rivals:
            rival.kill()
            rival.wait()
    assert slowdown.factor > 1.3, slowdown.factor
    assert slowdown.bound(3.0) <= 6.0


def test_a_block_too_short_to_sample_stretches_nothing() -> None:
    with Slowdown() as slowdown:
        pass
    assert (slowdown.factor, slowdown.bound(2.0)) == (1.0, 2.0)
