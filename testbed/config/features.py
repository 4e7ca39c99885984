"""Which settings of a topology this build does not act on yet, so a run can say so aloud."""
from __future__ import annotations

from testbed.config.specs import ProtocolSpec
from testbed.config.topology_spec import Topology

FEATURE_NAMES: frozenset[str] = frozenset(
    {
        "faults",
        "expect",
        "controller-quorum",
        "truncation:high-watermark",
        "elr:false",
        "unclean-leader-election",
        "unclean-recovery:none",
        "unclean-recovery:proactive",
        "unclean-recovery:manual",
        "fencing:zookeeper",
        "medium:tmpfs",
        "fsync:real",
        "network:netns",
        "placement:explicit",
    }
)


def not_yet_acted_on(t: Topology, supported: frozenset[str]) -> list[str]:
    """Notes for every setting of `t` whose behaviour this build does not implement yet.

    The schema is ahead of the code on purpose (a lab file can be written before its feature);
    a run must then say loudly which of its settings are ignored, not pretend they held.
    `supported` holds names from FEATURE_NAMES.
    """
    unknown = sorted(set(supported) - FEATURE_NAMES)
    if unknown:
        raise ValueError(f"unknown feature names {unknown} (expected names from FEATURE_NAMES)")
    used: list[tuple[str, str]] = []
    if t.faults:
        used.append(("faults", f"faults ({len(t.faults)} entries)"))
    if t.expect:
        used.append(("expect", f"expect ({', '.join(t.expect)})"))
    if len(t.cluster.controllers) > 1:
        used.append(("controller-quorum", f"cluster.controllers ({len(t.cluster.controllers)}, a quorum)"))
    if t.protocol.truncation == "high-watermark":
        used.append(("truncation:high-watermark", "protocol.truncation: high-watermark"))
    if not t.protocol.elr:
        used.append(("elr:false", "protocol.elr: false"))
    if t.protocol.unclean_leader_election:
        used.append(("unclean-leader-election", "protocol.unclean_leader_election: true"))
    if t.protocol.unclean_recovery != ProtocolSpec.unclean_recovery:
        used.append(
            (f"unclean-recovery:{t.protocol.unclean_recovery}", f"protocol.unclean_recovery: {t.protocol.unclean_recovery}")
        )
    if t.protocol.fencing == "zookeeper":
        used.append(("fencing:zookeeper", "protocol.fencing: zookeeper"))
    if t.storage.medium == "tmpfs":
        used.append(("medium:tmpfs", "storage.medium: tmpfs"))
    if t.storage.fsync == "real":
        used.append(("fsync:real", "storage.fsync: real"))
    if t.network.backend == "netns":
        used.append(("network:netns", "network.backend: netns"))
    explicit = [topic.name for topic in t.topics if topic.placement == "explicit"]
    if explicit:
        used.append(("placement:explicit", f"placement: explicit (topics: {', '.join(explicit)})"))
    return [
        f"{t.source}: {setting}: this build does not act on it yet (feature {feature!r})"
        for feature, setting in used
        if feature not in supported
    ]
