"""A seeded simulation of pure Raft nodes (broker/protocol/raft.py) on virtual time.

The network delays, drops, duplicates and reorders messages and can be cut into groups;
nodes crash and restart from what they made durable (each `Outputs`' disk operations are
applied before its messages leave, as the node runtime does). After every delivery and
tick the invariants Apache Kafka's own Raft simulation checks are asserted: one leader per
term, terms that never go back, commit ends that never go back and are held by a majority,
and committed entries identical on every node that has them.
"""
from __future__ import annotations

import heapq
import itertools
import random
from dataclasses import dataclass, field

from broker.protocol.messages import RaftEntry
from broker.protocol.outputs import Outputs, Send
from broker.protocol.raft import (
    LEADER,
    RaftConfig,
    RaftNode,
    SaveEntries,
    SaveHardState,
)

HEARTBEAT = 0.05
ELECTION = (0.3, 0.6)


@dataclass
class Durable:
    term: int = 0
    voted_for: int = -1
    log: list[RaftEntry] = field(default_factory=list)


class Sim:
    def __init__(self, n: int, seed: int, drop: float = 0.05, duplicate: float = 0.02,
                 delay: tuple[float, float] = (0.001, 0.02)) -> None:
        self.ids = tuple(range(1, n + 1))
        self.rng = random.Random(seed)
        self.seed = seed
        self.drop, self.duplicate, self.delay = drop, duplicate, delay
        self.now = 0.0
        self.durable = {i: Durable() for i in self.ids}
        self.nodes: dict[int, RaftNode | None] = {i: self._boot(i) for i in self.ids}
        self.queue: list[tuple[float, int, int, int, object]] = []  # (at, seq, src, dst, msg)
        self.seq = itertools.count()
        self.groups: list[set[int]] | None = None
        #: invariants' memory
        self.leaders: dict[int, int] = {}  # term -> leader
        self.committed: list[RaftEntry] = []  # the longest committed prefix seen
        self.terms: dict[int, int] = dict.fromkeys(self.ids, 0)
        self.commits: dict[int, int] = dict.fromkeys(self.ids, 0)
        self.proposed = 0
        self.steps = 0

    def _boot(self, i: int) -> RaftNode:
        d = self.durable[i]
        return RaftNode(RaftConfig(i, self.ids, ELECTION, HEARTBEAT, request_timeout=0.2),
                        term=d.term, voted_for=d.voted_for, log=list(d.log), seed=self.seed)

    # ------------------------------------------------------------------ the world
    def connected(self, a: int, b: int) -> bool:
        return self.groups is None or any(a in g and b in g for g in self.groups)

    def carry_out(self, src: int, out: Outputs) -> None:
        d = self.durable[src]
        for op in out.disk:
            if isinstance(op, SaveHardState):
                d.term, d.voted_for = op.term, op.voted_for
            elif isinstance(op, SaveEntries):
                del d.log[op.first:]
                d.log.extend(op.entries)
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
        while self.now < until:
            at = min(next_tick, next_propose, next_fault if faults else until, self.queue[0][0] if self.queue else until)
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
            assert node.term >= self.terms[i], f"node {i}: term went back {self.terms[i]} -> {node.term}"
            self.terms[i] = node.term
            if node.role == LEADER:
                other = self.leaders.setdefault(node.term, i)
                assert other == i, f"two leaders in term {node.term}: {other} and {i}"
                # leader completeness: a leader of a term at or after an entry was committed holds
                # it (a deposed leader of an older term, cut off in a minority, may not)
                if self.committed and node.term >= self.committed[-1].term:
                    assert node.log[:len(self.committed)] == self.committed, f"leader {i} lacks committed entries"
            # committed entries: identical wherever they are held, and held by a majority
            end = node.commit_end
            assert end <= node.log_end, f"node {i} commits {end} past its log end {node.log_end}"
            shared = min(end, len(self.committed))
            assert node.log[:shared] == self.committed[:shared], f"node {i} disagrees on committed entries"
            if end > len(self.committed):
                holders = sum(1 for j in self.ids if self.durable[j].log[:end] == node.log[:end])
                assert holders >= len(self.ids) // 2 + 1, f"index {end} committed on {holders} nodes only"
                self.committed = list(node.log[:end])
            assert end >= self.commits[i], f"node {i}: commit end went back {self.commits[i]} -> {end}"
            self.commits[i] = end
