"""A defect of isrlab's own stops a command with its traceback and exit 2 (nothing judged),
never exit 1, which says that an expectation failed (README, "Exit codes"): a crash while
recording a fault once ended a run with 1."""
from __future__ import annotations

import errno
import io
import subprocess
import sys
from pathlib import Path

import pytest

import run


def test_an_internal_error_exits_unjudged_with_its_traceback(monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    def boom(argv: list[str]) -> int:
        raise TypeError("Dict key must be str")
    monkeypatch.setattr(run, "cmd_validate", boom)
    assert run.main(["validate", "x.yaml"]) == run.EXIT_UNJUDGED == 2
    err = capsys.readouterr().err
    assert "TypeError: Dict key must be str" in err and "an internal error stopped the command" in err


def test_a_full_or_read_only_disk_is_the_machines_error_named_without_a_traceback(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Found by a tester: a results.json that met a full disk was reported as a defect of
    isrlab's, with its traceback."""
    def full(argv: list[str]) -> int:
        raise OSError(errno.ENOSPC, "No space left on device", "/runs/r/report.html")
    monkeypatch.setattr(run, "cmd_validate", full)
    assert run.main(["validate", "x.yaml"]) == run.EXIT_UNJUDGED
    err = capsys.readouterr().err
    assert "isrlab: No space left on device: /runs/r/report.html; the command stopped there" in err
    assert "Traceback" not in err and "internal error" not in err


def test_a_summary_that_spark_could_not_write_says_the_runs_were_judged(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Found by a tester: the JVM killed while a tree's summary was made left every run's
    results.json judged, and the command said "nothing was judged"."""
    from testbed.analysis.pipeline import SummaryError

    def summary_failed(argv: list[str]) -> int:
        raise SummaryError([], "every run was judged (each run's results.json), but the summary in /s could "
                               "not be written: SparkConnectGrpcException: gone")
    monkeypatch.setattr(run, "cmd_sim", summary_failed)
    assert run.main(["sim", "x.yaml"]) == run.EXIT_UNJUDGED
    err = capsys.readouterr().err
    assert "isrlab: every run was judged" in err and "nothing was judged" not in err and "Traceback" not in err


def test_an_output_whose_reader_went_away_stops_the_command_silently(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Found by a tester: `run.py matrix m.yaml --dry-run | head -1` ended as an internal error
    with a BrokenPipeError traceback, three times in five."""
    def piped(argv: list[str]) -> int:
        raise BrokenPipeError(32, "Broken pipe")
    redirected = []
    monkeypatch.setattr(run, "cmd_matrix", piped)
    monkeypatch.setattr(run.os, "dup2", lambda fd, to: redirected.append(to))
    assert run.main(["matrix", "m.yaml", "--dry-run"]) == run.EXIT_BROKEN_PIPE == 141
    assert redirected == [1]  # standard output: the exit's own flush of it cannot fail again
    assert capsys.readouterr().err == ""


def test_a_rich_console_whose_reader_went_away_raises_for_exit_141(tmp_path) -> None:
    """trial33: `analyze ... | head -1` exited 1 (an expectation failed), the same command
    unpiped 0: rich's console exits 1 itself on a broken pipe, before run.py's 141."""
    from testbed.common.console import UserConsole

    class Gone(io.StringIO):
        def write(self, text: str) -> int:
            raise BrokenPipeError(32, "Broken pipe")

        def fileno(self) -> int:
            raise io.UnsupportedOperation("no descriptor")
    console = UserConsole(file=Gone())
    with pytest.raises(BrokenPipeError):
        console.print("verdict")
    console.print("after")  # quiet from then on: the way out prints nothing


def test_a_missing_dependency_is_named_with_how_to_install_it(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A new user's `python3 run.py ...` outside the virtual environment was an "internal error"
    with a traceback ending in `No module named 'rich'`."""
    def missing(argv: list[str]) -> int:
        raise ModuleNotFoundError("No module named 'rich.console'", name="rich.console")
    monkeypatch.setattr(run, "cmd_validate", missing)
    assert run.main(["validate", "x.yaml"]) == run.EXIT_UNJUDGED
    err = capsys.readouterr().err
    assert "the Python package 'rich' is not installed" in err and "pip install -e ." in err
    assert "Traceback" not in err and "internal error" not in err


def test_a_missing_module_of_isrlab_itself_stays_a_defect(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def missing(argv: list[str]) -> int:
        raise ModuleNotFoundError("No module named 'testbed.gone'", name="testbed.gone")
    monkeypatch.setattr(run, "cmd_validate", missing)
    assert run.main(["validate", "x.yaml"]) == run.EXIT_UNJUDGED
    assert "an internal error stopped the command" in capsys.readouterr().err


def test_a_second_sigterm_ends_the_command_at_once_with_a_line_and_143() -> None:
    """The first SIGTERM unwinds the command as Ctrl-C does; a second, during that cleanup,
    ends it at once, and says so (trial38: it ended without a line)."""
    code = ("import os, signal, run\n"
            "signal.signal(signal.SIGTERM, run._terminate)\n"
            "try:\n"
            "    os.kill(os.getpid(), signal.SIGTERM)\n"
            "except run.Terminated:\n"
            "    os.kill(os.getpid(), signal.SIGTERM)\n"
            "    print('the cleanup went on')\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=Path(run.__file__).parent, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == run.EXIT_TERMINATED == 143
    assert r.stdout == ""
    assert r.stderr == "isrlab: terminated again (SIGTERM); stopped at once: each run's watchman stops what is left\n"
