"""The suite's order under pytest-xdist: each process starts with its share of the longest tests
(tests/support/markers.py), so that no process ends alone on a long test."""

from __future__ import annotations

from types import SimpleNamespace
from typing import cast

import pytest

from tests.support.markers import TESTS, _spread


def _item(path: str, name: str) -> pytest.Item:
    return cast(pytest.Item, SimpleNamespace(path=TESTS / path, name=name))


def _names(items: list[pytest.Item]) -> list[str]:
    return [f"{item.path.name}::{item.name}" for item in items]


MODEL = "runs/test_run_model.py"
SHARD = "test_the_run_state_machine"
SWEEP = "cli/test_cli_sweep.py"  # every test of it is in the long list, after the shards


def test_each_process_slice_starts_with_its_share_of_the_long_tests() -> None:
    short = [_item(f"x/test_{i}.py", "t") for i in range(10)]
    long = [_item(MODEL, f"{SHARD}[{i}]") for i in range(3)] + [_item(SWEEP, "s")]
    spread = _spread(short[:5] + long + short[5:], 2)
    # xdist's worksteal cuts 14 tests into slices of 7 and 7: each begins with its long tests, dealt in a
    # snake by rank (the first to one process, the second and third to the other, the fourth back to the
    # first), and the short tests keep their collection order.
    assert _names(spread) == [
        f"test_run_model.py::{SHARD}[0]",
        "test_cli_sweep.py::s",
        "test_0.py::t",
        "test_1.py::t",
        "test_2.py::t",
        "test_3.py::t",
        "test_4.py::t",
        f"test_run_model.py::{SHARD}[1]",
        f"test_run_model.py::{SHARD}[2]",
        "test_5.py::t",
        "test_6.py::t",
        "test_7.py::t",
        "test_8.py::t",
        "test_9.py::t",
    ]


def test_one_process_or_too_few_tests_run_the_long_ones_first() -> None:
    items = [_item("x/test_a.py", "t"), _item(SWEEP, "s"), _item(MODEL, f"{SHARD}[0]"), _item(MODEL, f"{SHARD}[1]")]
    expected = [
        f"test_run_model.py::{SHARD}[0]",
        f"test_run_model.py::{SHARD}[1]",
        "test_cli_sweep.py::s",
        "test_a.py::t",
    ]
    assert _names(_spread(items, 1)) == expected
    # Two processes, three long tests and nothing else: the first slice (one test) cannot hold its two,
    # so the plain ranking stands.
    assert _names(_spread(items[1:], 2)) == expected[:3]


def test_the_tests_of_a_shared_session_fixture_go_to_one_process() -> None:
    short = [_item(f"x/test_{i}.py", "t") for i in range(8)]
    citus = [_item("cluster/test_citus.py", name) for name in ("test_a", "test_b", "test_c")]
    shards = [_item(MODEL, f"{SHARD}[{i}]") for i in range(2)]
    spread = _spread([*short[:4], citus[0], shards[0], *short[4:], *citus[1:], shards[1]], 2)
    # The Citus tests are dealt as one (to the first process, they rank first), the shards after them in
    # the snake, both to the second; 13 tests are cut into slices of 6 and 7.
    assert _names(spread) == [
        "test_citus.py::test_a",
        "test_citus.py::test_b",
        "test_citus.py::test_c",
        "test_0.py::t",
        "test_1.py::t",
        "test_2.py::t",
        f"test_run_model.py::{SHARD}[0]",
        f"test_run_model.py::{SHARD}[1]",
        "test_3.py::t",
        "test_4.py::t",
        "test_5.py::t",
        "test_6.py::t",
        "test_7.py::t",
    ]
