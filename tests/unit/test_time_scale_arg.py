"""`--time-scale` multiplies every protocol timeout: a run, a matrix and a lab refuse a
value that is not a finite number above 0 before anything starts (a new user's `nan` got
as far as a broker, which died on `int(nan)`)."""
from __future__ import annotations

from pathlib import Path

import pytest

import run
from testbed.config.cli_values import MIN_TIME_SCALE, time_scale_problem

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("value", ["nan", "inf", "0", "-2"])
@pytest.mark.parametrize("command", [[str(ROOT / "topologies" / "quickstart.yaml"), "--dry-run"],
                                     ["matrix", str(ROOT / "topologies" / "matrix" / "example.yaml"), "--dry-run"],
                                     ["lab", "3"]])
def test_a_time_scale_that_is_not_a_finite_number_above_0_is_refused(
        command: list[str], value: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert run.main([*command, f"--time-scale={value}"]) == 2
    assert "--time-scale must be a number from 0.01 to 1000" in capsys.readouterr().err


@pytest.mark.parametrize("value", ["-inf", "-nan", "-1e3"])
def test_a_negative_value_argparse_would_read_as_an_option_reaches_its_check(
        value: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Found by a tester: `--time-scale -inf` (with a space, not `=`) was argparse's bare
    "expected one argument"."""
    assert run.main([str(ROOT / "topologies" / "quickstart.yaml"), "--dry-run", "--time-scale", value]) == 2
    assert "--time-scale must be a number from 0.01 to 1000" in capsys.readouterr().err


@pytest.mark.parametrize("command", [[str(ROOT / "topologies" / "quickstart.yaml"), "--dry-run"],
                                     ["matrix", str(ROOT / "topologies" / "matrix" / "example.yaml"), "--dry-run"],
                                     ["lab", "3"]])
def test_a_time_scale_below_its_least_is_refused(command: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """Found by an audit: `--time-scale 1e-300` was accepted (every timeout a rounding error)."""
    assert run.main([*command, "--time-scale", "1e-300"]) == 2
    said = capsys.readouterr().err
    assert "--time-scale must be a number from 0.01 to 1000 (at 0.01 a 100 ms timeout is 1 ms), got 1e-300" in said


def test_the_least_time_scale_is_the_one_the_readme_shows() -> None:
    """The README's example runs a 5 s workload in 50 ms at 0.01."""
    assert time_scale_problem(MIN_TIME_SCALE) is None and MIN_TIME_SCALE == 0.01
    assert "at F = 0.01 a 5 s workload lasts 50 ms" in (ROOT / "README.md").read_text(encoding="utf-8")
