"""What of a topology the simulation models, refuses or ignores, said before anything runs.

The sim runs the protocol, the storage code and its durability journal, the clients and
the faults exactly; what it has no counterpart for is the host: a kernel network
(`backend: netns`) it refuses, since a run there is about the kernel's TCP, which the sim
does not have, and so is a producer at `rate: max`, which the host's CPU bounds and virtual
time does not; and the settings whose only effect is on the host's cost, which it ignores,
since on virtual time they change no outcome.
"""
from __future__ import annotations

from testbed.config.topology_spec import Topology


def refused(t: Topology) -> list[str]:
    """Settings the sim cannot model: a run with any of them is refused."""
    out = []
    if t.network.backend == "netns":
        out.append(f"{t.source}: network.backend: netns: the simulation has its own network, not the kernel's; "
                   "run it on processes (python run.py FILE), or set backend: userspace")
    for i, p in enumerate(t.workload.producers):
        if p.rate is None:
            # a node's work takes no virtual time: such a producer is bounded by nothing (a
            # tester's 2 s run made 21 million sends and 14 GB of history)
            out.append(f"{t.source}: workload.producers[{i}].rate: max: the simulation's nodes take no time, so a "
                       f"producer at `max` sends without limit on virtual time; give a rate (e.g. 2000/s), or run "
                       f"it on processes (python run.py FILE)")
    return out


def ignored(t: Topology) -> list[str]:
    """Settings the sim accepts and does not act on (they change the host's cost, not the outcome)."""
    out = []
    if t.storage.medium == "tmpfs":
        out.append(f"{t.source}: storage.medium: tmpfs: ignored by the simulation (its files are a model "
                   "of the disk either way; the durability journal decides what a power loss keeps)")
    if t.storage.fsync == "real":
        out.append(f"{t.source}: storage.fsync: real: ignored by the simulation (no system call costs virtual "
                   "time; the durability journal records each flush as with fsync: simulated)")
    if t.network.transport == "tcp":
        out.append(f"{t.source}: network.transport: tcp: ignored by the simulation (its messages are events)")
    return out
