"""`next_tick_at`: each state machine says when its `tick` next has something to do, and a
tick before then changes nothing. The simulation ticks a node only from then on (testbed/sim/
node.py), so a deadline that came late would be a missed timeout; one that comes early only
costs a tick that does nothing.

The state machines are driven by the randomised drivers of the protocol properties (the
leader, the controller's broker lifecycles, Raft under loss, partitions and restarts, the
durability model), and after every input a copy of each is ticked at moments before its
deadline: the copy must return nothing to do and keep the state it had.
"""
from __future__ import annotations

import copy
import math
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.protocol.broker import BrokerState
from broker.protocol.controller import Controller
from broker.protocol.partition import Partition
from broker.protocol.raft import RaftNode
from broker.storage.durability import Durability
from broker.storage.flush import FlushPolicy
from tests.unit.raft_sim import Sim
from tests.unit.test_state_fuzz import (
    CONTROLLER_MODES,
    LEADER_OP,
    LIFECYCLE_OP,
    ControllerDriver,
    LeaderDriver,
)


def _moments_before(now: float, due: float) -> list[float]:
    """Tick times a deadline `due` promises to be idle, as of `now`."""
    if due <= now:
        return []
    if due == math.inf:
        return [now, now + 0.3, now + 7.0]
    return sorted(t for t in {now, (now + due) / 2, math.nextafter(due, -math.inf)} if t < due)


def _raft_state(node: RaftNode) -> Any:
    return (node.describe(), node._election_deadline, node._next_heartbeat, node._rng.getstate(),
            {p: vars(s) for p, s in node._progress.items()}, set(node._votes))


def _broker_state(b: BrokerState) -> Any:
    return (b.describe(), b._next_heartbeat, b._next_registration, b._heartbeat_in_flight,
            b._metadata_fetch_in_flight, len(b.parked))


def _partition_state(p: Partition) -> Any:
    return (p.describe(), p._checkpointed_hwm, p._last_checkpoint, p._alter_retry_at, p._proposed_isr,
            [vars(h) for h in p._pending_produces])


def _controller_state(c: Controller) -> Any:
    return (c.describe(), {b: vars(s) for b, s in c.heartbeats._sessions.items()}, c.recovery.searching(),
            len(c._held))


def assert_idle_before_deadline(machine: Any, now: float, state: Any, due: float) -> None:
    """A copy of `machine`, ticked at each moment before `due` in turn (as an executor ticks
    an idle machine again and again), has nothing to do and keeps `state`. One copy for all
    the moments: copying a Raft node's log was nearly all of this file's time."""
    moments = _moments_before(now, due)
    if not moments:
        return
    before = state(machine)
    twin = copy.deepcopy(machine)
    for t in moments:
        out = twin.tick(t)
        assert not out, f"a tick at {t} before the deadline {due} (now {now}) did {out}"
        assert state(twin) == before, f"a tick at {t} before the deadline {due} (now {now}) changed the state"


class _CheckedLeader(LeaderDriver):
    def check(self) -> None:
        super().check()
        assert_idle_before_deadline(self.b, self.now, _broker_state, self.b.next_tick_at(self.now))
        for p in self.b.partitions.values():  # the broker ticks only the partitions that are due
            assert_idle_before_deadline(p, self.now, _partition_state, p.next_tick_at(self.now))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(LEADER_OP, min_size=1, max_size=30))
def test_a_broker_leader_tick_before_its_deadline_does_nothing(ops: list) -> None:
    """Follower fetches, produces, time, AlterPartition answers and losses, failovers and late
    metadata (the leader property's operations): held produces (R20), ISR shrink and expansion
    (R16-R18), the HWM checkpoint, heartbeats and metadata fetches, parked fetches."""
    d = _CheckedLeader()
    for op in ops:
        d.step(op)


class _CheckedController(ControllerDriver):
    def tick(self) -> None:
        assert_idle_before_deadline(self.c, self.now, _controller_state, self.c.next_tick_at())
        super().tick()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(CONTROLLER_MODES, st.lists(LIFECYCLE_OP, min_size=1, max_size=15))
def test_a_controller_tick_before_its_deadline_does_nothing(mode: dict, ops: list) -> None:
    """Registrations, heartbeats, session expiry (R24), unclean recovery in every mode (R32),
    topics created and deleted: the controller's deadline covers each."""
    d = _CheckedController(mode)
    for op in ops:
        d.step(op)


class _CheckedRaft(Sim):
    def check(self) -> None:
        super().check()
        for node in self.nodes.values():
            if node is not None:
                assert_idle_before_deadline(node, self.now, _raft_state, node.next_tick_at())


@pytest.mark.parametrize("n, seed", [(1, 0), (3, 1), (5, 2)])
def test_a_raft_tick_before_its_deadline_does_nothing(n: int, seed: int) -> None:
    """Elections, heartbeats and check-quorum under loss, partitions and restarts (a quorum
    of one, which cannot be partitioned, only elects itself and commits)."""
    sim = _CheckedRaft(n, seed)
    sim.run(until=6.0, faults=n > 1)
    assert len(sim.leaders) >= 1


@given(st.integers(-2, 50), st.floats(0, 10), st.floats(0, 20), st.booleans(),
       st.sampled_from([FlushPolicy(), FlushPolicy(always=True), FlushPolicy(messages=10),
                        FlushPolicy(interval=1.0), FlushPolicy(messages=10, interval=0.5, on_roll=True)]))
def test_a_flush_is_due_exactly_when_the_policy_says_flush(unflushed: int, last: float, now: float,
                                                           rolled: bool, policy: FlushPolicy) -> None:
    due = policy.due(unflushed, last)
    assert policy.should_flush(unflushed, last, now, rolled) == ((rolled and policy.on_roll) or now >= due)


def test_the_writeback_is_due_when_the_oldest_dirty_bytes_are_writeback_old(tmp_path) -> None:
    rng = random.Random(7)
    d = Durability(tmp_path, "simulated", 5.0, tmp_path / "journal")
    files = [tmp_path / f"f{i}" for i in range(3)]
    for f in files:
        f.write_bytes(b"")
        d.created(f)
    now, sizes = 1000.0, dict.fromkeys(files, 0)
    for _ in range(300):
        now += rng.choice([0.01, 0.3, 2.0])
        f = rng.choice(files)
        sizes[f] += 10
        d.wrote(f, sizes[f], now)
        due = d.writeback_due()
        durable = {f: d.durable_length(f) for f in files}
        if due > now:
            d.tick(math.nextafter(due, -math.inf))
            assert {f: d.durable_length(f) for f in files} == durable
        d.tick(due)
        assert due == math.inf or d.writeback_due() > due
    d.close()


@pytest.mark.parametrize("flush", [None, {"messages": 1_000_000}])
def test_a_brokers_storage_due_time_kept_across_appends_is_never_later_than_worked_out_again(
        tmp_path, monkeypatch: pytest.MonkeyPatch, flush: dict | None) -> None:
    """`BrokerRole` lowers its storage's due time on each append (`_appended`) instead of
    asking every log and file again: over a simulated run of appends, lossy crashes and
    restarts (the sim's fault tour), with flushes by count and by interval or with the OS
    writeback alone making data durable, the time it keeps is never later than the one
    worked out from scratch, so no flush.ms or writeback is missed."""
    from broker.noderuntime.broker_role import BrokerRole
    from testbed.sim.run import run_seed
    from testbed.topology import parse_topology
    from tests.unit.test_sim import FAULT_TOUR

    checked = {"any": 0, "due": 0}
    next_tick_at = BrokerRole.next_tick_at

    def kept_no_later(self: BrokerRole, now: float) -> float:
        kept = self.storage_due()
        fresh = min(self.durability.writeback_due(), min((p.flush_due() for p in self.logs.values()), default=math.inf))
        assert kept <= fresh, f"kept {kept}, worked out again {fresh}"
        checked["any"] += 1
        checked["due"] += fresh < math.inf
        return next_tick_at(self, now)
    monkeypatch.setattr(BrokerRole, "next_tick_at", kept_no_later)
    tour = copy.deepcopy(FAULT_TOUR)
    if flush is not None:
        tour["topics"][0]["flush"] = flush
    outcome = run_seed(parse_topology(tour, "tour"), tmp_path / "run")
    assert outcome.error is None and outcome.converged
    assert checked["due"] > 100, checked  # the storage had work pending, many times
