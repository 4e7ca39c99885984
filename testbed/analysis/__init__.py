"""The analysis pipeline (DESIGN section 8): one PySpark job that ingests run directories,
runs every check, attributes every loss and judges each run against its expectations.

Its names are imported when first asked for (PEP 562): the pipeline's imports (PySpark's
Connect client, pandas, the report's plotting) take a second or more, and a command starts
its JVM from `session` before it needs them (`analysis.cli`, `experiment.warm_up`)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from testbed.analysis.pipeline import analyze_runs
    from testbed.analysis.terminal import print_verdict
    from testbed.analysis.verdict import RunVerdict

__all__ = ["RunVerdict", "analyze_runs", "print_verdict"]
_HOMES = {"analyze_runs": "pipeline", "print_verdict": "terminal", "RunVerdict": "verdict"}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib
    return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
