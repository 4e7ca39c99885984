"""What a protocol state machine asks the runtime to do, in the order it must be done.

Like etcd raft's `Ready`: `broker/node.py` first performs the disk operations (in list
order), then sends the messages, then records the events, and last stops the node if
`stop` says so. Nothing here does I/O.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Union

from broker.common.record_batch import BatchInfo
from broker.protocol.records import MetadataRecord


# ------------------------------------------------------------------ disk operations (per partition)
@dataclass(slots=True)
class AppendRecords:
    """Leader append: stamp `record_set` at `base_offset` in `leader_epoch` and append it."""
    topic: str
    partition: int
    base_offset: int
    leader_epoch: int
    record_set: bytes
    count: int


@dataclass(slots=True)
class AppendBatches:
    """Follower append: whole batches as fetched from the leader (already checked)."""
    topic: str
    partition: int
    batches: bytes
    next_offset: int  # LEO after the append
    #: the batches as the replica's check of their CRCs and offsets found them, so that the log
    #: need not scan them again (None: it does); how the bytes were checked, not what to do
    scanned: list[BatchInfo] | None = field(default=None, compare=False, repr=False)


@dataclass(slots=True)
class Truncate:
    """Cut the log (and its epoch cache) back to `offset` (R10, R13)."""
    topic: str
    partition: int
    offset: int
    reason: str


@dataclass(slots=True)
class AssignEpoch:
    """Persist epoch -> start offset in the leader-epoch checkpoint (R5)."""
    topic: str
    partition: int
    epoch: int
    start_offset: int


@dataclass(slots=True)
class CheckpointHighWatermark:
    topic: str
    partition: int
    high_watermark: int


@dataclass(slots=True)
class DeletePartition:
    """The replica left the partition's replica set (R35): delete its log."""
    topic: str
    partition: int


@dataclass(slots=True)
class PersistMetadata:
    """Append these (offset, record) pairs to the broker's copy of the metadata log (R22)."""
    records: list[tuple[int, dict]]


@dataclass(slots=True)
class PersistMetadataSnapshot:
    """Replace the broker's copy of the metadata log by this snapshot (the records that
    follow it come as PersistMetadata): {"end", "image", "digest"}, as fetched."""
    snapshot: dict


@dataclass(slots=True)
class CleanShutdown:
    """The end of a controlled shutdown (R28, R37), in this order: checkpoint each replica's
    HWM, flush every log, then write `broker_epoch` as the clean-shutdown marker."""
    broker_epoch: int
    high_watermarks: dict[tuple[str, int], int]


@dataclass(slots=True)
class AppendMetadata:
    """The controller's records for the metadata log; the first gets `base_offset`, the next
    ones follow. The runtime answers with the log's new committed end (`on_committed`)."""
    records: list[MetadataRecord]
    base_offset: int


DiskOp = Union[AppendRecords, AppendBatches, Truncate, AssignEpoch, CheckpointHighWatermark,
               DeletePartition, PersistMetadata, PersistMetadataSnapshot, CleanShutdown, AppendMetadata]


# ------------------------------------------------------------------ messages
@dataclass(slots=True)
class Send:
    """A request to another node. `correlation` comes back with the response or the timeout."""
    destination: int | str  # a node id (broker id, or "controller")
    message: Any
    correlation: Any = None
    timeout_ms: int | None = None


@dataclass(slots=True)
class Reply:
    """The answer to a request received earlier; `ctx` is the opaque handle the runtime gave."""
    ctx: Any
    message: Any


# ------------------------------------------------------------------ events (events.jsonl)
@dataclass(slots=True)
class Event:
    kind: str
    fields: dict = field(default_factory=dict)


@dataclass(slots=True)
class Outputs:
    disk: list[DiskOp] = field(default_factory=list)
    messages: list[Union[Send, Reply]] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    #: the node's exit code, once the state machine has nothing left to do (a finished
    #: controlled shutdown); None while it runs
    stop: int | None = None

    def __init__(self, disk: list[DiskOp] | None = None, messages: list[Union[Send, Reply]] | None = None,
                 events: list[Event] | None = None, stop: int | None = None) -> None:
        """Written out: the dataclass's would call a factory for each list, and a state
        machine makes an `Outputs` for most inputs (7,700 a quickstart seed)."""
        self.disk = [] if disk is None else disk
        self.messages = [] if messages is None else messages
        self.events = [] if events is None else events
        self.stop = stop

    def extend(self, other: "Outputs") -> "Outputs":
        if other.disk:
            self.disk.extend(other.disk)
        if other.messages:
            self.messages.extend(other.messages)
        if other.events:
            self.events.extend(other.events)
        if self.stop is None:
            self.stop = other.stop
        return self

    def event(self, kind: str, **fields: Any) -> None:
        self.events.append(Event(kind, fields))

    def __bool__(self) -> bool:
        return bool(self.disk or self.messages or self.events or self.stop is not None)
