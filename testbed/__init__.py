"""The testbed, cut along Jepsen's pieces, one owner each:

- `config/` (behind `topology.py`): the topology schema, parsed once into typed specs;
- `supervisor/`: the run's processes, the `Cluster` API, the cluster's status;
- `clients/`: the workload processes and the history they record;
- `experiment/`: one run from start to verdict;
- `analysis/`: the checker, which reads only the run directory.
The nemesis and its schedule are `faults/`.

`from testbed import Cluster` gives the step-by-step Python API (DESIGN section 9): the
supervisor's `Cluster` with `finish`, which ends and judges the run (`experiment/api.py`).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from testbed.experiment.api import Cluster

__all__ = ["Cluster"]


def __getattr__(name: str) -> Any:
    # Lazy, so `python run.py validate` does not import ZeroMQ and the node runtime.
    if name == "Cluster":
        from testbed.experiment.api import Cluster
        return Cluster
    raise AttributeError(name)
