"""Node names: `broker-1`, `controller-1`. Every record file, socket, link rule and fault
target names nodes this way, so the rule lives in one place."""
from __future__ import annotations


def node_name(kind: str, node_id: int) -> str:
    return f"{kind}-{node_id}"


def broker_name(broker_id: int) -> str:
    return node_name("broker", broker_id)


def node_id(name: str) -> int:
    """The id of `broker-3` or `controller-1`: 3, 1."""
    return int(name.rpartition("-")[2])
