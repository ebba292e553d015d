"""Where test servers keep their data: /dev/shm when it has room, else the system's temp directory."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from tests.support import scratch


def test_a_server_dir_is_in_memory_when_there_is_room(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(scratch, "MEMORY", tmp_path)
    monkeypatch.setattr(scratch, "MEMORY_NEEDED", 1)
    made = scratch.server_dir("agentlab-sched-scratch-")
    assert made.parent == tmp_path and made.name.startswith("agentlab-sched-scratch-")
    assert made.stat().st_mode & 0o777 == 0o700


def test_a_small_or_missing_shm_falls_back_to_the_temp_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(scratch, "MEMORY", tmp_path)
    monkeypatch.setattr(scratch, "MEMORY_NEEDED", 1 << 60)  # more than any machine has
    small = scratch.server_dir("agentlab-sched-scratch-")
    monkeypatch.setattr(scratch, "MEMORY", tmp_path / "absent")
    monkeypatch.setattr(scratch, "MEMORY_NEEDED", 1)
    missing = scratch.server_dir("agentlab-sched-scratch-")
    try:
        assert small.parent == missing.parent == Path(tempfile.gettempdir())
    finally:
        small.rmdir()
        missing.rmdir()
