"""A seed's data directories in memory (`testbed/sim/scratch.py`): the run directory's `data`
leads there while the seed runs, `--keep` brings the files home, nothing stays behind
otherwise, and what a killed worker left is reaped."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from testbed.sim import scratch

pytestmark = pytest.mark.skipif(not scratch.memory_has_room(), reason="no tmpfs with room on this host")


def _scratch_dirs() -> set[Path]:
    return set(scratch.MEMORY.glob("isrlab-sim-*"))


@pytest.mark.parametrize("keep", [False, True])
def test_data_lives_in_memory_and_is_kept_or_removed_at_the_end(tmp_path: Path, keep: bool) -> None:
    before = _scratch_dirs()
    data = tmp_path / "run" / "data"
    scratch.place_data(data)
    assert data.is_symlink() and data.resolve().parent == scratch.MEMORY.resolve()
    (data / "broker-1").mkdir()
    (data / "broker-1" / "segment.log").write_bytes(b"records")
    scratch.release_data(data, keep)
    assert _scratch_dirs() == before
    assert not data.is_symlink()
    if keep:
        assert (data / "broker-1" / "segment.log").read_bytes() == b"records"
    else:
        assert not data.exists()


def test_a_killed_workers_scratch_is_reaped(tmp_path: Path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    orphan = scratch.MEMORY / f"isrlab-sim-{int(dead.stdout)}-test"
    orphan.mkdir()
    (orphan / "file").write_bytes(b"x")
    mine = tmp_path / "data"
    scratch.place_data(mine)
    scratch.reap_orphans()
    assert not orphan.exists()
    assert mine.resolve().exists(), "a live worker's scratch was reaped"
    scratch.release_data(mine, keep=False)
