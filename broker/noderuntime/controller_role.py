"""The controller role's I/O: the metadata log on disk, and serving it to brokers by long
poll (R3, R22).

An adapter between the pure `Controller` and the node's single loop (`broker/node.py`):
inputs go to the controller, `Outputs` go back to the loop, which carries them out. Its
one disk operation, appending records to the metadata log, commits them (a single node
commits what it wrote), so `persist` answers with what the commit releases: the
controller's held replies and events, and the parked metadata fetches the new records
satisfy. The Raft quorum will replace the log behind the same seam.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from broker.common.errors import Errors
from broker.noderuntime.config import NodeConfig
from broker.noderuntime.metadata_log import SingleNodeMetadataLog
from broker.protocol.controller import Controller, ControllerConfig
from broker.protocol.messages import (
    MetadataFetchRequest,
    MetadataFetchResponse,
    MetadataRequest,
)
from broker.protocol.outputs import AppendMetadata, Outputs, Reply
from broker.protocol.records import from_dict, to_dict


@dataclass
class _ParkedFetch:
    handle: Any
    request: MetadataFetchRequest
    deadline: float


class ControllerRole:
    def __init__(self, cfg: NodeConfig) -> None:
        self.cfg = cfg
        cfg.data_dir.mkdir(parents=True, exist_ok=True)
        self.log = SingleNodeMetadataLog(cfg.data_dir / "metadata.jsonl")
        self.controller = Controller(cfg.id, ControllerConfig.from_settings(cfg.timeouts, cfg.protocol,
                                                                           cfg.placement_seed))
        # A restarted controller rebuilds its state from its own committed log.
        for offset, rec in enumerate(self.log.records):
            self.controller.replay(offset, from_dict(rec))
        self.parked: list[_ParkedFetch] = []

    def start(self, now: float) -> Outputs:
        out = Outputs()
        out.event("controller-elected", controller_id=self.cfg.id, term=1)
        return out

    def tick(self, now: float) -> Outputs:
        return self.controller.tick(now).extend(self._serve_parked(now))

    def on_request(self, handle: Any, msg: Any, now: float) -> Outputs:
        if isinstance(msg, MetadataFetchRequest):
            out = Outputs()
            if msg.fetch_offset < self.log.committed_end or msg.max_wait_ms <= 0:
                out.messages.append(Reply(handle, self._metadata(msg)))
            else:
                self.parked.append(_ParkedFetch(handle, msg, now + msg.max_wait_ms / 1000.0))
            return out
        if isinstance(msg, MetadataRequest):
            out = Outputs()
            out.messages.append(Reply(handle, self.controller.metadata_response(msg.topics)))
            return out
        return self.controller.on_request(handle, msg, now)

    def on_response(self, correlation: Any, msg: Any, now: float) -> Outputs:
        return self.controller.on_response(correlation, msg, now)

    def begin_shutdown(self, now: float) -> Outputs:
        return Outputs(stop=0)

    # ---------------------------------------------------------------- outputs, carried out for the loop
    def persist(self, op: Any, now: float) -> Outputs:
        """Append the records (committed once written) and release what waited for them."""
        if not isinstance(op, AppendMetadata):
            raise TypeError(f"unknown controller disk op {op!r}")
        if op.base_offset != self.log.committed_end:
            raise RuntimeError(f"controller appends at {op.base_offset}, log ends at {self.log.committed_end}")
        self.log.append([to_dict(r) for r in op.records])
        return self.controller.on_committed(self.log.committed_end).extend(self._serve_parked(now))

    def body(self, message: Any) -> Any:
        return message

    def _metadata(self, req: MetadataFetchRequest) -> MetadataFetchResponse:
        return MetadataFetchResponse(Errors.NONE, self.log.read(req.fetch_offset, req.max_records),
                                     base_offset=req.fetch_offset, high_watermark=self.log.committed_end,
                                     leader_id=self.cfg.id)

    def _serve_parked(self, now: float) -> Outputs:
        """Answer the parked fetches that new records or their deadline satisfy."""
        out = Outputs()
        end = self.log.committed_end
        still = []
        for p in self.parked:
            if p.request.fetch_offset < end or now >= p.deadline:
                out.messages.append(Reply(p.handle, self._metadata(p.request)))
            else:
                still.append(p)
        self.parked = still
        return out

    def status(self) -> dict:
        d = self.controller.describe()
        d["kind"] = "controller"
        d["node"] = self.cfg.name
        d["metadata_end"] = self.log.committed_end
        return d

    def close(self) -> None:
        self.log.close()
