"""Scratch directories named for their owner (`testbed/owned_dirs.py`): what a SIGKILLed
process leaves (the rehearsal's synthetic run, a sim worker's data) is removed by the next
process that makes one, and nothing of a live owner's or of another prefix is touched."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from testbed.common import owned_dirs


def _dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    return int(done.stdout)


def test_the_next_directory_made_reaps_those_of_dead_owners_only(tmp_path: Path) -> None:
    orphan = tmp_path / f"isrlab-rehearsal-{_dead_pid()}-abc"
    (orphan / "synthetic-run").mkdir(parents=True)
    live = tmp_path / f"isrlab-rehearsal-{os.getppid()}-abc"
    other = tmp_path / f"isrlab-warm-up-{_dead_pid()}-abc"
    live.mkdir()
    other.mkdir()
    made = owned_dirs.make("isrlab-rehearsal-", tmp_path)
    assert not orphan.exists() and live.is_dir() and other.is_dir()
    assert made.is_dir() and made.name.startswith(f"isrlab-rehearsal-{os.getpid()}-")


def test_a_scratch_directory_is_gone_after_its_block(tmp_path: Path) -> None:
    with owned_dirs.scratch("isrlab-test-", tmp_path) as d:
        (d / "file").write_bytes(b"x")
    assert not d.exists() and list(tmp_path.iterdir()) == []
