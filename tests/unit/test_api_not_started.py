"""The Python API (DESIGN section 9) before `start()`: every call says the cluster has not
started, as README promises a ClusterError for a bad call (a tester met a bare AssertionError,
and under `python -O` an AttributeError)."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from testbed import Cluster
from testbed.supervisor.cluster import ClusterError


def test_calls_on_a_cluster_never_started_raise_cluster_error(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump({"name": "t", "cluster": {"brokers": {"count": 3}},
                                    "topics": [{"name": "orders", "partitions": 1}]}))
    c = Cluster.from_yaml(path, run_dir=tmp_path / "run")
    for call in (lambda: c.produce("orders", 0, ["v"]), c.status, lambda: c.fault("kill", target="broker:1"),
                 c.finish, c.stop_all):  # stop_all: a bare KeyError 'broker-1' (trial38)
        with pytest.raises(ClusterError, match="has not started"):
            call()
    assert not (tmp_path / "run").exists()
