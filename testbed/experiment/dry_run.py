"""`run.py x.yaml --dry-run`: the resolved topology and the fault schedule, nothing started.

The schedule is the one the run will fire (the nemesis expanded with the seed); targets
resolve when each fault fires, so they are shown as written.
"""
from __future__ import annotations

import yaml

from faults.schedule import build_schedule, format_schedule
from testbed.topology import Topology


def describe(t: Topology) -> str:
    schedule = build_schedule(t)
    return "\n".join(["# resolved topology", yaml.safe_dump(t.to_dict(), sort_keys=False).rstrip(), "",
                      "# fault schedule (time, action, target, params, origin)",
                      format_schedule(schedule) if schedule else "(no faults)"])
