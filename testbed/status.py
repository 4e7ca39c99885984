"""A snapshot of the cluster as the supervisor sees it: the controller's partitions and
brokers, and each broker's own view of its replicas. Built from control-socket answers
only, so a paused or dead node simply has no view."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class PartitionView:
    """The controller's state of one partition (R1)."""
    topic: str
    partition: int
    leader: int
    leader_epoch: int
    partition_epoch: int
    replicas: list[int]
    isr: list[int]
    elr: list[int]
    last_known_elr: list[int]


@dataclass(frozen=True)
class ReplicaView:
    """One broker's view of its replica."""
    broker: int
    topic: str
    partition: int
    role: str
    leader_epoch: int
    leo: int
    hwm: int


@dataclass
class ClusterStatus:
    controller: dict | None
    brokers: dict[int, dict | None] = field(default_factory=dict)

    def partitions(self) -> list[PartitionView]:
        if not self.controller:
            return []
        return [PartitionView(p["topic"], p["partition"], p["leader"], p["leader_epoch"],
                              p["partition_epoch"], list(p["replicas"]), list(p["isr"]),
                              list(p.get("elr", [])), list(p.get("last_known_elr", [])))
                for p in self.controller.get("partitions", [])]

    def partition(self, topic: str, partition: int) -> PartitionView:
        for p in self.partitions():
            if p.topic == topic and p.partition == partition:
                return p
        raise KeyError(f"{topic}/{partition} is unknown to the controller")

    def registered_brokers(self) -> dict[int, dict]:
        if not self.controller:
            return {}
        return {b["broker_id"]: b for b in self.controller.get("brokers", [])}

    def replicas(self) -> list[ReplicaView]:
        out = []
        for broker, body in self.brokers.items():
            for p in (body or {}).get("partitions", []):
                out.append(ReplicaView(broker, p["topic"], p["partition"], p["role"],
                                       p["leader_epoch"], p["leo"], p["hwm"]))
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
        if not self.all_led():
            return False
        for p in self.partitions():
            if sorted(p.isr) != sorted(p.replicas):
                return False
            lead = self.replica(p.leader, p.topic, p.partition)
            if lead is None or lead.hwm != lead.leo:
                return False
            for b in p.replicas:
                r = self.replica(b, p.topic, p.partition)
                if r is None or r.leo != lead.leo:
                    return False
        return True
