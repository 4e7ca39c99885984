"""The frozen specs of a topology's sections, and the expectations a run is judged against.

Everything downstream reads these, never raw YAML, so a value here is already valid and in its
working unit: durations are float seconds, sizes bytes, lists tuples.
"""
from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass

from broker.protocol.settings import ProtocolSettings, Timeouts
from broker.storage.flush import FlushPolicy

CHECK_NAMES: tuple[str, ...] = (
    "lost_writes",
    "lost_writes_acks1",
    "unseen",
    "duplicates",
    "inconsistent_offsets",
    "nonmonotonic_polls",
    "poll_skips",
    "committed_regressions",
    "log_divergence",
    "leader_conflicts",
    "unclean_exclusion",
    "placement_violations",
    "elr_violations",
    "metadata_divergence",
    "aborted_reads",
    "nonmonotonic_sends",
    "internal_poll_skips",
)
# `converged` is not a check of the pipeline but whether the cluster converged after healing.
EXPECT_KEYS: tuple[str, ...] = CHECK_NAMES + ("converged",)


@dataclass(frozen=True)
class NodeSpec:
    kind: str  # "broker" | "controller"
    id: int
    rack: str | None = None

    @property
    def name(self) -> str:
        """The name used in every record file (`events.jsonl`'s `node`), e.g. `broker-1`."""
        return f"{self.kind}-{self.id}"


@dataclass(frozen=True)
class Timing:
    """The topology's `timing:` keys; their defaults are the protocol's own (`Timeouts`)."""
    heartbeat_interval: float = Timeouts.heartbeat_interval
    session_timeout: float = Timeouts.session_timeout
    replica_lag_max: float = Timeouts.replica_lag_max
    fetch_max_wait: float = Timeouts.fetch_max_wait
    controller_election_timeout: tuple[float, float] = Timeouts.controller_election_timeout
    hw_checkpoint_interval: float = Timeouts.hw_checkpoint_interval
    unclean_recovery_timeout: float = Timeouts.unclean_recovery_timeout

    def scaled(self, factor: float) -> Timing:
        """All timeouts multiplied by `--time-scale`, so a slow machine keeps the same ratios."""
        if factor <= 0:
            raise ValueError(f"time scale must be positive, got {factor}")
        low, high = self.controller_election_timeout
        return Timing(
            heartbeat_interval=self.heartbeat_interval * factor,
            session_timeout=self.session_timeout * factor,
            replica_lag_max=self.replica_lag_max * factor,
            fetch_max_wait=self.fetch_max_wait * factor,
            controller_election_timeout=(low * factor, high * factor),
            hw_checkpoint_interval=self.hw_checkpoint_interval * factor,
            unclean_recovery_timeout=self.unclean_recovery_timeout * factor,
        )


@dataclass(frozen=True)
class ClusterSpec:
    controllers: tuple[NodeSpec, ...]
    brokers: tuple[NodeSpec, ...]
    allow_even_quorum: bool = False  # an even number of controllers, on purpose
    #: a controller snapshots the metadata log every this many records (Kafka:
    #: metadata.log.max.record.bytes.between.snapshots, here counted in records)
    metadata_snapshot_records: int = 1000


#: the `protocol:` section is the protocol's own settings type, defaults included
ProtocolSpec = ProtocolSettings


@dataclass(frozen=True)
class StorageSpec:
    medium: str = "disk"
    fsync: str = "simulated"
    writeback: float = 5.0
    segment_bytes: int = 1 << 20


@dataclass(frozen=True)
class NetworkSpec:
    backend: str = "userspace"
    transport: str = "ipc"




@dataclass(frozen=True)
class TopicSpec:
    name: str
    partitions: int
    replication_factor: int
    min_insync_replicas: int
    flush: FlushPolicy
    placement: str
    assignment: dict[int, tuple[int, ...]] | None
    #: the seed of round-robin's start and shift (R34) for this topic alone, whatever the run's
    #: seed: a scenario whose rack-blind placement must put a partition inside one rack at
    #: every seed of a sweep or a matrix pins it (None: the run's seed)
    placement_seed: int | None = None


@dataclass(frozen=True)
class ProducerSpec:
    count: int
    topic: str
    acks: str  # "all" | "1" | "0"
    rate: float | None  # records/s per producer; None = as fast as possible (`rate: max`)
    batch: int
    retries: int
    partitions: tuple[int, ...] | None  # None = every partition of the topic
    in_flight: int = 1  # produce requests outstanding at once (Kafka's max.in.flight.requests.per.connection)


@dataclass(frozen=True)
class ConsumerSpec:
    count: int
    topic: str
    from_: str  # "earliest" | "latest"


@dataclass(frozen=True)
class WorkloadSpec:
    producers: tuple[ProducerSpec, ...] = ()
    consumers: tuple[ConsumerSpec, ...] = ()


_COMPARISONS: dict[str, Callable[[int, int], bool]] = {
    "==": operator.eq,
    ">": operator.gt,
    ">=": operator.ge,
    "<": operator.lt,
    "<=": operator.le,
}


@dataclass(frozen=True)
class Expectation:
    op: str  # "==", ">", ">=", "<", "<="
    value: int

    def holds(self, count: int) -> bool:
        return _COMPARISONS[self.op](count, self.value)

    def __str__(self) -> str:
        return str(self.value) if self.op == "==" else f"{self.op}{self.value}"


#: When a topology has no `expect:` block, these must hold (the run exits 1 otherwise):
#: the safety properties every correct configuration promises.
DEFAULT_EXPECT: dict[str, Expectation] = {
    "lost_writes": Expectation("==", 0),
    "inconsistent_offsets": Expectation("==", 0),
    "log_divergence": Expectation("==", 0),
    "leader_conflicts": Expectation("==", 0),
}
