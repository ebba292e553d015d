"""Markers by what a test needs, given at collection (a plugin of tests/conftest.py), so no file keeps a list:

- ``db``: it uses a PostgreSQL server (a fixture that depends on ``pg_server``, or a cluster server);
- ``worker``: it starts a worker (in this process or as a subprocess): every test in tests/worker/, and
  any test whose body calls something that does (``worker(...)``, ``run_worker``, a ``"worker"`` command
  line, or a function of its module that does one of these);
- ``pure``: neither: no server, no worker (it may still use Procrastinate's in-memory connector);
- ``procrastinate``: its module uses Procrastinate's code (imports it, a worker module, the demo app or
  an app of tests/support): what the run on the lowest Procrastinate allowed selects, with ``worker``, and
  ``db`` when that release's SQL differs from the installed one's (.ci/floor);
- ``slow``: the few that take seconds of wall time by design (``SLOW``), to leave out with ``-m "not slow"``.

Run a kind with ``pytest -m pure`` (seconds), ``-m "db and not worker"``, ``-m "not slow"``.
"""

from __future__ import annotations

import ast
import functools
import inspect
import re
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]

#: Fixtures that are a PostgreSQL server (and any fixture named ``*_server``, such as a pg_cron server);
#: every database fixture depends on one of them.
DB_FIXTURES = frozenset({"pg_server", "pg15", "citus"})
#: Folders whose every test needs a server or a worker whatever its fixtures say.
DB_FOLDERS = frozenset({"cluster"})
WORKER_FOLDERS = frozenset({"worker"})
#: Calls that start a worker: the in-process helper, the process entry points, a supervisor.
WORKER_CALLS = frozenset(
    {"worker", "run_worker", "run_worker_async", "Supervisor", "BatchWorker", "stop_workers", "hang_worker"}
)
#: Tests that wait seconds of wall time by design (real-time storms, kills, outages, a long model run),
#: as files or node ids relative to tests/.
SLOW = frozenset(
    {
        "worker/test_multiprocess.py",
        "worker/test_outages.py",
        "worker/test_long_outage.py",
        "worker/test_worker_pool_open.py",
        "database/test_sync_migrate_locks.py",
        "runs/test_run_model.py",
        "web/test_web_browser.py::test_a_run_suspended_by_killing_its_worker_is_resumed_on_screen_and_goes_on",
        "cluster/test_citus.py::test_once_only_on_the_distributed_schema_through_kill_9",
    }
)

#: What in a module's source means it runs Procrastinate's code.
PROCRASTINATE = re.compile(
    r"^\s*(from|import) procrastinate\b|\bagentlab_sched\.(worker|demo)\b|"
    r"\btests\.support\.(workers|code_app|periodic_app|hang_worker)\b",
    re.M,
)


def _calls(node: ast.AST) -> set[str]:
    """Names called under ``node``, and the string constants it passes (a command line's words)."""
    found: set[str] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call):
            func = sub.func
            if isinstance(func, ast.Name):
                found.add(func.id)
            elif isinstance(func, ast.Attribute):
                found.add(func.attr)
        elif isinstance(sub, ast.Constant) and sub.value == "worker":
            found.add("worker")
        elif isinstance(sub, ast.Name) and sub.id in {"WORKER", "WORKER_SCRIPT"}:
            found.add("worker")
    return found


@functools.cache
def _uses_procrastinate(path: Path) -> bool:
    return bool(PROCRASTINATE.search(path.read_text(encoding="utf-8")))


@functools.cache
def _worker_functions(path: Path) -> dict[str, bool]:
    """For each function of the module at ``path``: whether it starts a worker, directly or through
    another function of the module."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    functions = {
        node.name: _calls(node) for node in ast.walk(tree) if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    }
    starts = {name for name, calls in functions.items() if calls & WORKER_CALLS}
    while True:
        more = {name for name, calls in functions.items() if calls & starts} - starts
        if not more:
            return {name: name in starts for name in functions}
        starts |= more


def kinds(item: pytest.Item) -> set[str]:
    """The markers ``item`` gets (besides those written on it)."""
    path = Path(str(item.path)).resolve()
    try:
        relative = path.relative_to(TESTS)
    except ValueError:
        return set()
    found: set[str] = set()
    fixtures = set(getattr(item, "fixturenames", ()))
    folder = relative.parts[0] if len(relative.parts) > 1 else ""
    servers = {f for f in fixtures if f in DB_FIXTURES or f.endswith("_server")}
    if servers or folder in DB_FOLDERS:
        found.add("db")
    function = getattr(item, "function", None)
    name = getattr(function, "__name__", "")
    if folder in WORKER_FOLDERS:
        found.add("worker")
    elif function is not None and inspect.getsourcefile(function) == str(path):
        if _worker_functions(path).get(name, False):
            found.add("worker")
    if not found:
        found.add("pure")
    if path.suffix == ".py" and _uses_procrastinate(path):
        found.add("procrastinate")
    if relative.as_posix() in SLOW or f"{relative.as_posix()}::{item.name}" in SLOW:
        found.add("slow")
    return found


#: The longest tests, longest first (node ids relative to tests/, or their start; about 30 s down to 8 s on
#: two cores, then files of many seconds-long tests): each of pytest-xdist's processes starts with its share
#: of them (`_spread`), so that they run at once and the processes end together rather than one finishing a
#: long test alone at the end. A test of more than about 8 s missing here is what makes the suite end late.
LONG_FIRST = (
    "cluster/test_citus.py::",
    "worker/test_outages.py::test_every_connection",
    "worker/test_worker_pool_open.py::",
    "worker/test_long_outage.py::",
    "runs/test_run_model.py::test_the_run_state_machine",
    "database/test_sync_migrate_locks.py::test_a_held_sync_lock",
    "cluster/test_hosts.py::test_hosts_fire_once",
    "cli/test_cli_database.py::test_dev_uses",
    "cluster/test_standby.py::",
    "cluster/test_pgbouncer.py::",
    "cluster/test_cluster_fixtures.py::",  # short, but it starts the PostgreSQL 15 primary (below)
    "worker/test_multiprocess.py::",
    "worker/test_outages.py::test_workers_ride_through",
    "database/test_sync_migrate_locks.py::test_a_held_migrate_lock",
    "core/test_cron_match_sql.py::test_sql_and_python_agree_on_day_rules",
    "firing/test_backfill_refused_at_request.py::test_the_bound_never",
    "core/test_cron_match_sql.py::test_sql_and_python_agree_around_dst_transitions",
    "web/test_web_browser.py::test_admin_pauses_a_filtered_set",
    "web/test_web_browser.py::test_a_run_suspended_by_killing",
    "runs/test_run_model.py::",
    "core/test_cron_sql.py::test_python_and_sql_agree",
    "cli/test_cli_sweep.py::",
)
#: Tests of LONG_FIRST kept in one process, by the session fixture they share: each process that runs one
#: of them starts that fixture (a Citus cluster of three servers; a PostgreSQL 15 primary with a standby
#: and a PgBouncer), and spread over six processes they had started six Citus clusters.
ONE_PROCESS = {
    "cluster/test_citus.py::": "citus",
    "cluster/test_standby.py::": "pg15",
    "cluster/test_pgbouncer.py::": "pg15",
    "cluster/test_cluster_fixtures.py::": "pg15",
}


def _node(item: pytest.Item) -> str:
    try:
        return Path(str(item.path)).resolve().relative_to(TESTS).as_posix() + "::" + item.name
    except ValueError:
        return ""


def _rank(item: pytest.Item) -> int:
    node = _node(item)
    return next((i for i, start in enumerate(LONG_FIRST) if node and node.startswith(start)), len(LONG_FIRST))


def _group(item: pytest.Item) -> str | None:
    node = _node(item)
    return next((group for start, group in ONE_PROCESS.items() if node and node.startswith(start)), None)


def _spread(items: list[pytest.Item], workers: int) -> list[pytest.Item]:
    """``items`` reordered for ``workers`` processes: pytest-xdist's worksteal mode first gives each
    process a contiguous slice of the collection (the first ``len // workers`` tests to one, and so on)
    and later moves tests from the end of a busy process's slice to an idle one. So the long tests are
    dealt out in turn to the start of each slice, where they are never moved, those of a group of
    `ONE_PROCESS` together as one; the rest keep their order. Every process computes the same order from
    the same collection, as xdist requires."""
    ranked = sorted(items, key=_rank)  # stable: the order within each rank is the collection's
    long = [item for item in ranked if _rank(item) < len(LONG_FIRST)]
    rest = ranked[len(long) :]
    units: list[list[pytest.Item]] = []  # what is dealt: a long test, or a group's tests in their order
    groups: dict[str, list[pytest.Item]] = {}
    for item in long:
        group = _group(item)
        if group is None:
            units.append([item])
        elif group in groups:
            groups[group].append(item)
        else:
            groups[group] = [item]
            units.append(groups[group])
    sizes, left = [], len(items)
    for i in range(workers):  # the slices xdist cuts (scheduler/worksteal.py, check_schedule)
        sizes.append(left // (workers - i))
        left -= sizes[-1]
    # Dealt as cards in a snake (0, 1, ..., n-1, n-1, ..., 0, ...): the process that got the longest of a
    # round gets the shortest of the next, so the shares' sums stay close.
    shares: list[list[pytest.Item]] = [[] for _ in range(workers)]
    for i, unit in enumerate(units):
        turn, seat = divmod(i, workers)
        shares[seat if turn % 2 == 0 else workers - 1 - seat] += unit
    if workers < 2 or any(len(share) > size for share, size in zip(shares, sizes, strict=True)):
        return ranked
    spread: list[pytest.Item] = []
    for share, size in zip(shares, sizes, strict=True):
        spread += share + rest[: size - len(share)]
        del rest[: size - len(share)]
    return spread


#: Every collected test's node id and the names of its marks (written and given here), before ``-m`` or
#: ``-k`` leave any out: what tests/contract/test_repository.py reads of a session that collected the
#: whole suite, instead of collecting it again.
COLLECTED = pytest.StashKey[dict[str, list[str]]]()


@pytest.hookimpl(tryfirst=True)  # before pytest's own -m and -k leave tests out: they select by these marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every collected test by what it needs."""
    for item in items:
        for kind in sorted(kinds(item)):
            item.add_marker(kind)
    config.stash[COLLECTED] = {item.nodeid: sorted({m.name for m in item.iter_markers()}) for item in items}


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's, which sends the order to its controller
def pytest_collection_finish(session: pytest.Session) -> None:
    """Order what -m and -k left: the long tests spread over pytest-xdist's processes."""
    workers = getattr(session.config, "workerinput", {}).get("workercount", 1)
    session.items[:] = _spread(session.items, workers)
