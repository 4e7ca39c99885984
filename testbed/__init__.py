"""The testbed, cut along Jepsen's pieces, one owner each:

- `config/` (behind `topology.py`): the topology schema, parsed once into typed specs;
- `supervisor/`: the run's processes, the `Cluster` API, the cluster's status;
- `clients/`: the workload processes and the history they record;
- `experiment/`: one run from start to verdict;
- `analysis/`: the checker, which reads only the run directory.
The nemesis and its schedule are `faults/`.

`from testbed import Cluster` gives the step-by-step Python API (DESIGN section 9): the
supervisor's `Cluster` with `finish`, which ends and judges the run (`experiment/api.py`).

This module imports none of the packages below it, not even for type checking: Python runs
it before any of them (importing `testbed.config` imports `testbed` first), so an import
here would make every package of the testbed import, through its parent, what `Cluster`
leads to (the experiment, the analysis, the supervisor), and the layers would point up.
`Cluster` is looked up by name when it is first asked for, which also keeps `python run.py
validate` from importing ZeroMQ and the node runtime.
"""
from __future__ import annotations

import importlib
from typing import Any

__all__ = ["Cluster"]
#: where each name of `__all__` is defined
_API = {"Cluster": "testbed.experiment.api"}


def __getattr__(name: str) -> Any:
    if name in _API:
        return getattr(importlib.import_module(_API[name]), name)
    raise AttributeError(f"module 'testbed' has no attribute {name!r}")
