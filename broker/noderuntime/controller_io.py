"""The controller role's I/O: the metadata log on disk, serving it to brokers by long
poll, and carrying out the pure `Controller`'s outputs."""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from broker.common.errors import Errors
from broker.noderuntime.config import NodeConfig
from broker.noderuntime.metadata_log import SingleNodeMetadataLog
from broker.protocol.controller import AppendMetadata, Controller, ControllerConfig
from broker.protocol.messages import MetadataFetchRequest, MetadataFetchResponse, MetadataRequest
from broker.protocol.outputs import Outputs, Reply, Send
from broker.protocol.records import from_dict, to_dict

if TYPE_CHECKING:
    from broker.node import Node

log = logging.getLogger("isrlab.controller")


@dataclass
class _ParkedFetch:
    handle: Any
    request: MetadataFetchRequest
    deadline: float


class ControllerIO:
    def __init__(self, cfg: NodeConfig, node: "Node") -> None:
        self.cfg = cfg
        self.node = node
        cfg.data_dir.mkdir(parents=True, exist_ok=True)
        self.log = SingleNodeMetadataLog(cfg.data_dir / "metadata.jsonl")
        p = cfg.protocol
        self.controller = Controller(cfg.id, ControllerConfig(
            session_timeout=cfg.timing["session_timeout"], elr=bool(p.get("elr", True)),
            unclean_leader_election=bool(p.get("unclean_leader_election", False)),
            fencing=p.get("fencing", "kraft"), placement_seed=cfg.placement_seed))
        # A restarted controller rebuilds its state from its own committed log.
        for offset, rec in enumerate(self.log.records):
            self.controller.replay(offset, from_dict(rec))
        self.parked: list[_ParkedFetch] = []
        node.events.record("controller-elected", {"controller_id": cfg.id, "term": 1})

    def tick(self, now: float) -> None:
        self.perform(self.controller.tick(now))
        if self.parked:
            self._serve_parked(now)

    def on_request(self, handle: Any, msg: Any, now: float) -> None:
        if isinstance(msg, MetadataFetchRequest):
            if msg.fetch_offset < self.log.committed_end or msg.max_wait_ms <= 0:
                self.node.reply(handle, self._metadata(msg))
            else:
                self.parked.append(_ParkedFetch(handle, msg, now + msg.max_wait_ms / 1000.0))
            return
        if isinstance(msg, MetadataRequest):
            self.node.reply(handle, self.controller.metadata_response(msg.topics))
            return
        self.perform(self.controller.on_request(handle, msg, now))

    def on_response(self, correlation: Any, msg: Any, now: float) -> None:
        """A single controller sends no requests of its own."""

    def _metadata(self, req: MetadataFetchRequest) -> MetadataFetchResponse:
        return MetadataFetchResponse(Errors.NONE, self.log.read(req.fetch_offset, req.max_records),
                                     base_offset=req.fetch_offset, high_watermark=self.log.committed_end,
                                     leader_id=self.cfg.id)

    def _serve_parked(self, now: float) -> None:
        end = self.log.committed_end
        still = []
        for p in self.parked:
            if p.request.fetch_offset < end or now >= p.deadline:
                self.node.reply(p.handle, self._metadata(p.request))
            else:
                still.append(p)
        self.parked = still

    def perform(self, out: Outputs) -> None:
        while out:
            appended = False
            for op in out.disk:
                if isinstance(op, AppendMetadata):
                    if op.base_offset != self.log.committed_end:
                        raise RuntimeError(f"controller appends at {op.base_offset}, log ends at {self.log.committed_end}")
                    self.log.append([to_dict(r) for r in op.records])
                    appended = True
                else:
                    raise TypeError(f"unknown controller disk op {op!r}")
            for m in out.messages:
                if isinstance(m, Reply):
                    self.node.reply(m.ctx, m.message)
                elif isinstance(m, Send):
                    self.node.send(m.destination, m.message, m.correlation, m.timeout_ms)
            for ev in out.events:
                self.node.events.record(ev.kind, ev.fields)
            out = self.controller.on_committed(self.log.committed_end) if appended else Outputs()
        if self.parked:
            self._serve_parked(time.monotonic())

    def begin_shutdown(self, now: float) -> None:
        self.node.finish(0)

    def status(self) -> dict:
        d = self.controller.describe()
        d["kind"] = "controller"
        d["node"] = self.cfg.name
        d["metadata_end"] = self.log.committed_end
        return d

    def close(self) -> None:
        self.log.close()
