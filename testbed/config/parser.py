"""Raw topology data (DESIGN section 6, schema v1) to a validated `Topology`, or every error at once.

This module walks the top level and the small sections; the sections with rules of their own
(cluster, topics, workload, faults) have a module each.
"""
from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import Any

from broker.protocol.settings import (
    FENCING_MODES,
    TRUNCATION_MODES,
    UNCLEAN_RECOVERY_MODES,
)
from broker.storage.durability import FSYNC_MODES
from testbed.config import scalars
from testbed.config.cluster_section import parse_cluster
from testbed.config.faults_section import parse_faults
from testbed.config.references import known_from, with_added_brokers, with_created_topics
from testbed.config.specs import (
    EXPECT_KEYS,
    Expectation,
    NetworkSpec,
    ProtocolSpec,
    StorageSpec,
    Timing,
)
from testbed.config.topics_section import parse_topics
from testbed.config.topology_spec import TOPIC_ACTIONS, Topology, fault_topic
from testbed.config.units import format_duration, format_rate, parse_duration
from testbed.config.walker import INVALID, Walker, describe, join, valid
from testbed.config.workload_section import parse_workload

#: a topology's name names its run directories (`<stamp>-<name>-s<seed>`, a sweep's
#: `<name>-seed=<n>`), which a file system allows 255 bytes
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}\Z")


class TopologyError(ValueError):
    """Every problem found in one topology, each naming file, key path and what was expected."""

    def __init__(self, errors: list[str]) -> None:
        self.errors = list(errors)
        super().__init__("\n".join(self.errors))


def parse_topology(data: object, source: str) -> Topology:
    """Validate already-loaded YAML data; `source` names it in every error message."""
    w = Walker(source)
    topology = _parse_topology(w, data)
    if w.errors or topology is None:
        raise TopologyError(w.errors or [f"{source}: invalid topology"])
    return topology


def _parse_topology(w: Walker, data: object) -> Topology | None:
    if data is None:
        w.error("", "the file is empty (expected a mapping with at least name, cluster.brokers and topics)")
        return None
    keys = ("name", "description", "seed", "duration", "timing", "cluster", "protocol", "storage",
            "network", "topics", "workload", "faults", "expect")  # fmt: skip
    if not isinstance(data, dict):
        w.error("", f"expected a mapping at the top level (keys: {', '.join(keys)}), got {describe(data)}")
        return None
    w.mapping(data, "", keys, required=("name", "topics"))
    m = data
    name = w.field(m, "name", "", scalars.pattern(_NAME_RE, "a name (at most 100 ASCII letters, digits, '.', '_', '-')"))
    description = w.field(m, "description", "", scalars.text, "")
    seed = w.field(m, "seed", "", scalars.integer(0, scalars.MAX_SEED), 0)
    duration = w.field(m, "duration", "", scalars.positive_duration, 10.0)
    timing = _parse_timing(w, m.get("timing", {}), "timing")
    cluster = parse_cluster(w, m.get("cluster", {}), "cluster")
    protocol = _parse_protocol(w, m.get("protocol", {}), "protocol")
    storage = _parse_storage(w, m.get("storage", {}), "storage")
    network = _parse_network(w, m.get("network", {}), "network")
    brokers = None if cluster is INVALID else cluster.brokers
    topics = parse_topics(w, m["topics"], "topics", brokers) if "topics" in m else INVALID
    known = with_added_brokers(with_created_topics(
        known_from(cluster, topics, m.get("topics"), None if seed is INVALID else seed), m.get("faults")),
        m.get("faults"))
    workload = parse_workload(w, m.get("workload", {}), "workload", known)
    if valid(workload, duration):
        _note_lone_batches(w, workload, duration)
    total_nodes = None if cluster is INVALID else len(cluster.brokers) + len(cluster.controllers)
    run_length = None if duration is INVALID else duration
    faults = parse_faults(w, m.get("faults", []), "faults", known, run_length, total_nodes)
    expect = _parse_expect(w, m.get("expect", {}), "expect")
    if valid(workload, topics, faults):
        _note_idle_consumers(w, workload, topics, faults)
    parts = (name, description, seed, duration, timing, cluster, protocol, storage, network,
             topics, workload, faults, expect)  # fmt: skip
    if not valid(*parts) or w.errors:
        return None
    return Topology(*parts, source=w.source, notes=tuple(w.notes))


def _note_idle_consumers(w: Walker, workload: Any, topics: Any, faults: Any) -> None:
    """Consumers of a topic share its partitions (p to consumer p mod count); those beyond its
    partition count get none and are not started, unless a topic fault may give them one
    (trial31: 10 asked for over 6 partitions, 6 started, nothing said)."""
    partitions = {t.name: t.partitions for t in topics}
    changed = {fault_topic(f.do, f.params) for f in faults if getattr(f, "do", None) in TOPIC_ACTIONS}
    for i, c in enumerate(workload.consumers):
        have = partitions.get(c.topic)
        if have is not None and c.count > have and c.topic not in changed:
            w.note(f"workload.consumers[{i}].count", f"{c.count} consumers share the {have} partition(s) of "
                                                     f"{c.topic}: {c.count - have} get none and are not started")


def _note_lone_batches(w: Walker, workload: Any, duration: float) -> None:
    """A producer's `rate` paces whole batches: one whose batch takes longer than the run at
    that rate sends its one batch at the start, all at once (a tester's `rate: 100/s` with
    `batch: 100000` sent 100,000 values at 0 s of a 5 s run)."""
    for i, p in enumerate(workload.producers):
        if p.rate is not None and p.batch / p.rate >= duration:
            w.note(f"workload.producers[{i}]", f"a batch of {p.batch:,} at {format_rate(p.rate)} is one batch every "
                   f"{format_duration(p.batch / p.rate)}, not less than the run's {format_duration(duration)}: "
                   f"each producer sends its one batch at the start, all at once (the rate paces batches)")


def _parse_fields(w: Walker, value: object, path: str, spec: type, converters: dict[str, Callable[[object], Any]]) -> dict[str, Any] | None:
    """The fields of dataclass `spec` read from mapping `value`, each by its converter and
    defaulting to `spec()`'s value; None if the mapping or any field is invalid (already reported)."""
    fields = [f.name for f in dataclasses.fields(spec)]
    m = w.mapping(value, path, fields)
    if m is None:
        return None
    defaults = spec()
    values = {name: w.field(m, name, path, converters[name], getattr(defaults, name)) for name in fields}
    return values if valid(*values.values()) else None


def _parse_timing(w: Walker, value: object, path: str) -> Timing | Any:
    converters = {f.name: scalars.positive_duration for f in dataclasses.fields(Timing)}
    converters["controller_election_timeout"] = scalars.positive_range
    converters["fetch_max_wait"] = parse_duration
    values = _parse_fields(w, value, path, Timing, converters)
    if values is None:
        return INVALID
    low, high = values["controller_election_timeout"]
    given = value if isinstance(value, dict) else {}
    default = "" if "controller_election_timeout" in given else " (the default)"
    problems = len(w.errors)
    if not low < high:
        w.error(join(path, "controller_election_timeout"),
                f"{format_duration(low)}..{format_duration(high)}{default}: the range must be wider than one value "
                "(expected low..high with low < high), or every controller times out at once and votes split")
    elif low <= values["heartbeat_interval"]:
        w.error(join(path, "controller_election_timeout"),
                f"its minimum {format_duration(low)}{default} must be longer than heartbeat_interval "
                f"({format_duration(values['heartbeat_interval'])}), or followers call elections between heartbeats")
    if values["fetch_max_wait"] > values["replica_lag_max"]:
        w.error(join(path, "fetch_max_wait"),
                f"{format_duration(values['fetch_max_wait'])}{'' if 'fetch_max_wait' in given else ' (the default)'} "
                f"is longer than replica_lag_max ({format_duration(values['replica_lag_max'])}): a follower whose "
                f"fetch waits that long would fall "
                f"out of the ISR while it waits (Kafka refuses it: replica.fetch.wait.max.ms must be at most "
                f"replica.lag.time.max.ms)")
    if values["session_timeout"] <= values["heartbeat_interval"]:
        w.error(
            join(path, "session_timeout"),
            f"{format_duration(values['session_timeout'])} must be longer than heartbeat_interval "
            f"({format_duration(values['heartbeat_interval'])}), or every broker is fenced between heartbeats",
        )
    if len(w.errors) > problems:
        return INVALID
    return Timing(**values)


def _parse_protocol(w: Walker, value: object, path: str) -> ProtocolSpec | Any:
    values = _parse_fields(w, value, path, ProtocolSpec, {
        "truncation": scalars.choice(*TRUNCATION_MODES),
        "elr": scalars.boolean,
        "unclean_leader_election": scalars.boolean,
        "unclean_recovery": scalars.choice(*UNCLEAN_RECOVERY_MODES),
        "fencing": scalars.choice(*FENCING_MODES),
    })
    if values is None:
        return INVALID
    written = value if isinstance(value, dict) else {}  # the default `balanced` beside the legacy mode is no choice
    if values["unclean_leader_election"] and values["unclean_recovery"] != "none" and "unclean_recovery" in written:
        w.note(join(path, "unclean_recovery"),
               f"{values['unclean_recovery']} acts only where no replica can lead at all while "
               f"unclean_leader_election is true: R31's legacy election takes the first live replica as soon as "
               f"no clean candidate is left, before R32's recovery would begin (set unclean_leader_election: "
               f"false to see {values['unclean_recovery']})")
    return ProtocolSpec(**values)


def _parse_storage(w: Walker, value: object, path: str) -> StorageSpec | Any:
    values = _parse_fields(w, value, path, StorageSpec, {
        "medium": scalars.choice("disk", "tmpfs"),
        "fsync": scalars.choice(*FSYNC_MODES),
        "writeback": scalars.positive_duration,
        "segment_bytes": scalars.segment_bytes,
    })
    return INVALID if values is None else StorageSpec(**values)


def _parse_network(w: Walker, value: object, path: str) -> NetworkSpec | Any:
    m = w.mapping(value, path, [f.name for f in dataclasses.fields(NetworkSpec)])
    if m is None:
        return INVALID
    backend = w.field(m, "backend", path, scalars.choice("userspace", "netns"), "userspace")
    # ipc sockets are files and ignore network namespaces (DESIGN 5), so netns means tcp.
    transport = w.field(m, "transport", path, scalars.choice("ipc", "tcp"), "tcp" if backend == "netns" else "ipc")
    if not valid(backend, transport):
        return INVALID
    if backend == "netns" and transport == "ipc":
        w.error(join(path, "transport"), "ipc sockets ignore network namespaces (expected tcp with backend netns)")
        return INVALID
    return NetworkSpec(backend, transport)


def _parse_expect(w: Walker, value: object, path: str) -> dict[str, Expectation] | Any:
    m = w.mapping(value, path, EXPECT_KEYS)
    if m is None:
        return INVALID
    result: dict[str, Expectation] = {}
    for key in m:
        if key not in EXPECT_KEYS:
            continue
        convert = scalars.converged if key == "converged" else scalars.expectation
        result[key] = w.field(m, key, path, convert)
    if not valid(*result.values()) or len(result) != len(m):
        return INVALID
    return result
