"""The controller quorum's Raft (R22), pure: hand-stepped cases and a seeded simulation of 3
and 5 nodes under loss, duplication, reordering, partitions and restarts (the properties
Apache Kafka's RaftEventSimulationTest asserts: one leader per term, terms and commit ends
that never go back, commit ends held by a majority, committed data identical everywhere)."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.protocol.messages import (
    AppendEntriesRequest,
    AppendEntriesResponse,
    InstallSnapshotRequest,
    RaftEntry,
    VoteRequest,
    VoteResponse,
)
from broker.protocol.outputs import Outputs, Send
from broker.protocol.raft import (
    FOLLOWER,
    LEADER,
    LEADER_CHANGE,
    PRE_CANDIDATE,
    RaftConfig,
    RaftNode,
    RaftSnapshot,
    SaveEntries,
    SaveHardState,
    SaveSnapshot,
)
from tests.unit.raft_sim import Sim

VOTERS = (1, 2, 3)


def node(i: int, **kw) -> RaftNode:
    """A voter of (1, 2, 3) whose election timer started at time 0."""
    n = RaftNode(RaftConfig(i, VOTERS, (0.3, 0.6), 0.05), **kw)
    n.tick(0.0)
    return n


def sent(out: Outputs, kind: type) -> list:
    return [m.message for m in out.messages if isinstance(m, Send) and isinstance(m.message, kind)]


def deliver(src: RaftNode, out: Outputs, nodes: dict[int, RaftNode], now: float) -> None:
    """Every message of `out` to its node, and their answers back, until nothing is left."""
    pending = [(src.config.node_id, m) for m in out.messages]
    while pending:
        frm, m = pending.pop(0)
        dst = nodes.get(int(m.destination.split("-")[1]))
        if dst is not None:
            pending.extend((dst.config.node_id, x) for x in dst.step(m.message, now).messages)


def elect(nodes: dict[int, RaftNode], who: int, now: float = 1.0) -> None:
    deliver(nodes[who], nodes[who].tick(now), nodes, now)
    assert nodes[who].role == LEADER


def test_a_quorum_of_one_elects_itself_at_once_and_commits_its_leader_change():
    n = RaftNode(RaftConfig(1, (1,), (0.3, 0.6), 0.05))
    out = n.tick(0.0)
    assert n.role == LEADER and n.term == 1 and n.commit_end == 1
    assert [type(op) for op in out.disk] == [SaveHardState, SaveEntries]
    assert out.disk[1].entries[0].record["type"] == LEADER_CHANGE
    first, _ = n.propose([{"type": "x"}], 1.1)
    assert first == 1 and n.commit_end == 2


def test_a_new_leader_knows_the_highest_commit_end_among_the_voters_that_elected_it():
    """Voter 2, restarted, knows nothing committed; elected with voter 3's vote, it learns
    that 3 knew the first three entries committed (its controller records the events of the
    entries it commits from there on). A quorum of one has nobody else's: its log end."""
    nodes = {i: node(i) for i in VOTERS}
    elect(nodes, 1)
    _, out = nodes[1].propose([{"type": "x"}, {"type": "y"}], 1.1)
    deliver(nodes[1], out, nodes, 1.1)
    deliver(nodes[1], nodes[1].tick(1.2), nodes, 1.2)  # the heartbeat tells the followers the commit
    assert nodes[3].commit_end == 3 and nodes[2].commit_end == 3
    restarted = node(2, term=nodes[2].term, voted_for=nodes[2].voted_for, log=list(nodes[2].log))
    assert restarted.commit_end == 0
    elect({2: restarted, 3: nodes[3]}, 2, now=3.0)
    assert restarted.elected_commit_end == 3
    alone = RaftNode(RaftConfig(1, (1,), (0.3, 0.6), 0.05), term=1, log=list(nodes[2].log))
    alone.tick(0.0)
    assert alone.role == LEADER and alone.elected_commit_end == 3 and alone.log_end == 4


def test_a_new_quorums_lowest_voter_asks_at_once_and_the_others_wait_their_timeout():
    """Bootstrap: in a quorum with no term and no log, voter 1 pre-votes on its first tick and
    is elected without waiting an election timeout; a voter with a term waits as usual."""
    nodes = {i: RaftNode(RaftConfig(i, VOTERS, (0.3, 0.6), 0.05)) for i in VOTERS}
    assert not nodes[2].tick(0.0).messages and not nodes[3].tick(0.0).messages
    out = nodes[1].tick(0.0)
    assert nodes[1].role == PRE_CANDIDATE and len(sent(out, VoteRequest)) == 2
    deliver(nodes[1], out, nodes, 0.001)
    assert nodes[1].role == LEADER and nodes[1].term == 1
    veteran = RaftNode(RaftConfig(1, VOTERS, (0.3, 0.6), 0.05), term=3)
    assert not veteran.tick(0.0).messages and veteran.role == FOLLOWER


def test_pre_vote_does_not_raise_the_term_and_a_majority_elects():
    nodes = {i: node(i) for i in VOTERS}
    out = nodes[1].tick(1.0)
    assert nodes[1].role == PRE_CANDIDATE and nodes[1].term == 0 and not out.disk
    assert all(v.pre_vote and v.term == 1 for v in sent(out, VoteRequest))
    deliver(nodes[1], out, nodes, 1.0)
    assert nodes[1].role == LEADER and nodes[1].term == 1
    assert [nodes[i].role for i in (2, 3)] == [FOLLOWER, FOLLOWER]
    assert all(nodes[i].log == nodes[1].log for i in (2, 3)) and nodes[1].commit_end == 1


def test_an_isolated_node_does_not_depose_a_live_leader_when_it_returns():
    """Pre-vote and stickiness: node 3, cut off, keeps timing out without raising its term
    (its pre-votes find no majority); back, its request is refused while the leader lives."""
    nodes = {i: node(i) for i in VOTERS}
    elect(nodes, 1)
    lonely = nodes[3]
    t = 1.0
    while t < 4.0:
        t = round(t + 0.05, 2)
        deliver(nodes[1], nodes[1].tick(t), {1: nodes[1], 2: nodes[2]}, t)  # 1 and 2 talk
        lonely.tick(t)  # 3's pre-vote requests are lost
    assert lonely.term == 1 and lonely.role == PRE_CANDIDATE
    while lonely.role == PRE_CANDIDATE:  # back: its next pre-vote round reaches the others
        t = round(t + 0.05, 2)
        out = lonely.tick(t)
        if sent(out, VoteRequest):
            deliver(lonely, out, nodes, t)
            break
        deliver(nodes[1], nodes[1].tick(t), {1: nodes[1], 2: nodes[2]}, t)
    assert nodes[1].role == LEADER and nodes[1].term == 1 and nodes[2].term == 1


def test_only_entries_of_the_current_term_are_committed_by_counting_replicas():
    """Raft figure 8: an entry of an earlier term on a majority is not committed by that alone;
    the new leader's own first entry commits it."""
    nodes = {i: node(i) for i in VOTERS}
    elect(nodes, 1)
    first, out = nodes[1].propose([{"type": "a"}], 1.1)  # reaches nobody
    assert nodes[1].commit_end == 1
    # node 1 crashes; 2 becomes leader of term 2 with its own LEADER_CHANGE
    del nodes[1]
    deliver(nodes[2], nodes[2].tick(3.0), nodes, 3.0)
    assert nodes[2].role == LEADER and nodes[2].term == 2 and nodes[2].commit_end == 2
    assert [e.term for e in nodes[2].log] == [1, 2]


def test_a_follower_truncates_a_conflicting_suffix_but_never_a_committed_entry():
    f = node(2)
    f.step(AppendEntriesRequest(1, 1, -1, 0, [RaftEntry(1, {"n": 0}), RaftEntry(1, {"n": 1})], 1), 1.0)
    assert f.commit_end == 1
    out = f.step(AppendEntriesRequest(2, 3, 0, 1, [RaftEntry(2, {"n": "x"})], 1), 2.0)
    assert [e.record["n"] for e in f.log] == [0, "x"]
    assert [(op.first, len(op.entries)) for op in out.disk if isinstance(op, SaveEntries)] == [(1, 1)]
    [answer] = sent(out, AppendEntriesResponse)
    assert answer.success and answer.match_end == 2
    stale = f.step(AppendEntriesRequest(1, 1, 0, 1, [RaftEntry(1, {"n": 9})], 2), 3.0)
    assert not sent(stale, AppendEntriesResponse)[0].success and f.log[1].record["n"] == "x"


def test_a_vote_is_persisted_in_the_same_outputs_that_grants_it():
    n = node(2)
    out = n.step(VoteRequest(1, 1, -1, 0, pre_vote=False), 1.0)
    [grant] = [m.message for m in out.messages]
    assert grant.granted and out.disk and isinstance(out.disk[0], SaveHardState)
    assert (out.disk[-1].term, out.disk[-1].voted_for) == (1, 1)
    again = n.step(VoteRequest(1, 3, -1, 0, pre_vote=False), 1.1)
    assert not again.messages[0].message.granted  # one vote per term


def test_a_leader_that_hears_from_no_majority_steps_down():
    nodes = {i: node(i) for i in VOTERS}
    elect(nodes, 1)
    leader = nodes[1]
    leader.tick(1.3)
    assert leader.role == LEADER
    leader.tick(1.0 + 0.61)
    assert leader.role == FOLLOWER


def test_a_restarted_node_keeps_its_term_vote_and_log():
    nodes = {i: node(i) for i in VOTERS}
    elect(nodes, 1)
    n2 = nodes[2]
    again = node(2, term=n2.term, voted_for=n2.voted_for, log=list(n2.log))
    assert again.term == 1 and again.voted_for == 1 and again.log == n2.log and again.role == FOLLOWER
    assert again.commit_end == 0  # learned again from the leader


def test_an_append_lost_with_a_dead_voter_delays_its_restart_by_one_heartbeat_at_most():
    """R22: voter 3 dies with an AppendEntries in flight (never answered), restarts, and voter 2
    dies next, so every commit now needs voter 3. The append's request timeout (1 s here) is
    not waited out: the next heartbeat goes whatever is in flight, as etcd's does, and the
    restarted voter catches up and commits the entries proposed while it was gone."""
    nodes = {i: node(i) for i in VOTERS}
    elect(nodes, 1)
    leader = nodes[1]
    _, lost = leader.propose([{"type": "x"}], 1.1)  # voter 3 dies: its copy is never answered
    deliver(leader, lost, {1: leader, 2: nodes[2]}, 1.1)
    assert leader.commit_end == 2
    n3 = nodes[3]
    restarted = node(3, term=n3.term, voted_for=n3.voted_for, log=list(n3.log))
    _, out = leader.propose([{"type": "y"}], 1.12)  # voter 2 is gone now: only 3 can commit it
    assert [m.destination for m in out.messages] == ["controller-2"]  # 3's append is still in flight
    heartbeat = 1.0 + 0.05 * 3  # the leader's heartbeats: every 0.05 s from its election at 1.0
    deliver(leader, leader.tick(heartbeat), {1: leader, 3: restarted}, heartbeat)
    assert leader.commit_end == 3 and restarted.log_end == 3


@pytest.mark.parametrize("n, seed", [(3, s) for s in range(6)] + [(5, s) for s in range(4)])
def test_simulation_keeps_raft_safe_under_loss_partitions_and_restarts(n: int, seed: int) -> None:
    sim = Sim(n, seed)
    sim.run(until=60.0)
    sim.heal_all()
    sim.run(until=75.0, faults=False)
    sim.run(until=77.0, faults=False, propose_every=1e9)  # quiet: everything proposed commits
    assert sim.steps > 12_000
    leaders = [i for i, x in sim.nodes.items() if x is not None and x.role == LEADER]
    assert len(leaders) == 1, f"after healing: leaders {leaders}"
    leader = sim.nodes[leaders[0]]
    assert len(sim.committed) > 500 and leader.commit_end == leader.log_end
    assert all(x.commit_end == leader.commit_end and x.log == leader.log for x in sim.nodes.values())
    assert len(sim.leaders) >= 2, "the faults never forced an election"


@pytest.mark.parametrize("n, seed", [(3, 10), (3, 11), (5, 12)])
def test_simulation_with_snapshots_installs_them_and_keeps_raft_safe(n: int, seed: int) -> None:
    """R22 with log compaction: nodes snapshot at random, so restarted and lagging nodes are
    brought up by the leader's snapshot; every invariant of the simulation still holds, and
    every snapshot is the state of exactly the committed prefix it replaces."""
    sim = Sim(n, seed, snapshot_every=0.4)
    sim.run(until=40.0)
    sim.heal_all()
    sim.run(until=50.0, faults=False)
    sim.run(until=52.0, faults=False, propose_every=1e9)
    assert sim.snapshots_taken > 20 and sim.snapshots_installed > 0
    leader = next(x for x in sim.nodes.values() if x is not None and x.role == LEADER)
    assert len(sim.committed) > 300 and leader.commit_end == leader.log_end
    for x in sim.nodes.values():
        assert x.commit_end == leader.commit_end
        assert x.entries(max(x.log_start, leader.log_start), x.log_end) == \
            leader.entries(max(x.log_start, leader.log_start), leader.log_end)


def compacted_cluster() -> tuple[dict[int, RaftNode], list[RaftEntry]]:
    """Voters 1-3, 1 leading, 6 entries committed and the leader's log compacted below 4."""
    nodes = {i: node(i) for i in VOTERS}
    elect(nodes, 1)
    first, out = nodes[1].propose([{"type": "x", "n": k} for k in range(5)], 1.1)
    deliver(nodes[1], out, nodes, 1.1)
    deliver(nodes[1], nodes[1].tick(1.2), nodes, 1.2)  # the heartbeat carries the commit end
    committed = list(nodes[1].log)
    assert nodes[1].commit_end == 6
    compaction = nodes[1].compact(4, {"upto": 4})
    assert compaction.disk == [SaveSnapshot(RaftSnapshot(4, 1, {"upto": 4}), committed[4:])]
    assert nodes[1].log_start == 4 and nodes[1].log == committed[4:] and nodes[1].term_at(3) == 1
    return nodes, committed


def test_an_empty_voter_is_brought_up_by_the_leaders_snapshot_then_its_log():
    """R22, Raft section 7: voter 3 lost its disk; the leader no longer holds entries 0-3, so
    it sends its snapshot, then the entries after it."""
    nodes, committed = compacted_cluster()
    nodes[3] = node(3)
    out = nodes[1].tick(1.3)  # heartbeat: voter 3 answers that it lacks everything
    deliver(nodes[1], out, nodes, 1.3)
    empty = nodes[3]
    assert empty.snapshot == RaftSnapshot(4, 1, {"upto": 4}) and empty.log == committed[4:]
    assert empty.commit_end == 6 and empty.log_end == 6
    assert nodes[1].describe()["followers"]["3"]["match_end"] == 6


def test_a_snapshot_inside_the_committed_log_changes_nothing_and_a_restart_resumes_from_one():
    nodes, committed = compacted_cluster()
    f = nodes[2]
    out = f.step(InstallSnapshotRequest(f.term, 1, 3, 1, {"upto": 3}), 2.0)
    assert f.snapshot is None and f.log == committed and not out.disk
    assert sent(out, AppendEntriesResponse)[0].success
    again = node(1, term=nodes[1].term, voted_for=1, log=list(nodes[1].log), snapshot=nodes[1].snapshot)
    assert again.log_start == 4 and again.log_end == 6 and again.commit_end == 4 and again.last_term() == 1


def test_a_snapshot_keeps_the_follower_entries_that_follow_on_from_it_and_drops_a_conflicting_log():
    nodes, committed = compacted_cluster()
    f = nodes[2]
    f.commit_end = 2  # as if it had not learned the commit yet
    f.step(InstallSnapshotRequest(f.term, 1, 4, 1, {"upto": 4}), 2.0)
    assert f.log_start == 4 and f.log == committed[4:] and f.commit_end == 4
    g = node(3, log=[RaftEntry(0, {"type": "stale"})] * 5)
    g.step(InstallSnapshotRequest(1, 1, 4, 1, {"upto": 4}), 2.0)
    assert g.log_start == 4 and g.log == [] and g.commit_end == 4 and g.term == 1


def test_figure_8_an_old_term_entry_on_a_majority_is_not_committed_until_one_of_the_current_term_is():
    """Raft figure 8 (5.4.2): leader 1 of term 4 holds [t1, t2] and its own [t4]; followers
    reporting they match up to the t2 entry (a majority with the leader) commit nothing; the
    t4 entry on a majority commits all three."""
    voters = (1, 2, 3, 4, 5)
    leader = RaftNode(RaftConfig(1, voters, (0.3, 0.6), 0.05), term=3,
                      log=[RaftEntry(1, {"n": 0}), RaftEntry(2, {"n": 1})])
    leader.tick(0.0)
    leader.tick(1.0)  # pre-vote round
    for voter in (2, 3):
        leader.step(VoteResponse(4, voter, True, pre_vote=True), 1.0)
    for voter in (2, 3):
        leader.step(VoteResponse(4, voter, True, pre_vote=False), 1.0)
    assert leader.role == LEADER and leader.term == 4 and [e.term for e in leader.log] == [1, 2, 4]
    for follower in (2, 3):
        leader.step(AppendEntriesResponse(4, follower, True, match_end=2), 1.1)
    assert leader.commit_end == 0
    for follower in (2, 3):
        leader.step(AppendEntriesResponse(4, follower, True, match_end=3), 1.2)
    assert leader.commit_end == 3


RAFT_MESSAGE = st.one_of(
    st.builds(VoteRequest, st.integers(-1, 6), st.integers(-1, 5), st.integers(-2, 8), st.integers(-1, 6),
              st.booleans()),
    st.builds(VoteResponse, st.integers(-1, 6), st.integers(-1, 5), st.booleans(), st.booleans()),
    st.builds(AppendEntriesRequest, st.integers(-1, 6), st.integers(-1, 5), st.integers(-2, 8), st.integers(-1, 6),
              st.lists(st.builds(RaftEntry, st.integers(0, 6), st.just({"type": "x"})), max_size=4),
              st.integers(-1, 10)),
    st.builds(AppendEntriesResponse, st.integers(-1, 6), st.integers(-1, 5), st.booleans(), st.integers(-2, 10)),
    st.builds(InstallSnapshotRequest, st.integers(-1, 6), st.integers(-1, 5), st.integers(-2, 10), st.integers(-1, 6),
              st.just({"upto": "?"})),
)


@settings(max_examples=400, deadline=None)
@given(st.integers(1, 3), st.lists(st.tuples(RAFT_MESSAGE, st.floats(0, 2)), min_size=1, max_size=12))
def test_hostile_stale_or_foreign_raft_messages_never_crash_a_voter_or_break_its_state(who: int, steps) -> None:
    """Messages from old terms, from non-voters (-1, 4, 5), with nonsense indexes: a voter never
    raises, its term never goes back, its commit end never goes back nor passes its log end."""
    n = node(who)
    elect({i: node(i) for i in VOTERS} | {who: n}, who) if who == 1 else None
    now, term, commit = 1.0, n.term, n.commit_end
    committed = n.entries(0, n.commit_end)
    for msg, dt in steps:
        now += dt
        n.step(msg, now)
        n.tick(now)
        assert n.term >= term and n.commit_end >= commit and n.commit_end <= n.log_end
        start = n.log_start
        assert n.entries(start, len(committed)) == committed[start:], "a committed entry was rewritten"
        term, commit, committed = n.term, n.commit_end, committed[:start] + n.entries(start, n.commit_end)


def _leader_of_term_1() -> RaftNode:
    n = node(1)
    elect({i: node(i) for i in VOTERS} | {1: n}, 1)
    assert n.role == LEADER and n.term == 1 and n.commit_end == 1 and n.log[0].term == 1
    return n


def test_messages_no_correct_leader_sends_are_refused_and_change_nothing() -> None:
    """Found by the hostile-messages property: messages that contradict what a voter has
    committed (Raft 5.4: a leader holds every committed entry, and terms never decrease along
    a log) are refused instead of rewriting its log: a snapshot ending past our commit in an
    older term than our last committed entry, entries whose terms go down or pass the
    sender's term, a "leader" that is ourselves or a second leader of the term we lead."""
    hostile = [
        InstallSnapshotRequest(5, 3, 2, 0, {"upto": "?"}),  # last term 0 < 1, the term we committed in
        AppendEntriesRequest(6, 3, 0, 1, [RaftEntry(0, {"type": "x"})], 9),  # term 0 after term 1
        AppendEntriesRequest(2, 3, 0, 1, [RaftEntry(3, {"type": "x"})], 9),  # an entry past its term
        AppendEntriesRequest(2, 1, 0, 1, [RaftEntry(2, {"type": "x"})], 9),  # from ourselves
        AppendEntriesRequest(1, 2, 0, 1, [RaftEntry(1, {"type": "x"})], 9),  # a second leader of term 1
    ]
    for msg in hostile:
        n = _leader_of_term_1()
        before = (n.term, n.role, list(n.log), n.commit_end, n.snapshot)
        out = n.step(msg, 2.0)
        assert (n.term, n.role, list(n.log), n.commit_end, n.snapshot) == before, msg
        assert [m.message.success for m in out.messages] == [False], msg


def test_entries_that_contradict_our_snapshot_s_last_term_are_dropped() -> None:
    """A snapshot [0, 2) ending in term 1: entries sent from index 1 must start with a term-1
    entry there; a term-0 one there is from no correct leader and changes nothing."""
    n = _leader_of_term_1()
    n.step(InstallSnapshotRequest(2, 2, 2, 1, {"upto": 2}), 2.0)
    assert (n.log_start, n.commit_end, n.term) == (2, 2, 2)
    n.step(AppendEntriesRequest(2, 2, 0, 0, [RaftEntry(0, {"type": "x"}), RaftEntry(0, {"type": "x"}),
                                             RaftEntry(1, {"type": "x"})], 4), 2.1)
    assert n.log == [] and n.commit_end == 2
    n.step(AppendEntriesRequest(2, 2, 0, 1, [RaftEntry(1, {"type": "x"}), RaftEntry(2, {"type": "y"})], 4), 2.2)
    assert [e.term for e in n.log] == [2] and n.log_end == 3 and n.commit_end == 3
