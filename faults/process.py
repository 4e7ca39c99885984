"""Process faults: the signals behind `kill`, `pause` and `resume`.

Each function sends one signal to one pid and returns the effect for `faults.jsonl`:
{"pid", "signal", "delivered"}. A process that is already gone is not an error here
(`delivered: false`): a fault can race a node's own exit, and the record must say what
happened rather than abort the run. Waiting for the process (waitpid, the `stopped`
bookkeeping) is the supervisor's, which owns the child.
"""
from __future__ import annotations

import os
import signal


def sigkill(pid: int) -> dict:
    """SIGKILL: the process dies without flushing anything (the page cache survives)."""
    return _send(pid, signal.SIGKILL)


def sigstop(pid: int) -> dict:
    """SIGSTOP: the process freezes; its peers see silence, not a closed socket, and a pause
    longer than `session_timeout` gets the broker fenced."""
    return _send(pid, signal.SIGSTOP)


def sigcont(pid: int) -> dict:
    """SIGCONT: a paused process runs on, unaware that time passed."""
    return _send(pid, signal.SIGCONT)


def _send(pid: int, sig: signal.Signals) -> dict:
    if pid <= 0:
        raise ValueError(f"refusing to signal pid {pid} (a process group or every process)")
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        return {"pid": pid, "signal": sig.name, "delivered": False}
    return {"pid": pid, "signal": sig.name, "delivered": True}
