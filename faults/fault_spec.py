"""The vocabulary of faults (DESIGN section 6): the actions, their modes and shapes, and one
fault or nemesis block as the topology states it, parsed (durations in seconds).

The topology's parser (`testbed/config/`) checks YAML against these names and builds these
specs; the schedule and the injector here consume them. They live with the faults so that
the faults need nothing of the testbed.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from broker.storage.durability import LOSS_MODES

FAULT_ACTIONS: tuple[str, ...] = (
    "kill",
    "pause",
    "resume",
    "restart",
    "shutdown",
    "lossy-crash",
    "disk-loss",
    "partition",
    "heal",
    "slow",
    "reassign",
    "elect-preferred",
    "elect",
    "add-broker",
    "remove-broker",
    "create-topic",
    "delete-topic",
    "add-partitions",
)
NEMESIS_ACTIONS: tuple[str, ...] = (
    "kill",
    "pause",
    "shutdown",
    "lossy-crash",
    "disk-loss",
    "partition-halves",
    "partition-isolate",
    "partition-bridge",
    "slow",
    "elect-preferred",
)
PARTITION_SHAPES: tuple[str, ...] = ("isolate", "halves", "bridge", "one-way")
#: fault parameters that are durations: seconds in FaultSpec.params, strings in the YAML
DURATION_PARAMS = frozenset({"delay", "jitter"})

__all__ = ["DURATION_PARAMS", "FAULT_ACTIONS", "LOSS_MODES", "NEMESIS_ACTIONS", "PARTITION_SHAPES",
           "FaultSpec", "NemesisSpec"]


@dataclass(frozen=True)
class FaultSpec:
    at: float
    do: str
    target: str | None
    params: dict[str, Any]  # the other keys; durations in seconds, lists as tuples


@dataclass(frozen=True)
class NemesisSpec:
    start: float  # `from` in the YAML
    until: float
    every: tuple[float, float]
    do: tuple[str, ...]
    target: tuple[str, ...]
    max_down: int
