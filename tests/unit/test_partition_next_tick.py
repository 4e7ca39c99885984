"""A replica's `next_tick_due` is the `next_tick_at` it keeps between inputs (the broker reads
the attribute after every input and calls `next_tick_at` only when an input cleared it): a
seeded random walk of a leader and two followers through produces, fetches, ticks, lost or
refused AlterPartition answers, metadata records (ISR shrinks and expansions, a new leader)
and brokers fenced and unfenced checks, after every input, that what a replica keeps is what it would work out
afresh. A replica the input did not reach keeps a judgement of an earlier time, which may
only err early (a tick that does nothing), never late."""
from __future__ import annotations

import math
import random

import pytest

from broker.common.errors import Errors
from broker.protocol.messages import AlterPartitionRequest, AlterPartitionResponse
from broker.protocol.partition import LEADER, PartitionConfig
from tests.unit.partition_harness import BROKER_EPOCHS, TOPIC, Replica, apply_record, fetch_round, produce, record

CONFIG = PartitionConfig(min_insync_replicas=2, replica_lag_max=1.0, alter_partition_backoff=0.1,
                         hwm_checkpoint_interval=0.5)


def _kept_and_fresh(r: Replica, now: float) -> tuple[float, float]:
    """What the broker reads after an input (the kept value, or `next_tick_at` when none is
    kept), and what `next_tick_at` works out with nothing kept; the replica keeps the former."""
    p = r.p
    kept = p.next_tick_due if p.next_tick_due is not None else p.next_tick_at(now)
    p.next_tick_due = None
    fresh = p.next_tick_at(now)
    p.next_tick_due = kept
    return kept, fresh


def _walk(seed: int, steps: int) -> int:
    """Feed `steps` random inputs; returns how many inputs found a kept value to check."""
    rng = random.Random(seed)
    replicas = {b: Replica(b, CONFIG) for b in (1, 2, 3)}
    leader_id, leader_epoch, partition_epoch, isr = 1, 1, 1, [1, 2, 3]
    apply_record(list(replicas.values()), record(leader_id, leader_epoch, partition_epoch, isr))
    now, seq, checked = 0.0, 0, 0
    for _ in range(steps):
        now += rng.choice((0.0, 0.001, 0.05, 0.3, 1.2))
        leader = replicas[leader_id]
        followers = [r for b, r in replicas.items() if b != leader_id]
        action = rng.random()
        if action < 0.3:
            seq += 1
            produce(leader, [f"v{seq}-{i}" for i in range(rng.randint(1, 3))], acks=rng.choice((-1, 1)), now=now,
                    timeout_ms=rng.choice((200, 1000)), ctx=seq)
            reached = [leader]
        elif action < 0.6:
            follower = rng.choice(followers)
            if follower.p.fetch_partition() is None:
                continue
            fetch_round(leader, follower, now)
            reached = [leader, follower]
        elif action < 0.75:
            ticked = rng.choice(list(replicas.values()))
            ticked.run(ticked.p.tick(now))
            reached = [ticked]
        elif action < 0.85:
            proposals = [s for s in leader.sent if isinstance(s.message, AlterPartitionRequest)]
            if not proposals or leader.p.role != LEADER:
                continue
            answer = rng.choice((None, AlterPartitionResponse(TOPIC, 0, Errors.INELIGIBLE_REPLICA),
                                 AlterPartitionResponse(TOPIC, 0, Errors.INVALID_UPDATE_VERSION)))
            leader.answer(answer, now)
            leader.sent.clear()
            reached = [leader]
        elif action < 0.9:  # a broker fenced, or unfenced (R18: who may join the ISR)
            eligible = {b for b in (1, 2, 3) if rng.random() < 0.8}
            for r in replicas.values():
                r.p.update_brokers(BROKER_EPOCHS, eligible)
            reached = list(replicas.values())
        else:
            partition_epoch += 1
            if rng.random() < 0.2:  # a new leader from the ISR
                leader_id = rng.choice([b for b in isr if b != leader_id] or [leader_id])
                leader_epoch += 1
            others = [b for b in (1, 2, 3) if b != leader_id]
            isr = sorted({leader_id, *rng.sample(others, rng.randint(0, 2))})
            apply_record(list(replicas.values()), record(leader_id, leader_epoch, partition_epoch, isr), now)
            reached = list(replicas.values())
        for r in replicas.values():
            kept, fresh = _kept_and_fresh(r, now)
            if r in reached:
                assert kept == fresh, f"seed {seed}, broker {r.broker_id} at {now}: kept {kept}, works out {fresh}"
                checked += not math.isinf(kept)
            else:
                assert kept <= fresh, f"seed {seed}, broker {r.broker_id} at {now}: kept {kept} is late for {fresh}"
    return checked


@pytest.mark.parametrize("seed", range(20))
def test_the_kept_next_tick_is_the_one_worked_out_after_every_input(seed: int) -> None:
    assert _walk(seed, 300) > 0, "the walk reached a finite next tick"
