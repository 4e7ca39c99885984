"""The JVM PySpark starts for this process gets SIGTERM from the kernel when this process dies.

Spark's gateway exits at the end of its standard input, but only once it has started (5-15 s
on a loaded machine) and then after its shutdown: a supervisor SIGKILLed in a run's first
seconds left the JVM of its warm-up running for seconds more, outside every run's registry
(it starts before the cluster). So the JVM asks for PR_SET_PDEATHSIG as it is forked:
SIGTERM, on which it runs its shutdown hooks (its scratch directory is removed) and exits
in about half a second.

The kernel sends that signal when the *thread* that forked the JVM ends, not the process,
and the warm-up's thread ends once it has rehearsed. So every JVM is forked by one daemon
thread of this process that lives until the process does (`_Parent`). The thread's nice
value is not the caller's: the child takes the caller's (`session.warm_up` starts the JVM
at nice 10 while a cluster runs), and the thread is started with the importing thread's
(`install`), so that it does not take a warm-up thread's.

PySpark forks the JVM in `pyspark.java_gateway.launch_gateway` with the module's `Popen`;
`install` puts `_popen` in its place, which forks in that thread with PySpark's own
`preexec_fn` and then these requests. Being where PySpark's JVM is forked, `_popen` also
runs the JVM's recorded command instead of spark-submit's when there is one
(`jvm_command`).
"""
from __future__ import annotations

import ctypes
import os
import queue
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future

import pyspark.java_gateway

from testbed.analysis import jvm_command
from testbed.common import owned_dirs

_PR_SET_PDEATHSIG = 1
_prctl: Callable[..., int] | None
try:  # resolved before any fork: the child only calls it
    _prctl = ctypes.CDLL("libc.so.6", use_errno=True).prctl
except (OSError, AttributeError):  # not Linux's libc: the gateway's end of input stays the only way
    _prctl = None


class _Parent:
    """One daemon thread that runs the forks asked of it, one at a time."""

    def __init__(self) -> None:
        self.forget()

    def forget(self) -> None:
        """No thread yet; also in a forked child, which the thread was not copied to (its
        next fork starts one)."""
        self._work: queue.SimpleQueue[tuple[Callable[[], subprocess.Popen], Future]] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def start(self) -> None:
        """Start the thread, if not yet started."""
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._serve, name="isrlab-jvm-parent", daemon=True)
                self._thread.start()

    def run(self, fork: Callable[[], subprocess.Popen]) -> subprocess.Popen:
        """`fork()`'s result, called in the parent thread."""
        self.start()
        done: Future = Future()
        self._work.put((fork, done))
        return done.result()

    def _serve(self) -> None:
        while True:
            fork, done = self._work.get()
            try:
                done.set_result(fork())
            except BaseException as e:  # noqa: BLE001 - handed to the caller, which raises it
                done.set_exception(e)


_parent = _Parent()
os.register_at_fork(after_in_child=_parent.forget)


def _popen(command: list[str], **kwargs) -> subprocess.Popen:
    """`subprocess.Popen(command, **kwargs)` forked by the parent thread, the child asking for
    SIGTERM at this process's death and taking the calling thread's nice value."""
    nice = os.getpriority(os.PRIO_PROCESS, 0)  # the calling thread's (Linux)
    me = os.getpid()
    theirs = kwargs.pop("preexec_fn", None)

    def in_child() -> None:
        if theirs is not None:
            theirs()
        if _prctl is not None:
            _prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != me:  # this process died before the request took effect
            os.kill(os.getpid(), signal.SIGTERM)
        try:
            os.setpriority(os.PRIO_PROCESS, 0, nice)
        except OSError:
            pass  # a priority above the parent thread's, without the right to raise one

    # spark-submit's command, or the JVM's own as it was recorded for the same (`jvm_command`)
    command, kwargs["env"] = jvm_command.swap(command, kwargs.get("env"))
    # PySpark forks its JVM with a `preexec_fn` of its own already: this one adds two system
    # calls and a resolved C function to it, nothing that takes a lock another thread may hold
    proc = _parent.run(lambda: subprocess.Popen(command, preexec_fn=in_child, **kwargs))  # noqa: PLW1509
    jvm_command.started(proc)
    return proc


class _QuickPoll:
    """What `pyspark.java_gateway` knows as `time`: it looks for the JVM's connection file
    every 0.1 s (`time.sleep(0.1)`, its only use), 50 ms of every JVM start on average;
    every 10 ms here."""

    @staticmethod
    def sleep(seconds: float) -> None:
        time.sleep(min(seconds, 0.01))


class _OwnedTemp:
    """What `pyspark.java_gateway` knows as `tempfile`: the directory it makes for the JVM's
    connection file, and removes once it has read it, is named for this process
    (`owned_dirs`), so a supervisor SIGKILLed while its JVM starts leaves no empty
    `/tmp/tmpXXXXXXXX` behind (trial29: 13 of 13 kills in a run's first second): its
    watchman, or the next process to make one, removes it."""

    mkstemp = staticmethod(tempfile.mkstemp)

    @staticmethod
    def mkdtemp() -> str:
        return str(owned_dirs.make(owned_dirs.GATEWAY_PREFIX))


def install() -> None:
    """Have PySpark fork its JVM with `_popen`, look for its answer sooner (`_QuickPoll`) in
    a directory this process owns (`_OwnedTemp`), and start the parent thread (idempotent)."""
    pyspark.java_gateway.Popen = _popen
    pyspark.java_gateway.time = _QuickPoll
    pyspark.java_gateway.tempfile = _OwnedTemp
    _parent.start()
