"""The leader side of Partition: R8, R11, R14-R21."""
from __future__ import annotations

from broker.common.errors import Errors
from broker.common.record_batch import build_batch
from broker.protocol.messages import (
    AlterPartitionRequest,
    AlterPartitionResponse,
    FetchPartition,
    IsrMember,
    ProduceRequest,
)
from broker.protocol.outputs import AppendRecords, AssignEpoch, Send
from broker.protocol.partition import PartitionConfig, ReadSpec
from tests.unit.partition_harness import (
    BROKER_EPOCHS,
    TOPIC,
    Replica,
    apply_record,
    build_log,
    fetch_round,
    follower_fetch_now,
    produce,
    record,
)


def config(**kw) -> PartitionConfig:
    return PartitionConfig(**{"min_insync_replicas": 2, "replica_lag_max": 10.0, **kw})


def cluster(isr=(1, 2, 3), leader_epoch=1, cfg=None, leader_log=None, eligible=None):
    cfg = cfg or config()
    leader = Replica(1, cfg, leader_log)
    f2, f3 = Replica(2, cfg), Replica(3, cfg)
    apply_record([leader, f2, f3], record(1, leader_epoch, leader_epoch, list(isr)),
                 eligible=eligible)
    return leader, f2, f3


def sends(out) -> list[Send]:
    return [m for m in out.messages if isinstance(m, Send)]


def fetch(leader: Replica, follower_id: int, offset: int, now: float = 0.0,
          last_epoch: int = -1, current_epoch: int | None = None, broker_epoch: int | None = None):
    fp = FetchPartition(TOPIC, 0, offset, last_epoch,
                        leader.p.leader_epoch if current_epoch is None else current_epoch)
    result, read, out = follower_fetch_now(
        leader.p, follower_id, BROKER_EPOCHS[follower_id] if broker_epoch is None else broker_epoch, fp, now)
    leader.run(out)
    return result, read, out


def answers(replica: Replica) -> list:
    return [r.message for r in replica.replies]


# ------------------------------------------------------------------ R8
def test_R8_lower_epoch_is_fenced():
    leader, _f2, _f3 = cluster(leader_epoch=3)
    result, read, _ = fetch(leader, 2, 0, current_epoch=2)
    assert result.error == Errors.FENCED_LEADER_EPOCH and read is None


def test_R8_higher_epoch_is_unknown():
    leader, _f2, _f3 = cluster(leader_epoch=3)
    result, _read, _ = fetch(leader, 2, 0, current_epoch=4)
    assert result.error == Errors.UNKNOWN_LEADER_EPOCH


def test_R8_not_leader_after_epoch_check():
    _leader, f2, _f3 = cluster(leader_epoch=3)
    assert fetch(f2, 3, 0, current_epoch=3)[0].error == Errors.NOT_LEADER_OR_FOLLOWER
    assert fetch(f2, 3, 0, current_epoch=2)[0].error == Errors.FENCED_LEADER_EPOCH


def test_R8_minus_one_skips_the_epoch_check():
    leader, _f2, _f3 = cluster(leader_epoch=3)
    assert fetch(leader, 2, 0, current_epoch=-1)[0].error == Errors.NONE


def test_R11_stale_broker_epoch_does_not_overwrite_state():
    leader, _f2, _f3 = cluster()
    produce(leader, ["a", "b"], acks=1)
    fetch(leader, 2, 0, broker_epoch=200)
    result, _read, _ = fetch(leader, 2, 2, broker_epoch=102)  # an older incarnation
    assert result.error == Errors.NOT_LEADER_OR_FOLLOWER
    assert leader.p.describe()["followers"]["2"]["leo"] == 0


# ------------------------------------------------------------------ R11
def test_R11_leader_records_follower_leo_broker_epoch_and_caught_up_time():
    leader, f2, _f3 = cluster()
    produce(leader, ["a", "b"], acks=1, now=1.0)
    fetch_round(leader, f2, now=2.0)  # fetch offset 0 < leader LEO 2: not caught up
    st = leader.p.describe()["followers"]["2"]
    assert st["leo"] == 0 and st["broker_epoch"] == 102 and st["last_caught_up_time"] == 0.0
    fetch_round(leader, f2, now=3.0)  # reached the LEO the leader had at the previous fetch
    st = leader.p.describe()["followers"]["2"]
    assert st["leo"] == 2 and st["last_caught_up_time"] == 3.0


def test_R11_caught_up_as_of_previous_fetch_when_leader_moved_on():
    leader, f2, _f3 = cluster()
    produce(leader, ["a"], acks=1)
    fetch_round(leader, f2, now=1.0)  # gets offset 0; leader LEO was 1
    produce(leader, ["b"], acks=1, now=1.5)
    fetch_round(leader, f2, now=2.0)  # offset 1 >= LEO of the previous fetch, < LEO now (2)
    assert leader.p.describe()["followers"]["2"]["last_caught_up_time"] == 1.0


def test_R11_fetch_offset_beyond_leo_is_out_of_range():
    leader, _f2, _f3 = cluster()
    result, read, _ = fetch(leader, 2, 5)
    assert result.error == Errors.OFFSET_OUT_OF_RANGE and read is None


def test_R11_read_spec_covers_fetch_offset_to_leo():
    leader, _f2, _f3 = cluster()
    produce(leader, ["a", "b", "c"], acks=1)
    result, read, _ = fetch(leader, 2, 1)
    assert read == ReadSpec(1, 3, 1 << 20)
    assert result.log_end_offset == 3 and result.leader_epoch == 1


# ------------------------------------------------------------------ R14
def test_R14_new_leader_sets_leso_assigns_epoch_and_reports():
    leader = Replica(1, config(), build_log([(1, "a"), (1, "b"), (1, "c")]), high_watermark=2)
    out = leader.run(leader.p.on_partition_record(record(1, 4, 7, [1, 2]), BROKER_EPOCHS,
                                                  {1, 2, 3}, 0.0))
    assert leader.p.role == "leader" and leader.p.leader_epoch_start_offset == 3
    assert AssignEpoch(TOPIC, 0, 4, 3) in out.disk
    assert leader.p.epochs.entries == [(1, 0), (4, 3)]
    assert leader.events_of("became-leader") == [{
        "topic": TOPIC, "partition": 0, "leader_epoch": 4, "partition_epoch": 7, "isr": [1, 2],
        "elr": [], "last_known_elr": [], "leo": 3, "hwm": 2}]
    assert leader.p.high_watermark == 2  # starts at its own HWM, advances by R15 only


def test_R14_forgets_fetch_state_of_followers_outside_isr_and_pending_change():
    leader, f2, f3 = cluster(isr=(1, 2))
    produce(leader, ["a"], acks=1)
    fetch_round(leader, f2)
    out = follower_fetch_now(leader.p, 3, 103, f3.p.fetch_partition(), 0.0)[2]
    assert sends(out)  # 3 caught up: expansion in flight
    assert leader.p.maximal_isr == [1, 2, 3]
    apply_record([leader], record(1, 2, 5, [1, 2]))
    assert leader.p.maximal_isr == [1, 2]  # pending change dropped
    followers = leader.p.describe()["followers"]
    assert followers["3"]["fetched_in_epoch"] == -1 and followers["3"]["broker_epoch"] == -1
    assert followers["2"]["leo"] == -1  # an ISR member's LEO is unknown until it fetches again


# ------------------------------------------------------------------ R15
def test_R15_hwm_is_min_leo_over_leader_and_maximal_isr():
    leader, f2, f3 = cluster()
    produce(leader, ["a", "b", "c"], acks=1)
    fetch_round(leader, f2)
    fetch_round(leader, f2)
    assert leader.p.high_watermark == 0  # 3 has not fetched
    fetch_round(leader, f3)
    fetch_round(leader, f3)
    assert leader.p.high_watermark == 3
    assert f3.p.high_watermark == 3  # R12: min(leader HWM 3, LEO 3)


def test_R15_hwm_never_decreases_in_a_new_term():
    leader, f2, f3 = cluster()
    produce(leader, ["a", "b"], acks=1)
    for f in (f2, f3, f2, f3):
        fetch_round(leader, f)
    assert leader.p.high_watermark == 2
    apply_record([leader], record(1, 2, 2, [1, 2, 3]))  # followers' LEOs now unknown
    produce(leader, ["c"], acks=1)
    assert leader.p.high_watermark == 2


def test_R15_elr_true_hwm_frozen_with_isr_below_min_isr():
    leader, _f2, _f3 = cluster(isr=(1,), cfg=config(elr=True))
    produce(leader, ["a", "b"], acks=1)
    assert leader.p.high_watermark == 0


def test_R15_elr_false_hwm_advances_with_isr_of_leader_alone():
    leader, _f2, _f3 = cluster(isr=(1,), cfg=config(elr=False))
    produce(leader, ["a", "b"], acks=1, now=0.0)
    assert leader.p.high_watermark == 2
    assert leader.events_of("hwm-advanced") == [
        {"topic": TOPIC, "partition": 0, "leo": 2, "hwm": 2, "leader_epoch": 1}]


def test_R15_hwm_advanced_events_are_sampled():
    leader, _f2, _f3 = cluster(isr=(1,), cfg=config(elr=False))
    produce(leader, ["a"], acks=1, now=1.0)
    produce(leader, ["b"], acks=1, now=1.05)
    produce(leader, ["c"], acks=1, now=1.2)
    assert [e["hwm"] for e in leader.events_of("hwm-advanced")] == [1, 3]


# ------------------------------------------------------------------ R16
def _expansion_in_flight():
    leader, f2, f3 = cluster(isr=(1, 2))
    produce(leader, ["a", "b"], acks=1)
    fetch_round(leader, f2)
    fetch_round(leader, f2)
    assert leader.p.high_watermark == 2
    fetch_round(leader, f3, now=1.0)
    fetch_round(leader, f3, now=1.0)
    return leader, f2, f3, list(leader.sent)


def test_R16_maximal_isr_includes_proposed_while_in_flight():
    leader, f2, f3, sent = _expansion_in_flight()
    assert len(sent) == 1 and leader.p.isr == [1, 2] and leader.p.maximal_isr == [1, 2, 3]
    produce(leader, ["c"], acks=1)
    fetch_round(leader, f2)
    fetch_round(leader, f2)
    assert leader.p.high_watermark == 2  # 2 is at 3, but 3 (in the maximal ISR) is at 2
    fetch_round(leader, f3)
    fetch_round(leader, f3)
    assert leader.p.high_watermark == 3


def test_R16_at_most_one_proposal_in_flight():
    leader, f2, f3, _sent = _expansion_in_flight()
    out = leader.p.tick(2.0)
    assert not sends(out)
    _r, _read, out = fetch(leader, 3, 2)
    assert not sends(out)


def test_R16_error_rolls_back_maximal_isr():
    leader, *_ = _expansion_in_flight()
    leader.answer(AlterPartitionResponse(TOPIC, 0, Errors.INELIGIBLE_REPLICA), 2.0)
    assert leader.p.maximal_isr == [1, 2] and leader.p.isr == [1, 2]


def test_R16_timeout_keeps_the_maximal_isr_and_sends_the_proposal_again():
    """A lost answer proves nothing: the controller may have committed the expansion, so the
    HWM must keep counting broker 3 until an answer or the metadata says otherwise."""
    leader, *_ = _expansion_in_flight()
    leader.answer(None, 2.0)
    assert leader.p.maximal_isr == [1, 2, 3] and leader.p.isr == [1, 2]
    out = leader.p.tick(3.0)
    assert [s.message.new_isr for s in sends(out)] == [[IsrMember(1, 101), IsrMember(2, 102),
                                                         IsrMember(3, 103)]]


def test_R16_a_stale_view_keeps_the_maximal_isr_until_the_metadata_says():
    """INVALID_UPDATE_VERSION after a lost answer: the controller moved on, perhaps by our own
    proposal; nothing is proposed and the maximal ISR stays until the metadata record arrives."""
    leader, *_ = _expansion_in_flight()
    leader.answer(None, 2.0)
    leader.p.tick(3.0)
    leader.answer(AlterPartitionResponse(TOPIC, 0, Errors.INVALID_UPDATE_VERSION), 3.1)
    assert leader.p.maximal_isr == [1, 2, 3]
    assert not sends(leader.p.tick(10.0))


def test_R16_the_answer_to_a_proposal_a_newer_record_replaced_is_ignored():
    """A record with a newer partition epoch (another change: a reassignment's growth, a
    fence) arrives before the controller's INVALID_UPDATE_VERSION to our expansion: the
    record replaced the proposal, so the answer is stale, and the leader goes on judging
    the ISR from the record (found by a new user: waiting for metadata already applied, the
    leader never changed the ISR again and a reassignment hung)."""
    leader, f2, f3, _sent = _expansion_in_flight()
    apply_record([leader], record(1, 1, 2, [1, 2]))  # pe 2 from elsewhere; the expansion not in it
    leader.answer(AlterPartitionResponse(TOPIC, 0, Errors.INVALID_UPDATE_VERSION), 2.1)
    assert leader.p.maximal_isr == [1, 2]
    before = len(leader.sent)
    fetch_round(leader, f3, now=3.0)  # R18: the caught-up follower's fetch proposes it again
    again = [s.message for s in leader.sent[before:] if isinstance(s.message, AlterPartitionRequest)]
    assert [([m.broker_id for m in r.new_isr], r.partition_epoch) for r in again] == [([1, 2, 3], 2)]


def test_R16_success_commits_isr_and_partition_epoch():
    leader, *_ = _expansion_in_flight()
    leader.answer(AlterPartitionResponse(TOPIC, 0, Errors.NONE, 1, 1, 2, [1, 2, 3]), 2.0)
    assert leader.p.isr == [1, 2, 3] and leader.p.partition_epoch == 2


def test_R16_stale_partition_epoch_is_ignored():
    leader, *_ = _expansion_in_flight()
    apply_record([leader], record(1, 1, 3, [1, 2, 3]))  # metadata came first
    leader.answer(AlterPartitionResponse(TOPIC, 0, Errors.NONE, 1, 1, 2, [1, 2, 3]), 2.0)
    assert leader.p.partition_epoch == 3
    apply_record([leader], record(1, 1, 2, [1, 2]))  # an older record
    assert leader.p.isr == [1, 2, 3] and leader.p.partition_epoch == 3


# ------------------------------------------------------------------ R17
def test_R17_shrink_after_replica_lag_max():
    leader, f2, f3 = cluster()
    produce(leader, ["a"], acks=1, now=0.0)
    for t in (1.0, 2.0, 9.0):
        fetch_round(leader, f2, now=t)
        fetch_round(leader, f3, now=t)
    produce(leader, ["b"], acks=1, now=9.5)
    for t in (10.0, 15.0, 19.6):
        fetch_round(leader, f2, now=t)
    assert not sends(leader.p.tick(19.0))  # 3 caught up at 9.0: lag 10.0 not exceeded
    out = leader.p.tick(19.5)
    assert [s.message.new_isr for s in sends(out)] == [[IsrMember(1, 101), IsrMember(2, 102)]]
    assert leader.p.maximal_isr == [1, 2, 3]  # a shrink does not narrow it before it commits


def test_R17_R18_a_follower_that_stopped_fetching_is_not_taken_back_on_its_last_word():
    """A follower cut off from the leader keeps its last fetch's LEO, which equals the HWM
    that stopped with it (R15: |ISR| < MinISR); R18 alone would take it back into the ISR on
    the next tick and R17 shrink it again, a new AlterPartition every tick. Only a fetch that
    catches it up again lets it rejoin."""
    leader, f2, f3 = cluster()
    produce(leader, ["a"], acks=1, now=0.0)
    for f in (f2, f3, f2, f3):
        fetch_round(leader, f, now=1.0)
    produce(leader, ["b"], acks=1, now=2.0)  # nobody fetches "b": the HWM stays at 1
    [shrink] = sends(leader.run(leader.p.tick(12.5)))
    assert shrink.message.new_isr == [IsrMember(1, 101)]
    leader.answer(AlterPartitionResponse(
        TOPIC, 0, Errors.NONE, 1, leader.p.leader_epoch, leader.p.partition_epoch + 1, [1]), 12.6)
    assert leader.p.isr == [1]
    assert not sends(leader.p.tick(12.7)) and not sends(leader.p.tick(30.0))
    before = len(leader.sent)
    fetch_round(leader, f2, now=31.0)
    fetch_round(leader, f2, now=31.0)
    [expand] = leader.sent[before:]  # R18 on the fetch that caught broker 2 up
    assert expand.message.new_isr == [IsrMember(1, 101), IsrMember(2, 102)]


def test_R16_R18_a_new_term_does_not_wait_for_the_old_terms_proposal():
    """A leader cut off from the controller proposes a shrink that nobody answers. The
    controller then elects it again in a new term with the ISR its fences left (the leader
    alone), and a follower catches up at once. The old term's AlterPartition can no longer be
    applied (its epochs are stale), so the expansion leaves on that follower's fetch, not
    when the old request times out; the old request's late answer changes nothing (seen in
    a sim run: the partition stayed below MinISR for 3 s, refusing every acks=all write)."""
    leader, f2, f3 = cluster()
    produce(leader, ["a"], acks=1, now=0.0)
    for f in (f2, f3, f2, f3):
        fetch_round(leader, f, now=1.0)
    produce(leader, ["b"], acks=1, now=2.0)  # nobody fetches "b"
    [shrink] = sends(leader.run(leader.p.tick(12.5)))
    assert shrink.message.new_isr == [IsrMember(1, 101)]
    apply_record([leader, f2, f3], record(1, 2, 4, [1], elr=[2, 3]), now=13.0)
    before = len(leader.sent)
    fetch_round(leader, f2, now=13.1)  # "b"
    fetch_round(leader, f2, now=13.1)  # caught up in the new term
    [expand] = leader.sent[before:]
    assert expand.message.leader_epoch == 2 and expand.message.partition_epoch == 4
    assert expand.message.new_isr == [IsrMember(1, 101), IsrMember(2, 102)]
    leader.run(leader.p.on_alter_partition_response(None, 17.5, shrink.correlation[3]))  # the old one times out
    assert leader.p.maximal_isr == [1, 2]
    assert not sends(leader.run(leader.p.tick(17.6)))  # the expansion is still the one in flight
    leader.answer(AlterPartitionResponse(TOPIC, 0, Errors.NONE, 1, 2, 5, [1, 2]), 17.7)
    assert leader.p.isr == [1, 2] and leader.p.partition_epoch == 5


def test_R17_follower_at_leader_leo_is_never_shrunk():
    leader, f2, f3 = cluster()
    produce(leader, ["a"], acks=1)
    for f in (f2, f3, f2, f3):
        fetch_round(leader, f, now=1.0)
    assert not sends(leader.p.tick(100.0))


# ------------------------------------------------------------------ R18 (+ R19)
def _candidate(**kw):
    """ISR [1,2], 3 outside; HWM 2; 3 fetches at 2 unless told otherwise."""
    leader, f2, _f3 = cluster(isr=(1, 2), **kw)
    produce(leader, ["a", "b"], acks=1)
    fetch_round(leader, f2)
    fetch_round(leader, f2)
    return leader


def test_R18_R19_expansion_when_all_conditions_hold():
    leader = _candidate()
    _r, _read, out = fetch(leader, 3, 2, last_epoch=1)
    [send] = sends(out)
    assert send.destination == "controller"
    assert send.correlation == ("alter-partition", TOPIC, 0, leader.p.partition_epoch)
    assert send.timeout_ms == 5000
    assert send.message == AlterPartitionRequest(
        broker_id=1, broker_epoch=101, topic=TOPIC, partition=0, leader_epoch=1,
        partition_epoch=1, new_isr=[IsrMember(1, 101), IsrMember(2, 102), IsrMember(3, 103)])


def test_R18_blocked_when_not_fetched_in_current_epoch():
    leader, f2, f3 = cluster(isr=(1, 2, 3))
    produce(leader, ["a"], acks=1)
    fetch_round(leader, f3)
    fetch_round(leader, f3)  # 3 fetched in epoch 1, at LEO 1
    apply_record([leader], record(1, 2, 2, [1, 2, 3]))  # new term, 3 still in the ISR
    apply_record([leader], record(1, 2, 3, [1, 2]))  # then the controller drops it
    assert not sends(leader.p.tick(0.5))  # its only fetch is from epoch 1
    _r, _read, out = fetch(leader, 3, 1, last_epoch=1)
    assert [s.message.new_isr[-1] for s in sends(out)] == [IsrMember(3, 103)]


def test_R18_blocked_when_leo_below_hwm():
    leader = _candidate()
    _r, _read, out = fetch(leader, 3, 1, last_epoch=1)
    assert not sends(out)


def test_R18_blocked_when_leo_below_leso():
    log = build_log([(1, "a"), (1, "b"), (1, "c"), (1, "d")])
    leader = Replica(1, config(), log, high_watermark=0)
    leader.run(leader.p.on_partition_record(record(1, 2, 2, [1, 2]), BROKER_EPOCHS,
                                            {1, 2, 3}, 0.0))
    assert leader.p.high_watermark == 0 and leader.p.leader_epoch_start_offset == 4
    _r, _read, out = fetch(leader, 3, 2, last_epoch=1)
    assert not sends(out)
    _r, _read, out = fetch(leader, 3, 4, last_epoch=1)
    assert sends(out)


def test_R18_blocked_when_broker_fenced_or_shutting_down():
    leader = _candidate(eligible={1, 2})
    _r, _read, out = fetch(leader, 3, 2, last_epoch=1)
    assert not sends(out)
    leader.p.update_brokers(BROKER_EPOCHS, {1, 2, 3})
    assert sends(leader.p.tick(1.0))


def test_R18_blocked_when_broker_epoch_differs_from_metadata():
    leader = _candidate()
    _r, _read, out = fetch(leader, 3, 2, last_epoch=1, broker_epoch=999)
    assert not sends(out)


# ------------------------------------------------------------------ R20
def test_R20_acks_0_no_answer_even_on_error():
    leader, f2, _f3 = cluster()
    out = produce(leader, ["a"], acks=0)
    assert not out.messages and isinstance(out.disk[0], AppendRecords)
    produce(f2, ["b"], acks=0)
    assert not f2.replies


def test_R20_acks_1_answers_after_local_append():
    leader, _f2, _f3 = cluster()
    produce(leader, ["a", "b"], acks=1)
    produce(leader, ["c"], acks=1)
    assert [(m.error, m.base_offset) for m in answers(leader)] == [(Errors.NONE, 0), (Errors.NONE, 2)]
    assert leader.p.log_end_offset == 3


def test_R20_acks_all_answers_when_hwm_passes_the_batch():
    leader, f2, f3 = cluster()
    produce(leader, ["a", "b"], acks=-1)
    assert not leader.replies
    for f in (f2, f3, f2):
        fetch_round(leader, f)
    assert not leader.replies
    fetch_round(leader, f3)
    [resp] = answers(leader)
    assert resp.error == Errors.NONE and resp.base_offset == 0 and resp.leader_epoch == 1


def test_R20_not_enough_replicas_without_append():
    leader, _f2, _f3 = cluster(isr=(1,))
    out = produce(leader, ["a"], acks=-1)
    assert not out.disk and leader.p.log_end_offset == 0
    [resp] = answers(leader)
    assert resp.error == Errors.NOT_ENOUGH_REPLICAS and resp.appended is False


def test_R20_min_isr_capped_by_replication_factor():
    leader = Replica(1, config(min_insync_replicas=3))
    apply_record([leader], record(1, 1, 1, [1, 2], [1, 2]))
    out = produce(leader, ["a"], acks=-1)
    assert out.disk  # |ISR| 2 >= min(MinISR 3, RF 2)


def test_R20_not_enough_replicas_after_append():
    leader, f2, _f3 = cluster(isr=(1, 2), cfg=config(elr=False))
    produce(leader, ["a"], acks=-1, timeout_ms=60000)
    leader.run(leader.p.tick(11.0))  # 2 never fetched: shrink proposed
    leader.answer(AlterPartitionResponse(TOPIC, 0, Errors.NONE, 1, 1, 2, [1]), 11.0)
    [resp] = answers(leader)
    assert resp.error == Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND and resp.appended is True


def test_R20_leadership_lost_while_waiting():
    leader, _f2, _f3 = cluster()
    produce(leader, ["a"], acks=-1)
    apply_record([leader], record(2, 2, 2, [2, 3]))
    [resp] = answers(leader)
    assert resp.error == Errors.NOT_LEADER_OR_FOLLOWER and resp.appended is True


def test_R20_request_timed_out_in_tick():
    leader, _f2, _f3 = cluster()
    produce(leader, ["a"], acks=-1, now=1.0, timeout_ms=500)
    leader.run(leader.p.tick(1.4))
    assert not leader.replies
    leader.run(leader.p.tick(1.5))
    [resp] = answers(leader)
    assert resp.error == Errors.REQUEST_TIMED_OUT and resp.appended is True


def test_R20_not_leader_and_corrupt_refused_without_append():
    leader, f2, _f3 = cluster()
    out = produce(f2, ["a"], acks=1)
    assert not out.disk and answers(f2)[0].error == Errors.NOT_LEADER_OR_FOLLOWER
    assert answers(f2)[0].appended is False
    out = leader.run(leader.p.on_produce(ProduceRequest(TOPIC, 0, 1, 1000, b"\x00\x00"), "c", 0.0))
    assert not out.disk and answers(leader)[0].error == Errors.CORRUPT_MESSAGE


# ------------------------------------------------------------------ R21
def test_R21_consumer_reads_below_hwm_only():
    leader, f2, f3 = cluster()
    produce(leader, ["a", "b", "c"], acks=1)
    for f in (f2, f3, f2, f3):
        fetch_round(leader, f)
    produce(leader, ["d"], acks=1)
    assert leader.p.high_watermark == 3
    result, read = leader.p.on_consumer_fetch(FetchPartition(TOPIC, 0, 1))
    assert result.error == Errors.NONE and read == ReadSpec(1, 3, 1 << 20)
    result, read = leader.p.on_consumer_fetch(FetchPartition(TOPIC, 0, 3))
    assert result.error == Errors.NONE and read is None and result.high_watermark == 3
    result, read = leader.p.on_consumer_fetch(FetchPartition(TOPIC, 0, 5))
    assert result.error == Errors.OFFSET_OUT_OF_RANGE


def test_R21_consumer_only_from_leader():
    _leader, f2, _f3 = cluster()
    result, read = f2.p.on_consumer_fetch(FetchPartition(TOPIC, 0, 0))
    assert result.error == Errors.NOT_LEADER_OR_FOLLOWER and read is None


def test_R21_consumer_read_spec_starts_inside_a_batch():
    leader, _f2, _f3 = cluster(isr=(1,), cfg=config(elr=False))
    produce(leader, ["a", "b", "c"], acks=1)  # one batch, offsets 0-2
    _result, read = leader.p.on_consumer_fetch(FetchPartition(TOPIC, 0, 1))
    assert leader.log.read(read) == build_batch(0, 1, [b"a", b"b", b"c"])
