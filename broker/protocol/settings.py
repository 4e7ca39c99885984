"""The settings both roles run with, parsed once at the edge (the topology) and handed down.

`ProtocolSettings` are the protocol modes a topology chooses (DESIGN section 3); `Timeouts`
are every protocol timeout a node uses, in seconds: the ones a topology sets (`timing:`)
and Kafka's defaults for the rest. `Timeouts.scaled` multiplies all of them, so that
`--time-scale` slows a whole cluster down without changing any ratio between its timers.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

TRUNCATION_MODES = ("leader-epoch", "high-watermark")  # R13
FENCING_MODES = ("kraft", "zookeeper")  # R13a
UNCLEAN_RECOVERY_MODES = ("none", "proactive", "balanced", "manual")  # R32


@dataclass(frozen=True)
class ProtocolSettings:
    truncation: str = "leader-epoch"
    elr: bool = True
    unclean_leader_election: bool = False
    unclean_recovery: str = "balanced"
    fencing: str = "kraft"

    def __post_init__(self) -> None:
        for name, allowed in (("truncation", TRUNCATION_MODES), ("fencing", FENCING_MODES),
                              ("unclean_recovery", UNCLEAN_RECOVERY_MODES)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {getattr(self, name)!r}")


@dataclass(frozen=True)
class Timeouts:
    # set by the topology's `timing:` section (DESIGN section 6)
    heartbeat_interval: float = 0.1
    session_timeout: float = 0.6  # R24
    replica_lag_max: float = 1.0  # R17
    fetch_max_wait: float = 0.05
    hw_checkpoint_interval: float = 5.0
    unclean_recovery_timeout: float = 2.0  # R32
    controller_election_timeout: tuple[float, float] = (0.3, 0.6)
    # not in the topology: what Kafka uses, scaled like the rest
    request_timeout: float = 0.5  # the floor of a broker's requests to the controller
    fetch_request_timeout: float = 2.0  # added to a follower fetch's long-poll wait
    fetch_backoff: float = 0.1  # after a failed fetch (whole leader) or a partition error
    alter_partition_timeout: float = 5.0  # R19: one AlterPartition in flight, at most this long
    alter_partition_backoff: float = 0.1  # before proposing again after a rejection
    produce_timeout: float = 5.0  # R20: a produce that names no timeout of its own

    @property
    def controller_request_timeout(self) -> float:
        """A broker's registration and metadata requests: never shorter than its session."""
        return max(self.request_timeout, self.session_timeout)

    def scaled(self, factor: float) -> Timeouts:
        """Every timeout multiplied by `factor` (`--time-scale`)."""
        if factor <= 0:
            raise ValueError(f"time scale must be positive, got {factor}")
        values = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            values[f.name] = tuple(x * factor for x in v) if isinstance(v, tuple) else v * factor
        return Timeouts(**values)
