"""The cluster section: controllers and brokers, each a count, a list of {id, rack} or {count, racks}."""
from __future__ import annotations

from typing import Any

from testbed.config import scalars
from testbed.config.specs import ClusterSpec, NodeSpec
from testbed.config.walker import INVALID, Walker, describe, is_int, join, valid


def parse_cluster(w: Walker, value: object, path: str) -> ClusterSpec | Any:
    m = w.mapping(value, path, ("controllers", "brokers", "allow_even_quorum", "metadata_snapshot_records"), required=("brokers",))
    if m is None:
        return INVALID
    controllers = _parse_nodes(w, m.get("controllers", 1), join(path, "controllers"), "controller")
    brokers = _parse_nodes(w, m["brokers"], join(path, "brokers"), "broker") if "brokers" in m else INVALID
    allow_even = w.field(m, "allow_even_quorum", path, scalars.boolean, False)
    snapshot_records = w.field(m, "metadata_snapshot_records", path, scalars.integer(1),
                               ClusterSpec.metadata_snapshot_records)
    if not valid(controllers, brokers, allow_even, snapshot_records):
        return INVALID
    n = len(controllers)
    if n % 2 == 0 and not allow_even:
        w.error(join(path, "controllers"),
                f"{n} controllers: a Raft quorum of {n} needs {n // 2 + 1} votes and so tolerates {n // 2 - 1} "
                f"failed controller(s), no more than {n - 1} controllers would (use {n - 1} or {n + 1}, or set "
                f"allow_even_quorum: true to run it anyway)")
        return INVALID
    without_rack = [b.id for b in brokers if b.rack is None]
    if without_rack and len(without_rack) < len(brokers):
        w.error(
            join(path, "brokers"),
            f"brokers {', '.join(map(str, without_rack))} have no rack while others do "
            "(give every broker a rack, or none)",
        )
        return INVALID
    return ClusterSpec(controllers=controllers, brokers=brokers, allow_even_quorum=allow_even,
                       metadata_snapshot_records=snapshot_records)


def _parse_nodes(w: Walker, value: object, path: str, kind: str) -> tuple[NodeSpec, ...] | Any:
    """A count, a list of {id, rack}, or the shorthand {count, racks}."""
    if is_int(value):
        if value < 1:
            w.error(path, f"{value} is too small (expected at least one {kind})")
            return INVALID
        if value > scalars.MAX_NODES:
            w.error(path, f"{describe(value)} is too many (expected at most {scalars.MAX_NODES} {kind}s on one host)")
            return INVALID
        return tuple(NodeSpec(kind, i) for i in range(1, value + 1))
    if isinstance(value, dict):
        w.mapping(value, path, ("count", "racks"), required=("count",))
        count = w.field(value, "count", path, scalars.integer(1, scalars.MAX_NODES))
        racks = w.field(value, "racks", path, scalars.rack_list, None)
        if not valid(count, racks):
            return INVALID
        return tuple(NodeSpec(kind, i, racks[(i - 1) % len(racks)] if racks else None) for i in range(1, count + 1))
    entries = w.sequence(value, path, f"{kind} ({{id, rack}}) in a list, a count or {{count, racks}}", min_len=1)
    if entries is None:
        return INVALID
    nodes: list[NodeSpec] = []
    first_index: dict[int, int] = {}
    for index, entry in enumerate(entries):
        entry_path = join(path, index)
        e = w.mapping(entry, entry_path, ("id", "rack"), required=("id",), what=" {id, rack}")
        if e is None:
            continue
        node_id = w.field(e, "id", entry_path, scalars.integer(1, scalars.MAX_NODE_ID))
        rack = w.field(e, "rack", entry_path, scalars.rack, None)
        if not valid(node_id, rack):
            continue
        if node_id in first_index:
            w.error(
                join(entry_path, "id"),
                f"{node_id} is already the id of {join(path, first_index[node_id])} (ids must be unique)",
            )
            continue
        first_index[node_id] = index
        nodes.append(NodeSpec(kind, node_id, rack))
    if len(entries) > scalars.MAX_NODES:
        w.error(path, f"{len(entries)} {kind}s are too many (expected at most {scalars.MAX_NODES} on one host)")
        return INVALID
    return tuple(nodes) if len(nodes) == len(entries) else INVALID
