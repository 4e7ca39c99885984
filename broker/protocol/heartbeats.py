"""Broker sessions as the active controller sees them, Kafka's BrokerHeartbeatManager.

Not metadata: this state lives only in the active controller's memory and is driven by the
`now` its caller passes. A session starts with a registration and is renewed by each
heartbeat; R24 fences a broker whose session is older than `session_timeout`. R23 refuses a
second incarnation while the first one's session lives. R37 lets a broker in controlled
shutdown go only once every active broker has applied the metadata that moved its leaderships
(so the new leaders know they lead before the old one stops), as Kafka does.
"""
from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass
class _Session:
    last_contact: float
    metadata_offset: int = -1  # the last metadata offset the broker said it applied
    controlled_shutdown_offset: int | None = None  # R37: the last record that moved its work away


class BrokerHeartbeatManager:
    def __init__(self, session_timeout: float) -> None:
        self.session_timeout = session_timeout
        self._sessions: dict[int, _Session] = {}

    def touch(self, broker_id: int, now: float, metadata_offset: int = -1) -> None:
        """A registration or heartbeat arrived: the session lives for another session_timeout (R24)."""
        session = self._sessions.setdefault(broker_id, _Session(now))
        session.last_contact = now
        session.metadata_offset = max(session.metadata_offset, metadata_offset)

    def has_session(self, broker_id: int) -> bool:
        return broker_id in self._sessions

    def is_live(self, broker_id: int, now: float) -> bool:
        """R23: whether the broker's current session still holds its registration."""
        session = self._sessions.get(broker_id)
        return session is not None and now < session.last_contact + self.session_timeout

    def expired(self, now: float) -> list[int]:
        """R24: brokers with no heartbeat for session_timeout, in id order."""
        return sorted(b for b in self._sessions if not self.is_live(b, now))

    def next_expiry(self) -> float:
        """When the first session expires (R24), which may have passed; inf when there is none."""
        first = math.inf
        for s in self._sessions.values():
            if s.last_contact < first:
                first = s.last_contact
        return first + self.session_timeout

    def end_session(self, broker_id: int) -> None:
        """The broker was fenced or replaced: a new registration starts a new session."""
        self._sessions.pop(broker_id, None)

    def begin_controlled_shutdown(self, broker_id: int, offset: int) -> None:
        """R37: remember the metadata offset every active broker must reach before this one may stop."""
        self._sessions[broker_id].controlled_shutdown_offset = offset

    def in_controlled_shutdown(self, broker_id: int) -> bool:
        """R37: whether this controller began the broker's controlled shutdown. A controller that
        became active since then knows of it only from the metadata log, and has no offset yet."""
        return self._sessions[broker_id].controlled_shutdown_offset is not None

    def may_shut_down(self, broker_id: int, active_brokers: Iterable[int]) -> bool:
        """R37: the active brokers all applied the records that moved this broker's work away."""
        target = self._sessions[broker_id].controlled_shutdown_offset
        if target is None:
            return False
        return all(self._sessions[b].metadata_offset >= target
                   for b in active_brokers if b != broker_id and b in self._sessions)
