"""Fault targets (DESIGN section 6) resolved to node names when the fault fires: pure.

A target names a role, not a node: `leader-of orders/0` is whoever leads the partition at
that moment. So resolution needs a snapshot of the cluster (`ClusterView`) and, for the
random targets, the fault's own rng (so that the same seed picks the same node when the
cluster is in the same state). The runtime records what a target resolved to; an empty
list (a leaderless partition, no controller answering) is a legitimate answer that the
runtime records as "resolved to nothing", not an error. Only a malformed target string,
which the topology's parser should have rejected already, raises `TargetError`.
"""
from __future__ import annotations

import random
import re
from dataclasses import dataclass

from broker.common.names import node_name

Partition = tuple[str, int]

_PARTITION_TARGET = re.compile(r"(leader-of|followers-of|isr-of) ([A-Za-z0-9._-]+)/([0-9]{1,9})")
_NODE_TARGET = re.compile(r"(broker|controller):([0-9]{1,9})")


class TargetError(ValueError):
    """A target string outside the grammar of DESIGN section 6, or naming no such node."""


@dataclass(frozen=True)
class ClusterView:
    """What target resolution may know about the cluster at one moment.

    `brokers` and `controllers` map node name to rack, in topology order (`rack:a` is every
    node there, a rack's controller too); `leaders`, `isr` and `replicas` are the
    controller's view (node names), empty when no controller answered.
    """

    brokers: dict[str, str | None]
    controllers: dict[str, str | None]
    active_controller: str | None
    stopped: frozenset[str]
    paused: frozenset[str]
    leaders: dict[Partition, str | None]
    isr: dict[Partition, tuple[str, ...]]
    replicas: dict[Partition, tuple[str, ...]]

    @property
    def nodes(self) -> tuple[str, ...]:
        """Every cluster node, controllers first, in topology order."""
        return (*self.controllers, *self.brokers)

    def is_up(self, node: str) -> bool:
        """Running and not paused: a node a random target may pick."""
        return node not in self.stopped and node not in self.paused


def resolve(target: str, view: ClusterView, rng: random.Random) -> list[str]:
    """The node names `target` stands for now (`["clients"]` for the clients).

    Named targets (`broker:1`, `rack:a`, `brokers`, `isr-of T/P`, ...) resolve to their
    nodes whatever state those are in: killing a stopped node is the runtime's no-op to
    record. Random targets (`random-broker`, `random-controller`, `leader-of any`) choose only
    among nodes that are up (neither stopped nor paused), because a nemesis that picks a node
    already down wastes its fault. Order is the topology's, so records are stable.
    """
    if target == "clients":
        return ["clients"]
    if target == "brokers":
        return list(view.brokers)
    if target == "controllers":
        return list(view.controllers)
    if target == "stopped":
        return [n for n in view.nodes if n in view.stopped]
    if target == "paused":
        return [n for n in view.nodes if n in view.paused]
    if target == "active-controller":
        return [view.active_controller] if view.active_controller is not None else []
    if target == "random-broker":
        return _pick([b for b in view.brokers if view.is_up(b)], rng)
    if target == "random-controller":
        return _pick([c for c in view.controllers if view.is_up(c)], rng)
    if target == "leader-of any":
        leaders = {leader for leader in view.leaders.values() if leader is not None and view.is_up(leader)}
        return _pick([b for b in view.brokers if b in leaders], rng)
    if target.startswith("rack:") and len(target) > len("rack:"):
        rack = target[len("rack:"):]
        return [n for racks in (view.controllers, view.brokers) for n, r in racks.items() if r == rack]
    match = _NODE_TARGET.fullmatch(target)
    if match is not None:
        node = node_name(match.group(1), int(match.group(2)))
        if node not in view.nodes:
            raise TargetError(f"{target!r}: there is no {node} (nodes: {', '.join(view.nodes)})")
        return [node]
    match = _PARTITION_TARGET.fullmatch(target)
    if match is not None:
        return _partition_target(match.group(1), (match.group(2), int(match.group(3))), view)
    raise TargetError(f"unknown target {target!r}")


def broker_id(target: str) -> int:
    """N of a `broker:N` target: the one form `elect` and `remove-broker` take (checked when
    the topology is read, so a run never meets another here)."""
    match = _NODE_TARGET.fullmatch(target)
    if match is None or match.group(1) != "broker":
        raise TargetError(f"{target!r}: expected broker:N")
    return int(match.group(2))


def _partition_target(kind: str, partition: Partition, view: ClusterView) -> list[str]:
    leader = view.leaders.get(partition)
    if kind == "leader-of":
        return [leader] if leader is not None else []
    if kind == "isr-of":
        return list(view.isr.get(partition, ()))
    return [r for r in view.replicas.get(partition, ()) if r != leader]


def _pick(candidates: list[str], rng: random.Random) -> list[str]:
    return [rng.choice(candidates)] if candidates else []
