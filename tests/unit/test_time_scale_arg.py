"""`--time-scale` multiplies every protocol timeout: a run, a matrix and a lab refuse a
value that is not a finite number above 0 before anything starts (a new user's `nan` got
as far as a broker, which died on `int(nan)`)."""
from __future__ import annotations

from pathlib import Path

import pytest

import run

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("value", ["nan", "inf", "0", "-2"])
@pytest.mark.parametrize("command", [[str(ROOT / "topologies" / "quickstart.yaml"), "--dry-run"],
                                     ["matrix", str(ROOT / "topologies" / "matrix" / "example.yaml"), "--dry-run"],
                                     ["lab", "3"]])
def test_a_time_scale_that_is_not_a_finite_number_above_0_is_refused(
        command: list[str], value: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert run.main([*command, f"--time-scale={value}"]) == 2
    assert "--time-scale must be a finite number > 0" in capsys.readouterr().err


@pytest.mark.parametrize("value", ["-inf", "-nan", "-1e3"])
def test_a_negative_value_argparse_would_read_as_an_option_reaches_its_check(
        value: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Found by a tester: `--time-scale -inf` (with a space, not `=`) was argparse's bare
    "expected one argument"."""
    assert run.main([str(ROOT / "topologies" / "quickstart.yaml"), "--dry-run", "--time-scale", value]) == 2
    assert "--time-scale must be a finite number > 0" in capsys.readouterr().err
