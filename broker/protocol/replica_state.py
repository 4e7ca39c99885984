"""What a partition leader remembers about its followers and its held produce requests.

Kafka keeps the first in `Replica` (one per remote replica of a `Partition`) and the second
in the produce purgatory (`DelayedProduce`). Both are plain data here so that
`broker/protocol/partition.py` decides and this module only keeps the books.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

UNKNOWN_OFFSET = -1


@dataclass
class FollowerState:
    """The leader's view of one follower, learnt only from that follower's fetches (R11).

    `log_end_offset` counts only while `fetch_leader_epoch` equals the leader's current
    epoch (`known_log_end_offset`): a LEO learnt in an earlier term may have been truncated
    since, so a new term treats it as unknown (Kafka resets it in `resetReplicaState`).
    """

    broker_id: int
    log_end_offset: int = UNKNOWN_OFFSET
    broker_epoch: int = -1
    #: the leader epoch in which the leader last accepted a fetch from this follower (R18)
    fetch_leader_epoch: int = -1
    last_fetch_time: float | None = None
    #: the leader's own LEO when it answered the previous fetch (Kafka's
    #: lastFetchLeaderLogEndOffset), so a follower that reached it counts as caught up then
    last_fetch_leader_log_end_offset: int = UNKNOWN_OFFSET
    last_caught_up_time: float | None = None

    def record_fetch(self, fetch_offset: int, broker_epoch: int, leader_log_end_offset: int,
                     leader_epoch: int, now: float) -> None:
        """R11 (Kafka's `Replica.updateFetchStateOrThrow`).

        Caught up now if the fetch offset reaches the leader's LEO; else caught up as of the
        previous fetch if it reaches the LEO the leader had then. R17 measures lag from here.
        """
        if fetch_offset >= leader_log_end_offset:
            caught_up: float | None = now
        elif (self.last_fetch_time is not None
              and fetch_offset >= self.last_fetch_leader_log_end_offset):
            caught_up = self.last_fetch_time
        else:
            caught_up = None
        if caught_up is not None and (self.last_caught_up_time is None or caught_up > self.last_caught_up_time):
            self.last_caught_up_time = caught_up
        self.log_end_offset = fetch_offset
        self.broker_epoch = broker_epoch
        self.fetch_leader_epoch = leader_epoch
        self.last_fetch_leader_log_end_offset = leader_log_end_offset
        self.last_fetch_time = now

    def known_log_end_offset(self, leader_epoch: int) -> int:
        """The follower's LEO if it fetched in `leader_epoch`, else UNKNOWN_OFFSET (R15)."""
        return self.log_end_offset if self.fetch_leader_epoch == leader_epoch else UNKNOWN_OFFSET

    def is_caught_up(self, leader_log_end_offset: int, leader_epoch: int, now: float,
                     replica_lag_max: float) -> bool:
        """R17: at the leader's LEO, or caught up within the last `replica_lag_max` seconds."""
        if self.fetch_leader_epoch == leader_epoch and self.log_end_offset == leader_log_end_offset:
            return True  # (`known_log_end_offset`, written out: the leader's LEO is never -1)
        return (self.last_caught_up_time is not None
                and now <= self.last_caught_up_time + replica_lag_max)

    def start_term(self, in_isr: bool, leader_log_end_offset: int, now: float) -> "FollowerState":
        """R14: the state a new leader term starts from.

        An ISR member keeps its identity but counts as caught up from now (so it is not
        shrunk before it could fetch); a follower outside the ISR forgets everything, so it
        must fetch in this term before it can rejoin (R18).
        """
        if not in_isr:
            return FollowerState(self.broker_id)
        self.last_caught_up_time = now
        self.last_fetch_time = now
        self.last_fetch_leader_log_end_offset = leader_log_end_offset
        return self

    def describe(self, leader_epoch: int) -> dict:
        return {
            "leo": self.known_log_end_offset(leader_epoch),
            "broker_epoch": self.broker_epoch,
            "fetched_in_epoch": self.fetch_leader_epoch,
            "last_caught_up_time": self.last_caught_up_time,
        }


@dataclass
class PendingProduce:
    """An acks=all produce held until the HWM passes `end_offset` (R20)."""

    ctx: Any
    base_offset: int
    end_offset: int  # exclusive: the LEO right after the append
    deadline: float
