"""When a partition's log is flushed: the topic's flush policy (seed 001, section 5).

Kafka lets a topic trade durability for throughput: flush on every write (writes are
synchronous), every N messages or every N ms (the HWM can advance between flushes, so an
acknowledged record may be lost by one replica), or only when a segment rolls. The policy
only decides; `PartitionLog` performs the flush through `Durability`.

`FlushPolicy()` with nothing set never flushes: only the OS writeback makes bytes durable.
Kafka's defaults correspond to `FlushPolicy(on_roll=True)`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

_KEYS = ("always", "on_roll", "messages", "interval")


@dataclass(frozen=True)
class FlushPolicy:
    always: bool = False
    on_roll: bool = False
    messages: int | None = None  # flush.messages
    interval: float | None = None  # flush.ms, in seconds

    def __post_init__(self) -> None:
        if self.messages is not None and self.messages < 1:
            raise ValueError(f"flush policy: messages must be >= 1, got {self.messages}")
        if self.interval is not None and self.interval < 0:
            raise ValueError(f"flush policy: interval must be >= 0 seconds, got {self.interval}")

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "FlushPolicy":
        """Build from typed values (durations already in seconds: the topology parses units)."""
        unknown = sorted(set(d) - set(_KEYS))
        if unknown:
            raise ValueError(f"flush policy: unknown keys {unknown}, expected some of {list(_KEYS)}")
        return cls(**d)

    def to_dict(self) -> dict[str, Any]:
        """Only the settings that differ from the default, so that from_dict round-trips."""
        out: dict[str, Any] = {}
        if self.always:
            out["always"] = True
        if self.on_roll:
            out["on_roll"] = True
        if self.messages is not None:
            out["messages"] = self.messages
        if self.interval is not None:
            out["interval"] = self.interval
        return out

    def should_flush(self, unflushed_messages: int, last_flush: float, now: float,
                     rolled: bool) -> bool:
        """Whether the log must be flushed now, after an append or on a timer tick.

        Nothing unflushed means nothing to do, except that a roll asks for the rolled
        segment to be made durable under `on_roll`.
        """
        return (rolled and self.on_roll) or now >= self.due(unflushed_messages, last_flush)

    def due(self, unflushed_messages: int, last_flush: float) -> float:
        """When a timer tick must flush a log in this state (-inf: at once, inf: never), so
        that a runtime ticks the log when it is due rather than polling it."""
        if unflushed_messages <= 0:
            return math.inf
        if self.always or (self.messages is not None and unflushed_messages >= self.messages):
            return -math.inf
        return last_flush + self.interval if self.interval is not None else math.inf


#: the policy of a topic that names none: the DESIGN example's
DEFAULT_FLUSH = FlushPolicy(messages=1000, interval=1.0)
