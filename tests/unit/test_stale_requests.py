"""Requests whose in-flight state outlives what they were made for, on the pure pieces: a
request lost with a controller the broker has since turned away from must not hold back the
next one until its own timeout, and an answer made for an older state (a replica deleted and
made again) must not be applied to the newer one, nor a log info answered before the
metadata caught up stand for the log after it; a follower's fetch to a broker that died
must not hold back its fetches once that broker, restarted, leads again (the last test runs
the whole on virtual time). Each test failed on the code before its fix; their docstrings
say what Kafka does."""
from __future__ import annotations

from pathlib import Path

from broker.common.errors import Errors
from broker.common.jsonl import read_jsonl
from broker.common.record_batch import build_batch, encode_record_set
from broker.protocol.broker import BrokerConfig, BrokerState, LocalReplica
from broker.protocol.epochs import EpochHistory
from broker.protocol.messages import (
    AlterPartitionRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationResponse,
    DeleteTopicsRequest,
    ErrorResponse,
    FetchPartition,
    FetchPartitionResult,
    FetchRequest,
    FetchResponse,
    GetReplicaLogInfoRequest,
    GetReplicaLogInfoResponse,
    MetadataFetchRequest,
    MetadataFetchResponse,
    ProduceRequest,
)
from broker.protocol.outputs import AppendBatches, Outputs, Reply, Send
from broker.protocol.settings import ProtocolSettings
from testbed.sim.run import run_seed
from testbed.topology import parse_topology
from tests.unit.test_controller import Harness, cluster
from tests.unit.test_recovery_and_reassignment import outage
from tests.unit.test_topic_admin import (
    feed,
    metadata_log,
    produce,
    replies,
    two_partitions,
)

QUORUM = (1, 2, 3)
ACKS_ALL = -1


def sends(out: Outputs, kind: str) -> list[Send]:
    return [m for m in out.messages if isinstance(m, Send) and m.correlation[0] == kind]


def answer_metadata(b: BrokerState, h: Harness, send: Send, now: float) -> Outputs:
    """Answer the metadata fetch `send` with every committed record after the broker's image."""
    log = metadata_log(h)
    start = b.image.offset + 1
    return b.on_response(send.correlation, MetadataFetchResponse(Errors.NONE, log[start:], start, len(log), 100), now)


def broker_1_of_quorum(h: Harness) -> tuple[BrokerState, float]:
    """Broker 1 with a three-voter controller quorum (R22), registered with controller 1 and
    caught up with its log; (the broker, the time it is at)."""
    b = BrokerState(BrokerConfig(1, None, "inc-1", controller_ids=QUORUM), {}, -1)
    (register,) = sends(b.tick(0.0), "register")
    assert register.destination == "controller-1"
    out = b.on_response(register.correlation, BrokerRegistrationResponse(Errors.NONE, h.epoch(1)), 0.0)
    out.extend(b.tick(0.0))
    (heartbeat,) = sends(out, "heartbeat")
    (fetch,) = sends(out, "metadata")
    answer_metadata(b, h, fetch, 0.05)
    b.on_response(heartbeat.correlation, BrokerHeartbeatResponse(Errors.NONE, False, True, False), 0.05)
    assert b.caught_up and b.controller_id == 1
    return b, 0.05


def controller_1_dies(b: BrokerState, heartbeat: Send) -> float:
    """Controller 1 dies with the broker's heartbeat sent at 0.2 s: the heartbeat times out,
    and the broker turns to controller 2; the time then."""
    now = 0.2 + heartbeat.timeout_ms / 1000
    b.on_response(heartbeat.correlation, None, now)
    assert b.controller_id == 2
    return now


def follower_fetch(b: BrokerState, h: Harness, replica: int, now: float) -> Outputs:
    p = b.partitions[("t", 0)]
    req = FetchRequest(replica, h.epoch(replica), 0, 1, [FetchPartition("t", 0, p.log_end_offset, -1, p.leader_epoch)])
    return b.on_request(f"fetch-{replica}-{now}", req, now)


# ============================================================================ a controller failover
def test_r16_r19_an_alter_partition_lost_with_the_old_controller_does_not_hold_the_isr_until_its_timeout():
    """R16, R19 after a controller failover. Broker 1 leads t/0 on [1, 2, 3] with ISR [1, 3]
    (MinISR 2, so acks=all writes go on); follower 2 catches up and broker 1 proposes [1, 3, 2]
    to controller 1, which is then killed (or cut off): the request is lost. Broker 1's next
    heartbeat times out and it turns to controller 2 (`_controller_failed`), whose heartbeats
    and metadata fetches it now sends. The proposal sent to controller 1 can never be answered,
    yet it stayed in flight for its whole timeout (`alter_partition_timeout`, 5 s): until then
    the leader proposes nothing, so a caught-up follower stays out of the ISR (and a dead ISR
    member, were it a shrink, holds the HWM and every acks=all write). Kafka's
    NodeToControllerRequestThread puts a request whose connection to the old controller dropped
    (the killed controller) or that was answered NOT_CONTROLLER back at the head of its queue
    and sends it to the new active controller at once."""
    h = cluster(3)
    assert h.create(placement="explicit", assignment={0: [1, 2, 3]}) == "NONE"
    assert h.alter([1, 3]).error == Errors.NONE  # 2 fell behind: out of the ISR
    b, now = broker_1_of_quorum(h)
    p = b.partitions[("t", 0)]
    assert (p.role, p.isr) == ("leader", [1, 3])

    now = 0.2
    out = b.tick(now)  # a heartbeat (and the metadata fetch) to controller 1
    (heartbeat,) = sends(out, "heartbeat")
    assert heartbeat.destination == "controller-1"
    (alter,) = sends(follower_fetch(b, h, 2, now), "alter-partition")  # 2 caught up: R18
    assert alter.destination == "controller-1"
    assert isinstance(alter.message, AlterPartitionRequest) and [m.broker_id for m in alter.message.new_isr] == [1, 3, 2]

    now = controller_1_dies(b, heartbeat)

    # follower 2 keeps fetching at the LEO; well within the old request's 5 s timeout, the
    # proposal goes to the controller the broker now believes active
    proposed = []
    t = now
    while t < now + 1.0:
        t = round(t + 0.1, 3)
        proposed += sends(follower_fetch(b, h, 2, t), "alter-partition") + sends(b.tick(t), "alter-partition")
    assert alter.timeout_ms / 1000 > 1.0 + heartbeat.timeout_ms / 1000
    assert [s.destination for s in proposed][:1] == ["controller-2"], \
        "the proposal lost with controller 1 held every ISR change until its own timeout"


def test_r22_the_metadata_fetch_follows_the_broker_to_the_new_active_controller():
    """R22, R24 after a controller failover. Broker 1's metadata fetch is a long poll parked
    at controller 1 when controller 1 dies; its heartbeat times out and it turns to controller
    2. The metadata fetch lost with controller 1 stayed in flight for its own timeout (a heartbeat
    interval plus the controller request timeout: 0.7 s against a 0.2 s heartbeat timeout), and
    until then no metadata fetch goes to controller 2, so the leaderships and ISR changes the new
    controller commits reach this broker half a second later than its heartbeats could have
    brought them. Kafka's broker learns the new leader from its Raft client, which on a leader
    change forgets the request in flight to the old one and fetches from the new one at once."""
    h = cluster(3)
    b, now = broker_1_of_quorum(h)
    now = 0.2
    out = b.tick(now)
    (heartbeat,) = sends(out, "heartbeat")
    (parked,) = sends(out, "metadata")  # a long poll, parked at controller 1
    assert heartbeat.destination == parked.destination == "controller-1"
    assert parked.timeout_ms > 3 * heartbeat.timeout_ms

    now = controller_1_dies(b, heartbeat)
    fetches = []
    t = now
    while t < now + 0.3:
        t = round(t + 0.05, 3)
        fetches += sends(b.tick(t), "metadata")
    assert [f.destination for f in fetches][:1] == ["controller-2"], \
        "the metadata fetch lost with controller 1 held the next one until its own timeout"
    assert isinstance(fetches[0].message, MetadataFetchRequest)


def test_r22_a_not_controller_answer_to_the_heartbeat_moves_the_metadata_fetch_too():
    """R22: as above, when controller 1 lost its leadership and says so (NOT_CONTROLLER naming
    controller 3) to the heartbeat, while the metadata fetch parked there is never answered (a
    resigning controller answers the requests it held for a commit, not a parked long poll
    whose answer it then drops, nor one it cannot reach once cut off)."""
    h = cluster(3)
    b, now = broker_1_of_quorum(h)
    now = 0.2
    (heartbeat,) = sends(b.tick(now), "heartbeat")
    b.on_response(heartbeat.correlation, ErrorResponse(Errors.NOT_CONTROLLER, "resigned", 3), 0.21)
    assert b.controller_id == 3
    fetches = []
    t = 0.21
    while t < 0.5:
        t = round(t + 0.05, 3)
        fetches += sends(b.tick(t), "metadata")
    assert [f.destination for f in fetches][:1] == ["controller-3"]


# ============================================================================ a replica made again
def test_r12_r40_a_fetch_answer_for_a_deleted_topic_is_not_appended_to_the_topic_made_again():
    """R12, R40. Broker 1 follows t/1 (led by broker 2, leader epoch 0) and has a fetch at
    offset 0 in flight when t is deleted and made again under the same name, t/1 again led by
    broker 2 in leader epoch 0 (a new topic's first term). The late answer, made by broker 2
    from the old topic's log, names the same leader and the same leader epoch the fetch was
    sent in, which is all `FetcherManager.on_response` compares, so its records, the deleted
    topic's, are appended to the new topic's empty replica (and its fetch offset moves past
    them: the new leader's records at those offsets are never fetched). Kafka's fetcher applies
    an answer only to the partition state it was sent for: the same topic id and the fetch
    offset the request carried (AbstractFetcherThread.processFetchRequest)."""
    h = two_partitions()
    b = BrokerState(BrokerConfig(1, None, "inc-1"), {}, -1)
    b.tick(0.0)
    b.on_response(("register", 1), BrokerRegistrationResponse(Errors.NONE, h.epoch(1)), 0.0)
    log = metadata_log(h)
    b.on_response(("metadata", 1), MetadataFetchResponse(Errors.NONE, log, 0, len(log), 100), 0.1)
    old = b.partitions[("t", 1)]
    assert (old.role, old.leader_id, old.leader_epoch, old.log_end_offset) == ("follower", 2, 0, 0)
    (fetch,) = [s for s in sends(b.tick(0.2), "fetch") if s.destination == 2]
    assert [(fp.topic, fp.partition, fp.fetch_offset) for fp in fetch.message.partitions] == [("t", 1, 0)]

    h.call(DeleteTopicsRequest(["t"]))
    assert h.create(partitions=2, placement="explicit", assignment={0: [1, 2, 3], 1: [2, 1, 3]}) == "NONE"
    log = metadata_log(h)
    start = b.image.offset + 1
    b.on_response(("metadata", 1), MetadataFetchResponse(Errors.NONE, log[start:], start, len(log), 100), 0.3)
    new = b.partitions[("t", 1)]
    assert new is not old
    assert (new.role, new.leader_id, new.leader_epoch, new.log_end_offset) == ("follower", 2, 0, 0)

    # the answer broker 2 made from the old topic's log before it deleted it
    stale = build_batch(0, 0, [b"old-1", b"old-2"])
    late = FetchResponse(Errors.NONE, [FetchPartitionResult("t", 1, Errors.NONE, 2, 2, 0, records=stale)])
    out = b.on_response(fetch.correlation, late, 0.35)
    assert not [op for op in out.disk if isinstance(op, AppendBatches)], \
        "the deleted topic's records were appended to the replica of the topic made again"
    assert new.log_end_offset == 0


def test_r11_r15_r40_a_fetch_sent_for_a_deleted_topic_does_not_count_for_the_topic_made_again():
    """R11, R15, R40, the leader's side of the test above. Broker 1 leads t/0 on [1, 2, 3] in
    leader epoch 0 and holds 3 records; follower 2's fetch at offset 3 (all of them) is on its
    way when t is deleted and made again, t/0 again led by 1 in leader epoch 0. The new topic
    takes an acks=all write of 3 records; follower 3 fetches them. Then follower 2's fetch for
    the old topic arrives: same leader epoch, same broker epoch, a last fetched epoch the new
    log also has, an offset within its log, so the leader takes it as follower 2 holding the new
    topic's first 3 records: the HWM passes them and the write is acknowledged, though broker 2
    holds none of them (nor did it learn yet that the topic was made again). Kafka's fetch names
    the topic by its id (KIP-516), and the leader answers a fetch for another id with
    UNKNOWN_TOPIC_ID / INCONSISTENT_TOPIC_ID, changing no follower state."""
    h = cluster(3)
    assert h.create(placement="explicit", assignment={0: [1, 2, 3]}) == "NONE"
    b = BrokerState(BrokerConfig(1, None, "inc-1"), {}, -1)
    b.tick(0.0)
    b.on_response(("register", 1), BrokerRegistrationResponse(Errors.NONE, h.epoch(1)), 0.0)
    log = metadata_log(h)
    b.on_response(("metadata", 1), MetadataFetchResponse(Errors.NONE, log, 0, len(log), 100), 0.1)
    for i in range(3):
        produce(b, f"old-{i}", 0.2, acks=1)
    assert b.partitions[("t", 0)].log_end_offset == 3
    old_id = h.controller.image.topic_ids["t"]
    assert b.partitions[("t", 0)].fetch_partition() is None  # a leader: followers name its topic id
    stale = FetchRequest(2, h.epoch(2), 0, 1, [FetchPartition("t", 0, 3, 0, 0, topic_id=old_id)])  # for the old topic

    h.call(DeleteTopicsRequest(["t"]))
    assert h.create(placement="explicit", assignment={0: [1, 2, 3]}) == "NONE"
    log = metadata_log(h)
    start = b.image.offset + 1
    b.on_response(("metadata", 1), MetadataFetchResponse(Errors.NONE, log[start:], start, len(log), 100), 0.3)
    p = b.partitions[("t", 0)]
    assert (p.role, p.leader_epoch, p.log_end_offset, p.isr) == ("leader", 0, 0, [1, 2, 3])
    new_id = h.controller.image.topic_ids["t"]
    assert p.topic_id == new_id != old_id

    write = ProduceRequest("t", 0, ACKS_ALL, 30_000, encode_record_set([b"n0", b"n1", b"n2"]))
    assert not replies(b.on_request("new", write, 0.4))  # held for the ISR (R20)
    assert p.log_end_offset == 3
    b.on_request("f3", FetchRequest(3, h.epoch(3), 0, 1, [FetchPartition("t", 0, 0, -1, 0, topic_id=new_id)]), 0.45)
    b.on_request("f3b", FetchRequest(3, h.epoch(3), 0, 1, [FetchPartition("t", 0, 3, 0, 0, topic_id=new_id)]), 0.5)
    assert p.high_watermark == 0  # follower 2 has fetched nothing of the new topic

    out = b.on_request("stale", stale, 0.55)
    assert p.high_watermark == 0 and "new" not in replies(out), \
        "a fetch sent for the deleted topic moved the new topic's HWM and acknowledged its write"
    [result] = replies(out)["stale"].partitions
    assert result.error == Errors.INCONSISTENT_TOPIC_ID


# ============================================================================ a leader restarted
RESTARTED_LEADER = {
    "name": "restarted-leader", "seed": 0, "duration": "4s",
    "cluster": {"controllers": 1, "brokers": 3},
    "topics": [{"name": "orders", "partitions": 2, "replication_factor": 3, "min_insync_replicas": 2,
                "placement": "explicit", "assignment": {0: [1, 2, 3], 1: [3, 1, 2]}}],
    "workload": {"producers": [{"count": 1, "topic": "orders", "acks": "all", "rate": "200/s", "batch": 10,
                                "partitions": [1]}]},
    "faults": [{"at": "1s", "do": "kill", "target": "broker:1"}, {"at": "1.65s", "do": "restart", "target": "broker:1"},
               {"at": "2.2s", "do": "kill", "target": "broker:3"}],
}


def test_r7_a_leader_killed_and_restarted_gets_its_followers_fetches_at_once_when_it_leads_again(
        tmp_path: Path) -> None:
    """R7, on virtual time. Broker 2 follows orders/0 from broker 1 and has a fetch parked there
    when broker 1 is killed; broker 1 restarts, rejoins orders/1's ISR, and is elected its
    leader when broker 3, the leader, is killed. Broker 2's fetch to broker 1 went to the dead
    process and was waited for until its timeout (2 s past the long poll), so the new leader
    got no follower fetch and its HWM stood still: 0.425 s after it became leader (the SIGKILL
    failover bench: 1.2-1.3 s instead of 0.55 whenever the new leader had been restarted). Kafka
    sees the connection break and shuts an idle fetcher thread down. Now the fetch is abandoned
    once it speaks for no partition (orders/0 moved to broker 2) or broker 1 registered again."""
    run = tmp_path / "run"
    outcome = run_seed(parse_topology(RESTARTED_LEADER, "restarted-leader"), run)
    assert outcome.error is None and outcome.converged
    events = read_jsonl(run / "events.jsonl")
    led = [e["time_ns"] for e in events
           if e["kind"] == "became-leader" and e["node"] == "broker-1" and e.get("partition") == 1]
    assert len(led) == 1, "the schedule elects the restarted broker 1 leader of orders/1 once"
    advanced = [e["time_ns"] for e in events if e["kind"] == "hwm-advanced" and e["node"] == "broker-1"
                and e.get("partition") == 1 and e["time_ns"] >= led[0]]
    assert advanced and advanced[0] - led[0] < 0.1e9, \
        f"the new leader's HWM stood still for {(advanced[0] - led[0]) / 1e9 if advanced else None} s"


def test_r32_a_broker_answers_for_its_log_only_once_its_metadata_caught_up():
    """A tester's sim seed with `truncation: high-watermark`: broker 1 restarted with 805
    records and an HWM checkpoint of 5, answered GetReplicaLogInfo with LEO 805 as soon as it
    registered, then applied the metadata, became a follower of the leaderless partition and
    truncated to 5 (R13), and was elected on its 805. A KRaft broker serves no request before
    its metadata caught up; nor does this one now: its log info is the log it will lead with."""
    h = cluster(unclean_recovery="balanced")
    outage(h)
    local = {("t", 0): LocalReplica(805, 5, EpochHistory([(0, 0)]))}
    b = BrokerState(BrokerConfig(2, None, "2-after-outage", protocol=ProtocolSettings(truncation="high-watermark")),
                    local, -1)
    b.tick(h.now)
    b.on_response(("register",), BrokerRegistrationResponse(Errors.NONE, h.epoch(2)), h.now)

    def log_info() -> GetReplicaLogInfoResponse:
        [reply] = [m.message for m in b.on_request("ask", GetReplicaLogInfoRequest("t", 0), h.now).messages
                   if isinstance(m, Reply)]
        return reply

    assert log_info().error == Errors.BROKER_NOT_AVAILABLE  # registered, its metadata not caught up
    feed(b, h, h.now)
    assert b.caught_up and b.partitions[("t", 0)].log_end_offset == 5  # R13: cut to its HWM
    answered = log_info()
    assert (answered.error, answered.log_end_offset, answered.broker_epoch) == (Errors.NONE, 5, h.epoch(2))
