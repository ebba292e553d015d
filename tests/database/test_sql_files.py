"""The files of database/sql/: applied in name order, one number each, each saying what it holds.

A file holds one concern and stays readable (about 400 lines at most).
"""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

SQL_DIR = Path(__file__).resolve().parents[2] / "agentlab_sched" / "database" / "sql"
MOST_LINES = 420


def test_no_two_files_share_a_number() -> None:
    by_number: dict[str, list[str]] = defaultdict(list)
    for path in SQL_DIR.glob("*.sql"):
        match = re.match(r"(\d\d)_[a-z0-9_]+\.sql$", path.name)
        assert match, f"{path.name}: not NN_<what>.sql"
        by_number[match.group(1)].append(path.name)
    assert {n: sorted(names) for n, names in by_number.items() if len(names) > 1} == {}


def test_each_file_opens_with_what_it_holds() -> None:
    missing = [p.name for p in sorted(SQL_DIR.glob("*.sql")) if not p.read_text(encoding="utf-8").startswith("-- ")]
    assert missing == []


def test_each_file_stays_readable() -> None:
    sizes = {p.name: len(p.read_text(encoding="utf-8").splitlines()) for p in SQL_DIR.glob("*.sql")}
    too_long = {name: n for name, n in sorted(sizes.items()) if n > MOST_LINES}
    assert too_long == {}
