"""The testbed: supervisor, topologies, workloads, history, live monitor, report.

`from testbed import Cluster` gives the step-by-step Python API (DESIGN section 9).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from testbed.cluster import Cluster

__all__ = ["Cluster"]


def __getattr__(name: str) -> Any:
    # Lazy, so `python run.py validate` does not import ZeroMQ and the node runtime.
    if name == "Cluster":
        from testbed.cluster import Cluster
        return Cluster
    raise AttributeError(name)
