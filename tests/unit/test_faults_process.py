"""The signal side of process faults, on a real child process (synchronised by waitpid)."""
from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from faults.process import sigcont, sigkill, sigstop


@pytest.fixture
def child() -> Iterator[subprocess.Popen]:
    """A process that blocks reading stdin until told otherwise."""
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdin.close()


def test_sigkill_kills(child):
    assert sigkill(child.pid) == {"pid": child.pid, "signal": "SIGKILL", "delivered": True}
    assert child.wait() == -9


def test_sigstop_then_sigcont(child):
    assert sigstop(child.pid) == {"pid": child.pid, "signal": "SIGSTOP", "delivered": True}
    _, status = os.waitpid(child.pid, os.WUNTRACED)
    assert os.WIFSTOPPED(status)
    assert sigcont(child.pid) == {"pid": child.pid, "signal": "SIGCONT", "delivered": True}
    _, status = os.waitpid(child.pid, os.WCONTINUED)
    assert os.WIFCONTINUED(status)
    child.stdin.close()
    assert child.wait() == 0  # it ran on and finished normally


def test_a_process_already_gone_is_recorded_not_raised(child):
    child.kill()
    child.wait()
    for send in (sigkill, sigstop, sigcont):
        assert send(child.pid)["delivered"] is False


@pytest.mark.parametrize("pid", [0, -1, -1234])
def test_refuses_pids_that_mean_a_group_or_everyone(pid):
    with pytest.raises(ValueError, match="refusing"):
        sigkill(pid)
