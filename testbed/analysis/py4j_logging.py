"""py4j's reports of a JVM that went away, kept off the user's terminal.

py4j reports a command its JVM did not answer with `logging.exception` on the root logger,
and a root logger without handlers then configures itself to print that traceback on
standard error: a Ctrl-C while the analysis JVM was starting (the start's command cut off by
the JVM's kill) ended a run with two py4j tracebacks above its one line. The caller learns
of the failure from the exception py4j raises next, and says it in its own words; the JVM's
own output is in the run's `spark.log`. Only records py4j logs on the root logger are
dropped: isrlab's own loggers, and anything else, print as before.
"""
from __future__ import annotations

import logging
import sys
from pathlib import Path

import py4j

_PY4J = str(Path(py4j.__file__).parent)


class _LastResort(logging.Handler):
    """What Python prints for a logging application that configured nothing (its
    `logging.lastResort`: a warning or worse that no handler took, the message alone, to the
    current standard error), as a handler of the root logger, so that no `logging.exception`
    configures one."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)

    def emit(self, record: logging.LogRecord) -> None:
        if _handled_below(record):
            return
        try:
            sys.stderr.write(self.format(record) + "\n")
        except Exception:  # noqa: BLE001 - logging's own rule: a failed emit is reported, never raised
            self.handleError(record)


def _handled_below(record: logging.LogRecord) -> bool:
    """A handler of the record's logger or of one between it and the root took the record
    (as `Logger.callHandlers` counts them): Python's last resort would not print it."""
    logger = logging.getLogger(record.name) if record.name != "root" else None
    while isinstance(logger, logging.Logger) and logger is not logging.getLogger():
        if any(record.levelno >= h.level for h in logger.handlers):
            return True
        logger = logger.parent if logger.propagate else None
    return False


def _not_py4j(record: logging.LogRecord) -> bool:
    return not record.pathname.startswith(_PY4J)


def quiet_py4j() -> None:
    """Drop the records py4j logs on the root logger (once per process); where the
    application configured no logging, keep Python's last-resort output for the rest."""
    root = logging.getLogger()
    if _not_py4j in root.filters:
        return
    if not root.handlers:
        root.addHandler(_LastResort())
    root.addFilter(_not_py4j)
