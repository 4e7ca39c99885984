"""`stop_spark` while another thread holds the session's lock to start the JVM (`run.py`'s
warm-up, when Ctrl-C comes early): the start is killed each time the wait for the lock runs
out, not once. A start that the first kill missed (its thread not yet at the JVM's launch)
held the lock to its end, at nice 10 on a loaded machine, and the command did not exit."""
from __future__ import annotations

import threading

import pytest

from testbed.analysis import session


class _NoJvm:
    """What `stop_spark` reads of PySpark's SparkContext, with no JVM: the test worker's own
    session (if it has one) is not touched."""
    _gateway = None
    _jvm = None


def test_a_start_the_first_kill_missed_is_killed_again_and_the_stop_returns(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in (("_session", None), ("_driver", None), ("_master", None), ("_url", None),
                        ("_scratch", None), ("_others", []), ("_archive", None), ("SparkContext", _NoJvm),
                        ("_lock", threading.Lock()), ("START_WAIT", 0.05)):
        monkeypatch.setattr(session, name, value)
    kills: list[int] = []
    start_failed = threading.Event()

    def kill() -> None:  # the first finds nothing to kill; the second ends the start
        kills.append(1)
        if len(kills) == 2:
            start_failed.set()
    monkeypatch.setattr(session, "_kill_starting_jvm", kill)
    holding = threading.Event()

    def starting() -> None:
        with session._lock:
            holding.set()
            start_failed.wait(30)
    starter = threading.Thread(target=starting, daemon=True)
    starter.start()
    assert holding.wait(10)
    session.stop_spark()
    starter.join(10)
    assert len(kills) == 2 and not starter.is_alive()
