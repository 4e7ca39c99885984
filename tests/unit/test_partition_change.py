"""PartitionChangeBuilder rules: R2, R25, R27 (seed 001 cases A-G), R29, R30, R31."""
from broker.protocol.partition_change import (
    BrokerStates,
    ElectionPolicy,
    alter_isr,
    elect_leader,
    exclude_unclean,
    initial_partition,
    remove_broker,
)
from broker.protocol.records import NO_LEADER, PartitionRecord

ELR = ElectionPolicy(elr=True)
NO_ELR = ElectionPolicy(elr=False)


def part(leader: int, isr: list[int], elr: list[int] = (), last_known: list[int] = (),
         replicas: list[int] = (1, 2, 3)) -> PartitionRecord:
    return PartitionRecord(topic="t", partition=0, replicas=list(replicas), isr=list(isr), leader=leader,
                           leader_epoch=5, partition_epoch=9, elr=list(elr), last_known_elr=list(last_known))


def states(unfenced: set[int], shutting_down: set[int] = frozenset()) -> BrokerStates:
    return BrokerStates(unfenced=frozenset(unfenced), shutting_down=frozenset(shutting_down))


def test_case_a_fenced_in_sync_follower_moves_to_elr_when_isr_below_min_isr():
    """R27 case A: "The controller fences replica R which is currently an in-sync follower and
    removes it from the ISR ... the ISR is now < Min ISR therefore the controller adds replica R to the ELR."""
    new = remove_broker(part(1, [1, 3]), 3, min_isr=2, policy=ELR, brokers=states({1, 2}), reason="fence")
    assert (new.leader, new.isr, new.elr) == (1, [1], [3])
    assert (new.leader_epoch, new.partition_epoch) == (5, 10)  # R2: same leader, new partition epoch


def test_case_b_elected_elr_member_moves_into_the_isr():
    """R27 case B: "The controller elects replica R, which is an unfenced follower and member of the
    ISR or ELR. The controller transfers the replica from the ELR to the ISR if it is currently an ELR member." """
    new = elect_leader(part(NO_LEADER, [], elr=[2, 3]), min_isr=2, policy=ELR, brokers=states({3}))
    assert (new.leader, new.isr, new.elr) == (3, [3], [2])
    assert (new.leader_epoch, new.partition_epoch, new.reason) == (6, 10, "election")


def test_case_c_fenced_leader_moves_to_elr_when_new_isr_below_min_isr():
    """R27 case C: "The controller fences replica R, which the current leader. Another leader candidate
    is elected and replica R is removed from the ISR ... the ISR is now < Min ISR therefore the
    controller adds the replica to the ELR." """
    new = remove_broker(part(1, [1, 2]), 1, min_isr=2, policy=ELR, brokers=states({2, 3}), reason="fence")
    assert (new.leader, new.isr, new.elr) == (2, [2], [1])
    assert (new.leader_epoch, new.partition_epoch) == (6, 10)


def test_case_d_fenced_leader_not_in_elr_when_new_isr_reaches_min_isr():
    """R27 case D: "The new ISR >= Min ISR which means the new leader can advance the high watermark.
    Therefore replica R has no completeness guarantee and is not added to the ELR." """
    new = remove_broker(part(1, [1, 2, 3]), 1, min_isr=2, policy=ELR, brokers=states({2, 3}), reason="fence")
    assert (new.leader, new.isr, new.elr) == (2, [2, 3], [])


def test_case_e_caught_up_follower_added_to_isr_leaves_elr():
    """R27 case E: "Replica R, which is currently an out-of-sync follower, has caught up to the leader
    and the leader adds the out-of-sync follower to the ISR." """
    new = alter_isr(part(1, [1], elr=[3], replicas=[1, 2, 3, 4]), [1, 3], min_isr=3, policy=ELR,
                    brokers=states({1, 2, 3, 4}))
    assert (new.isr, new.elr, new.reason) == ([1, 3], [], "isr-expand")
    assert (new.leader_epoch, new.partition_epoch) == (5, 10)


def test_case_f_out_of_sync_follower_removed_not_added_to_elr_when_isr_still_min_isr():
    """R27 case F: "Replica R, which is a currently an in-sync follower, goes out-of-sync and is removed
    from the ISR. The new ISR >= Min ISR therefore replica R ... is not added to the ELR." """
    new = alter_isr(part(1, [1, 2, 3]), [1, 2], min_isr=2, policy=ELR, brokers=states({1, 2, 3}))
    assert (new.isr, new.elr, new.reason) == ([1, 2], [], "isr-shrink")


def test_case_g_isr_expanded_to_min_isr_clears_fenced_elr_member():
    """R27 case G: "Replica R is a fenced follower and a member of the ELR. The ISR just got expanded
    to be >= Min ISR ... Therefore replica R lose its completeness guarantee and must be removed from the ELR." """
    new = alter_isr(part(1, [1], elr=[3], last_known=[]), [1, 2], min_isr=2, policy=ELR, brokers=states({1, 2}))
    assert (new.isr, new.elr, new.last_known_elr) == ([1, 2], [], [])


def test_r27_isr_may_become_empty_and_elr_keeps_every_fenced_member():
    """R27, seed 001 5.3.3 step 5: "The controller fences broker 3 and sets NoLeader ... ISR=[], ELR=[2, 3]"."""
    new = remove_broker(part(3, [3], elr=[2]), 3, min_isr=2, policy=ELR, brokers=states({1}), reason="fence")
    assert (new.leader, new.isr, new.elr) == (NO_LEADER, [], [2, 3])
    assert new.leader_epoch == 6


def test_r25_shutting_down_isr_member_is_not_elected():
    """R25: a new leader comes from the ISR members that are not shutting down."""
    new = remove_broker(part(1, [1, 2, 3]), 1, min_isr=1, policy=ELR,
                        brokers=states({1, 2, 3}, shutting_down={1, 2}), reason="controlled-shutdown")
    assert (new.leader, new.isr) == (3, [2, 3])


def test_r25_follower_removed_without_leader_change():
    """R25 on a follower: the ISR shrinks, the leader epoch stays, the partition epoch grows (R2)."""
    new = remove_broker(part(1, [1, 2, 3]), 2, min_isr=1, policy=ELR, brokers=states({1, 3}), reason="fence")
    assert (new.leader, new.isr, new.leader_epoch, new.partition_epoch, new.reason) == (1, [1, 3], 5, 10, "fence")


def test_r25_fenced_elr_member_is_not_a_candidate():
    """R25: only unfenced ELR members may be elected; none left means no leader."""
    new = remove_broker(part(1, [1], elr=[2]), 1, min_isr=2, policy=ELR, brokers=states({3}), reason="fence")
    assert (new.leader, new.isr, new.elr) == (NO_LEADER, [], [1, 2])


def test_r29_unclean_elr_member_moves_to_last_known_elr():
    """R29, seed 001 5.3.3 step 7: "Broker 2 ... registers with the controller with an empty broker epoch
    value and is moved from the ELR to the LastKnownELR. ELR=[3], LastKnownELR=[2]"."""
    new = exclude_unclean(part(NO_LEADER, [], elr=[2, 3]), 2, min_isr=2, policy=ELR, brokers=states({2}))
    assert (new.leader, new.isr, new.elr, new.last_known_elr) == (NO_LEADER, [], [3], [2])
    assert (new.leader_epoch, new.partition_epoch, new.reason) == (5, 10, "unclean-exclusion")
    step8 = exclude_unclean(new, 3, min_isr=2, policy=ELR, brokers=states({2, 3}))
    assert (step8.elr, step8.last_known_elr) == ([], [2, 3])  # I6: |LastKnownELR| = MinISR


def test_r29_unclean_replica_outside_isr_and_elr_changes_nothing():
    """R29, seed 001 5.3.3 step 6: "It was not a member of the ELR so no partition metadata change is necessary"."""
    assert exclude_unclean(part(NO_LEADER, [], elr=[2, 3]), 1, min_isr=2, policy=ELR, brokers=states({1})) is None


def test_r30_last_replica_standing_stays_in_isr_without_leader_then_is_reelected():
    """R30: elr false, ISR=[x], x fenced -> x stays in the ISR, no leader; x is elected again on return."""
    fenced = remove_broker(part(1, [1]), 1, min_isr=2, policy=NO_ELR, brokers=states({2, 3}), reason="fence")
    assert (fenced.leader, fenced.isr, fenced.elr) == (NO_LEADER, [1], [])
    assert (fenced.leader_epoch, fenced.partition_epoch) == (6, 10)
    assert elect_leader(fenced, min_isr=2, policy=NO_ELR, brokers=states({2, 3})) is None
    back = elect_leader(fenced, min_isr=2, policy=NO_ELR, brokers=states({1, 2, 3}))
    assert (back.leader, back.isr, back.leader_epoch, back.partition_epoch) == (1, [1], 7, 11)


def test_r30_without_elr_no_elr_is_kept():
    """R27 applies only with elr true: without it a shrink below MinISR leaves the ELR empty."""
    new = remove_broker(part(1, [1, 2]), 2, min_isr=2, policy=NO_ELR, brokers=states({1, 3}), reason="fence")
    assert (new.isr, new.elr) == ([1], [])


def test_r31_unclean_election_picks_first_live_replica_and_clears_elr():
    """R31: no leader and no candidate -> the first live replica in replica order; ISR := [it]."""
    policy = ElectionPolicy(elr=True, unclean_leader_election=True)
    new = remove_broker(part(1, [1], elr=[2], last_known=[]), 1, min_isr=2, policy=policy,
                        brokers=states({3}), reason="fence")
    assert (new.leader, new.isr, new.elr, new.last_known_elr, new.reason) == (3, [3], [], [], "unclean-election")
    assert new.leader_epoch == 6


def test_r31_disabled_leaves_partition_leaderless():
    """R31 off: the same fencing leaves no leader rather than electing an out-of-sync replica."""
    new = remove_broker(part(1, [1]), 1, min_isr=2, policy=ELR, brokers=states({3}), reason="fence")
    assert new.leader == NO_LEADER


def test_r2_no_change_returns_none():
    """R2: epochs only move with a change; an identical ISR proposal is no change."""
    assert alter_isr(part(1, [1, 2]), [1, 2], min_isr=1, policy=ELR, brokers=states({1, 2})) is None


def test_initial_partition_leader_is_first_unfenced_replica():
    """R40 create: ISR = the replicas that can lead, leader = the first of them; none up: no partition."""
    created = initial_partition("t", 0, [1, 2, 3], states({2, 3}))
    assert (created.leader, created.isr, created.leader_epoch, created.partition_epoch) == (2, [2, 3], 0, 0)
    assert initial_partition("t", 0, [1, 2, 3], states({1, 2, 3})).isr == [1, 2, 3]
    assert initial_partition("t", 0, [1, 2, 3], states(set())) is None


def test_i6_elr_is_disjoint_from_isr_and_inside_replicas_after_any_sequence():
    """I6 over the 5.3.3 sequence: ELR ⊆ replicas, ELR ∩ ISR = ∅, |ISR| >= MinISR => ELR = ∅."""
    p = part(1, [1, 2, 3])
    up = {1, 2, 3}
    for broker in (1, 2, 3):
        up.discard(broker)
        p = remove_broker(p, broker, min_isr=2, policy=ELR, brokers=states(up), reason="fence")
        assert set(p.elr) <= set(p.replicas) and not set(p.elr) & set(p.isr)
        assert len(p.isr) < 2 or p.elr == []
    assert (p.leader, p.isr, p.elr) == (NO_LEADER, [], [2, 3])
