"""A nemesis entry of the faults section: a seeded random schedule of faults within a window.

The nemesis undoes what it does itself (restart, resume, heal), so those are not among its
actions, and it only takes down nodes that are up, so `stopped` and `paused` are no targets.
"""
from __future__ import annotations

from typing import Any

from faults.fault_spec import NEMESIS_ACTIONS, NemesisSpec
from testbed.config import scalars
from testbed.config.references import (
    ONLY_CONTROLLER_KEPT,
    Known,
    may_name_only_controller,
    partition_named,
    target_problem,
)
from testbed.config.units import format_duration, parse_duration
from testbed.config.walker import INVALID, Walker, join, valid


#: the most faults one nemesis may draw: its schedule is drawn whole when the topology is
#: read (a fault every microsecond for 10 s took gigabytes before anything ran)
MAX_NEMESIS_FAULTS = 10_000


def parse_nemesis(
    w: Walker, value: object, path: str, known: Known, duration: float | None, total_nodes: int | None
) -> NemesisSpec | Any:
    m = w.mapping(value, path, ("from", "until", "every", "do", "target", "max_down"), required=("do",))
    if m is None:
        return INVALID
    start = w.field(m, "from", path, parse_duration, 0.0)
    until = w.field(m, "until", path, parse_duration, duration if duration is not None else INVALID)
    every = w.field(m, "every", path, scalars.positive_range, (2.0, 4.0))
    do = w.field(m, "do", path, scalars.names_from(NEMESIS_ACTIONS, "nemesis actions"))
    max_down = w.field(m, "max_down", path, scalars.integer(1), 1)
    targets: Any = ("random-broker",)
    if "target" in m:
        targets = _nemesis_targets(w, m["target"], join(path, "target"), known)
    if valid(start, until) and start >= until:
        w.error(join(path, "until"), f"{format_duration(until)} is not after from ({format_duration(start)})")
        until = INVALID
    if until is not INVALID and duration is not None and until > duration:
        w.error(join(path, "until"), f"{format_duration(until)} is after the end of the run (duration {format_duration(duration)})")
        until = INVALID
    if max_down is not INVALID and total_nodes is not None and max_down >= total_nodes:
        w.error(join(path, "max_down"), f"{max_down} must be less than the number of nodes ({total_nodes})")
        max_down = INVALID
    if valid(start, until, every) and (until - start) / every[0] > MAX_NEMESIS_FAULTS:
        w.error(join(path, "every"), f"from {format_duration(start)} to {format_duration(until)} a fault every "
                f"{format_duration(every[0])} or more is up to {(until - start) / every[0]:,.0f} faults (expected at most "
                f"{MAX_NEMESIS_FAULTS:,}: every at least {format_duration((until - start) / MAX_NEMESIS_FAULTS)})")
        every = INVALID
    parts = (start, until, every, do, targets, max_down)
    if not valid(*parts):
        return INVALID
    if total_nodes is not None and "partition-halves" in do and total_nodes // 2 > max_down:
        w.note(path, f"partition-halves cuts off at least {total_nodes // 2} of the {total_nodes} nodes, more than "
                     f"max_down {max_down}: it is skipped every time it is drawn (max_down "
                     f"{total_nodes - total_nodes // 2} lets it fire whichever half the active controller is in)")
    down = [action for action in do if action in _DOWN_ACTIONS]
    for index, target in enumerate(targets) if down else ():
        least = _least_nodes(target, known)
        if least is not None and least > max_down:
            one = len(down) == 1
            actions = down[0] if one else f"{', '.join(down[:-1])} and {down[-1]}"
            w.note(join(join(path, "target"), index) if "target" in m else path,
                   f"{target} is at least {least} nodes, more than max_down {max_down}: {actions} of it "
                   f"{'is' if one else 'are'} skipped every time {'it is' if one else 'they are'} drawn "
                   f"(max_down {least} lets {'it' if one else 'them'} fire)")
    if "disk-loss" in do and any(may_name_only_controller(target, known) for target in targets):
        w.note(path, ONLY_CONTROLLER_KEPT)
    return NemesisSpec(*parts)


#: the nemesis actions the injector counts against `max_down` (the nodes they take down or cut off)
_DOWN_ACTIONS = frozenset({"kill", "pause", "shutdown", "lossy-crash", "disk-loss", "partition-isolate"})


def _least_nodes(target: str, known: Known) -> int | None:
    """The fewest nodes `target` resolves to when the run starts, where the topology fixes it:
    a partition's followers are its replicas but the leader, `brokers` and `controllers` are
    every one of them. None for targets that can be one node."""
    if target == "brokers" and known.broker_ids is not None:
        return len(set(known.broker_ids) - known.added_brokers)
    if target == "controllers" and known.controller_ids is not None:
        return len(known.controller_ids)
    named = partition_named(target) if target.startswith("followers-of ") else None
    if named is not None and known.replication is not None and named[0] in known.replication:
        return known.replication[named[0]] - 1
    return None


def _nemesis_targets(w: Walker, value: object, path: str, known: Known) -> tuple[str, ...] | Any:
    entries = w.sequence(value, path, "targets", min_len=1)
    if entries is None:
        return INVALID
    ok = True
    for index, target in enumerate(entries):
        problem = target_problem(target, known)
        if problem is None and target in ("clients", "stopped", "paused"):
            problem = f"{target!r} cannot be a nemesis target (the nemesis takes down nodes that are up)"
        if problem is not None:
            w.error(join(path, index), problem)
            ok = False
    return tuple(entries) if ok else INVALID


def never_firing(t: Any) -> list[str]:
    """The notes of topology `t`: what is valid but will not do what it seems to, each named
    where it is in the file, found as the file is read. First of them, the nemesis actions
    that can never fire: `partition-halves` cuts off at least half of the nodes from the
    side that keeps the controller, and the injector skips any fault that would put more than the
    nemesis's `max_down` nodes out of reach (its `faults.jsonl` line says `skipped:
    max_down`), so with fewer the action is drawn and skipped every time. Also a disk-loss
    that may strike the only controller (kept), a producer whose one batch outlasts the run,
    a protocol mode not acted on."""
    return list(t.notes)
