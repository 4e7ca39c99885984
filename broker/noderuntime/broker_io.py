"""The broker role's I/O: partition logs on disk, the metadata log copy, and the
controlled-shutdown sequence that ends with the clean-shutdown marker (R28, R37)."""
from __future__ import annotations

import logging
import time
import uuid
from typing import TYPE_CHECKING, Any

import orjson

from broker.noderuntime.config import NodeConfig
from broker.protocol.broker import BrokerConfig, BrokerState, LocalReplica, PendingFetch, PersistMetadata
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
from broker.storage.checkpoint import take_clean_shutdown, write_clean_shutdown
from broker.storage.durability import Durability
from broker.storage.flush import FlushPolicy
from broker.storage.layout import METADATA_COPY_FILE, PARTITION_DIR, journal_path
from broker.storage.log import PartitionLog

if TYPE_CHECKING:
    from broker.node import Node

log = logging.getLogger("isrlab.broker")


class BrokerIO:
    def __init__(self, cfg: NodeConfig, node: "Node") -> None:
        self.cfg = cfg
        self.node = node
        now = time.monotonic()
        cfg.data_dir.mkdir(parents=True, exist_ok=True)
        self.durability = Durability(cfg.data_dir, cfg.storage["fsync"], cfg.storage["writeback"],
                                     journal_path(cfg.data_dir))
        self.segment_bytes = int(cfg.storage["segment_bytes"])
        self.logs: dict[tuple[str, int], PartitionLog] = {}
        previous = take_clean_shutdown(cfg.data_dir, self.durability)
        local = self._recover_logs(now)
        self.metadata_path = cfg.data_dir / METADATA_COPY_FILE
        records = self._read_metadata_copy()
        self.metadata_fd = self.metadata_path.open("ab")
        t = cfg.timing
        self.state = BrokerState(BrokerConfig(
            broker_id=cfg.id, rack=cfg.rack, incarnation_id=uuid.uuid4().hex,
            heartbeat_interval=t["heartbeat_interval"], session_timeout=t["session_timeout"],
            replica_lag_max=t["replica_lag_max"], fetch_max_wait=t["fetch_max_wait"],
            truncation=cfg.protocol.get("truncation", "leader-epoch"),
            elr=bool(cfg.protocol.get("elr", True)),
            request_timeout=max(0.5, t["session_timeout"]),
            hw_checkpoint_interval=t["hw_checkpoint_interval"]),
            local, previous if previous is not None else -1, records)
        node.events.record("broker-started", {"clean_shutdown_epoch": previous, "partitions": len(local)})
        self.next_storage_tick = now

    # ---------------------------------------------------------------- startup
    def _flush_policy(self, topic: str) -> FlushPolicy:
        spec = self.cfg.topics.get(topic, {}).get("flush")
        return FlushPolicy.from_dict(spec) if spec else FlushPolicy(messages=1000, interval=1.0)

    def _recover_logs(self, now: float) -> dict[tuple[str, int], LocalReplica]:
        local: dict[tuple[str, int], LocalReplica] = {}
        for d in sorted(self.cfg.data_dir.iterdir()):
            m = PARTITION_DIR.match(d.name)
            if not d.is_dir() or not m:
                continue
            topic, partition = m["topic"], int(m["partition"])
            plog, report = PartitionLog.open(self.cfg.data_dir, topic, partition, self.segment_bytes,
                                             self._flush_policy(topic), self.durability, now)
            self.logs[(topic, partition)] = plog
            self.node.events.record("recovered", {
                "topic": topic, "partition": partition, "valid_to": report.valid_to,
                "dropped_bytes": report.dropped_bytes, "reason": report.reason})
            local[(topic, partition)] = LocalReplica(plog.log_end_offset, min(plog.hw_checkpoint, plog.log_end_offset),
                                                     plog.epochs, plog.log_start_offset)
        return local

    def _read_metadata_copy(self) -> list[tuple[int, dict]]:
        out: list[tuple[int, dict]] = []
        if not self.metadata_path.exists():
            return out
        for line in self.metadata_path.read_bytes().splitlines():
            try:
                offset, rec = orjson.loads(line)
            except (orjson.JSONDecodeError, ValueError, TypeError):
                break  # a torn last line: the rest is fetched again from the controller
            out.append((offset, rec))
        return out

    def log_for(self, topic: str, partition: int) -> PartitionLog:
        key = (topic, partition)
        plog = self.logs.get(key)
        if plog is None:
            plog, _ = PartitionLog.open(self.cfg.data_dir, topic, partition, self.segment_bytes,
                                        self._flush_policy(topic), self.durability, time.monotonic())
            self.logs[key] = plog
        return plog

    # ---------------------------------------------------------------- inputs
    def tick(self, now: float) -> None:
        self.perform(self.state.tick(now))
        if now >= self.next_storage_tick:
            self.next_storage_tick = now + 0.05
            for plog in self.logs.values():
                plog.tick(now)
            self.durability.tick(now)

    def on_request(self, handle: Any, msg: Any, now: float) -> None:
        self.perform(self.state.on_request(handle, msg, now))

    def on_response(self, correlation: Any, msg: Any, now: float) -> None:
        self.perform(self.state.on_response(correlation, msg, now))

    def begin_shutdown(self, now: float) -> None:
        self.state.begin_controlled_shutdown()
        self.perform(self.state.tick(now))

    # ---------------------------------------------------------------- outputs, in order
    def perform(self, out: Outputs) -> None:
        if not out:
            return
        now = time.monotonic()
        for op in out.disk:
            self._disk(op, now)
        for m in out.messages:
            if isinstance(m, Send):
                self.node.send(m.destination, m.message, m.correlation, m.timeout_ms)
            elif isinstance(m, Reply):
                msg = m.message
                if isinstance(msg, PendingFetch):
                    msg = self._fill(msg)
                self.node.reply(m.ctx, msg)
        for ev in out.events:
            self.node.events.record(ev.kind, ev.fields)
        if self.state.state == "stopped" and self.node.exit_code is None:
            self._finish_controlled_shutdown(now)

    def _disk(self, op: Any, now: float) -> None:
        if isinstance(op, AppendRecords):
            self.log_for(op.topic, op.partition).append_record_set(op.base_offset, op.leader_epoch, op.record_set, now)
        elif isinstance(op, AppendBatches):
            self.log_for(op.topic, op.partition).append_batches(op.batches, now)
        elif isinstance(op, Truncate):
            self.log_for(op.topic, op.partition).truncate_to(op.offset, now)
        elif isinstance(op, AssignEpoch):
            self.log_for(op.topic, op.partition).assign_epoch(op.epoch, op.start_offset, now)
        elif isinstance(op, CheckpointHighWatermark):
            self.log_for(op.topic, op.partition).checkpoint_hw(op.high_watermark, now)
        elif isinstance(op, PersistMetadata):
            self.metadata_fd.write(b"".join(orjson.dumps([o, r], option=orjson.OPT_APPEND_NEWLINE)
                                            for o, r in op.records))
            self.metadata_fd.flush()
        else:
            raise TypeError(f"unknown disk op {op!r}")

    def _fill(self, pending: PendingFetch) -> Any:
        for result, spec in zip(pending.response.partitions, pending.reads):
            if spec is not None:
                result.records = self.log_for(result.topic, result.partition).read(spec.offset, spec.max_bytes, spec.upper)
        return pending.response

    def _finish_controlled_shutdown(self, now: float) -> None:
        """R28/R37: flush everything, then write our broker epoch as the clean-shutdown marker.
        The final HWMs are checkpointed here; while running, the partitions schedule it."""
        for key, p in self.state.partitions.items():
            if key in self.logs:
                self.logs[key].checkpoint_hw(p.high_watermark, now)
        for plog in self.logs.values():
            plog.flush(now)
        write_clean_shutdown(self.cfg.data_dir, self.state.broker_epoch, self.durability, now)
        self.node.events.record("clean-shutdown", {"broker_epoch": self.state.broker_epoch})
        self.node.finish(0)

    # ---------------------------------------------------------------- status
    def status(self) -> dict:
        d = self.state.describe()
        d["kind"] = "broker"
        d["node"] = self.cfg.name
        return d

    def close(self) -> None:
        for plog in self.logs.values():
            plog.close()
        self.metadata_fd.close()
