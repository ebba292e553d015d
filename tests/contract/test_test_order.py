"""The suite's order under pytest-xdist: each process starts with its share of the longest tests
(tests/support/markers.py), so that no process ends alone on a long test."""

from __future__ import annotations

from types import SimpleNamespace
from typing import cast

import pytest

from tests.support.markers import LONG_FIRST, TESTS, _spread


def _item(path: str, name: str) -> pytest.Item:
    return cast(pytest.Item, SimpleNamespace(path=TESTS / path, name=name))


def _names(items: list[pytest.Item]) -> list[str]:
    return [f"{item.path.name}::{item.name}" for item in items]


MODEL = LONG_FIRST[0].removesuffix("::")  # a file whose every test is long
SWEEP = next(start for start in LONG_FIRST if start.startswith("cli/")).removesuffix("::")


def test_each_process_slice_starts_with_its_share_of_the_long_tests() -> None:
    short = [_item(f"x/test_{i}.py", "t") for i in range(10)]
    long = [_item(MODEL, f"m{i}") for i in range(3)] + [_item(SWEEP, "s")]
    spread = _spread(short[:5] + long + short[5:], 2)
    # xdist's worksteal cuts 14 tests into slices of 7 and 7: each begins with every other long test,
    # longest rank first, and the short tests keep their collection order.
    assert _names(spread) == [
        "test_run_model.py::m0",
        "test_run_model.py::m2",
        "test_0.py::t",
        "test_1.py::t",
        "test_2.py::t",
        "test_3.py::t",
        "test_4.py::t",
        "test_run_model.py::m1",
        "test_cli_sweep.py::s",
        "test_5.py::t",
        "test_6.py::t",
        "test_7.py::t",
        "test_8.py::t",
        "test_9.py::t",
    ]


def test_one_process_or_too_few_tests_run_the_long_ones_first() -> None:
    items = [_item("x/test_a.py", "t"), _item(SWEEP, "s"), _item(MODEL, "m0"), _item(MODEL, "m1")]
    expected = ["test_run_model.py::m0", "test_run_model.py::m1", "test_cli_sweep.py::s", "test_a.py::t"]
    assert _names(_spread(items, 1)) == expected
    # Two processes, three long tests and nothing else: the first slice (one test) cannot hold its two,
    # so the plain ranking stands.
    assert _names(_spread(items[1:], 2)) == expected[:3]
