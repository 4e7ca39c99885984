"""R6, R9, R10: divergence detection and truncation, cases A-G.

Cases A-G follow section 3.3 of the public Kafka replication protocol description (Jack
Vanlightly, kafka-tlaplus, "3. Log divergence"). Its figures are drawings, so the concrete
logs below are rebuilt from the prose of each case and reproduce the numbers it states
(the diverging epoch, both end offsets, the truncation point). Each test builds a leader and
a follower with concrete logs, fetches until nothing changes, and checks the truncation
point and that the follower ends with the leader's log. Further scenarios the brief asked
for (several rounds, an empty follower, a former leader's empty epoch) come after them.
"""
from __future__ import annotations

from broker.protocol.messages import DivergingEpoch
from broker.protocol.partition import PartitionConfig
from tests.unit.partition_harness import (
    Replica,
    apply_record,
    build_log,
    fetch_round,
    fetch_until_stable,
    record,
)

CONFIG = PartitionConfig(min_insync_replicas=1, replica_lag_max=10.0)


def pair(leader_log: list[tuple[int, str]], follower_log: list[tuple[int, str]],
         leader_epoch: int) -> tuple[Replica, Replica]:
    leader = Replica(1, CONFIG, build_log(leader_log))
    follower = Replica(2, CONFIG, build_log(follower_log))
    apply_record([leader, follower], record(1, leader_epoch, leader_epoch, [1, 2], [1, 2]))
    return leader, follower


def truncations(follower: Replica) -> list[int]:
    return [e["to"] for e in follower.events_of("truncated")]


def converge(leader: Replica, follower: Replica) -> None:
    fetch_until_stable(leader, follower)
    assert follower.values() == leader.values()
    assert follower.p.epochs.entries == [e for e in leader.p.epochs.entries
                                         if e[1] < leader.p.log_end_offset]


def test_R9_R10_case_a_follower_behind_same_epoch_no_divergence():
    leader, follower = pair([(1, "A"), (1, "B"), (1, "C"), (1, "D")], [(1, "A"), (1, "B")], 2)
    result = fetch_round(leader, follower)
    assert result.diverging_epoch is None and result.records
    converge(leader, follower)
    assert truncations(follower) == []
    assert follower.p.log_end_offset == 4


def test_R9_R10_case_b_leader_has_higher_epoch_records_no_divergence():
    leader, follower = pair([(1, "A"), (1, "B"), (2, "C"), (2, "D")], [(1, "A"), (1, "B")], 3)
    result = fetch_round(leader, follower)
    assert result.diverging_epoch is None
    converge(leader, follower)
    assert truncations(follower) == []
    assert follower.p.epochs.entries == [(1, 0), (2, 2)]  # R5: learnt from the batches


def test_R9_R10_case_c_follower_ahead_in_same_epoch():
    leader, follower = pair([(1, "A"), (1, "B")], [(1, "A"), (1, "B"), (1, "x"), (1, "y")], 2)
    result = fetch_round(leader, follower)
    assert result.diverging_epoch == DivergingEpoch(1, 2)
    assert not result.records
    assert truncations(follower) == [2]  # min(own EOE(1)=4, leader's 2)
    converge(leader, follower)


def test_R9_R10_case_d_follower_ahead_with_epoch_leader_never_had():
    leader, follower = pair([(1, "A"), (1, "B")], [(1, "A"), (1, "B"), (2, "x"), (2, "y")], 3)
    result = fetch_round(leader, follower)
    assert result.diverging_epoch == DivergingEpoch(1, 2)
    assert truncations(follower) == [2]
    converge(leader, follower)


def test_R9_R10_case_e_fork_each_side_its_own_epoch():
    leader, follower = pair([(1, "A"), (1, "B"), (3, "C"), (3, "D")],
                            [(1, "A"), (1, "B"), (2, "x"), (2, "y")], 3)
    result = fetch_round(leader, follower)
    assert result.diverging_epoch == DivergingEpoch(1, 2)
    assert truncations(follower) == [2]
    converge(leader, follower)
    assert [v for _o, _e, v in follower.values()] == ["A", "B", "C", "D"]


def test_R9_R10_case_f_fork_leader_has_more_of_the_common_epoch():
    leader, follower = pair([(1, "A"), (1, "B")], [(1, "A"), (2, "x"), (2, "y")], 3)
    result = fetch_round(leader, follower)
    assert result.diverging_epoch == DivergingEpoch(1, 2)
    assert truncations(follower) == [1]  # min(own EOE(1)=1, leader's 2)
    converge(leader, follower)
    assert [v for _o, _e, v in follower.values()] == ["A", "B"]


def test_R6_R9_R10_case_g_no_common_epoch_truncates_everything():
    leader, follower = pair([(1, "A"), (3, "B"), (3, "C")], [(2, "x"), (2, "y")], 3)
    result = fetch_round(leader, follower)
    assert result.diverging_epoch == DivergingEpoch(1, 1)
    assert truncations(follower) == [0]  # R6: no epoch <= 1 on the follower -> offset 0
    converge(leader, follower)


def test_R10_several_epochs_of_divergence_take_repeated_rounds():
    leader, follower = pair([(1, "A"), (1, "B"), (3, "C"), (3, "D")],
                            [(1, "A"), (2, "x"), (2, "y"), (4, "z"), (4, "w")], 5)
    assert fetch_round(leader, follower).diverging_epoch == DivergingEpoch(3, 4)
    assert fetch_round(leader, follower).diverging_epoch == DivergingEpoch(1, 2)
    assert truncations(follower) == [3, 1]
    converge(leader, follower)


def test_R9_R10_empty_follower_fetches_everything():
    leader, follower = pair([(1, "A"), (2, "B")], [], 3)
    result = fetch_round(leader, follower)
    assert result.diverging_epoch is None
    converge(leader, follower)
    assert truncations(follower) == []


def test_R10_former_leader_empty_epoch_is_dropped_without_losing_records():
    # The follower led epoch 2 without writing in it: its cache ends with (2, LEO).
    log = build_log([(1, "A"), (1, "B")])
    log.epochs.assign(2, 2)
    leader = Replica(1, CONFIG, build_log([(1, "A"), (1, "B"), (3, "C")]))
    follower = Replica(2, CONFIG, log)
    apply_record([leader, follower], record(1, 3, 3, [1, 2], [1, 2]))
    assert fetch_round(leader, follower).diverging_epoch == DivergingEpoch(1, 2)
    assert follower.p.epochs.entries == [(1, 0)] and follower.p.log_end_offset == 2
    assert truncations(follower) == []  # no record removed
    converge(leader, follower)


def test_R9_divergent_fetch_does_not_update_follower_state():
    leader, follower = pair([(1, "A"), (1, "B")], [(1, "A"), (1, "B"), (1, "x")], 2)
    fetch_round(leader, follower)
    assert leader.p.describe()["followers"]["2"]["leo"] == -1
