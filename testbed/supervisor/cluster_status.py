"""A snapshot of the cluster as the supervisor sees it: the controller's partitions and
brokers, and each broker's own view of its replicas. Built from control-socket answers
only, so a paused or dead node simply has no view.

A partition is the protocol's own outside view (`PartitionMetadata`, R1), the shape clients
get in a MetadataResponse; a replica is what its broker says of it.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from broker.common.names import broker_name
from broker.protocol.messages import PartitionMetadata
from faults.targets import ClusterView


class ReplicaView(NamedTuple):
    """One broker's view of its replica (a named tuple: immutable, and made at half a frozen
    dataclass's cost, for every replica at every look of a supervisor's wait). As a named tuple
    it equals (and sorts like) a plain tuple of the same values: nothing compares it with
    another type."""
    broker: int
    topic: str
    partition: int
    role: str
    leader_epoch: int
    leo: int
    hwm: int
    topic_id: int | None = None  # the id of the topic it was made for (`MetadataImage.topic_ids`)


#: builds a `ReplicaView` from all its values as the class's call does (its generated `__new__`
#: is a Python function that calls this), at a fifth of the cost
_tuple_new = tuple.__new__


@dataclass
class ClusterStatus:
    controller: dict | None  # the active controller's status, None when none answered as active
    brokers: dict[int, dict | None] = field(default_factory=dict)
    #: every controller's status by node name (None: stopped, paused or silent)
    quorum: dict[str, dict | None] = field(default_factory=dict)

    @classmethod
    def of(cls, quorum: dict[str, dict | None], brokers: dict[int, dict | None]) -> "ClusterStatus":
        active = next((body for _, body in sorted(quorum.items()) if body and body.get("active")), None)
        return cls(active, brokers, quorum)

    def partitions(self) -> list[PartitionMetadata]:
        if not self.controller:
            return []
        return [PartitionMetadata(**p) for p in self.controller.get("partitions", [])]

    def partitions_brokers_hold(self) -> list[PartitionMetadata]:
        """Each partition as the answering brokers describe it, from the one that applied its
        newest state (the highest leader epoch, then partition epoch): what the metadata the
        brokers hold says, the clients' view when no controller answers."""
        newest: dict[tuple[str, int], dict] = {}
        for body in self.brokers.values():
            for p in (body or {}).get("partitions", []):
                key = (p["topic"], p["partition"])
                held = newest.get(key)
                if held is None or (p["leader_epoch"], p["partition_epoch"]) > (held["leader_epoch"],
                                                                                 held["partition_epoch"]):
                    newest[key] = p
        return [PartitionMetadata(p["topic"], p["partition"], p["leader"], p["leader_epoch"], p["partition_epoch"],
                                  list(p["replicas"]), list(p["isr"]), list(p.get("elr", [])),
                                  list(p.get("last_known_elr", [])))
                for _, p in sorted(newest.items())]

    def topic_id(self, topic: str) -> int | None:
        """The active controller's id of `topic`; None when it has no such topic."""
        return (self.controller or {}).get("topic_ids", {}).get(topic)

    def partition(self, topic: str, partition: int) -> PartitionMetadata:
        for p in self.partitions():
            if p.topic == topic and p.partition == partition:
                return p
        if not self.controller:
            raise KeyError(f"{topic}/{partition}: no active controller answered")
        raise KeyError(f"{topic}/{partition}: the controller has no such partition")

    def registered_brokers(self) -> dict[int, dict]:
        if not self.controller:
            return {}
        return {b["broker_id"]: b for b in self.controller.get("brokers", [])}

    def replicas(self) -> list[ReplicaView]:
        out = []
        for broker, body in self.brokers.items():
            for p in (body or {}).get("partitions", []):
                # (ReplicaView(...) by tuple.__new__ itself, without the class call's Python frame:
                # the simulation's supervisor polls the status of every replica)
                out.append(_tuple_new(ReplicaView, (broker, p["topic"], p["partition"], p["role"],
                                                    p["leader_epoch"], p["leo"], p["hwm"], p.get("topic_id"))))
        return out

    def replica(self, broker: int, topic: str, partition: int) -> ReplicaView | None:
        for r in self.replicas():
            if (r.broker, r.topic, r.partition) == (broker, topic, partition):
                return r
        return None

    def all_led(self) -> bool:
        """Every partition has a leader that itself acts as leader in that epoch."""
        parts = self.partitions()
        if not parts:
            return False
        for p in parts:
            if p.leader < 0:
                return False
            r = self.replica(p.leader, p.topic, p.partition)
            if r is None or r.role != "leader" or r.leader_epoch != p.leader_epoch:
                return False
        return True

    def fully_replicated(self) -> bool:
        """Led, ISR = replicas, and every replica at the leader's LEO with HWM = LEO."""
        return not self.unconverged()

    def unconverged(self) -> list[str]:
        """What keeps the cluster from being fully replicated, a line per partition ("pay/1: no
        leader"), in topic and partition order (none: it is): what a user reads when a run did
        not converge. A broker still holding a replica the controller no longer assigns to it
        (of a topic deleted, maybe made again elsewhere, R40; or moved away, R35) has not heard
        yet: its final log would be read as a second leader's or a lost replica's."""
        if not self.controller:
            return ["no controller answered as active"]
        parts = self.partitions()  # none: every topic deleted (R40), nothing left to replicate
        out = []
        for p in parts:
            name = f"{p.topic}/{p.partition}"
            lead = self.replica(p.leader, p.topic, p.partition) if p.leader >= 0 else None
            if p.leader < 0:
                out.append((p.topic, p.partition, f"{name}: no leader (ISR {sorted(p.isr)})"))
            elif lead is None or lead.role != "leader" or lead.leader_epoch != p.leader_epoch:
                out.append((p.topic, p.partition,
                            f"{name}: broker {p.leader} does not lead it at leader epoch {p.leader_epoch} yet"))
            elif sorted(p.isr) != sorted(p.replicas):
                out.append((p.topic, p.partition, f"{name}: ISR {sorted(p.isr)} of replicas {sorted(p.replicas)}"))
            elif lead.hwm != lead.leo:
                out.append((p.topic, p.partition, f"{name}: the leader's HWM {lead.hwm} below its LEO {lead.leo}"))
            else:
                behind = [f"broker {b} at LEO {r.leo if r is not None else '?'}" for b in p.replicas
                          if (r := self.replica(b, p.topic, p.partition)) is None or r.leo != lead.leo]
                if behind:
                    out.append((p.topic, p.partition, f"{name}: {', '.join(behind)}, the leader's {lead.leo}"))
        out += self._strays({(p.topic, p.partition): p for p in parts})
        return [line for *_, line in sorted(out)]

    def _strays(self, assigned: dict[tuple[str, int], PartitionMetadata]) -> list[tuple[str, int, str]]:
        """(topic, partition, line) of each replica a broker holds that the controller does not
        assign to it."""
        ids = (self.controller or {}).get("topic_ids", {})
        out = []
        for r in self.replicas():
            p = assigned.get((r.topic, r.partition))
            if p is None or (r.topic_id is not None and ids.get(r.topic, r.topic_id) != r.topic_id):
                what = "a replica of a deleted topic"
            elif r.broker not in p.replicas:
                what = "a replica the controller moved away"
            else:
                continue
            out.append((r.topic, r.partition, f"{r.topic}/{r.partition}: broker {r.broker} still holds {what}"))
        return out

    def view(self, brokers: Mapping[str, str | None], controllers: Mapping[str, str | None],
             stopped: Iterable[str], paused: Iterable[str]) -> ClusterView:
        """What fault targets resolve against: this snapshot plus the supervisor's own process
        bookkeeping (`brokers` and `controllers`: node name -> rack, in topology order).

        The active controller is the one whose status answered (the single controller until
        the quorum lands); a stopped or paused controller does not answer, so it is never
        the active one. While none is active, each partition is as the answering brokers
        last applied it (`partitions_brokers_hold`): its leader still leads, and
        `leader-of T/P` must name it (it named nobody, and a kill of the leader with the
        quorum down did nothing).
        """
        parts = self.partitions() if self.controller else self.partitions_brokers_hold()
        return ClusterView(
            brokers=dict(brokers),
            controllers=dict(controllers),
            active_controller=self.controller.get("node") if self.controller else None,
            stopped=frozenset(stopped),
            paused=frozenset(paused),
            leaders={(p.topic, p.partition): broker_name(p.leader) if p.leader >= 0 else None for p in parts},
            isr={(p.topic, p.partition): tuple(map(broker_name, p.isr)) for p in parts},
            replicas={(p.topic, p.partition): tuple(map(broker_name, p.replicas)) for p in parts},
        )
