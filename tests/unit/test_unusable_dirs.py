"""A runs or summary directory that cannot be made (a file on its path) is one line and exit
2 before anything starts, from every command that writes one (a new user got a
NotADirectoryError traceback and exit 1, which means "an expectation did not hold")."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import run
from tests.unit.analysis_fixtures import RunBuilder

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("command", [[str(ROOT / "topologies" / "quickstart.yaml")],
                                     ["sim", str(ROOT / "topologies" / "quickstart.yaml")],
                                     ["matrix", str(ROOT / "topologies" / "matrix" / "example.yaml")],
                                     ["lab", "3"]])
def test_a_runs_dir_under_a_file_is_refused_before_anything_starts(
        tmp_path: Path, command: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "afile").write_text("")
    assert run.main([*command, "--runs-dir", str(tmp_path / "afile" / "runs")]) == 2
    captured = capsys.readouterr()
    assert f"--runs-dir {tmp_path / 'afile' / 'runs'}: cannot be made" in captured.out + captured.err


def test_a_summary_dir_that_is_a_file_is_refused(tmp_path: Path) -> None:
    """(A command of its own: `analyze` stops the process's Spark session at its end, which
    this test process may share with the pipeline's tests.)"""
    RunBuilder(tmp_path / "tree", "one").write()
    RunBuilder(tmp_path / "tree", "two").write()
    (tmp_path / "afile").write_text("")
    done = subprocess.run([sys.executable, "run.py", "analyze", str(tmp_path / "tree"), "--summary-dir",
                           str(tmp_path / "afile")], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"--summary-dir {tmp_path / 'afile'}: a file, not a directory" in " ".join(done.stdout.split())
    assert not (tmp_path / "tree" / "one" / "results.json").exists(), "nothing was judged"


def test_a_run_directory_that_cannot_take_a_verdict_is_refused_before_anything_is_written(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by a tester: a read-only run directory, or an immutable results.json, was an
    internal error raised after the run's tables had been rewritten. (The permission is
    played by `os.access`, since root may write where the test could forbid it.)"""
    from testbed.analysis import pipeline, run_dirs
    d = RunBuilder(tmp_path / "tree", "one").write()
    (d / "results.json").write_text('{"ok": true}')
    real = run_dirs.os.access
    monkeypatch.setattr(run_dirs.os, "access", lambda path, mode: Path(path).name != "results.json"
                        and real(path, mode))
    with pytest.raises(pipeline.IngestError, match=r"one/results\.json: not writable"):
        pipeline.analyze_runs([tmp_path / "tree"])
    assert (d / "results.json").read_text() == '{"ok": true}' and not (d / "analysis").exists()


def test_a_second_judgment_of_one_warehouse_waits_for_the_first(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by a tester: two `analyze` of one run at once replaced each other's tables, and
    the first failed reading files the second had removed."""
    import fcntl
    import threading

    from testbed.analysis import pipeline
    warehouse = tmp_path / "run" / "analysis" / "tables"
    entered, blocked = threading.Event(), threading.Event()
    real = fcntl.flock

    def flock(fd: object, op: int) -> None:
        if op == fcntl.LOCK_EX:  # the wait itself (a try is LOCK_EX | LOCK_NB)
            blocked.set()
        real(fd, op)
    monkeypatch.setattr(pipeline.fcntl, "flock", flock)

    def second() -> None:
        with pipeline._sole_judgment(warehouse):
            entered.set()
    with pipeline._sole_judgment(warehouse):
        waiting = threading.Thread(target=second)
        waiting.start()
        assert blocked.wait(10), "the second judgment never waited for the lock"
        assert not entered.is_set(), "two judgments filled one warehouse at once"
    waiting.join(5)
    assert entered.is_set()
    assert f"another judgment is filling {warehouse}; waiting for it to end" in capsys.readouterr().err
    lock = os.open(tmp_path / "run" / "analysis", os.O_RDONLY)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # released at the end of both
    finally:
        os.close(lock)
    assert not [p.name for p in (tmp_path / "run" / "analysis").iterdir() if p.name.startswith(".")], \
        "a lock file was left beside the warehouse"
