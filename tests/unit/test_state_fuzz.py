"""A node never crashes on a malformed or stale message (DESIGN section 11), and never breaks
a protocol invariant while it absorbs one.

The codec already turns undecodable frames into errors; these properties go one step
further: well-typed but hostile, stale or nonsensical messages (unknown partitions, old
epochs, negative offsets, garbage record sets, responses nobody asked for) are fed to a
broker and a controller that are in a realistic state, and neither may raise. After every
input the state is checked against the invariants of PROTOCOL.md:

- controller, every partition of its image and every PartitionRecord it appends, in log
  order: ISR ⊆ replicas, ELR ⊆ replicas, ELR ∩ ISR = ∅, |ISR| >= MinISR => ELR = [] and
  LastKnownELR = [] (R27, I6); without `elr` no ELR at all and a non-empty ISR (R30); the
  leader is -1 or an ISR member (R25); leader and partition epochs never decrease, and a
  new record bumps the partition epoch (R2); one leader per (partition, leader epoch)
  (I4); with `fencing: kraft` the leader, and every ISR member but the last one R30 keeps
  without `elr`, is registered, unfenced and not shutting down (R24, R25, R37);
- broker, every replica: LEO >= HWM >= log start >= 0 (R12, R15); a leader's HWM never
  decreases within its leader epoch (R12, R15); a leader's ISR ⊆ its replicas and holds the
  leader (R19), its maximal ISR ⊆ replicas (R16).

The lifecycle and leader properties drive the same state machines with well-formed inputs
in random order (so they reach elections, ELR, ISR changes and HWM advances). The leader
property also checks, against the real controller beside it, that the controller's ISR in
the leader's term stays within the leader's maximal ISR (R16), that every HWM advance stays
at or below the LEO every such member reported and needs |ISR| >= MinISR (R15), and that
acks=all is answered only below the HWM (R20). The `*_checker_catches_*` tests hand-build
violations to show the checkers are not vacuous; the R16 and R40 tests are the minimal
sequences of the real violations the properties found (a leader that rolled its maximal ISR
back on a lost AlterPartition answer, and a topic placed on fenced brokers), kept as
regression tests.
"""
from __future__ import annotations

import itertools
from dataclasses import replace
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.common.errors import Errors
from broker.common.record_batch import build_batch, encode_record_set
from broker.protocol.broker import BrokerConfig, BrokerState, PendingFetch
from broker.protocol.controller import Controller, ControllerConfig
from broker.protocol.messages import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionRequest,
    BrokerHeartbeatRequest,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    ElectLeadersRequest,
    FetchPartition,
    FetchRequest,
    FetchResponse,
    GetReplicaLogInfoResponse,
    IsrMember,
    MetadataFetchResponse,
    NewTopic,
    ProduceRequest,
    ProduceResponse,
    TopicPartition,
)
from broker.protocol.outputs import AppendMetadata, Outputs, Reply, Send
from broker.protocol.records import NO_LEADER, PartitionRecord, RemoveTopicRecord, to_dict
from broker.protocol.settings import Timeouts
from tests.unit.message_strategies import any_message

SMALL_INT = st.integers(-3, 40)
TOPIC = st.sampled_from(["orders", "nope", ""])
RECORDS = st.one_of(st.binary(max_size=40), st.just(encode_record_set([b"a", b"bc"])),
                    st.just(build_batch(0, 0, [b"x"])), st.just(build_batch(5, 9, [b"y", b"z"])))


NEAR_VALID = {int: SMALL_INT, str: st.sampled_from(["orders", "x", "broker-1"]), bool: st.booleans(),
              bytes: st.binary(max_size=16), Errors: st.sampled_from(list(Errors)), float: st.floats(0, 10),
              dict: st.dictionaries(st.sampled_from(["name", "partitions", "type"]), SMALL_INT | TOPIC, max_size=3)}
#: values close to what a real peer sends, so the handlers get past their first check
ANY = any_message(NEAR_VALID, {"topic": TOPIC, "records": RECORDS})
#: the controller's: `orders` is its only topic, and the checks need partitions to look at
#: (the lifecycle property deletes and re-creates topics of its own)
ANY_BUT_DELETING_ORDERS = ANY.filter(lambda m: not (isinstance(m, DeleteTopicsRequest) and "orders" in m.topics))

RACKS = {1: "a", 2: "b", 3: "c", 4: "a"}


def controller_with_topic(config: ControllerConfig | None = None) -> tuple[Controller, list[dict]]:
    """A controller with brokers 1-3 registered and unfenced and topic `orders` created."""
    c = Controller(1, config or ControllerConfig(session_timeout=1.0))
    log: list[dict] = []

    def step(out: Outputs) -> None:
        for op in out.disk:
            if isinstance(op, AppendMetadata):
                log.extend(to_dict(r) for r in op.records)
        c.on_committed(c.log_end_offset)

    epochs = {}
    for b in (1, 2, 3):
        step(c.on_request(("reg", b), BrokerRegistrationRequest(b, f"inc-{b}", "abc"[b - 1]), 0.0))
        epochs[b] = c.image.broker_epoch(b)
    for b in (1, 2, 3):
        step(c.on_request(("hb", b), BrokerHeartbeatRequest(b, epochs[b], c.log_end_offset), 0.1))
    step(c.on_request("create", CreateTopicsRequest([NewTopic("orders", 3, 3, min_insync_replicas=2)]), 0.2))
    assert len(c.image.partitions) == 3
    return c, log


def broker_and_controller() -> tuple[BrokerState, Controller, list[dict]]:
    """`broker_with_metadata`, with the controller whose metadata log (as dicts) it read."""
    c, log = controller_with_topic()
    timeouts = Timeouts(heartbeat_interval=0.1, session_timeout=1.0, replica_lag_max=1.0, fetch_max_wait=0.05)
    b = BrokerState(BrokerConfig(1, "a", "inc", timeouts), {}, -1)
    b.tick(0.0)
    b.on_response(("register",), BrokerRegistrationResponse(Errors.NONE, 0), 0.0)
    b.on_response(("metadata",), MetadataFetchResponse(Errors.NONE, list(log), 0, len(log), 1), 0.1)
    assert b.caught_up and {p.role for p in b.partitions.values()} >= {"leader"}
    return b, c, log


def broker_with_metadata() -> BrokerState:
    """Broker 1, registered and caught up: leader of some partitions, follower of others."""
    return broker_and_controller()[0]


# ============================================================================ invariant checkers
def check_partition_record(p: PartitionRecord, min_isr: int, *, elr: bool) -> None:
    """One partition's metadata: R1, R25, R27/I6, R30."""
    where = f"in {p}"
    replicas, isr, elr_set = set(p.replicas), set(p.isr), set(p.elr)
    assert len(replicas) == len(p.replicas) and len(isr) == len(p.isr) and len(elr_set) == len(p.elr), \
        f"R1: a replica listed twice {where}"
    assert isr <= replicas, f"R1/R19: ISR not a subset of the replicas {where}"
    assert elr_set <= replicas, f"R27/I6: ELR not a subset of the replicas {where}"
    assert not elr_set & isr, f"R27/I6: ELR and ISR overlap {where}"
    if elr:
        if len(isr) >= min_isr:
            assert not p.elr, f"R27/I6: |ISR| >= MinISR={min_isr} but ELR is not empty {where}"
            assert not p.last_known_elr, f"R27: |ISR| >= MinISR={min_isr} but LastKnownELR is not empty {where}"
    else:
        assert not p.elr and not p.last_known_elr, f"R27/R30: ELR without `elr` {where}"
        assert p.isr, f"R30: without `elr` the last ISR member stays in the ISR {where}"
    assert p.leader == NO_LEADER or p.leader in isr, f"R25: leader outside the ISR {where}"


class ControllerInvariants:
    """R2, R24/R25/R37, R27/I6, R30 and I4 over a controller's whole run (see the module docstring).

    `check(out)` takes the Outputs of one input: every PartitionRecord it appended is checked
    in log order (so a state that lived only inside one batch is seen too), then every
    partition of the image. `inspected` counts the partition states checked. A deleted topic's
    partitions are forgotten: one created again under its name starts its epochs over (R40).
    """

    def __init__(self, controller: Controller) -> None:
        self.c = controller
        self.epochs: dict[tuple[str, int], tuple[int, int]] = {}  # -> (leader epoch, partition epoch)
        self.leaders: dict[tuple[str, int, int], int] = {}  # (topic, partition, leader epoch) -> leader
        self.inspected = 0
        self.records = 0

    def observe(self, p: PartitionRecord, *, appended: bool) -> None:
        check_partition_record(p, self.c.image.min_insync_replicas(p.topic), elr=self.c.config.elr)
        key = (p.topic, p.partition)
        before = self.epochs.get(key)
        if before is not None:
            assert p.leader_epoch >= before[0], f"R2: leader epoch went back from {before[0]} in {p}"
            assert p.partition_epoch >= before[1], f"R2: partition epoch went back from {before[1]} in {p}"
            if appended:
                assert p.partition_epoch > before[1], f"R2: a change without a partition epoch bump: {p}"
        self.epochs[key] = (p.leader_epoch, p.partition_epoch)
        leader = self.leaders.setdefault((p.topic, p.partition, p.leader_epoch), p.leader)
        assert leader == p.leader, (f"I4/R2: leader epoch {p.leader_epoch} of {key} had leader {leader}, "
                                    f"now {p.leader}: {p}")
        self.inspected += 1

    def forget(self, topic: str) -> None:
        self.epochs = {k: v for k, v in self.epochs.items() if k[0] != topic}
        self.leaders = {k: v for k, v in self.leaders.items() if k[0] != topic}

    def check(self, out: Outputs | None = None) -> None:
        for op in out.disk if out is not None else ():
            if isinstance(op, AppendMetadata):
                for record in op.records:
                    if isinstance(record, PartitionRecord):
                        self.records += 1
                        self.observe(record, appended=True)
                    elif isinstance(record, RemoveTopicRecord):
                        self.forget(record.name)
        image = self.c.image
        assert image.partitions, "nothing to check: the controller has no partitions"
        for _key, p in sorted(image.partitions.items()):
            self.observe(p, appended=False)
            if self.c.config.fencing == "kraft":
                self._check_live(p)

    def _check_live(self, p: PartitionRecord) -> None:
        """R24/R25/R37 with `fencing: kraft`: fencing or controlled shutdown removes a broker from
        leadership and the ISR at once, and no one brings it back before it is unfenced (R18,
        R19); without `elr` only the last ISR member stays (R30)."""
        def live(broker: int) -> bool:
            b = self.c.image.brokers.get(broker)
            return b is not None and not b.fenced and not b.in_controlled_shutdown
        assert p.leader == NO_LEADER or live(p.leader), \
            f"R24/R25/R37: leader {p.leader} is fenced, shutting down or unregistered: {p}"
        if self.c.config.elr or len(p.isr) > 1:
            gone = [r for r in p.isr if not live(r)]
            assert not gone, f"R25/R30: fenced or shutting-down brokers {gone} in the ISR: {p}"


class BrokerInvariants:
    """R12, R15, R16, R19 over every replica of a broker (see the module docstring).

    `inspected` counts replica states checked, `leaders_inspected` those of leaders.
    """

    def __init__(self, broker: BrokerState | SimpleNamespace) -> None:
        self.b = broker
        self.leader_hwm: dict[tuple[tuple[str, int], int], int] = {}  # (key, leader epoch) -> HWM
        self.inspected = 0
        self.leaders_inspected = 0

    def check(self) -> None:
        assert self.b.partitions, "nothing to check: the broker has no replicas"
        for key, p in sorted(self.b.partitions.items()):
            leo, hwm = p.log_end_offset, p.high_watermark
            assert leo >= hwm >= p.log_start_offset >= 0, \
                f"R12/R15: LEO {leo} >= HWM {hwm} >= log start {p.log_start_offset} >= 0 broken: {p.describe()}"
            if p.role == "leader":
                term = (key, p.leader_epoch)
                before = self.leader_hwm.get(term)
                assert before is None or hwm >= before, \
                    f"R12/R15: leader HWM of {key} went back from {before} to {hwm} in epoch {p.leader_epoch}"
                self.leader_hwm[term] = hwm
                replicas, isr = set(p.replicas), set(p.isr)
                assert isr <= replicas, f"R19: leader ISR {p.isr} outside the replicas {p.replicas} of {key}"
                assert not isr or p.leader_id in isr and p.leader_id == self.b.broker_id, \
                    f"R19: leader {self.b.broker_id} not in its own ISR {p.isr} of {key}"
                assert set(p.maximal_isr) <= replicas, \
                    f"R16: maximal ISR {p.maximal_isr} outside the replicas {p.replicas} of {key}"
                self.leaders_inspected += 1
            self.inspected += 1


# ============================================================================ hostile messages
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ANY, min_size=1, max_size=6))
def test_broker_survives_any_request_sequence(msgs: list) -> None:
    """No raise, and R12/R15/R16/R19 after every request and tick."""
    b = broker_with_metadata()
    inv = BrokerInvariants(b)
    inv.check()
    assert inv.leaders_inspected >= 1
    now = 1.0
    for i, m in enumerate(msgs):
        now += 0.05
        assert isinstance(b.on_request(("ctx", i), m, now), Outputs)
        inv.check()
        assert isinstance(b.tick(now), Outputs)
        inv.check()
    assert inv.inspected >= (2 * len(msgs) + 1) * len(b.partitions)


#: a fetch's correlation names its leader and its number: broker 1's first tick sends its fetches
#: to brokers 2 and 3 as numbers 1 and 2, in leader order
CORRELATIONS = st.sampled_from([("register",), ("heartbeat",), ("metadata",), ("fetch", 2, 1), ("fetch", 3, 2),
                                ("fetch", 2, 2), ("fetch", 9, 1), ("fetch", 2),
                                ("alter-partition", "orders", 0, 0), ("alter-partition", "orders", 0, 5),
                                ("alter-partition", "nope", 7, 0), ("bogus",)])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(CORRELATIONS, st.none() | ANY), min_size=1, max_size=6))
def test_broker_survives_any_response_sequence(responses: list) -> None:
    """Late, duplicated or mismatched responses (and timeouts, None) are absorbed; R12/R15/R16/R19
    hold after each."""
    b = broker_with_metadata()
    assert sorted(s.correlation for s in b.tick(1.0).messages if s.correlation[0] == "fetch") == [
        ("fetch", 2, 1), ("fetch", 3, 2)]
    inv = BrokerInvariants(b)
    inv.check()
    assert inv.leaders_inspected >= 1
    now = 1.0
    for corr, m in responses:
        now += 0.05
        assert isinstance(b.on_response(corr, m, now), Outputs)
        inv.check()
    assert inv.inspected >= (len(responses) + 1) * len(b.partitions)


CONTROLLER_MODES = st.sampled_from([
    {}, {"elr": False}, {"unclean_leader_election": True}, {"elr": False, "unclean_leader_election": True},
    {"fencing": "zookeeper"}, {"unclean_recovery": "balanced"}, {"unclean_recovery": "proactive"},
    {"unclean_recovery": "manual"},
])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(CONTROLLER_MODES, st.lists(ANY_BUT_DELETING_ORDERS, min_size=1, max_size=6))
def test_controller_survives_any_request_sequence(mode: dict, msgs: list) -> None:
    """No raise, and R2, R25, R27/I6, R30, I4 after every request and tick, in every protocol mode."""
    c, _log = controller_with_topic(ControllerConfig(session_timeout=1.0, **mode))
    inv = ControllerInvariants(c)
    inv.check()
    now = 0.5
    for i, m in enumerate(msgs):
        now += 0.05
        out = c.on_request(("ctx", i), m, now)
        assert isinstance(out, Outputs)
        out.extend(c.on_committed(c.log_end_offset))
        inv.check(out)
        inv.check(c.tick(now))
    assert inv.inspected >= (2 * len(msgs) + 1) * 3


# ============================================================================ controller lifecycle
BROKER = st.sampled_from([1, 2, 3, 4])
LIFECYCLE_OP = st.one_of(
    st.tuples(st.just("heartbeat"), BROKER, st.sampled_from(["plain", "plain", "fence", "shutdown"]),
              st.booleans()),
    st.tuples(st.just("register"), BROKER, st.booleans()),
    st.tuples(st.just("time"), st.sampled_from([0.05, 0.6, 1.5])),
    st.tuples(st.just("alter"), st.integers(0, 7), st.sets(BROKER), st.booleans(),
              st.sampled_from(["leader", "leader", "stale", "other"])),
    st.tuples(st.just("create"), st.sampled_from(["t1", "t2"]), st.integers(1, 3), st.integers(1, 4),
              st.integers(1, 3), st.sampled_from(["rack-aware", "round-robin"])),
    # R32: a replica's answer to unclean recovery's GetReplicaLogInfo of one search, or its timeout
    st.tuples(st.just("log-info"), st.integers(0, 7), BROKER, st.integers(-1, 3), st.integers(0, 20),
              st.booleans(), st.integers(1, 4)),
    st.tuples(st.just("elect"), st.integers(0, 7), st.integers(0, 4)),  # R32 manual: the operator's choice
    st.tuples(st.just("preferred"), st.booleans()),  # R36
    st.tuples(st.just("reassign"), st.integers(0, 7), st.lists(BROKER, min_size=1, max_size=3, unique=True)),  # R35
    st.tuples(st.just("delete"), st.sampled_from(["t1", "t2"])),  # R40, after which "create" may re-create it
    st.tuples(st.just("add-partitions"), st.sampled_from(["orders", "t1"]), st.integers(1, 6)),  # R40
)


class ControllerDriver:
    """Well-formed broker requests and time, in random order, with the invariants after each input."""

    def __init__(self, mode: dict) -> None:
        self.c, _log = controller_with_topic(ControllerConfig(session_timeout=1.0, **mode))
        self.inv = ControllerInvariants(self.c)
        self.inv.check()
        self.now = 0.5
        self.incarnations = itertools.count()

    def request(self, msg: object) -> object:
        out = self.c.on_request("ctx", msg, self.now)
        out.extend(self.c.on_committed(self.c.log_end_offset))
        self.inv.check(out)
        (reply,) = [m for m in out.messages if isinstance(m, Reply)]
        return reply.message

    def tick(self) -> None:
        out = self.c.tick(self.now)
        out.extend(self.c.on_committed(self.c.log_end_offset))
        self.inv.check(out)

    def step(self, op: tuple) -> None:
        c = self.c
        kind = op[0]
        self.now += 0.05
        if kind == "heartbeat":
            _, broker, how, caught_up = op
            self.request(BrokerHeartbeatRequest(broker, c.image.broker_epoch(broker),
                                                c.image.offset if caught_up else -1,
                                                want_fence=how == "fence", want_shutdown=how == "shutdown"))
        elif kind == "register":  # a restart; clean: with the epoch of its clean-shutdown file (R28)
            _, broker, clean = op
            previous = c.image.broker_epoch(broker) if clean else -1
            self.request(BrokerRegistrationRequest(broker, f"inc-{broker}-{next(self.incarnations)}",
                                                   RACKS[broker], previous))
        elif kind == "time":
            self.now += op[1]
        elif kind == "alter":  # R19, from the leader, a stale leader or another replica
            _, index, members, with_leader, sender = op
            parts = [p for _, p in sorted(c.image.partitions.items())]
            part = parts[index % len(parts)]
            others = [r for r in part.replicas if r != part.leader]
            sender_id = part.leader if sender != "other" or not others else others[0]
            isr = sorted(members | ({part.leader} if with_leader and part.leader != NO_LEADER else set()))
            self.request(AlterPartitionRequest(
                sender_id, c.image.broker_epoch(sender_id), part.topic, part.partition, part.leader_epoch,
                part.partition_epoch - (1 if sender == "stale" else 0),
                [IsrMember(m, c.image.broker_epoch(m)) for m in isr]))
        elif kind == "create":
            _, name, partitions, rf, min_isr, placement = op
            self.request(CreateTopicsRequest([NewTopic(name, partitions, rf, min_isr, placement)]))
        elif kind == "log-info":
            _, index, broker, epoch, leo, answered, search = op
            parts = [p for _, p in sorted(c.image.partitions.items())]
            part = parts[index % len(parts)]
            resp = GetReplicaLogInfoResponse(part.topic, part.partition, Errors.NONE, broker_id=broker,
                                             broker_epoch=c.image.broker_epoch(broker), last_written_epoch=epoch,
                                             log_end_offset=leo) if answered else None
            self.inv.check(c.on_response(("log-info", part.topic, part.partition, broker, search), resp, self.now))
        elif kind in ("elect", "reassign"):
            parts = [p for _, p in sorted(c.image.partitions.items())]
            part = parts[op[1] % len(parts)]
            if kind == "elect":
                self.request(ElectLeadersRequest("unclean", [TopicPartition(part.topic, part.partition)], op[2]))
            else:
                self.request(AlterPartitionReassignmentsRequest(part.topic, part.partition, list(op[2])))
        elif kind == "preferred":
            self.request(ElectLeadersRequest("preferred", None if op[1] else [TopicPartition("orders", 0)]))
        elif kind == "delete":
            self.request(DeleteTopicsRequest([op[1]]))
        elif kind == "add-partitions":
            self.request(CreatePartitionsRequest(op[1], op[2]))
        self.tick()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(CONTROLLER_MODES, st.lists(LIFECYCLE_OP, min_size=1, max_size=15))
def test_controller_invariants_hold_over_broker_lifecycles(mode: dict, ops: list) -> None:
    """Registrations (clean and unclean restarts), heartbeats (fence, controlled shutdown),
    session expiry, AlterPartition (valid, stale, from a non-leader), topic creation, deletion
    and growth in random order, in every protocol mode: R2, R24/R25/R37 (kraft), R27/I6, R30, I4
    after every input."""
    d = ControllerDriver(mode)
    for op in ops:
        d.step(op)
    assert d.inv.inspected >= (len(ops) + 1) * 3


def test_controller_driver_reaches_elections_elr_and_leaderless_partitions():
    """The lifecycle driver is not vacuous: fencing fills the ELR (R27), a controlled shutdown
    empties the ISR, an unclean restart moves its ELR membership to LastKnownELR (R29), and a
    clean restart is elected from the ELR (R25 case B), every invariant checked after each input."""
    d = ControllerDriver({})
    for op in [("heartbeat", 2, "fence", True), ("heartbeat", 3, "fence", True)]:
        d.step(op)
    assert all((p.leader, p.isr, p.elr) == (1, [1], [3]) for p in d.c.image.partitions.values())
    for op in [("heartbeat", 1, "shutdown", True), ("time", 1.5), ("register", 3, False)]:
        d.step(op)
    assert all((p.leader, p.isr, p.elr, p.last_known_elr) == (NO_LEADER, [], [1], [3])
               for p in d.c.image.partitions.values())
    for op in [("register", 1, True), ("heartbeat", 1, "plain", True)]:
        d.step(op)
    assert all((p.leader, p.isr, p.elr, p.reason) == (1, [1], [], "election") for p in d.c.image.partitions.values())
    assert d.inv.records == 15 and d.inv.inspected >= 15 + 2 * 7 * 3


@pytest.mark.parametrize("fenced, rf, error", [([1], 2, "NONE"), ([1, 2, 3], 1, "INVALID_REPLICATION_FACTOR")])
def test_r40_topic_created_while_a_broker_is_fenced_is_placed_on_live_brokers_only(fenced, rf, error):
    """R40: "A topic created at run time is placed (R34) on the brokers unfenced at that moment".

    The minimal sequences the lifecycle property found: fence broker 1 (or all three), then
    create a topic. Broker 1 was made a replica and ISR member of the new topic's partitions
    (R25: a fenced broker in the ISR), and with every broker fenced partition 0 of an RF-1
    topic got fenced broker 1 as its leader. Now the topic goes on the brokers that are up,
    and with none up it is refused, as Kafka refuses a replication factor it cannot meet.
    """
    c, _log = controller_with_topic()
    for broker in fenced:
        c.on_request("hb", BrokerHeartbeatRequest(broker, c.image.broker_epoch(broker), c.image.offset,
                                                  want_fence=True), 0.5)
        c.on_committed(c.log_end_offset)
    out = c.on_request("create", CreateTopicsRequest([NewTopic("t1", 3, rf, 1, "round-robin")]), 0.6)
    out.extend(c.on_committed(c.log_end_offset))
    [answer] = [m.message for m in out.messages]
    assert answer.errors == {"t1": error}
    live = set(c.image.unfenced_brokers())
    assert live == {1, 2, 3} - set(fenced)
    assert len(c.image.partitions_of("t1")) == (3 if error == "NONE" else 0)
    for p in c.image.partitions_of("t1"):
        assert set(p.replicas) <= live, f"R40: {p} placed on fenced brokers (live: {sorted(live)})"


# ============================================================================ broker as leader
class LeaderDriver:
    """Broker 1, leader of one `orders` partition, with followers 2 and 3 fetching from it,
    producers, time, and the real controller answering its AlterPartition requests, fencing and
    unfencing brokers, and feeding broker 1 the resulting metadata. Followers fetch one request
    at a time, as the fetcher does, so `accepted` is what the leader knows of each (R11)."""

    def __init__(self) -> None:
        self.b, self.c, self.log = broker_and_controller()
        self.key = next(k for k, p in sorted(self.b.partitions.items()) if p.role == "leader")
        self.binv = BrokerInvariants(self.b)
        self.cinv = ControllerInvariants(self.c)
        self.now = 1.0
        self.ids = itertools.count()
        self.pending: list[Send] = []  # AlterPartition requests the controller has not seen yet
        self.decided: list[tuple[object, object]] = []  # (correlation, answer) not delivered yet
        #: follower -> offset of its last fetch the leader accepted in this leader epoch (R11)
        self.accepted: dict[int, int] = {}
        self.term = self.p.leader_epoch
        self.hwm = self.p.high_watermark
        self.produces: dict[object, tuple[int, int]] = {}  # ctx -> (acks, record count)
        self.hwm_advances = 0
        self.acked = 0
        self.binv.check()
        self.cinv.check()
        assert self.binv.leaders_inspected >= 1

    @property
    def p(self):
        return self.b.partitions[self.key]

    def _take(self, out: Outputs) -> None:
        for m in out.messages:
            if isinstance(m, Send) and m.correlation and m.correlation[0] == "alter-partition":
                self.pending.append(m)
            elif isinstance(m, Reply) and m.ctx in self.produces and isinstance(m.message, ProduceResponse):
                acks, count = self.produces.pop(m.ctx)
                if acks == -1 and m.message.error == Errors.NONE:
                    # R20: acks=all is answered once the HWM passed the batch
                    assert m.message.base_offset + count <= self.p.high_watermark, (m, self.p.describe())
                    self.acked += 1

    def fetch(self, follower: int, offset_spec: object, epoch_spec: str, broker_epoch_spec: str,
              max_wait: int) -> None:
        if any(parked.request.replica_id == follower for parked in self.b.parked):
            return  # that follower's fetch is still in the leader's purgatory
        p = self.p
        offset = {"leo": p.log_end_offset, "last": self.accepted.get(follower, 0)}.get(offset_spec, offset_spec)
        last_epoch = {"auto": p.leader_epoch if offset > 0 else -1, "none": -1,
                      "ahead": p.leader_epoch + 1}[epoch_spec]
        current = self.c.image.broker_epoch(follower)
        broker_epoch = {"current": current, "old": current - 1, "unknown": -1}[broker_epoch_spec]
        ctx = ("fetch", next(self.ids))
        req = FetchRequest(follower, broker_epoch, max_wait, 1,
                           [FetchPartition(self.key[0], self.key[1], offset, last_epoch, p.leader_epoch)])
        out = self.b.on_request(ctx, req, self.now)
        answers = [m.message for m in out.messages if isinstance(m, Reply) and m.ctx == ctx]
        if answers:
            # a PendingFetch when there are records to read, else the response as it is
            assert isinstance(answers[0], (PendingFetch, FetchResponse))
            response = answers[0].response if isinstance(answers[0], PendingFetch) else answers[0]
            assert isinstance(response, FetchResponse)
            result = response.partitions[0]
            accepted = result.error == Errors.NONE and result.diverging_epoch is None
        else:
            accepted = True  # parked: only a fetch without error, divergence or data is (R11)
        if accepted:
            self.accepted[follower] = offset
        self._take(out)

    def produce(self, acks: int, count: int, timeout_ms: int) -> None:
        ctx = ("produce", next(self.ids))
        self.produces[ctx] = (acks, count)
        values = [b"v%d" % i for i in range(count)]
        req = ProduceRequest(self.key[0], self.key[1], acks, timeout_ms, encode_record_set(values))
        self._take(self.b.on_request(ctx, req, self.now))

    def _to_controller(self, msg: object) -> object:
        """One request to the controller, committed at once; its records join the metadata log."""
        c = self.c
        out = c.on_request(("ctx", next(self.ids)), msg, self.now)
        out.extend(c.on_committed(c.log_end_offset))
        self.cinv.check(out)
        for op in out.disk:
            if isinstance(op, AppendMetadata):
                self.log.extend(to_dict(r) for r in op.records)
        (answer,) = [m.message for m in out.messages if isinstance(m, Reply)]
        return answer

    def controller(self, how: str) -> None:
        """Every pending AlterPartition (R19) reaches the controller, which decides, and the answer
        is delivered ("answer") or held for `answers` ("decide"); or it times out (None) before
        the controller saw it ("lost-request") or after it decided ("lost-response")."""
        pending, self.pending = self.pending, []
        for send in pending:
            answer = self._to_controller(send.message) if how != "lost-request" else None
            if how == "decide":
                self.decided.append((send.correlation, answer))
            else:
                self._take(self.b.on_response(send.correlation, answer if how == "answer" else None, self.now))

    def answers(self) -> None:
        """The answers the controller decided on reach the leader, late (R16)."""
        decided, self.decided = self.decided, []
        for correlation, answer in decided:
            self._take(self.b.on_response(correlation, answer, self.now))

    def broker(self, broker: int, how: str) -> None:
        """A heartbeat of `broker` reaches the controller: fence, unfence or controlled shutdown
        (R24, R25, R37); the broker under test learns of it only through `metadata`."""
        c = self.c
        self._to_controller(BrokerHeartbeatRequest(broker, c.image.broker_epoch(broker), c.log_end_offset,
                                                   want_fence=how == "fence", want_shutdown=how == "shutdown"))

    def rejoin(self) -> None:
        """While broker 2 or 3 leads, it adds every live replica back to the ISR (R18, R19), as
        if they caught up with it: the way back to leadership, in a new term (R14), for broker 1."""
        c = self.c
        part = c.image.partition(*self.key)
        if part.leader in (NO_LEADER, self.b.broker_id):
            return
        live = [r for r in part.replicas if r in part.isr or (
            not c.image.brokers[r].fenced and not c.image.brokers[r].in_controlled_shutdown)]
        self._to_controller(AlterPartitionRequest(
            part.leader, c.image.broker_epoch(part.leader), part.topic, part.partition, part.leader_epoch,
            part.partition_epoch, [IsrMember(r, c.image.broker_epoch(r)) for r in live]))

    def failover(self) -> None:
        """The partition's leader is fenced and at once unfenced (R24, R25), and the new leader
        takes it back into the ISR: leadership moves on in replica order, in a new leader epoch."""
        leader = self.c.image.partition(*self.key).leader
        if leader == NO_LEADER:
            return
        self.broker(leader, "fence")
        self.broker(leader, "unfence")
        self.rejoin()

    def metadata(self) -> None:
        """The controller's committed metadata the broker has not seen yet (R3, R22)."""
        base = self.b.image.offset + 1
        self._take(self.b.on_response(("metadata",), MetadataFetchResponse(
            Errors.NONE, self.log[base:], base, len(self.log), 1), self.now))

    def step(self, op: tuple) -> None:
        self.now += 0.01
        kind, *args = op
        if kind == "tick":
            self.now += args[0]
            self._take(self.b.tick(self.now))
        else:
            getattr(self, kind)(*args)
        self.check()

    def check(self) -> None:
        self.binv.check()
        p = self.p
        if p.role == "leader":
            if p.leader_epoch != self.term:  # R14: a new term knows no follower LEO
                self.term, self.accepted = p.leader_epoch, {}
            part = self.c.image.partition(*self.key)
            same_term = (part.leader, part.leader_epoch) == (self.b.broker_id, p.leader_epoch)
            committed = set(part.isr) if same_term else set()
            # R16: the maximal ISR covers every ISR the controller may have committed in this
            # term, so that the HWM (R15) never passes a replica the controller may elect (R25).
            assert committed <= set(p.maximal_isr), \
                (f"R16: the controller's ISR {part.isr} (partition epoch {part.partition_epoch}) is not within "
                 f"the leader's maximal ISR {p.maximal_isr} (partition epoch {p.partition_epoch}): {p.describe()}")
            if p.high_watermark > self.hwm:
                # R15: it advanced to at most the LEO of the leader and of every member of the
                # maximal ISR (and of the controller's ISR), and (elr) only with |ISR| >= MinISR.
                self.hwm_advances += 1
                for f in sorted((set(p.maximal_isr) | committed) - {self.b.broker_id}):
                    assert self.accepted.get(f, -1) >= p.high_watermark, \
                        f"R15: HWM {p.high_watermark} above follower {f}'s LEO {self.accepted.get(f)}: {p.describe()}"
                assert not p.config.elr or len(p.isr) >= min(p.config.min_insync_replicas, len(p.replicas)), \
                    f"R15 (elr): HWM advanced with |ISR| < MinISR: {p.describe()}"
        self.hwm = p.high_watermark


#: what a follower's fetcher sends: from its LEO, with its last epoch and broker epoch (R7)
GOOD_FETCH = st.tuples(st.just("fetch"), st.sampled_from([2, 3]), st.just("leo"), st.just("auto"), st.just("current"),
                       st.sampled_from([0, 100]))
#: and stale or hostile variants: any offset, a last epoch ahead of the leader's, old or no broker epoch
ANY_FETCH = st.tuples(st.just("fetch"), st.sampled_from([2, 3]),
                      st.one_of(st.sampled_from(["leo", "last"]), st.integers(0, 12)),
                      st.sampled_from(["auto", "none", "ahead"]), st.sampled_from(["current", "old", "unknown"]),
                      st.sampled_from([0, 100]))
LEADER_OP = st.one_of(
    GOOD_FETCH, GOOD_FETCH, ANY_FETCH,
    st.tuples(st.just("produce"), st.sampled_from([-1, -1, 1, 0]), st.integers(1, 3), st.sampled_from([0, 300])),
    st.tuples(st.just("tick"), st.sampled_from([0.05, 0.3, 1.2])),
    st.tuples(st.just("controller"), st.sampled_from(["answer", "decide", "lost-request", "lost-response"])),
    st.tuples(st.just("answers")),
    st.tuples(st.just("metadata")),
    st.tuples(st.just("rejoin")),
    st.tuples(st.just("failover")),
    st.tuples(st.just("broker"), st.sampled_from([1, 2, 3]),
              st.sampled_from(["fence", "unfence", "unfence", "shutdown"])),
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(LEADER_OP, min_size=1, max_size=30))
def test_leader_invariants_hold_under_follower_fetches_and_produces(ops: list) -> None:
    """Follower fetches (current, stale or ahead offsets and epochs, old broker epochs, long polls),
    produces (acks 0/1/all), time (R17 shrink, R18 expand), AlterPartition answers or timeouts,
    fencing and failovers that take leadership away and back in a new term (R14), and metadata
    delivered late and in bulk (R3), in random order: R12/R15/R16/R19 after every step, R15's
    advance rule at every HWM advance, and R20 for every acks=all success."""
    d = LeaderDriver()
    for op in ops:
        d.step(op)
    assert d.binv.inspected >= (len(ops) + 1) * len(d.b.partitions) and d.binv.leaders_inspected >= 1


def test_leader_driver_reaches_hwm_advances_isr_changes_and_acks():
    """The leader driver is not vacuous: produce, both followers catch up (the HWM advances, the
    acks=all produce is answered), follower 3 lags (R17 shrink), then catches up (R18 expand)."""
    d = LeaderDriver()
    for op in [("produce", -1, 2, 0), ("fetch", 2, "leo", "auto", "current", 0),
               ("fetch", 3, "leo", "auto", "current", 0), ("fetch", 2, "leo", "auto", "current", 0),
               ("fetch", 3, "leo", "auto", "current", 0), ("produce", 1, 1, 0),
               ("fetch", 2, "leo", "auto", "current", 0), ("tick", 1.2), ("controller", "answer"),
               ("fetch", 2, "leo", "auto", "current", 0), ("fetch", 3, "leo", "auto", "current", 0),
               ("tick", 0.3), ("controller", "answer"), ("metadata",)]:
        d.step(op)
    assert d.hwm_advances >= 2 and d.acked == 1
    assert d.p.high_watermark == d.p.log_end_offset == 3
    assert d.c.image.partition(*d.key).partition_epoch >= 2 and sorted(d.p.isr) == [1, 2, 3]


def test_r16_lost_alter_partition_response_keeps_the_maximal_isr():
    """R16 (maximal ISR), R15, R25, I1/I2: the minimal sequence the leader property found.

    ISR [1, 3] (broker 2 was shrunk out); 2 catches up and the leader proposes [1, 2, 3]; the
    controller commits it (partition epoch 2) but its answer is lost. Had the leader taken the
    timeout for an error and set maximal ISR := ISR = [1, 3], an acks=all produce would be
    acknowledged once 3 alone had it, and when broker 1 is fenced the controller elects 2, a
    member of its ISR that never had that record. The leader keeps [1, 3, 2] instead: the
    produce waits for 2, and nothing acknowledged is missing from the new leader.
    """
    d = LeaderDriver()
    for op in [("fetch", 3, "leo", "auto", "current", 0), ("tick", 0.3), ("controller", "answer"),
               ("fetch", 2, "leo", "auto", "current", 0), ("controller", "lost-response")]:
        d.step(op)
    assert sorted(d.p.maximal_isr) == [1, 2, 3], d.p.describe()
    for op in [("produce", -1, 1, 0), ("fetch", 3, "leo", "auto", "current", 0), ("broker", 1, "fence")]:
        d.step(op)
    part = d.c.image.partition(*d.key)
    assert part.leader == 2 and d.acked == 0 and d.p.high_watermark == 0, (part, d.p.describe())


# ============================================================================ the checkers catch violations
def _orders(**changes: object) -> PartitionRecord:
    base = PartitionRecord("orders", 0, [1, 2, 3], [1, 2, 3], leader=1, leader_epoch=5, partition_epoch=9)
    return replace(base, **changes)


@pytest.mark.parametrize("record, min_isr, elr, rule", [
    (_orders(isr=[1, 4]), 2, True, "ISR not a subset"),
    (_orders(isr=[1], elr=[2, 5]), 2, True, "ELR not a subset"),
    (_orders(isr=[1], elr=[1, 2]), 2, True, "ELR and ISR overlap"),  # R27/I6
    (_orders(isr=[1, 2], elr=[3]), 2, True, "ELR is not empty"),  # I6
    (_orders(isr=[1, 2], last_known_elr=[3]), 2, True, "LastKnownELR is not empty"),  # R27
    (_orders(isr=[2, 3], leader=1), 2, True, "leader outside the ISR"),  # R25
    (_orders(isr=[1], elr=[2]), 2, False, "ELR without"),  # R30
    (_orders(isr=[], leader=NO_LEADER), 2, False, "stays in the ISR"),  # R30
    (_orders(isr=[1, 1]), 2, True, "listed twice"),
])
def test_partition_checker_catches_each_violation(record, min_isr, elr, rule):
    """R25, R27/I6, R30: a record breaking one invariant fails the checker, naming the rule."""
    check_partition_record(_orders(), 2, elr=True)
    check_partition_record(_orders(isr=[1], elr=[2, 3]), 2, elr=True)  # ELR below MinISR is fine
    with pytest.raises(AssertionError, match=rule):
        check_partition_record(record, min_isr, elr=elr)


@pytest.mark.parametrize("second, rule", [
    (_orders(leader_epoch=4, partition_epoch=10), "leader epoch went back"),  # R2
    (_orders(partition_epoch=8), "partition epoch went back"),  # R2
    (_orders(leader=2, isr=[2, 3], partition_epoch=10), "I4"),  # two leaders in leader epoch 5
])
def test_controller_checker_catches_epoch_regressions_and_two_leaders_in_one_epoch(second, rule):
    """R2, I4: the sequence checks see a record that goes back in an epoch or re-leads an epoch."""
    c, _log = controller_with_topic()
    inv = ControllerInvariants(c)
    inv.observe(_orders(), appended=True)
    with pytest.raises(AssertionError, match=rule):
        inv.observe(second, appended=True)
    inv = ControllerInvariants(c)
    inv.observe(_orders(), appended=True)
    with pytest.raises(AssertionError, match="without a partition epoch bump"):  # R2
        inv.observe(_orders(isr=[1, 2]), appended=True)


def test_controller_checker_catches_a_fenced_isr_member_or_leader_and_sees_every_partition():
    """R24/R25/R37: a fenced ISR member or a shutting-down leader fails the kraft check; a clean
    image is inspected whole."""
    c, _log = controller_with_topic()
    inv = ControllerInvariants(c)
    inv.check()
    assert inv.inspected == len(c.image.partitions) == 3
    part = c.image.partitions[("orders", 0)]
    follower = next(r for r in part.isr if r != part.leader)
    c.image.brokers[follower].fenced = True  # forged: R25 would have removed it from the ISR
    with pytest.raises(AssertionError, match=rf"fenced or shutting-down brokers \[{follower}\] in the ISR"):
        inv.check()
    c.image.brokers[follower].fenced = False
    c.image.brokers[part.leader].in_controlled_shutdown = True
    with pytest.raises(AssertionError, match=f"leader {part.leader} is fenced, shutting down"):
        inv.check()


def _leader(b: BrokerState):
    return next(p for _, p in sorted(b.partitions.items()) if p.role == "leader")


def test_broker_checker_catches_hwm_above_leo_and_a_leader_hwm_going_back():
    """R12/R15: HWM above LEO, and a leader HWM that decreases within its epoch, both fail."""
    d = LeaderDriver()
    for op in [("produce", 1, 2, 0), ("fetch", 2, "leo", "auto", "current", 0),
               ("fetch", 3, "leo", "auto", "current", 0), ("fetch", 2, "leo", "auto", "current", 0)]:
        d.step(op)
    p = d.p
    assert p.high_watermark == 2
    p.high_watermark = 1  # forged: the violation the checker must see
    with pytest.raises(AssertionError, match="went back from 2 to 1"):
        d.binv.check()
    p.high_watermark = p.log_end_offset + 1
    with pytest.raises(AssertionError, match="LEO 2 >= HWM 3"):
        BrokerInvariants(d.b).check()


def test_broker_checker_catches_a_leader_outside_its_isr():
    """R19: a leader that accepted a record whose ISR lacks it (or leaves the replicas) fails."""
    b = broker_with_metadata()
    p = _leader(b)
    inv = BrokerInvariants(b)
    inv.check()
    bad = PartitionRecord(p.topic, p.partition, p.replicas, [r for r in p.replicas if r != 1], leader=1,
                          leader_epoch=p.leader_epoch, partition_epoch=p.partition_epoch + 1)
    p.on_partition_record(bad, {}, set(), 2.0)
    assert p.role == "leader"
    with pytest.raises(AssertionError, match="not in its own ISR"):
        inv.check()
    p.on_partition_record(replace(bad, isr=[1, 7], partition_epoch=bad.partition_epoch + 1), {}, set(), 2.0)
    with pytest.raises(AssertionError, match="outside the replicas"):
        inv.check()
    with pytest.raises(AssertionError, match="no replicas"):
        BrokerInvariants(SimpleNamespace(partitions={}, broker_id=1)).check()


def test_leader_driver_catches_a_maximal_isr_behind_the_controller_and_an_early_hwm():
    """R16: a leader ISR that lost a member the controller still has fails; R15: an HWM that
    passes a maximal-ISR follower's LEO fails; both forged on an otherwise healthy leader."""
    d = LeaderDriver()
    for op in [("produce", 1, 2, 0), ("fetch", 2, "leo", "auto", "current", 0)]:
        d.step(op)
    p = d.p
    p._isr = [1, 3]  # forged: the controller's ISR is [1, 2, 3]
    with pytest.raises(AssertionError, match=r"R16: the controller's ISR \[1, 2, 3\]"):
        d.check()
    p._isr = [1, 2, 3]
    d.check()
    p.high_watermark = 2  # forged: follower 3 never fetched
    with pytest.raises(AssertionError, match="R15: HWM 2 above follower 3's LEO None"):
        d.check()
