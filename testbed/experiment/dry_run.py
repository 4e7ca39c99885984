"""`run.py x.yaml --dry-run`: the resolved topology and the fault schedule, nothing started.

The schedule is the one the run will fire (the nemesis expanded with the seed); targets
resolve when each fault fires, so they are shown as written.
"""
from __future__ import annotations

from typing import Any

import yaml

from faults.fault_spec import DURATION_PARAMS
from faults.schedule import ScheduledFault, build_schedule
from testbed.config.references import initial_replicas
from testbed.config.specs import DEFAULT_EXPECT
from testbed.config.nemesis_section import never_firing
from testbed.config.topology_spec import Topology
from testbed.config.units import format_duration


def describe(t: Topology, time_scale: float = 1.0) -> str:
    schedule = build_schedule(t)
    scaled = [] if time_scale == 1 else [
        f"# --time-scale {time_scale:g}: every time here (the duration, each fault's time, every timeout) "
        f"will take {time_scale:g} times as long"]
    defaults = [] if t.expect else [
        "# no expectations given: the run is held to the defaults, "
        + ", ".join(f"{name}: {expectation}" for name, expectation in DEFAULT_EXPECT.items())]
    notes = [f"# note: {note}" for note in never_firing(t)]
    return "\n".join([*scaled, *notes, "# resolved topology", yaml.safe_dump(t.to_dict(), sort_keys=False).rstrip(), *defaults, "",
                      *_placement(t),
                      "# fault schedule (time, action, target, params, origin)",
                      format_schedule(schedule)])


def _placement(t: Topology) -> list[str]:
    """The replicas of each partition as the controller will place them at the start (R34,
    the run's seed): what a rack outage takes, before anything runs."""
    replicas = initial_replicas(t.cluster, t.topics, t.seed)
    if not replicas:
        return []
    racks = {b.id: b.rack for b in t.cluster.brokers}
    lines = ["# replicas at the start (R34; the first is the preferred leader)"]
    for partition, brokers in replicas.items():
        if not any(racks.values()):
            lines.append(f"{partition}: {list(brokers)}")
            continue
        spread = f"  racks {', '.join(str(racks[b]) for b in brokers)}"
        spanned, wanted = len({racks[b] for b in brokers if racks[b] is not None}), min(len(brokers), len(t.racks))
        if spanned < wanted:  # what the check `placement_violations` counts
            spread += f"  (spans {spanned} of min(RF, racks) = {wanted}: a placement violation, I9)"
        lines.append(f"{partition}: {list(brokers)}{spread}")
    return [*lines, ""]


def format_schedule(schedule: list[ScheduledFault]) -> str:
    """One line per fault: time, action, target, params, origin. Durations are spelled as
    YAML spells them (`delay=20ms`), as the run's progress line says them: trial38's
    `delay=0.02` beside `delay 20ms` read as two different faults."""
    if not schedule:
        return "(no faults)"
    lines = []
    for f in schedule:
        params = " ".join(f"{k}={_format_value(k, v)}" for k, v in sorted(f.params.items()))
        lines.append(f"{f.at:8.3f}s  {f.do:<16} {f.target or '-':<24} {params:<40} {f.origin}")
    return "\n".join(lines)


def _format_value(key: str, value: Any) -> str:
    if isinstance(value, (tuple, list)):
        return "[" + ",".join(_format_value(key, v) for v in value) + "]"
    if key in DURATION_PARAMS and isinstance(value, int | float):
        return format_duration(value)
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)
