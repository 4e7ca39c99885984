"""The controller quorum's replicated log (R22), Raft as a pure state machine, like etcd's raft.

Inputs are `tick(now)`, `step(msg, now)` for a Raft message from a peer and `propose(records)`
on the leader; every input returns an `Outputs`: the term and vote to persist (`SaveHardState`)
and the log suffix to persist (`SaveEntries`), which the runtime makes durable with a real
fsync before it sends the messages of the same `Outputs` (a vote or an acknowledgement is
never sent for state that a crash could forget), then the messages. The commit index is
`commit_end` (the exclusive end of the committed log); the controller applies entries below
it, in order, once each.

isrlab's metadata offsets are Raft log indexes: entry i is metadata record i. What this
module adds to the textbook algorithm:
- pre-vote (Raft thesis 9.6): a node whose election timer fires first asks whether it could
  win, without raising its term, so an isolated node that comes back cannot depose a healthy
  leader by its inflated term;
- leader stickiness: a node that heard from a leader within the minimum election timeout
  ignores (pre-)vote requests, as etcd's checkQuorum does;
- check-quorum: a leader that has not heard from a majority within the maximum election
  timeout steps down, so an isolated leader stops believing it leads;
- a new leader appends one entry of its own term at once (`LEADER_CHANGE`), because only
  entries of the current term are committed by counting replicas (Raft figure 8), and
  committing it commits everything before it;
- snapshots (Raft section 7, KIP-630): `compact(end, state)` replaces the committed prefix
  below `end` by the state machine's state after it, so the log stays short; a follower that
  needs an entry the leader no longer holds (a new, lagging or emptied voter) gets the
  snapshot (`InstallSnapshotRequest`) and then the log after it. The log then holds the
  entries from `log_start` (the snapshot's end) on.
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from broker.common.names import node_name
from broker.protocol.messages import (
    AppendEntriesRequest,
    AppendEntriesResponse,
    InstallSnapshotRequest,
    RaftEntry,
    VoteRequest,
    VoteResponse,
)
from broker.protocol.outputs import Outputs, Send

FOLLOWER, PRE_CANDIDATE, CANDIDATE, LEADER = "follower", "pre-candidate", "candidate", "leader"
NO_LEADER = -1
#: the record a new leader appends in its own term (see the module docstring), the type name
#: of broker.protocol.records.LeaderChangeRecord
LEADER_CHANGE = "leader-change"
#: entries an AppendEntries carries at most
MAX_BATCH = 500


@dataclass(frozen=True)
class RaftConfig:
    node_id: int
    voters: tuple[int, ...]
    election_timeout: tuple[float, float]  # seconds: each timer is drawn from this range
    heartbeat_interval: float
    request_timeout: float = 1.0

    @property
    def majority(self) -> int:
        return len(self.voters) // 2 + 1


@dataclass
class SaveHardState:
    """Persist the term and the vote, durably, before anything of this `Outputs` is sent."""
    term: int
    voted_for: int


@dataclass
class SaveEntries:
    """Make the log hold `entries` from index `first` on: whatever was at or after `first` is
    replaced (a conflicting suffix is truncated). Durable before anything is sent."""
    first: int
    entries: list[RaftEntry]


@dataclass(frozen=True)
class RaftSnapshot:
    """The state machine after the entries below `end`, which it replaces."""
    end: int  # exclusive: entries 0 .. end-1 are in it
    last_term: int  # the term of entry end-1
    state: dict  # opaque to Raft: what the state machine needs to resume at `end`


@dataclass
class SaveSnapshot:
    """Make `snapshot` durable, then the log hold exactly `entries` from `snapshot.end` on
    (everything below is in the snapshot). Durable before anything is sent."""
    snapshot: RaftSnapshot
    entries: list[RaftEntry]


@dataclass
class _Progress:
    """What the leader knows of one follower."""
    next_index: int
    match_end: int = 0  # exclusive end of the prefix known to match the leader's log
    last_heard: float = 0.0
    in_flight_until: float = 0.0  # an AppendEntries is out until then (or until answered)


@dataclass
class RaftNode:
    config: RaftConfig
    term: int = 0
    voted_for: int = NO_LEADER
    log: list[RaftEntry] = field(default_factory=list)  # the entries from log_start on
    seed: int = 0
    snapshot: RaftSnapshot | None = None

    def __post_init__(self) -> None:
        self.role = FOLLOWER
        self.leader_id = NO_LEADER
        self.commit_end = self.log_start  # a snapshot holds committed entries only
        self._rng = random.Random(f"raft:{self.seed}:{self.config.node_id}")
        self._election_deadline: float | None = None
        self._last_leader_contact: float | None = None
        self._votes: set[int] = set()
        #: the highest commit end among the granted votes (this node's own included)
        self._voters_commit_end = self.commit_end
        #: as leader: the highest commit end the voters that elected it knew. Below it, an
        #: earlier leader saw each entry committed; from it on, one may have died before it saw
        #: its last entries committed (the controller role records those entries' events when
        #: it commits them again). A quorum of one has nobody else's to inherit: the log's end
        self.elected_commit_end = self.commit_end
        self._progress: dict[int, _Progress] = {}
        self._next_heartbeat = 0.0

    # ------------------------------------------------------------------ views
    @cached_property
    def peers(self) -> tuple[int, ...]:
        """The other voters. Worked out once: the config is frozen and a node keeps its own (a
        controller asks after every input, on its ticks and on every proposal)."""
        return tuple(v for v in self.config.voters if v != self.config.node_id)

    @property
    def log_start(self) -> int:
        """The first index held as an entry; those below are in the snapshot."""
        return self.snapshot.end if self.snapshot is not None else 0

    @property
    def log_end(self) -> int:
        return self.log_start + len(self.log)

    def entry(self, index: int) -> RaftEntry:
        """Entry `index`, which must be held (log_start <= index < log_end)."""
        return self.log[index - self.log_start]

    def entries(self, start: int, stop: int) -> list[RaftEntry]:
        """The held entries of [start, stop)."""
        base = self.log_start
        return self.log[max(0, start - base):max(0, stop - base)]

    def last_term(self) -> int:
        return self.term_at(self.log_end - 1)

    def term_at(self, index: int) -> int:
        """The term of entry `index`: the snapshot's last term for the entry just below the
        log; 0 for index -1 (before the log) and for an index not held."""
        if self.log_start <= index < self.log_end:
            return self.log[index - self.log_start].term
        if self.snapshot is not None and index == self.snapshot.end - 1:
            return self.snapshot.last_term
        return 0

    def describe(self) -> dict:
        d: dict[str, Any] = {"node_id": self.config.node_id, "role": self.role, "term": self.term,
                             "leader_id": self.leader_id, "voted_for": self.voted_for,
                             "log_start": self.log_start, "log_end": self.log_end, "commit_end": self.commit_end}
        if self.role == LEADER:
            d["followers"] = {str(p): {"match_end": s.match_end, "next_index": s.next_index}
                              for p, s in sorted(self._progress.items())}
        return d

    # ------------------------------------------------------------------ time
    def tick(self, now: float) -> Outputs:
        out = Outputs()
        if self._election_deadline is None:
            self._reset_election_timer(now)
            if self._fresh() and self.config.node_id == min(self.config.voters):
                self._election_deadline = now  # bootstrap: see `_fresh`
        if not self.peers and self.role != LEADER:
            self._start_election(now, out, pre_vote=False)  # a quorum of one elects itself at once
            return out
        if self.role == LEADER:
            if not self._quorum_alive(now):
                self._become_follower(self.term, NO_LEADER, now, out)  # check-quorum
                return out
            if self.peers and now >= self._next_heartbeat:
                self._next_heartbeat = now + self.config.heartbeat_interval
                for peer in self.peers:
                    self._replicate(peer, now, out, force=True)
            return out
        if now >= self._election_deadline:
            self._start_election(now, out, pre_vote=True)
        return out

    def next_tick_at(self) -> float:
        """When `tick` next has something to do: the election timeout, or on the leader its
        next heartbeat or the moment check-quorum would find the majority silent (-inf: at
        the next tick). A tick before then changes nothing."""
        if self._election_deadline is None:
            return -math.inf
        if self.role != LEADER:
            return self._election_deadline if self.peers else -math.inf
        if not self.peers:
            return math.inf  # a quorum of one has no one to send heartbeats to or hear from
        needed = self.config.majority - 1  # peers that must have been heard, besides ourselves
        longest = self.config.election_timeout[1]
        heard_until = sorted((p.last_heard + longest for p in self._progress.values()), reverse=True)
        return min(self._next_heartbeat, heard_until[needed - 1])

    # ------------------------------------------------------------------ proposals
    def propose(self, records: list[dict], now: float) -> tuple[int, Outputs] | None:
        """Append `records` at the end of the leader's log; (first index, outputs), or None when
        this node is not the leader."""
        if self.role != LEADER:
            return None
        out = Outputs()
        first = self._append([RaftEntry(self.term, r) for r in records], out)
        for peer in self.peers:
            self._replicate(peer, now, out)
        self._advance_commit()
        return first, out

    # ------------------------------------------------------------------ snapshots
    def compact(self, end: int, state: dict) -> Outputs:
        """Replace the committed entries below `end` by `state`, the state machine after them.
        A no-op unless log_start < end <= commit_end."""
        out = Outputs()
        if not self.log_start < end <= self.commit_end:
            return out
        last_term = self.term_at(end - 1)
        del self.log[:end - self.log_start]
        self.snapshot = RaftSnapshot(end, last_term, state)
        out.disk.append(SaveSnapshot(self.snapshot, list(self.log)))
        out.event("metadata-snapshot", end=end, term=self.snapshot.last_term, how="taken")
        return out

    # ------------------------------------------------------------------ messages
    def step(self, msg: object, now: float) -> Outputs:
        out = Outputs()
        if isinstance(msg, VoteRequest):
            self._on_vote_request(msg, now, out)
        elif isinstance(msg, VoteResponse):
            self._on_vote_response(msg, now, out)
        elif isinstance(msg, AppendEntriesRequest):
            self._on_append(msg, now, out)
        elif isinstance(msg, AppendEntriesResponse):
            self._on_append_response(msg, now, out)
        elif isinstance(msg, InstallSnapshotRequest):
            self._on_install_snapshot(msg, now, out)
        return out

    def on_timeout(self, peer: int, now: float) -> None:
        """A request to `peer` got no answer: it may be sent again."""
        progress = self._progress.get(peer)
        if progress is not None:
            progress.in_flight_until = 0.0

    def _on_vote_request(self, msg: VoteRequest, now: float, out: Outputs) -> None:
        if msg.candidate_id not in self.config.voters:
            return  # a non-voter has no vote to ask for
        if self._heard_from_leader_recently(now) and msg.candidate_id != self.leader_id:
            out.messages.append(self._send(msg.candidate_id, VoteResponse(self.term, self.config.node_id, False,
                                                                          msg.pre_vote)))
            return  # stickiness: a live leader is not deposed
        if msg.term < self.term:
            out.messages.append(self._send(msg.candidate_id, VoteResponse(self.term, self.config.node_id, False,
                                                                          msg.pre_vote)))
            return
        up_to_date = (msg.last_log_term, msg.last_log_index) >= (self.last_term(), self.log_end - 1)
        if msg.pre_vote:
            # granted without changing our term or vote: only "you could win"
            granted = up_to_date and msg.term > self.term
            out.messages.append(self._send(msg.candidate_id, VoteResponse(msg.term if granted else self.term,
                                                                          self.config.node_id, granted, True)))
            return
        if msg.term > self.term:
            self._become_follower(msg.term, NO_LEADER, now, out)
        granted = up_to_date and self.voted_for in (NO_LEADER, msg.candidate_id)
        if granted:
            self.voted_for = msg.candidate_id
            out.disk.append(SaveHardState(self.term, self.voted_for))
            self._reset_election_timer(now)
        out.messages.append(self._send(msg.candidate_id, VoteResponse(self.term, self.config.node_id, granted, False,
                                                                      self.commit_end)))

    def _on_vote_response(self, msg: VoteResponse, now: float, out: Outputs) -> None:
        if msg.term > self.term and not (msg.pre_vote and msg.granted):
            self._become_follower(msg.term, NO_LEADER, now, out)
            return
        if msg.voter_id not in self.config.voters or not msg.granted:
            return
        if msg.pre_vote and self.role == PRE_CANDIDATE and msg.term == self.term + 1:
            self._votes.add(msg.voter_id)
            if len(self._votes) >= self.config.majority:
                self._start_election(now, out, pre_vote=False)
        elif not msg.pre_vote and self.role == CANDIDATE and msg.term == self.term:
            self._votes.add(msg.voter_id)
            if msg.commit_end > self._voters_commit_end:
                self._voters_commit_end = msg.commit_end
            if len(self._votes) >= self.config.majority:
                self._become_leader(now, out)

    def _on_append(self, msg: AppendEntriesRequest, now: float, out: Outputs) -> None:
        if msg.prev_log_index < -1:
            return  # malformed: no leader sends it, and acting on it would index from the end
        if not self._accept_leader(msg.term, msg.leader_id, _entries_well_formed(msg), now, out):
            return
        prev, new = msg.prev_log_index, list(msg.entries)
        match_end = prev + 1 + len(new)
        if prev < self.log_start - 1:
            # entries below log_start are in our snapshot, so committed, so the leader's own;
            # the one at log_start - 1 is the snapshot's last, whose term we know
            inside = new[:self.log_start - 1 - prev]
            if len(inside) == self.log_start - 1 - prev and inside[-1].term != self.term_at(self.log_start - 1):
                return  # it contradicts our snapshot: no correct leader sends it
            del new[:self.log_start - 1 - prev]
            prev = self.log_start - 1
            if not new:
                out.messages.append(self._send(msg.leader_id, AppendEntriesResponse(
                    self.term, self.config.node_id, True, match_end)))
                return
        elif prev >= self.log_end or (prev >= 0 and self.term_at(prev) != msg.prev_log_term):
            # the leader backs off to what we may share: at most our end, below the mismatch
            hint = min(self.log_end, max(0, prev))
            out.messages.append(self._send(msg.leader_id, AppendEntriesResponse(
                self.term, self.config.node_id, False, hint)))
            return
        index = prev + 1
        # skip entries we already hold; truncate at the first conflict (log matching)
        while new and index < self.log_end and self.term_at(index) == new[0].term:
            index += 1
            new.pop(0)
        if new:
            if index < self.log_end and index < self.commit_end:
                return  # a leader never rewrites committed entries: drop the malformed message
            del self.log[index - self.log_start:]
            self.log.extend(new)
            out.disk.append(SaveEntries(index, list(new)))
        self.commit_end = max(self.commit_end, min(msg.leader_commit, match_end))
        out.messages.append(self._send(msg.leader_id, AppendEntriesResponse(
            self.term, self.config.node_id, True, match_end)))

    def _accept_leader(self, term: int, leader_id: int, well_formed: bool, now: float, out: Outputs) -> bool:
        """Whether a message from a leader is to be acted on: refused (with our term) when it is
        from an old term, a non-voter or malformed, or when no correct node can have sent it:
        ourselves, or another leader of the term we lead (one leader per term, Raft 5.2);
        otherwise we follow that leader, and its contact holds off our election."""
        impossible = leader_id == self.config.node_id or (self.role == LEADER and term == self.term)
        if term < self.term or leader_id not in self.config.voters or not well_formed or impossible:
            out.messages.append(self._send(leader_id, AppendEntriesResponse(
                self.term, self.config.node_id, False, self.log_end)))
            return False
        if term > self.term or self.role != FOLLOWER or self.leader_id != leader_id:
            self._become_follower(term, leader_id, now, out)
        self._last_leader_contact = now
        self._reset_election_timer(now)
        return True

    def _on_install_snapshot(self, msg: InstallSnapshotRequest, now: float, out: Outputs) -> None:
        """Raft section 7: the leader no longer holds the entries we need. A snapshot that
        ends inside what we have committed changes nothing; otherwise our log gives way to it,
        keeping the entries after it only when they follow on from its last entry."""
        # Terms never decrease along a log, so a snapshot reaching past our commit ends in the
        # term of our last committed entry or a later one.
        well_formed = msg.end >= 1 and 0 <= msg.last_term <= msg.term and (
            msg.end <= self.commit_end or msg.last_term >= self.term_at(self.commit_end - 1))
        if not self._accept_leader(msg.term, msg.leader_id, well_formed, now, out):
            return
        if msg.end > self.commit_end:
            keep = (self.log_start <= msg.end - 1 < self.log_end and self.term_at(msg.end - 1) == msg.last_term)
            self.log = self.log[msg.end - self.log_start:] if keep else []
            self.snapshot = RaftSnapshot(msg.end, msg.last_term, dict(msg.state))
            self.commit_end = msg.end
            out.disk.append(SaveSnapshot(self.snapshot, list(self.log)))
            out.event("metadata-snapshot", end=msg.end, term=msg.last_term, how="installed",
                      leader=msg.leader_id)
        out.messages.append(self._send(msg.leader_id, AppendEntriesResponse(
            self.term, self.config.node_id, True, msg.end)))

    def _on_append_response(self, msg: AppendEntriesResponse, now: float, out: Outputs) -> None:
        if msg.term > self.term:
            self._become_follower(msg.term, NO_LEADER, now, out)
            return
        progress = self._progress.get(msg.follower_id)
        if self.role != LEADER or msg.term != self.term or progress is None:
            return
        progress.last_heard = now
        progress.in_flight_until = 0.0
        if msg.success:
            progress.match_end = max(progress.match_end, min(msg.match_end, self.log_end))
            progress.next_index = max(progress.next_index, progress.match_end)
            self._advance_commit()
        else:
            progress.next_index = max(0, min(progress.next_index - 1, msg.match_end))
            # a follower that lost its disk no longer holds what it acknowledged: believe it, so
            # that what is sent next (a snapshot, then entries) starts where it really is
            progress.match_end = min(progress.match_end, progress.next_index)
        if progress.next_index < self.log_end:
            self._replicate(msg.follower_id, now, out)

    # ------------------------------------------------------------------ transitions
    def _start_election(self, now: float, out: Outputs, pre_vote: bool) -> None:
        self._reset_election_timer(now)
        self.leader_id = NO_LEADER
        self._votes = {self.config.node_id}
        self._voters_commit_end = self.commit_end
        if pre_vote:
            self.role = PRE_CANDIDATE
            term = self.term + 1
        else:
            self.role = CANDIDATE
            self.term += 1
            self.voted_for = self.config.node_id
            out.disk.append(SaveHardState(self.term, self.voted_for))
            term = self.term
        if len(self._votes) >= self.config.majority:  # a quorum of one
            if pre_vote:
                self._start_election(now, out, pre_vote=False)
            else:
                self._become_leader(now, out)
            return
        for peer in self.peers:
            out.messages.append(self._send(peer, VoteRequest(term, self.config.node_id, self.log_end - 1,
                                                             self.last_term(), pre_vote)))

    def _become_follower(self, term: int, leader: int, now: float, out: Outputs) -> None:
        if term > self.term:
            self.term = term
            self.voted_for = NO_LEADER
            out.disk.append(SaveHardState(self.term, self.voted_for))
        self.role = FOLLOWER
        self.leader_id = leader
        self._votes = set()
        self._progress = {}
        self._reset_election_timer(now)

    def _become_leader(self, now: float, out: Outputs) -> None:
        self.role = LEADER
        self.leader_id = self.config.node_id
        self.elected_commit_end = min(self._voters_commit_end, self.log_end) if self.peers else self.log_end
        self._progress = {p: _Progress(next_index=self.log_end, last_heard=now) for p in self.peers}
        self._next_heartbeat = now + self.config.heartbeat_interval
        self._append([RaftEntry(self.term, {"type": LEADER_CHANGE, "leader": self.config.node_id,
                                            "term": self.term})], out)
        for peer in self.peers:
            self._replicate(peer, now, out, force=True)
        self._advance_commit()
        out.event("controller-elected", controller_id=self.config.node_id, term=self.term)

    # ------------------------------------------------------------------ leader work
    def _append(self, entries: list[RaftEntry], out: Outputs) -> int:
        first = self.log_end
        self.log.extend(entries)
        out.disk.append(SaveEntries(first, list(entries)))
        return first

    def _replicate(self, peer: int, now: float, out: Outputs, force: bool = False) -> None:
        progress = self._progress[peer]
        if not force and now < progress.in_flight_until:
            return
        progress.in_flight_until = now + self.config.request_timeout
        if progress.next_index < self.log_start:
            assert self.snapshot is not None
            out.messages.append(self._send(peer, InstallSnapshotRequest(
                self.term, self.config.node_id, self.snapshot.end, self.snapshot.last_term, self.snapshot.state)))
            return
        prev = progress.next_index - 1
        entries = self.entries(progress.next_index, progress.next_index + MAX_BATCH)
        out.messages.append(self._send(peer, AppendEntriesRequest(
            self.term, self.config.node_id, prev, self.term_at(prev), list(entries), self.commit_end)))

    def _advance_commit(self) -> None:
        """Raft 5.3/5.4.2: the highest end a majority holds, if its last entry is of this term."""
        ends = sorted([self.log_end, *(p.match_end for p in self._progress.values())], reverse=True)
        candidate = ends[self.config.majority - 1]
        if candidate > self.commit_end and self.term_at(candidate - 1) == self.term:
            self.commit_end = candidate

    def _quorum_alive(self, now: float) -> bool:
        longest = self.config.election_timeout[1]
        heard = 1 + sum(1 for p in self._progress.values() if p.last_heard + longest >= now)
        return heard >= self.config.majority

    # ------------------------------------------------------------------ helpers
    def _heard_from_leader_recently(self, now: float) -> bool:
        return (self.role == LEADER or (self.leader_id != NO_LEADER and self._last_leader_contact is not None
                and now - self._last_leader_contact < self.config.election_timeout[0]))

    def _fresh(self) -> bool:
        """A voter of a new quorum: no term, no log. The lowest id of a new quorum asks for
        votes at once instead of after a timeout (the others keep theirs, so they do not split
        the vote): a new cluster has an active controller a timeout sooner. Safety never rests
        on timers, so an unlucky start only costs the ordinary election that follows."""
        return self.term == 0 and self.log_end == 0

    def _reset_election_timer(self, now: float) -> None:
        low, high = self.config.election_timeout
        self._election_deadline = now + self._rng.uniform(low, high)

    def _send(self, peer: int, msg: object) -> Send:
        return Send(node_name("controller", peer), msg, correlation=("raft", peer),
                    timeout_ms=max(1, int(self.config.request_timeout * 1000)))


def _entries_well_formed(msg: AppendEntriesRequest) -> bool:
    """What every correct leader's AppendEntries satisfies: the terms of its entries never
    decrease, start no lower than the term before them and end no later than its own."""
    last = max(msg.prev_log_term, 0) if msg.prev_log_index >= 0 else 0
    for entry in msg.entries:
        if entry.term < last or entry.term > msg.term:
            return False
        last = entry.term
    return True
