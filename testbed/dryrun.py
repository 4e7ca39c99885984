"""`run.py x.yaml --dry-run`: the resolved topology and the fault schedule, nothing started."""
from __future__ import annotations

import yaml

from testbed.topology import FaultSpec, NemesisSpec, Topology


def describe(t: Topology) -> str:
    lines = ["# resolved topology", yaml.safe_dump(t.to_dict(), sort_keys=False).rstrip(), "", "# fault schedule"]
    if not t.faults:
        lines.append("(no faults)")
    for f in t.faults:
        if isinstance(f, FaultSpec):
            params = " ".join(f"{k}={v}" for k, v in sorted(f.params.items()))
            lines.append(f"{f.at:8.3f}s  {f.do:<16} {f.target or '':<24} {params}".rstrip())
        elif isinstance(f, NemesisSpec):
            lines.append(f"{f.start:8.3f}s..{f.until:.3f}s  nemesis every {f.every[0]}s..{f.every[1]}s "
                         f"do {list(f.do)} on {list(f.target)} max_down {f.max_down} "
                         "(expanded with the seed when fault injection lands)")
    return "\n".join(lines)
