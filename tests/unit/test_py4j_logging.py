"""py4j's reports of a JVM gone mid-command stay off the terminal (a Ctrl-C while the
analysis JVM started printed two py4j tracebacks above the run's one line), and isrlab's own
warnings print as before."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import py4j.java_gateway

SCRIPT = """
import logging, sys
if sys.argv[1] == "quiet":
    from testbed.analysis.py4j_logging import quiet_py4j
    quiet_py4j()
    quiet_py4j()
# what py4j does when its JVM is killed mid-command, from py4j's own file
exec(compile('''
try:
    raise ConnectionResetError(104, "Connection reset by peer")
except ConnectionResetError:
    logging.exception("Exception while sending command.")
''', sys.argv[2], "exec"))
logging.getLogger("isrlab.faults").warning("tmpfs: not root, a plain directory instead")
logging.getLogger("isrlab.faults").info("not shown")
own = logging.getLogger("lib.with.handler")  # a library's logger with a handler of its own
own.addHandler(logging.StreamHandler(sys.stdout))
own.warning("once, by its own handler")
"""


def _stderr(mode: str) -> str:
    done = subprocess.run([sys.executable, "-c", SCRIPT, mode, py4j.java_gateway.__file__],
                          cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stderr


def test_py4j_reports_on_the_root_logger_are_dropped_and_isrlabs_warnings_print_as_before() -> None:
    """As Python's last resort prints them: the message alone, a record another handler took
    not again."""
    assert _stderr("quiet") == "tmpfs: not root, a plain directory instead\n"


def test_without_it_python_prints_py4j_traceback() -> None:
    """The case above is not vacuous: left alone, the root logger configures itself and prints."""
    err = _stderr("loud")
    assert "ERROR:root:Exception while sending command." in err and "Traceback" in err, err
