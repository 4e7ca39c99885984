"""A partition's next state, Kafka's PartitionChangeBuilder: ISR, ELR, elections and epochs.

Every change the controller makes to a partition goes through `_build`, so the ISR/ELR
arithmetic (R27), the choice of leader (R25, R30, R31) and the epoch bumps (R2) live in one
place. The public functions only say which ISR the change targets and why. Each returns the
partition's new PartitionRecord, or None when the change would change nothing.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from broker.protocol.metadata_image import MetadataImage
from broker.protocol.records import NO_LEADER, PartitionRecord


@dataclass(frozen=True)
class ElectionPolicy:
    elr: bool = True  # R27, KIP-966; False gives the Last Replica Standing behaviour (R30)
    unclean_leader_election: bool = False  # R31


@dataclass(frozen=True)
class BrokerStates:
    """What elections need to know of the brokers, taken from the image of the moment."""
    unfenced: frozenset[int]
    shutting_down: frozenset[int]

    @classmethod
    def of(cls, image: MetadataImage) -> "BrokerStates":
        return cls(
            unfenced=frozenset(b.broker_id for b in image.brokers.values() if not b.fenced),
            shutting_down=frozenset(b.broker_id for b in image.brokers.values() if b.in_controlled_shutdown))

    def can_lead(self, broker: int) -> bool:
        """R25: a leader candidate is unfenced and not shutting down."""
        return broker in self.unfenced and broker not in self.shutting_down


def _in_replica_order(replicas: list[int], members: set[int]) -> list[int]:
    return [r for r in replicas if r in members]


def _build(part: PartitionRecord, target_isr: set[int], *, min_isr: int, policy: ElectionPolicy,
           brokers: BrokerStates, reason: str, unclean: frozenset[int] = frozenset()) -> PartitionRecord | None:
    """Apply an ISR change, then R27, then an election if the leader cannot stay, then R2.

    `unclean` holds replicas that restarted unclean (R29): they leave the ELR for LastKnownELR.
    """
    replicas = part.replicas
    isr = set(target_isr) & set(replicas)
    elr, last_known = set(part.elr), set(part.last_known_elr)
    if policy.elr:
        # R27: (ELR ∪ old ISR) − new ISR − unclean replicas; R29: unclean ELR members -> LastKnownELR.
        last_known |= elr & unclean
        elr = ((elr | set(part.isr)) - isr - unclean) & set(replicas)
    else:
        elr, last_known = set(), set()

    leader = part.leader
    if leader == NO_LEADER or leader not in isr or not brokers.can_lead(leader):
        leader = NO_LEADER
        from_isr = [r for r in _in_replica_order(replicas, isr) if brokers.can_lead(r)]
        from_elr = [r for r in _in_replica_order(replicas, elr) if brokers.can_lead(r)]
        if from_isr:
            leader = from_isr[0]
        elif from_elr:  # R25, case B: the elected ELR member moves into the ISR
            leader = from_elr[0]
            isr.add(leader)
            elr.discard(leader)
        elif policy.unclean_leader_election:  # R31: first live replica; data loss possible
            live = [r for r in replicas if brokers.can_lead(r)]
            if live:
                leader, isr, elr, last_known = live[0], {live[0]}, set(), set()
                reason = "unclean-election"

    if policy.elr and len(isr) >= min_isr:
        elr, last_known = set(), set()  # R27: the HWM can advance again (cases D, F, G)
    last_known -= isr | elr

    new = replace(part, isr=_in_replica_order(replicas, isr), leader=leader,
                  elr=_in_replica_order(replicas, elr), last_known_elr=_in_replica_order(replicas, last_known))
    if (new.isr, new.leader, new.elr, new.last_known_elr) == (part.isr, part.leader, part.elr, part.last_known_elr):
        return None
    return replace(new, reason=reason, partition_epoch=part.partition_epoch + 1,
                   leader_epoch=part.leader_epoch + (1 if leader != part.leader else 0))  # R2


def initial_partition(topic: str, partition: int, replicas: list[int], brokers: BrokerStates
                      ) -> PartitionRecord | None:
    """A new partition (R40): ISR = the replicas that can lead now (unfenced, not shutting
    down), leader = the first of them; None when none can (an explicit assignment to brokers
    that are all down), as Kafka refuses such an assignment."""
    isr = [r for r in replicas if brokers.can_lead(r)]
    if not isr:
        return None
    return PartitionRecord(topic=topic, partition=partition, replicas=list(replicas), isr=isr,
                           leader=isr[0], reason="create")


def remove_broker(part: PartitionRecord, broker: int, *, min_isr: int, policy: ElectionPolicy,
                  brokers: BrokerStates, reason: str) -> PartitionRecord | None:
    """R25: the broker was fenced or is shutting down (`brokers` already says so).

    It leaves leadership and the ISR; the ELR follows R27; a new leader comes from the ISR,
    else from the unfenced ELR. R30: without ELR the last ISR member stays in the ISR as the
    only candidate, leaderless until it returns.
    """
    target = set(part.isr) - {broker}
    if not policy.elr and not target:
        target = set(part.isr)
    return _build(part, target, min_isr=min_isr, policy=policy, brokers=brokers, reason=reason)


def exclude_unclean(part: PartitionRecord, broker: int, *, min_isr: int, policy: ElectionPolicy,
                    brokers: BrokerStates) -> PartitionRecord | None:
    """R29 Unclean Exclusion: a replica that restarted unclean leaves the ISR and ELR; an ELR
    member moves to LastKnownELR (seed 001, 5.3.3 steps 7-8)."""
    return _build(part, set(part.isr) - {broker}, min_isr=min_isr, policy=policy, brokers=brokers,
                  reason="unclean-exclusion", unclean=frozenset({broker}))


def alter_isr(part: PartitionRecord, new_isr: list[int], *, min_isr: int, policy: ElectionPolicy,
              brokers: BrokerStates) -> PartitionRecord | None:
    """R19 success: the leader's (already validated) ISR, with the ELR kept by R27 (cases E, F, G)."""
    reason = "isr-expand" if set(new_isr) - set(part.isr) else "isr-shrink"
    return _build(part, set(new_isr), min_isr=min_isr, policy=policy, brokers=brokers, reason=reason)


def elect_leader(part: PartitionRecord, *, min_isr: int, policy: ElectionPolicy,
                 brokers: BrokerStates) -> PartitionRecord | None:
    """A leaderless partition whose candidate may have returned (seed 002, 2.8; R30, R31)."""
    return _build(part, set(part.isr), min_isr=min_isr, policy=policy, brokers=brokers, reason="election")


def unclean_recovery(part: PartitionRecord, leader: int) -> PartitionRecord:
    """R32, R33: elect the replica whose log unclean recovery (or the operator) chose. Its log
    is the truth from now on: ISR := [leader], ELR and LastKnownELR cleared."""
    return replace(part, leader=leader, isr=[leader], elr=[], last_known_elr=[], reason="unclean-recovery",
                   leader_epoch=part.leader_epoch + 1, partition_epoch=part.partition_epoch + 1)


def awaiting_operator(part: PartitionRecord) -> PartitionRecord:
    """R32 `manual`: nothing changes but the record says an operator must elect a leader."""
    return replace(part, reason=MANUAL_ELECTION_REQUIRED, partition_epoch=part.partition_epoch + 1)


MANUAL_ELECTION_REQUIRED = "manual-election-required"


def elect_preferred(part: PartitionRecord, brokers: BrokerStates) -> PartitionRecord | None:
    """R36: leadership to the first replica, when it is in the ISR and can lead; None otherwise."""
    preferred = part.replicas[0]
    if part.leader == preferred or preferred not in part.isr or not brokers.can_lead(preferred):
        return None
    return replace(part, leader=preferred, reason="preferred-election",
                   leader_epoch=part.leader_epoch + 1, partition_epoch=part.partition_epoch + 1)


def reassignment_target(part: PartitionRecord) -> list[int]:
    """R35: the replicas a partition is being moved to (all of them when none is moving)."""
    return [r for r in part.replicas if r not in part.removing]


def begin_reassignment(part: PartitionRecord, target: list[int]) -> PartitionRecord:
    """R35 grow: replicas := target then the replicas leaving; `adding` and `removing` say which.
    The ISR is untouched: the leader adds the new replicas as they catch up (R18)."""
    removing = [r for r in part.replicas if r not in target]
    return replace(part, replicas=[*target, *removing], adding=[r for r in target if r not in part.replicas],
                   removing=removing, reason="reassign", partition_epoch=part.partition_epoch + 1)


def complete_reassignment(part: PartitionRecord, *, min_isr: int, policy: ElectionPolicy,
                          brokers: BrokerStates) -> PartitionRecord | None:
    """R35 complete, once every target replica is in the ISR: replicas := target, the leaving
    replicas drop out of the ISR, ELR and LastKnownELR, a new leader is elected from the ISR if
    the old one left, and the leader epoch is bumped when replicas left (R2). None while the
    reassignment waits, or when there is none."""
    if not (part.adding or part.removing):
        return None
    target = reassignment_target(part)
    if not set(target) <= set(part.isr):
        return None
    narrowed = replace(part, replicas=target, isr=[r for r in part.isr if r in target],
                       elr=[r for r in part.elr if r in target],
                       last_known_elr=[r for r in part.last_known_elr if r in target], adding=[], removing=[])
    elected = _build(narrowed, set(narrowed.isr), min_isr=min_isr, policy=policy, brokers=brokers,
                     reason="reassign") or narrowed
    bump = 1 if (part.removing and elected.leader_epoch == part.leader_epoch) else 0
    return replace(elected, reason="reassign", partition_epoch=part.partition_epoch + 1,
                   leader_epoch=elected.leader_epoch + bump)
