"""The analysis JVM dies with the process that started it, whichever thread asked for it
(`testbed.analysis.jvm_parent`). A child command stands in for the JVM: what is tested is
how PySpark's `Popen` forks it, not Java."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import psutil
import pyspark.java_gateway

import testbed.analysis.session  # noqa: F401 - its import installs the fork
from testbed.analysis import jvm_parent

# A process that forks `sleep` as PySpark forks its JVM, from a thread that then ends (as the
# run's warm-up thread does once it has rehearsed) and that runs at nice 7, prints the
# child's pid and waits to be killed.
_STARTER = textwrap.dedent("""
    import os, sys, threading, pyspark.java_gateway
    import testbed.analysis.session
    pids = []
    def start():
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 7)
        pids.append(pyspark.java_gateway.Popen(["sleep", "120"], preexec_fn=lambda: None).pid)
    t = threading.Thread(target=start)
    t.start()
    t.join()
    print(pids[0], flush=True)
    sys.stdin.read()
""")


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _wait_gone(pid: int, deadline_s: float) -> bool:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if _gone(pid):
            return True
        time.sleep(0.02)
    return _gone(pid)


def test_importing_the_session_makes_pyspark_fork_its_jvm_through_the_parent_thread() -> None:
    assert pyspark.java_gateway.Popen is jvm_parent._popen


def test_the_jvm_outlives_the_thread_that_started_it_and_dies_with_its_process() -> None:
    starter = subprocess.Popen([sys.executable, "-c", _STARTER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               text=True)
    child = 0
    try:
        assert starter.stdout is not None
        child = int(starter.stdout.readline())
        assert not _gone(child), "the child died with the thread that asked for it"
        assert psutil.Process(child).nice() == 7, "the child did not take its caller's nice value"
        starter.kill()  # SIGKILL: nothing of the starter's own runs
        starter.wait()
        # `sleep 120` ends only on a signal: the kernel's SIGTERM at the starter's death
        assert _wait_gone(child, 30.0), "the child outlived the process that started it"
    finally:
        starter.kill()
        starter.wait()
        if child and not _gone(child):
            os.kill(child, signal.SIGKILL)


def test_a_forked_child_forks_its_own_jvm() -> None:
    """A process forked after the parent thread started has no such thread: its first fork
    starts one (it waited for ever on a queue nobody served)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: fork `true` as PySpark would, and say whether it ran
        try:
            code = pyspark.java_gateway.Popen(["true"]).wait(timeout=30)
            os.write(write, b"ok" if code == 0 else b"failed")
        finally:
            os._exit(0)
    os.close(write)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and os.waitpid(pid, os.WNOHANG) == (0, 0):
        time.sleep(0.05)
    try:  # still waiting: killed, so that its end of the pipe closes
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass
    with os.fdopen(read, "rb") as answer:
        assert answer.read() == b"ok"


def test_pysparks_connection_file_directory_is_named_for_this_process() -> None:
    """trial29: a supervisor SIGKILLed while its JVM started left PySpark's `tempfile.mkdtemp()`
    directory, empty, in /tmp (13 of 13 kills in a run's first second). It is one this process
    owns now, which its watchman, or the next process to make one, removes once it is gone."""
    from pathlib import Path

    from testbed.common import owned_dirs
    made = Path(pyspark.java_gateway.tempfile.mkdtemp())
    try:
        assert made.name.startswith(f"{owned_dirs.GATEWAY_PREFIX}{os.getpid()}-") and made.is_dir()
        fd, name = pyspark.java_gateway.tempfile.mkstemp(dir=str(made))  # its other use, as PySpark makes it
        os.close(fd)
        assert Path(name).parent == made
    finally:
        subprocess.run(["rm", "-rf", str(made)], check=False)
