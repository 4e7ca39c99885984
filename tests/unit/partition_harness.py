"""Test support for the partition tests: an in-memory log that performs disk ops exactly as
the runtime would (disk first), and helpers that step leaders and followers by hand.

No tests live here; the other test_partition*/test_fetcher*/test_divergence* modules import it.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from broker.common.record_batch import (
    build_batch,
    decode_batches,
    encode_record_set,
    scan_batches,
    stamp_batch,
)
from broker.protocol.epochs import EpochHistory
from broker.protocol.messages import (AlterPartitionRequest, AlterPartitionResponse, FetchPartition,
                                      FetchPartitionResult, ProduceRequest)
from broker.protocol.outputs import (
    AppendBatches,
    AppendRecords,
    AssignEpoch,
    CheckpointHighWatermark,
    Outputs,
    Reply,
    Send,
    Truncate,
)
from broker.protocol.partition import Partition, PartitionConfig, ReadSpec
from broker.protocol.records import PartitionRecord

TOPIC = "orders"
BROKER_EPOCHS = {1: 101, 2: 102, 3: 103}


@dataclass
class MemLog:
    """Whole batches in offset order, plus the epoch cache the storage layer would persist."""

    batches: list[bytes] = field(default_factory=list)
    epochs: EpochHistory = field(default_factory=EpochHistory)
    hwm_checkpoint: int = 0

    @property
    def log_end_offset(self) -> int:
        if not self.batches:
            return 0
        info = scan_batches(self.batches[-1])[0][0]
        return info.next_offset

    def append_batch(self, batch: bytes) -> None:
        infos, reason = scan_batches(batch, expect_offset=self.log_end_offset)
        assert reason is None and infos, reason
        self.batches.extend(batch[i.position:i.position + i.size] for i in infos)

    def truncate(self, offset: int) -> None:
        kept = []
        for b in self.batches:
            info = scan_batches(b)[0][0]
            if info.next_offset <= offset:
                kept.append(b)
            else:
                assert info.base_offset >= offset, "truncation inside a batch"
        self.batches = kept
        self.epochs.truncate_from_end(offset)

    def read(self, spec: ReadSpec) -> bytes:
        out = []
        size = 0
        for b in self.batches:
            info = scan_batches(b)[0][0]
            if info.next_offset <= spec.offset or info.base_offset >= spec.upper:
                continue
            if out and size + len(b) > spec.max_bytes:
                break
            out.append(b)
            size += len(b)
        return b"".join(out)

    def records(self) -> list[tuple[int, int, bytes]]:
        return list(decode_batches(b"".join(self.batches)))

    def apply(self, op: object) -> None:
        if isinstance(op, AppendRecords):
            assert op.base_offset == self.log_end_offset
            self.batches.append(stamp_batch(op.base_offset, op.leader_epoch, op.record_set))
        elif isinstance(op, AppendBatches):
            self.append_batch(op.batches)
            assert self.log_end_offset == op.next_offset
        elif isinstance(op, Truncate):
            self.truncate(op.offset)
        elif isinstance(op, AssignEpoch):
            self.epochs.assign(op.epoch, op.start_offset)
        elif isinstance(op, CheckpointHighWatermark):
            self.hwm_checkpoint = op.high_watermark
        else:
            raise AssertionError(f"unknown disk op {op!r}")


def build_log(layout: list[tuple[int, str]]) -> MemLog:
    """A log of one-record batches: [(epoch, value), ...] from offset 0."""
    log = MemLog()
    for offset, (epoch, value) in enumerate(layout):
        log.batches.append(build_batch(offset, epoch, [value.encode()]))
        log.epochs.assign(epoch, offset)
    return log


class Replica:
    """A Partition plus the log the runtime keeps for it; `run` performs outputs' disk ops."""

    def __init__(self, broker_id: int, config: PartitionConfig, log: MemLog | None = None,
                 high_watermark: int = 0) -> None:
        self.broker_id = broker_id
        self.log = log or MemLog()
        self.log.hwm_checkpoint = high_watermark
        self.p = Partition(TOPIC, 0, broker_id, config, self.log.log_end_offset,
                           high_watermark, self.log.epochs.copy())
        self.p.set_local_broker_epoch(BROKER_EPOCHS.get(broker_id, -1))
        self.replies: list[Reply] = []
        self.sent: list[Send] = []
        self.events: list = []

    def run(self, out: Outputs) -> Outputs:
        for op in out.disk:
            self.log.apply(op)
        self.replies.extend(m for m in out.messages if isinstance(m, Reply))
        self.sent.extend(m for m in out.messages if isinstance(m, Send))
        self.events.extend(out.events)
        self.check()
        return out

    def answer(self, resp: AlterPartitionResponse | None, now: float) -> Outputs:
        """The controller's answer (None: a timeout) to the last AlterPartition this replica
        sent, matched by the partition epoch it was made on, as the broker matches it."""
        proposal = next(s for s in reversed(self.sent) if isinstance(s.message, AlterPartitionRequest))
        return self.run(self.p.on_alter_partition_response(resp, now, proposal.correlation[3]))

    def check(self) -> None:
        """The model and the disk agree (the contract of partition.py's docstring)."""
        assert self.p.log_end_offset == self.log.log_end_offset
        assert self.p.epochs.entries == self.log.epochs.entries
        assert self.p.high_watermark <= self.p.log_end_offset

    def restart(self, config: PartitionConfig) -> "Replica":
        """A new process over the same files: LEO, epoch cache and the HWM checkpoint."""
        return Replica(self.broker_id, config, self.log, self.log.hwm_checkpoint)

    def values(self) -> list[tuple[int, int, str]]:
        return [(o, e, v.decode()) for o, e, v in self.log.records()]

    def events_of(self, kind: str) -> list[dict]:
        return [e.fields for e in self.events if e.kind == kind]


def record(leader: int, leader_epoch: int, partition_epoch: int, isr: list[int],
           replicas: list[int] | None = None, **kw: object) -> PartitionRecord:
    return PartitionRecord(TOPIC, 0, replicas or [1, 2, 3], isr, leader, leader_epoch,
                           partition_epoch, **kw)


def apply_record(replicas: list[Replica], rec: PartitionRecord, now: float = 0.0,
                 eligible: set[int] | None = None) -> None:
    for r in replicas:
        r.run(r.p.on_partition_record(rec, BROKER_EPOCHS,
                                      set(BROKER_EPOCHS) if eligible is None else eligible, now))


def produce(leader: Replica, values: list[str], acks: int = -1, now: float = 0.0,
            timeout_ms: int = 1000, ctx: object = None) -> Outputs:
    req = ProduceRequest(TOPIC, 0, acks, timeout_ms, encode_record_set([v.encode() for v in values]))
    return leader.run(leader.p.on_produce(req, ctx if ctx is not None else values[0], now))


def follower_fetch_now(p: Partition, replica_id: int, broker_epoch: int, fp: FetchPartition,
                       now: float) -> tuple[FetchPartitionResult, ReadSpec | None, Outputs]:
    """A follower's fetch answered at once, as a broker answers one it does not park: the
    partition's `follower_fetch`, with a fetch at the LEO given its `fetch_result`."""
    out = Outputs()
    result, read = p.follower_fetch(replica_id, broker_epoch, fp, now, out)
    return p.fetch_result() if result is None else result, read, out


def fetch_round(leader: Replica, follower: Replica, now: float = 0.0,
                broker_epoch: int | None = None) -> FetchPartitionResult:
    """One fetch of `follower` from `leader`, performed as the runtimes would."""
    fp = follower.p.fetch_partition()
    assert fp is not None
    epoch = BROKER_EPOCHS[follower.broker_id] if broker_epoch is None else broker_epoch
    result, read, out = follower_fetch_now(leader.p, follower.broker_id, epoch, fp, now)
    leader.run(out)
    if read is not None:
        result.records = leader.log.read(read)
    follower.run(follower.p.on_fetch_result(result, now))
    return result


def fetch_until_stable(leader: Replica, follower: Replica, now: float = 0.0,
                       rounds: int = 10) -> int:
    """Fetch until a round changes nothing on the follower; returns the rounds used."""
    for n in range(1, rounds + 1):
        before = (follower.p.log_end_offset, follower.p.high_watermark,
                  list(follower.p.epochs.entries))
        fetch_round(leader, follower, now)
        after = (follower.p.log_end_offset, follower.p.high_watermark,
                 list(follower.p.epochs.entries))
        if after == before:
            return n
    raise AssertionError("follower did not converge")
