"""A defect of isrlab's own stops a command with its traceback and exit 2 (nothing judged),
never exit 1, which says that an expectation failed (README, "Exit codes"): a crash while
recording a fault once ended a run with 1."""
from __future__ import annotations

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
