"""The fault schedule: plain data made from the topology and the seed, before anything runs.

Like Jepsen's generator, the schedule decides *what* happens *when*; the nemesis decides
*to whom* only when the fault fires (a target names a role, see `faults/targets.py`). So
the schedule is computable without a cluster, printable by `--dry-run`, and identical for
the same topology and seed.

Each `nemesis:` block is expanded with its own `random.Random`, seeded from the run seed
and the block's index: adding a second block, or an explicit fault, leaves the first
block's draws unchanged. Its first fault fires at `from`, each next one an `every` draw
later, while before `until`. Every nemesis fault that takes something down is paired with
its undo, halfway to the next fault, carrying `undo_of` (the origin of the fault it undoes)
and no target: the runtime must undo exactly the nodes that fault resolved to, which a
target re-resolved later (who leads `orders/0` *now*) would miss. Nemesis faults that take
nodes down carry `max_down` for the runtime to enforce (it alone knows what is down).
"""
from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from faults.fault_spec import LOSS_MODES, FaultSpec, NemesisSpec

#: What undoes each nemesis action (the nemesis never leaves its damage behind).
UNDO_ACTIONS: dict[str, str] = {
    "kill": "restart",
    "lossy-crash": "restart",
    "disk-loss": "restart",
    "shutdown": "restart",
    "pause": "resume",
    "partition-halves": "heal",
    "partition-isolate": "heal",
    "partition-bridge": "heal",
    "slow": "heal",
}
#: The nemesis's `slow`: links of the drawn target degraded by these (seconds, probabilities).
NEMESIS_SLOW: dict[str, float] = {"delay": 0.1, "jitter": 0.05, "loss": 0.05}
# Actions that need no target: the shape or the controller chooses.
_UNTARGETED = frozenset({"partition-halves", "partition-bridge", "elect-preferred"})
#: what follows a nemesis block's key path in its faults' origins (`faults[3].nemesis#0`)
_NEMESIS = ".nemesis"


class FaultPlan(Protocol):
    """What a schedule is made from: a topology's `faults:` entries and its seed."""

    @property
    def faults(self) -> Sequence[FaultSpec | NemesisSpec]: ...

    @property
    def seed(self) -> int: ...


@dataclass(frozen=True)
class ScheduledFault:
    """One fault to inject `at` seconds into the workload phase.

    `origin` says where it came from, as the entry's key path in the topology's `faults:`
    list (the order the user wrote, which `topology.yaml` of the run keeps and validate's
    errors name): `faults[i]`, `faults[i].nemesis#n` (the n-th fault the nemesis block
    `faults[i]` drew) or `faults[i].nemesis#n.undo`.
    """

    at: float
    do: str
    target: str | None
    params: dict[str, Any]
    origin: str


def build_schedule(t: FaultPlan, seed: int | None = None) -> list[ScheduledFault]:
    """Every fault of the run in firing order (ties keep the topology's order)."""
    run_seed = t.seed if seed is None else seed
    faults: list[ScheduledFault] = []
    nemesis_index = 0
    for index, spec in enumerate(t.faults):
        if isinstance(spec, FaultSpec):
            faults.append(ScheduledFault(spec.at, spec.do, spec.target, dict(spec.params), f"faults[{index}]"))
        else:
            faults.extend(_expand(spec, nemesis_index, f"faults[{index}]{_NEMESIS}", run_seed))
            nemesis_index += 1
    return sorted(faults, key=lambda f: f.at)


def from_nemesis(origin: str) -> bool:
    """The fault is one a nemesis drew (its undo is of the same origin with `.undo`)."""
    return _NEMESIS in origin


def fault_rng(seed: int, origin: str) -> random.Random:
    """The rng a fault resolves its random choices with (targets, partition halves, loss
    points): one per fault, so a fault's choices do not depend on how many draws faults
    before it happened to make."""
    return random.Random(f"isrlab:{seed}:{origin}")


def _expand(n: NemesisSpec, index: int, entry: str, seed: int) -> list[ScheduledFault]:
    """The faults of the `index`-th nemesis block, the topology's entry `entry`: its draws
    are seeded by `index`, so explicit faults added around it leave them as they were."""
    rng = fault_rng(seed, f"nemesis[{index}]")
    out: list[ScheduledFault] = []
    at, number = n.start, 0
    while at < n.until:
        gap = rng.uniform(*n.every)
        action = rng.choice(n.do)
        target = None if action in _UNTARGETED else rng.choice(n.target)
        origin = f"{entry}#{number}"
        do, target, params = _nemesis_fault(action, target, n.max_down, rng)
        out.append(ScheduledFault(at, do, target, params, origin))
        if action in UNDO_ACTIONS:
            undo_at = at + min(gap, n.until - at) / 2
            out.append(ScheduledFault(undo_at, UNDO_ACTIONS[action], None, {"undo_of": origin}, origin + ".undo"))
        at += gap
        number += 1
    return out


def _nemesis_fault(action: str, target: str | None, max_down: int,
                   rng: random.Random) -> tuple[str, str | None, dict[str, Any]]:
    """A nemesis action in the form an explicit fault of the same kind has (do, target, params)."""
    if action == "elect-preferred":
        return action, None, {}
    if action == "slow":
        return action, None, {"from": target, **NEMESIS_SLOW}
    params: dict[str, Any] = {"max_down": max_down}
    if action == "lossy-crash":
        params["loss"] = rng.choice(LOSS_MODES)
    if action.startswith("partition-"):
        params["shape"] = action[len("partition-"):]
        return "partition", target, params
    return action, target, params
