"""The controller role: one voter of the Raft quorum (R22) and, while it leads, the active
controller; the metadata log on disk, and serving it to brokers by long poll (R3).

An adapter between the pure pieces and the node's single loop (`broker/node.py`): inputs go
to `RaftNode` (`broker/protocol/raft.py`) and, on the active controller, to `Controller`;
their `Outputs` go back to the loop, which carries them out. The active controller's
`AppendMetadata` becomes a Raft proposal; every entry below the commit end is applied to the
controller state once, in order: replayed on a follower, released (held replies and events)
on the leader. Replies and events reach the loop in the same `Outputs` as the log writes
they rest on, so the loop makes those durable first.

A leader becomes the active controller once the entry of its own term is committed (which
commits everything before it) and applied. A controller that stops leading drops its state
and rebuilds it from the committed log: what it had applied but not committed may be gone.
A controller that is not active answers brokers NOT_CONTROLLER, naming the leader it knows.

Once `metadata_snapshot_records` entries have been applied since the last snapshot, the
applied state (the metadata image and the log digest) becomes the Raft snapshot and the log
below it is dropped (on the active controller only when nothing uncommitted is applied yet,
since its image runs ahead of the commit). A broker fetching below the log's start gets the
snapshot with the records after it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from broker.common.errors import Errors
from broker.noderuntime.config import NodeConfig
from broker.noderuntime.quorum_store import QuorumStore
from broker.protocol.controller import Controller, ControllerConfig, record_events
from broker.protocol.messages import (
    AppendEntriesRequest,
    AppendEntriesResponse,
    ErrorResponse,
    InstallSnapshotRequest,
    MetadataFetchRequest,
    MetadataFetchResponse,
    MetadataRequest,
    VoteRequest,
    VoteResponse,
)
from broker.protocol.metadata_image import MetadataImage
from broker.protocol.outputs import AppendMetadata, Outputs, Reply
from broker.protocol.raft import (
    LEADER,
    RaftConfig,
    RaftNode,
    SaveEntries,
    SaveHardState,
    SaveSnapshot,
)
from broker.protocol.records import DIGEST_INTERVAL, BadRecord, chain_digest, from_dict, to_dict

RAFT_MESSAGES = (VoteRequest, VoteResponse, AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest)


@dataclass
class _ParkedFetch:
    handle: Any
    request: MetadataFetchRequest
    deadline: float


def _applicable(msg: Any) -> bool:
    """Whether the metadata a Raft message carries can be applied: every entry a record, a
    snapshot an image of the log below its end. Raft treats both as opaque, so they are
    checked here, before a malformed one is stored, replicated or committed."""
    try:
        if isinstance(msg, AppendEntriesRequest):
            for entry in msg.entries:
                from_dict(entry.record)
        elif isinstance(msg, InstallSnapshotRequest):
            int(msg.state["digest"])
            return MetadataImage.from_state(msg.state["image"]).offset == msg.end - 1
    except (BadRecord, KeyError, TypeError, ValueError):
        return False
    return True


class ControllerRole:
    def __init__(self, cfg: NodeConfig) -> None:
        self.cfg = cfg
        self.store = QuorumStore(cfg.data_dir)
        term, voted_for = self.store.hard_state()
        t = cfg.timeouts
        self.raft = RaftNode(
            RaftConfig(cfg.id, tuple(cfg.controller_ids), t.controller_election_timeout, t.heartbeat_interval,
                       request_timeout=t.controller_request_timeout),
            term=term, voted_for=voted_for, log=list(self.store.entries), seed=cfg.placement_seed,
            snapshot=self.store.snapshot)
        self.active = False
        self.parked: list[_ParkedFetch] = []
        self.malformed = 0  # Raft messages dropped because their records or snapshot cannot be applied
        #: the active controller's `next_tick_at`, kept until this role next calls it with an
        #: input (None: to be asked): it changes only with those, and the role is asked after
        #: every input, most of them metadata fetches that the controller never sees
        self._controller_due: float | None = None
        self._restart_state_machine()

    def _restart_state_machine(self) -> None:
        """A fresh controller state at the snapshot (or the log's start), with nothing after it
        applied yet: `_settle` replays the committed entries that follow."""
        self.controller = self._new_controller()
        self._controller_due = None
        self.applied = 0  # entries applied to self.controller
        self.digest = 0  # I8: the digest of the committed log up to `applied`
        snapshot = self.raft.snapshot
        if snapshot is not None:
            self.controller.load_snapshot(MetadataImage.from_state(snapshot.state["image"]))
            self.applied, self.digest = snapshot.end, int(snapshot.state["digest"])

    def _new_controller(self) -> Controller:
        return Controller(self.cfg.id, ControllerConfig.from_settings(self.cfg.timeouts, self.cfg.protocol,
                                                                      self.cfg.placement_seed))

    # ---------------------------------------------------------------- inputs
    def start(self, now: float) -> Outputs:
        return self.tick(now)

    def tick(self, now: float) -> Outputs:
        """Raft's tick, and the active controller's when it has something due: the role
        ticks for a parked fetch's deadline too (a broker's metadata fetch, every heartbeat
        interval), where the controller's tick, which looks at every session and partition,
        would find nothing to do (a tick before its `next_tick_at` changes nothing)."""
        out = self.raft.tick(now)
        if self.active and self._controller_next_tick() <= now:
            self._controller_due = None
            out.extend(self._propose(self.controller.tick(now), now))
        return self._settle(out, now)

    def _controller_next_tick(self) -> float:
        """The controller's `next_tick_at`, as kept since its last input."""
        due = self._controller_due
        if due is None:
            due = self._controller_due = self.controller.next_tick_at()
        return due

    def next_tick_at(self, now: float) -> float:
        """When `tick` next has something to do: Raft's timers, the active controller's, and
        the parked metadata fetches' deadlines (what else completes them, a commit, is an
        input that serves them at once)."""
        due = self.raft.next_tick_at()
        if self.active:  # (comparisons, not min(), which parses keyword arguments on Python 3.11)
            at = self._controller_next_tick()
            if at < due:
                due = at
        for p in self.parked:
            if p.deadline < due:
                due = p.deadline
        return due

    def on_request(self, handle: Any, msg: Any, now: float) -> Outputs:
        if isinstance(msg, RAFT_MESSAGES):
            if not _applicable(msg):
                self.malformed += 1  # Raft would store it, and the state machine could not apply it
                return Outputs()
            return self._settle(self.raft.step(msg, now), now)
        out = Outputs()
        if isinstance(msg, MetadataRequest):
            out.messages.append(Reply(handle, self.controller.metadata_response(msg.topics)))
            return out
        if not self.active:
            out.messages.append(Reply(handle, ErrorResponse(
                Errors.NOT_CONTROLLER, f"{self.cfg.name} is not the active controller", self.raft.leader_id)))
            return out
        if isinstance(msg, MetadataFetchRequest):
            if msg.fetch_offset < self.raft.commit_end or msg.max_wait_ms <= 0:
                out.messages.append(Reply(handle, self._metadata(msg)))
            else:
                self.parked.append(_ParkedFetch(handle, msg, now + msg.max_wait_ms / 1000.0))
            return out
        self._controller_due = None
        return self._settle(self._propose(self.controller.on_request(handle, msg, now), now), now)

    def on_response(self, correlation: Any, msg: Any, now: float) -> Outputs:
        if correlation[0] == "raft":
            if msg is None or not isinstance(msg, RAFT_MESSAGES):
                self.raft.on_timeout(correlation[1], now)
                return Outputs()
            return self._settle(self.raft.step(msg, now), now)
        if self.active:
            self._controller_due = None
            return self._settle(self._propose(self.controller.on_response(correlation, msg, now), now), now)
        return Outputs()

    def begin_shutdown(self, now: float) -> Outputs:
        return Outputs(stop=0)

    # ---------------------------------------------------------------- the log and the state machine
    def _propose(self, out: Outputs, now: float) -> Outputs:
        """The active controller's records become Raft entries at the same offsets."""
        proposals = [op for op in out.disk if isinstance(op, AppendMetadata)]
        out.disk = [op for op in out.disk if not isinstance(op, AppendMetadata)]
        for op in proposals:
            if op.base_offset != self.raft.log_end:
                raise RuntimeError(f"controller appends at {op.base_offset}, the Raft log ends at {self.raft.log_end}")
            proposed = self.raft.propose([to_dict(r) for r in op.records], now)
            if proposed is None:  # leadership lost mid-input: the records are dropped with the state
                continue
            out.extend(proposed[1])
        return out

    def _settle(self, out: Outputs, now: float) -> Outputs:
        """After any input: step down or up, apply what is newly committed, take a snapshot
        when it is due, serve fetches."""
        if self.active and self.raft.role != LEADER:
            out.messages.extend(self.controller.resign(self.raft.leader_id))
            self._deactivate()
        if self.applied < self.raft.log_start:  # a snapshot from the leader replaced our log
            self._restart_state_machine()
        end = self.raft.commit_end
        if end > self.applied:
            self._controller_due = None  # (committed records: replayed, or released on the active one)
        if self.active:
            if end > self.applied:
                self._digest_through(end, out)
                self.applied = end
                out.extend(self.controller.on_committed(end))
        else:
            self._digest_through(end, out)
            # a new leader commits an earlier leader's last entries, whose events that leader
            # may not have recorded (it died, or dropped them held at `resign`): from the
            # commit end its voters knew on, it records them (the ingest keeps one of each)
            unrecorded = self.raft.elected_commit_end if self.raft.role == LEADER else end
            while self.applied < end:
                record = from_dict(self.raft.entry(self.applied).record)
                self.controller.replay(self.applied, record)
                if self.applied >= unrecorded:
                    out.events.extend(record_events(record, self.applied))
                self.applied += 1
            if self.raft.role == LEADER and self.applied == self.raft.log_end:
                self.active = True  # its own term's entry is committed, and everything before it
        if (self.applied - self.raft.log_start >= self.cfg.metadata_snapshot_records
                and self.controller.log_end_offset == self.applied):
            out.extend(self.raft.compact(self.applied, {"image": self.controller.image.to_state(),
                                                        "digest": self.digest}))
        if self.parked:
            out.extend(self._serve_parked(now))
        return out

    def _digest_through(self, end: int, out: Outputs) -> None:
        """Extend the committed log's digest from `applied` to `end`, recording it every
        DIGEST_INTERVAL records (the brokers record theirs at the same offsets)."""
        for offset in range(self.applied, end):
            self.digest = chain_digest(self.digest, self.raft.entry(offset).record)
            if (offset + 1) % DIGEST_INTERVAL == 0:
                out.event("metadata-committed", offset=offset, digest=self.digest)

    def _deactivate(self) -> None:
        """No longer the leader: forget state built on what may not be committed."""
        self.active = False
        self._restart_state_machine()
        self.parked = []  # the brokers' requests time out and go to the new leader

    # ---------------------------------------------------------------- outputs, carried out for the loop
    def persist(self, op: Any, now: float) -> Outputs:
        if isinstance(op, SaveHardState):
            self.store.save_hard_state(op.term, op.voted_for)
        elif isinstance(op, SaveEntries):
            self.store.save_entries(op.first, op.entries)
        elif isinstance(op, SaveSnapshot):
            self.store.save_snapshot(op.snapshot, op.entries)
        else:
            raise TypeError(f"unknown controller disk op {op!r}")
        return Outputs()

    def body(self, message: Any) -> Any:
        return message

    def _metadata(self, req: MetadataFetchRequest) -> MetadataFetchResponse:
        start = max(0, req.fetch_offset)
        snapshot = None
        if start < self.raft.log_start:  # what the broker needs is in the snapshot only
            snapshot = {"end": self.raft.snapshot.end, **self.raft.snapshot.state}
            start = self.raft.log_start
        stop = min(self.raft.commit_end, start + req.max_records)
        records = [e.record for e in self.raft.entries(start, stop)]
        # (by position: base offset, committed end, leader, snapshot; a keyword call of a
        # dataclass is the slow path of a call on Python 3.11, and every broker fetches in a loop)
        return MetadataFetchResponse(Errors.NONE, records, start, self.raft.commit_end, self.cfg.id, snapshot)

    def _serve_parked(self, now: float) -> Outputs:
        """Answer the parked fetches that new records or their deadline satisfy."""
        out = Outputs()
        still = []
        for p in self.parked:
            if p.request.fetch_offset < self.raft.commit_end or now >= p.deadline:
                out.messages.append(Reply(p.handle, self._metadata(p.request)))
            else:
                still.append(p)
        self.parked = still
        return out

    def status(self) -> dict:
        d = self.controller.describe() if self.active else {"brokers": [], "partitions": []}
        d.update(kind="controller", node=self.cfg.name, active=self.active, quorum=self.raft.describe(),
                 metadata_end=self.raft.commit_end, malformed_raft_messages=self.malformed)
        return d

    def endpoint_of(self, broker_id: int) -> str | None:
        return self.controller.image.endpoint_of(broker_id)

    def close(self) -> None:
        self.store.close()
