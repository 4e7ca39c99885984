"""The console every command prints to.

Rich draws for 80 columns when its stream is no terminal and `COLUMNS` is unset: a CI log
or a `| tee` then got the matrix's and the sim's summaries squeezed, their words cut
mid-word ("expectati/ons", "t8-nemesis-ad/min"). Piped, a command draws for 160 columns;
`COLUMNS` still decides where set, and a terminal keeps its own width."""
from __future__ import annotations

import os
import sys

from rich.console import Console

#: the width of a piped command's tables: a log has no edge to wrap at
PIPED_WIDTH = 160


class UserConsole(Console):
    """Rich's console, but a reader gone away (`| head`) raises `BrokenPipeError` for the
    command to stop as a shell tool does (exit 141, run.py): rich's own exits 1 there, which
    says an expectation failed (trial33: `analyze ... | head -1` exited 1, 0 unpiped)."""

    def on_broken_pipe(self) -> None:
        self.quiet = True  # what the command's way out prints goes nowhere
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), self.file.fileno())  # else the exit's flush fails again
        except (OSError, ValueError):  # a stream without a descriptor
            pass
        raise BrokenPipeError


def user_console(stderr: bool = False) -> Console:
    """A console on stdout (or stderr) as wide as the terminal, or `PIPED_WIDTH` when piped."""
    stream = sys.stderr if stderr else sys.stdout
    piped = not (hasattr(stream, "isatty") and stream.isatty()) and not os.environ.get("COLUMNS")
    return UserConsole(stderr=stderr, width=PIPED_WIDTH if piped else None)
