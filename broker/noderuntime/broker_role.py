"""The broker role's I/O: partition logs on disk, the copy of the metadata log, the
durability model's clock, and the record bytes a fetch response carries.

An adapter between the pure `BrokerState` and the node's single loop (`broker/node.py`):
each input goes to the state machine and its `Outputs` go back to the loop, which alone
carries them out. The loop hands every disk operation to `persist`, and every reply to
`body` for the record bytes it must carry; nothing here sends, records or stops.
"""
from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from broker.common.files import replace_durably
from broker.common.jsonl import JsonlAppender, read_jsonl
from broker.noderuntime.config import NodeConfig
from broker.protocol.broker import BrokerConfig, BrokerState, LocalReplica, PendingFetch
from broker.protocol.outputs import (
    AppendBatches,
    AppendRecords,
    AssignEpoch,
    CheckpointHighWatermark,
    CleanShutdown,
    DeletePartition,
    Outputs,
    PersistMetadata,
    PersistMetadataSnapshot,
    Truncate,
)
from broker.storage.checkpoint import take_clean_shutdown, write_clean_shutdown
from broker.storage.durability import Durability
from broker.storage.flush import DEFAULT_FLUSH, FlushPolicy
from broker.storage.layout import METADATA_COPY_FILE, METADATA_SNAPSHOT_FILE, journal_path, partition_dirs
from broker.storage.log import PartitionLog


def _metadata_copy(lines: list[Any]) -> list[tuple[int, dict]]:
    """The (offset, record) pairs of the broker's metadata copy, up to the first line that is
    not one: the rest is fetched again from the controller."""
    pairs = []
    for line in lines:
        if not (isinstance(line, list) and len(line) == 2 and isinstance(line[0], int)):
            break
        pairs.append((line[0], line[1]))
    return pairs


def _metadata_snapshot(path: Path) -> dict | None:
    """The broker's last metadata snapshot, if it has one that parses as a map."""
    try:
        snapshot = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    return snapshot if isinstance(snapshot, dict) else None


class BrokerRole:
    def __init__(self, cfg: NodeConfig, clock: Callable[[], float] = time.monotonic,
                 incarnation_id: str | None = None) -> None:
        """`clock` and `incarnation_id` are the host's (and a random id) in a node process;
        the simulation passes its virtual clock and an id drawn from the seed."""
        self.cfg = cfg
        self.clock = clock
        now = clock()
        cfg.data_dir.mkdir(parents=True, exist_ok=True)
        self.durability = Durability(cfg.data_dir, cfg.storage.fsync, cfg.storage.writeback,
                                     journal_path(cfg.data_dir))
        self.logs: dict[tuple[str, int], PartitionLog] = {}
        self._started = Outputs()
        previous = take_clean_shutdown(cfg.data_dir, self.durability)
        local = self._recover_logs(now)
        metadata_path = cfg.data_dir / METADATA_COPY_FILE
        records = _metadata_copy(read_jsonl(metadata_path, prefix_only=True))
        self.metadata_path = metadata_path
        self.metadata_copy = JsonlAppender(metadata_path)
        self.state = BrokerState(
            BrokerConfig(broker_id=cfg.id, rack=cfg.rack, incarnation_id=incarnation_id or uuid.uuid4().hex,
                         timeouts=cfg.timeouts, protocol=cfg.protocol,
                         controller_ids=tuple(cfg.controller_ids), endpoint=cfg.endpoint),
            local, previous if previous is not None else -1, records,
            _metadata_snapshot(cfg.data_dir / METADATA_SNAPSHOT_FILE))
        self._started.event("broker-started", clean_shutdown_epoch=previous, partitions=len(local))
        #: requests and answers go to the state machine as they come: its own methods, bound
        #: here, without a call of this adapter's in between (every input of a broker is one)
        self.on_request: Callable[[Any, Any, float], Outputs] = self.state.on_request
        self.on_response: Callable[[Any, Any, float], Outputs] = self.state.on_response
        #: when a log's interval flush or the OS writeback is next due; None: to be computed
        #: again (after a disk operation)
        self._storage_due: float | None = None

    # ---------------------------------------------------------------- startup
    def _flush_policy(self, topic: str) -> FlushPolicy:
        return self.cfg.flush.get(topic, DEFAULT_FLUSH)

    def _open_log(self, topic: str, partition: int, now: float) -> tuple[PartitionLog, Any]:
        plog, report = PartitionLog.open(self.cfg.data_dir, topic, partition, self.cfg.storage.segment_bytes,
                                         self._flush_policy(topic), self.durability, now)
        self.logs[(topic, partition)] = plog
        self._storage_due = None
        return plog, report

    def _recover_logs(self, now: float) -> dict[tuple[str, int], LocalReplica]:
        local: dict[tuple[str, int], LocalReplica] = {}
        for topic, partition, _ in partition_dirs(self.cfg.data_dir):
            plog, report = self._open_log(topic, partition, now)
            self._started.event("recovered", topic=topic, partition=partition, valid_to=report.valid_to,
                                dropped_bytes=report.dropped_bytes, reason=report.reason)
            local[(topic, partition)] = LocalReplica(plog.log_end_offset, min(plog.hw_checkpoint, plog.log_end_offset),
                                                     plog.epochs, plog.log_start_offset)
        return local

    def log_for(self, topic: str, partition: int) -> PartitionLog:
        plog = self.logs.get((topic, partition))
        return plog if plog is not None else self._open_log(topic, partition, self.clock())[0]

    # ---------------------------------------------------------------- inputs
    def start(self, now: float) -> Outputs:
        """What recovery found, as events for the loop to record."""
        started, self._started = self._started, Outputs()
        return started

    def tick(self, now: float) -> Outputs:
        if now >= self.storage_due():
            for plog in self.logs.values():
                plog.tick(now)
            self.durability.tick(now)
            self._storage_due = None
        return self.state.tick(now)

    def next_tick_at(self, now: float) -> float:
        """When `tick` next has something to do: the protocol's or the storage's."""
        due = self.state.next_tick_at(now)
        storage = self._storage_due  # (the kept value without the call: this runs after every input)
        if storage is None:
            storage = self.storage_due()
        return storage if storage < due else due

    def storage_due(self) -> float:
        """When the storage may next have work of its own (flush.ms, writeback), never later
        than it does: the first tick from then on looks, so the logs are not polled on every
        tick."""
        due = self._storage_due
        if due is None:
            # (comparisons, not min() over a generator with a default, which parses keyword
            # arguments on Python 3.11: worked out again after every tick and most disk operations)
            due = self.durability.writeback_due()
            for plog in self.logs.values():
                at = plog.flush_due()
                if at < due:
                    due = at
            self._storage_due = due
        return due

    def begin_shutdown(self, now: float) -> Outputs:
        return self.state.begin_controlled_shutdown(now)

    # ---------------------------------------------------------------- outputs, carried out for the loop
    def persist(self, op: Any, now: float) -> None:
        """Carry out one disk operation; a broker's never triggers further outputs."""
        if isinstance(op, AppendRecords):
            plog = self.log_for(op.topic, op.partition)
            plog.append_record_set(op.base_offset, op.leader_epoch, op.record_set, now, op.count)
            self._appended(plog, now)
            return
        if isinstance(op, AppendBatches):
            plog = self.log_for(op.topic, op.partition)
            plog.append_batches(op.batches, now, op.scanned)
            self._appended(plog, now)
            return
        self._storage_due = None
        if isinstance(op, Truncate):
            self.log_for(op.topic, op.partition).truncate_to(op.offset, now)
        elif isinstance(op, AssignEpoch):
            self.log_for(op.topic, op.partition).assign_epoch(op.epoch, op.start_offset, now)
        elif isinstance(op, CheckpointHighWatermark):
            self.log_for(op.topic, op.partition).checkpoint_hw(op.high_watermark, now)
        elif isinstance(op, DeletePartition):
            plog = self.logs.pop((op.topic, op.partition), None)
            if plog is not None:
                plog.delete()
        elif isinstance(op, PersistMetadata):
            self.metadata_copy.write_many([[o, r] for o, r in op.records])
        elif isinstance(op, PersistMetadataSnapshot):
            self._persist_metadata_snapshot(op.snapshot)
        elif isinstance(op, CleanShutdown):
            self._clean_shutdown(op, now)
        else:
            raise TypeError(f"unknown disk op {op!r}")

    def _appended(self, plog: PartitionLog, now: float) -> None:
        """An append can bring the storage's work closer only by the log's interval flush, or
        by bytes dirty from now on (no earlier than what was dirty already): the time known
        stays, or comes down to those, without looking at every file again."""
        due = self._storage_due
        if due is not None:  # (comparisons, not min(), which parses keyword arguments on Python 3.11)
            for at in (plog.flush_due(), now + self.durability.writeback):
                if at < due:
                    due = at
            self._storage_due = due

    def _persist_metadata_snapshot(self, snapshot: dict) -> None:
        """The snapshot replaces the copy: written whole (atomically), then the copy emptied.
        A crash between the two leaves records below the snapshot's end, which are skipped."""
        replace_durably(self.cfg.data_dir / METADATA_SNAPSHOT_FILE, orjson.dumps(snapshot))
        self.metadata_copy.close()
        self.metadata_path.write_bytes(b"")
        self.metadata_copy = JsonlAppender(self.metadata_path)

    def _clean_shutdown(self, op: CleanShutdown, now: float) -> None:
        """R28/R37 in order: the final HWMs (partitions checkpoint them while running, on
        their own schedule), every log flushed, then the marker."""
        for key, hwm in op.high_watermarks.items():
            if key in self.logs:
                self.logs[key].checkpoint_hw(hwm, now)
        for plog in self.logs.values():
            plog.flush(now)
        write_clean_shutdown(self.cfg.data_dir, op.broker_epoch, self.durability, now)

    def body(self, message: Any) -> Any:
        """A reply as it goes on the wire: a fetch response gets its record bytes here."""
        if not isinstance(message, PendingFetch):
            return message
        for result, spec in zip(message.response.partitions, message.reads):
            if spec is not None:
                result.records = self.log_for(result.topic, result.partition).read(spec.offset, spec.max_bytes,
                                                                                   spec.upper)
        return message.response

    # ---------------------------------------------------------------- status
    def status(self) -> dict:
        d = self.state.describe()
        d["kind"] = "broker"
        d["node"] = self.cfg.name
        return d

    def endpoint_of(self, broker_id: int) -> str | None:
        return self.state.image.endpoint_of(broker_id)

    def close(self) -> None:
        """Release the files (flushing nothing: a controlled shutdown flushed already)."""
        for plog in self.logs.values():
            plog.close()
        self.metadata_copy.close()
        self.durability.close()
