"""The repository stands alone: its code, SQL, tests, benchmarks and docs refer to its own docs/ pages,
never to a design document or an issue tracker outside it."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: A design document, its section signs, an issue number, the shared folder outside the repository.
OUTSIDE = re.compile(r"\bDESIGN\b|§|\b[Ii]ssues? #?\d+|\.\./shared\b|/work/shared\b")


def _files() -> list[Path]:
    found = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "pyproject.toml"]
    for folder, patterns in (
        ("agentlab_sched", ("*.py", "*.sql")),
        ("tests", ("*.py",)),
        ("bench", ("*.py", "*.sh", "*.sql")),
        ("docs", ("*.md",)),
        (".ci", ("*",)),
    ):
        for pattern in patterns:
            found.extend(p for p in (ROOT / folder).rglob(pattern) if p.is_file())
    return [p for p in found if p.exists() and p != Path(__file__).resolve()]


def test_no_reference_to_a_document_outside_the_repository() -> None:
    hits = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for path in _files()
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if OUTSIDE.search(line)
    ]
    assert hits == [], "refer to a docs/ page instead:\n" + "\n".join(hits)
