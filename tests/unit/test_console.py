"""The commands' console when piped (a CI log, `| tee`): rich drew for 80 columns, and the
matrix's and the sim's summaries came out with their words cut ("expectati/ons")."""
from __future__ import annotations

import io
from pathlib import Path

import pytest

from testbed.common.console import PIPED_WIDTH, user_console


def test_a_piped_command_draws_wide_unless_columns_says_otherwise(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdout", io.StringIO())
    monkeypatch.delenv("COLUMNS", raising=False)
    assert user_console().width == PIPED_WIDTH
    monkeypatch.setenv("COLUMNS", "100")
    assert user_console().width == 100


def test_a_piped_summary_keeps_its_words_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    from testbed.sim.cli import print_summary  # the table the tester saw cut
    out = io.StringIO()
    monkeypatch.setattr("sys.stdout", out)
    monkeypatch.delenv("COLUMNS", raising=False)
    print_summary(user_console(), [], {"t8-nemesis-admin": Path("t8-nemesis-admin.yaml")}, ["t8-nemesis-admin"])
    text = out.getvalue()
    assert "t8-nemesis-admin" in text and "expectations" in text, text
