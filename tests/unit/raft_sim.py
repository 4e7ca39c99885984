"""A seeded simulation of pure Raft nodes (broker/protocol/raft.py) on virtual time.

The network delays, drops, duplicates and reorders messages and can be cut into groups;
nodes crash and restart from what they made durable (each `Outputs`' disk operations are
applied before its messages leave, as the node runtime does). After every delivery and
tick the invariants Apache Kafka's own Raft simulation checks are asserted: one leader per
term, terms that never go back, commit ends that never go back and are held by a majority,
and committed entries identical on every node that has them. Nodes also take snapshots at
random moments, of a state machine that folds the committed entries into a checksum, so a
lagging or restarted node sometimes needs the leader's snapshot: every snapshot, taken or
installed, must be the state of exactly the committed prefix it replaces.
"""
from __future__ import annotations

import heapq
import itertools
import random
import zlib
from dataclasses import dataclass, field

from broker.protocol.messages import RaftEntry
from broker.protocol.outputs import Outputs, Send
from broker.protocol.raft import (
    LEADER,
    RaftConfig,
    RaftNode,
    RaftSnapshot,
    SaveEntries,
    SaveHardState,
    SaveSnapshot,
)

HEARTBEAT = 0.05
ELECTION = (0.3, 0.6)


@dataclass
class Durable:
    term: int = 0
    voted_for: int = -1
    log: list[RaftEntry] = field(default_factory=list)  # from the snapshot's end on
    snapshot: RaftSnapshot | None = None

    @property
    def start(self) -> int:
        return self.snapshot.end if self.snapshot is not None else 0


def fold(crc: int, entries: list[RaftEntry]) -> int:
    """The simulated state machine: a checksum of the committed entries, in order."""
    for e in entries:
        crc = zlib.crc32(repr((e.term, e.record)).encode(), crc)
    return crc


class Sim:
    def __init__(self, n: int, seed: int, drop: float = 0.05, duplicate: float = 0.02,
                 delay: tuple[float, float] = (0.001, 0.02), snapshot_every: float = 0.0) -> None:
        self.ids = tuple(range(1, n + 1))
        self.rng = random.Random(seed)
        self.seed = seed
        self.drop, self.duplicate, self.delay = drop, duplicate, delay
        self.snapshot_every = snapshot_every  # mean seconds between a node's snapshots; 0: never
        self.now = 0.0
        self.durable = {i: Durable() for i in self.ids}
        self.applied: dict[int, tuple[int, int]] = {}  # node -> (applied end, state) of its state machine
        self.nodes: dict[int, RaftNode | None] = {i: self._boot(i) for i in self.ids}
        self.queue: list[tuple[float, int, int, int, object]] = []  # (at, seq, src, dst, msg)
        self.seq = itertools.count()
        self.groups: list[set[int]] | None = None
        #: invariants' memory
        self.leaders: dict[int, int] = {}  # term -> leader
        self.committed: list[RaftEntry] = []  # the longest committed prefix seen
        self.committed_crc = [0]  # committed_crc[k]: the state machine after committed[:k]
        self.terms: dict[int, int] = dict.fromkeys(self.ids, 0)
        self.commits: dict[int, int] = dict.fromkeys(self.ids, 0)
        self.proposed = 0
        self.steps = 0
        self.snapshots_taken = 0
        self.snapshots_installed = 0

    def _boot(self, i: int) -> RaftNode:
        d = self.durable[i]
        self.applied[i] = (d.snapshot.end, d.snapshot.state["crc"]) if d.snapshot is not None else (0, 0)
        return RaftNode(RaftConfig(i, self.ids, ELECTION, HEARTBEAT, request_timeout=0.2),
                        term=d.term, voted_for=d.voted_for, log=list(d.log), seed=self.seed,
                        snapshot=d.snapshot)

    def apply(self, i: int, node: RaftNode) -> None:
        """Node i's state machine: from an installed snapshot, then the newly committed entries."""
        end, crc = self.applied[i]
        if node.log_start > end:
            assert node.snapshot is not None
            end, crc = node.snapshot.end, node.snapshot.state["crc"]
        if node.commit_end > end:
            end, crc = node.commit_end, fold(crc, node.entries(end, node.commit_end))
        self.applied[i] = (end, crc)

    # ------------------------------------------------------------------ the world
    def connected(self, a: int, b: int) -> bool:
        return self.groups is None or any(a in g and b in g for g in self.groups)

    def carry_out(self, src: int, out: Outputs) -> None:
        d = self.durable[src]
        for op in out.disk:
            if isinstance(op, SaveHardState):
                d.term, d.voted_for = op.term, op.voted_for
            elif isinstance(op, SaveEntries):
                del d.log[op.first - d.start:]
                d.log.extend(op.entries)
            elif isinstance(op, SaveSnapshot):
                d.snapshot, d.log = op.snapshot, list(op.entries)
                self.snapshots_installed += any(e.kind == "metadata-snapshot" and e.fields["how"] == "installed"
                                                for e in out.events)
        for m in out.messages:
            assert isinstance(m, Send)
            dst = int(str(m.destination).split("-")[1])
            copies = 0 if self.rng.random() < self.drop else (2 if self.rng.random() < self.duplicate else 1)
            for _ in range(copies):
                at = self.now + self.rng.uniform(*self.delay)
                heapq.heappush(self.queue, (at, next(self.seq), src, dst, m.message))

    def run(self, until: float, propose_every: float = 0.05, faults: bool = True) -> None:
        next_tick = self.now
        next_propose = self.now
        next_fault = self.now + 0.5
        next_snapshot = self.now + self.snapshot_every if self.snapshot_every else until
        while self.now < until:
            at = min(next_tick, next_propose, next_fault if faults else until, next_snapshot,
                     self.queue[0][0] if self.queue else until)
            self.now = max(self.now, at)
            if self.queue and self.queue[0][0] <= self.now:
                _, _, src, dst, msg = heapq.heappop(self.queue)
                node = self.nodes[dst]
                if node is not None and self.connected(src, dst) and self.nodes[src] is not None:
                    self.carry_out(dst, node.step(msg, self.now))
            elif self.now >= next_tick:
                next_tick = self.now + 0.01
                for i, node in self.nodes.items():
                    if node is not None:
                        self.carry_out(i, node.tick(self.now))
            elif self.now >= next_propose:
                next_propose = self.now + propose_every
                for i, node in self.nodes.items():
                    if node is not None and node.role == LEADER:
                        proposed = node.propose([{"type": "test", "n": self.proposed}], self.now)
                        if proposed is not None:
                            self.proposed += 1
                            self.carry_out(i, proposed[1])
            elif self.snapshot_every and self.now >= next_snapshot:
                next_snapshot = self.now + self.rng.expovariate(1 / self.snapshot_every)
                up = [i for i, n in self.nodes.items() if n is not None]
                i = self.rng.choice(up)
                end, crc = self.applied[i]
                out = self.nodes[i].compact(end, {"crc": crc})
                self.snapshots_taken += bool(out.disk)
                self.carry_out(i, out)
            elif faults and self.now >= next_fault:
                next_fault = self.now + self.rng.uniform(0.2, 1.5)
                self.fault()
            self.check()
            self.steps += 1

    def fault(self) -> None:
        kind = self.rng.choice(["crash", "restart", "partition", "heal", "none"])
        if kind == "crash":
            up = [i for i, n in self.nodes.items() if n is not None]
            if len(up) > 1:
                self.nodes[self.rng.choice(up)] = None
        elif kind == "restart":
            down = [i for i, n in self.nodes.items() if n is None]
            if down:
                i = self.rng.choice(down)
                self.nodes[i] = self._boot(i)
                self.commits[i] = 0  # the commit end is not durable: a restart learns it again
        elif kind == "partition":
            ids = list(self.ids)
            self.rng.shuffle(ids)
            cut = self.rng.randint(1, len(ids) - 1)
            self.groups = [set(ids[:cut]), set(ids[cut:])]
        elif kind == "heal":
            self.groups = None

    def heal_all(self) -> None:
        self.groups = None
        for i, n in self.nodes.items():
            if n is None:
                self.nodes[i] = self._boot(i)
                self.commits[i] = 0

    # ------------------------------------------------------------------ invariants
    def check(self) -> None:
        for i, node in self.nodes.items():
            if node is None:
                continue
            self.apply(i, node)
            assert node.term >= self.terms[i], f"node {i}: term went back {self.terms[i]} -> {node.term}"
            self.terms[i] = node.term
            start = node.log_start
            if node.snapshot is not None:
                snap = node.snapshot
                assert snap.end <= len(self.committed), f"node {i}: snapshot at {snap.end} beyond the committed log"
                assert snap.state["crc"] == self.committed_crc[snap.end], f"node {i}: snapshot of other entries"
                assert snap.last_term == self.committed[snap.end - 1].term
            if node.role == LEADER:
                other = self.leaders.setdefault(node.term, i)
                assert other == i, f"two leaders in term {node.term}: {other} and {i}"
                # leader completeness: a leader of a term at or after an entry was committed holds
                # it (a deposed leader of an older term, cut off in a minority, may not)
                if self.committed and node.term >= self.committed[-1].term:
                    assert node.log_end >= len(self.committed) and \
                        node.entries(start, len(self.committed)) == self.committed[start:], \
                        f"leader {i} lacks committed entries"
            # committed entries: identical wherever they are held, and held by a majority
            end = node.commit_end
            assert end <= node.log_end, f"node {i} commits {end} past its log end {node.log_end}"
            shared = min(end, len(self.committed))
            assert node.entries(start, shared) == self.committed[start:shared], \
                f"node {i} disagrees on committed entries"
            if end > len(self.committed):
                base = len(self.committed)
                new = node.entries(base, end)
                assert len(new) == end - base, f"node {i} commits entries it does not hold"
                holders = sum(1 for j in self.ids if self._holds(j, base, new))
                assert holders >= len(self.ids) // 2 + 1, f"index {end} committed on {holders} nodes only"
                self.committed.extend(new)
                for e in new:
                    self.committed_crc.append(fold(self.committed_crc[-1], [e]))
            assert end >= self.commits[i], f"node {i}: commit end went back {self.commits[i]} -> {end}"
            self.commits[i] = end

    def _holds(self, j: int, base: int, entries: list[RaftEntry]) -> bool:
        """Whether node j's durable state holds `entries` at `base` (a snapshot that covers them
        counts: it can only have been taken of committed entries, checked on its own)."""
        d = self.durable[j]
        if d.start >= base + len(entries):
            return True
        if d.start > base:
            return False
        return d.log[base - d.start:base - d.start + len(entries)] == entries
