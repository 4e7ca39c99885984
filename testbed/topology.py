"""Topology files (DESIGN section 6, schema v1) parsed once, at the edge, into frozen specs.

A malformed topology must be rejected before any process starts, with every problem at once:
a user who fixes one typo per run of `run.py validate` gives up. So the parser never stops at
the first error; it records `<file>: <key.path>: <what was wrong and what was expected>` and
goes on, and checks that depend on a broken part (a target naming a broker when the broker
list itself is broken) are skipped rather than reported twice.

Everything downstream reads these dataclasses, never raw YAML. Durations are float seconds.
`Topology.to_dict()` writes the resolved topology (every default filled in) back in the
schema's own form, so the `topology.yaml` a run leaves behind reproduces the run.
"""
from __future__ import annotations

import dataclasses
import operator
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from testbed.durations import (
    format_duration,
    format_duration_range,
    format_rate,
    format_size,
    parse_duration,
    parse_duration_range,
    parse_rate,
    parse_size,
)

CHECK_NAMES: tuple[str, ...] = (
    "lost_writes",
    "lost_writes_acks1",
    "unseen",
    "duplicates",
    "inconsistent_offsets",
    "nonmonotonic_polls",
    "poll_skips",
    "committed_regressions",
    "log_divergence",
    "leader_conflicts",
    "unclean_exclusion",
    "placement_violations",
    "elr_violations",
    "metadata_divergence",
)
# `converged` is not a check of the pipeline but whether the cluster converged after healing.
EXPECT_KEYS: tuple[str, ...] = CHECK_NAMES + ("converged",)

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
)
# The nemesis undoes what it does itself (restart, resume, heal), so those are not choices here.
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
LOSS_MODES: tuple[str, ...] = ("unsynced", "partial", "torn")
PARTITION_SHAPES: tuple[str, ...] = ("isolate", "halves", "bridge", "one-way")

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

TARGET_GRAMMAR = (
    "broker:N, controller:N, rack:X, leader-of TOPIC/P, leader-of any, followers-of TOPIC/P, "
    "isr-of TOPIC/P, active-controller, random-broker, random-controller, controllers, brokers, "
    "clients, stopped, paused"
)
_TARGET_WORDS = frozenset(
    {
        "leader-of any",
        "active-controller",
        "random-broker",
        "random-controller",
        "controllers",
        "brokers",
        "clients",
        "stopped",
        "paused",
    }
)
_PARTITION_TARGET_RE = re.compile(r"^(leader-of|followers-of|isr-of) (\S+)$")
_TOPIC_PARTITION_RE = re.compile(r"^([A-Za-z0-9._-]+)/(\d+)$")
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_TOPIC_NAME_RE = re.compile(r"^[A-Za-z0-9._-]+$")
_EXPECTATION_RE = re.compile(r"^(==|>=|<=|>|<)?\s*(\d+)$")
# Fault parameters that are durations: seconds in FaultSpec.params, strings in the YAML.
_DURATION_PARAMS = frozenset({"delay", "jitter"})


class TopologyError(ValueError):
    """Every problem found in one topology, each naming file, key path and what was expected."""

    def __init__(self, errors: list[str]) -> None:
        self.errors = list(errors)
        super().__init__("\n".join(self.errors))


# ---------------------------------------------------------------------------------------------
# The typed result
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NodeSpec:
    kind: str  # "broker" | "controller"
    id: int
    rack: str | None = None

    @property
    def name(self) -> str:
        """The name used in every record file (`events.jsonl`'s `node`), e.g. `broker-1`."""
        return f"{self.kind}-{self.id}"


@dataclass(frozen=True)
class Timing:
    heartbeat_interval: float = 0.1
    session_timeout: float = 0.6
    replica_lag_max: float = 1.0
    fetch_max_wait: float = 0.05
    controller_election_timeout: tuple[float, float] = (0.3, 0.6)
    hw_checkpoint_interval: float = 5.0
    unclean_recovery_timeout: float = 2.0

    def scaled(self, factor: float) -> Timing:
        """All timeouts multiplied by `--time-scale`, so a slow machine keeps the same ratios."""
        if factor <= 0:
            raise ValueError(f"time scale must be positive, got {factor}")
        low, high = self.controller_election_timeout
        return Timing(
            heartbeat_interval=self.heartbeat_interval * factor,
            session_timeout=self.session_timeout * factor,
            replica_lag_max=self.replica_lag_max * factor,
            fetch_max_wait=self.fetch_max_wait * factor,
            controller_election_timeout=(low * factor, high * factor),
            hw_checkpoint_interval=self.hw_checkpoint_interval * factor,
            unclean_recovery_timeout=self.unclean_recovery_timeout * factor,
        )


@dataclass(frozen=True)
class ClusterSpec:
    controllers: tuple[NodeSpec, ...]
    brokers: tuple[NodeSpec, ...]


@dataclass(frozen=True)
class ProtocolSpec:
    truncation: str = "leader-epoch"
    elr: bool = True
    unclean_leader_election: bool = False
    unclean_recovery: str = "balanced"
    fencing: str = "kraft"


@dataclass(frozen=True)
class StorageSpec:
    medium: str = "disk"
    fsync: str = "simulated"
    writeback: float = 5.0
    segment_bytes: int = 1 << 20


@dataclass(frozen=True)
class NetworkSpec:
    backend: str = "userspace"
    transport: str = "ipc"


@dataclass(frozen=True)
class FlushPolicy:
    always: bool = False
    on_roll: bool = False
    messages: int | None = None
    interval: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """The fields as plain JSON data (interval in seconds), for a node's config file.

        `FlushPolicy(**policy.to_dict())` gives the policy back; the YAML form (`always`,
        `on-roll`, `{messages, interval}`) is what `Topology.to_dict` writes.
        """
        return dataclasses.asdict(self)


# The DESIGN example's flush policy, used when a topic gives none.
_DEFAULT_FLUSH = FlushPolicy(messages=1000, interval=1.0)


@dataclass(frozen=True)
class TopicSpec:
    name: str
    partitions: int
    replication_factor: int
    min_insync_replicas: int
    flush: FlushPolicy
    placement: str
    assignment: dict[int, tuple[int, ...]] | None


@dataclass(frozen=True)
class ProducerSpec:
    count: int
    topic: str
    acks: str  # "all" | "1" | "0"
    rate: float | None  # records/s per producer; None = as fast as possible (`rate: max`)
    batch: int
    retries: int
    partitions: tuple[int, ...] | None  # None = every partition of the topic


@dataclass(frozen=True)
class ConsumerSpec:
    count: int
    topic: str
    from_: str  # "earliest" | "latest"


@dataclass(frozen=True)
class WorkloadSpec:
    producers: tuple[ProducerSpec, ...] = ()
    consumers: tuple[ConsumerSpec, ...] = ()


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


_COMPARISONS: dict[str, Callable[[int, int], bool]] = {
    "==": operator.eq,
    ">": operator.gt,
    ">=": operator.ge,
    "<": operator.lt,
    "<=": operator.le,
}


@dataclass(frozen=True)
class Expectation:
    op: str  # "==", ">", ">=", "<", "<="
    value: int

    def holds(self, count: int) -> bool:
        return _COMPARISONS[self.op](count, self.value)

    def __str__(self) -> str:
        return str(self.value) if self.op == "==" else f"{self.op}{self.value}"


@dataclass(frozen=True)
class Topology:
    name: str
    description: str
    seed: int
    duration: float
    timing: Timing
    cluster: ClusterSpec
    protocol: ProtocolSpec
    storage: StorageSpec
    network: NetworkSpec
    topics: tuple[TopicSpec, ...]
    workload: WorkloadSpec
    faults: tuple[FaultSpec | NemesisSpec, ...]
    # `converged: true` is held as Expectation("==", 1): 1 when the cluster converged.
    expect: dict[str, Expectation]
    source: str

    def topic(self, name: str) -> TopicSpec:
        for topic in self.topics:
            if topic.name == name:
                return topic
        raise KeyError(f"{self.source}: no topic {name!r} (topics: {', '.join(t.name for t in self.topics)})")

    @property
    def broker_ids(self) -> tuple[int, ...]:
        return tuple(b.id for b in self.cluster.brokers)

    @property
    def racks(self) -> tuple[str, ...]:
        """Distinct broker racks, in order of first appearance (the rack-alternated order of R34)."""
        return tuple(dict.fromkeys(b.rack for b in self.cluster.brokers if b.rack is not None))

    def to_dict(self) -> dict[str, Any]:
        return _topology_to_dict(self)


# ---------------------------------------------------------------------------------------------
# Entry points
# ---------------------------------------------------------------------------------------------


def load_topology(path: str | Path, seed: int | None = None) -> Topology:
    """Read, parse and validate a topology file; `seed` (from `--seed`) replaces the file's."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TopologyError([f"{source}: no such file"]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise TopologyError([f"{source}: cannot read the file ({exc})"]) from None
    try:
        data = yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        raise TopologyError([_yaml_error(source, exc)]) from None
    except yaml.YAMLError as exc:
        raise TopologyError([f"{source}: invalid YAML: {exc}"]) from None
    topology = parse_topology(data, source)
    if seed is not None:
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise TopologyError([f"{source}: seed: --seed {seed!r} is not a non-negative integer"])
        topology = dataclasses.replace(topology, seed=seed)
    return topology


def parse_topology(data: object, source: str) -> Topology:
    """Validate already-loaded YAML data; `source` names it in every error message."""
    parser = _Parser(source)
    topology = parser.topology(data)
    if parser.errors or topology is None:
        raise TopologyError(parser.errors or [f"{source}: invalid topology"])
    return topology


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


# ---------------------------------------------------------------------------------------------
# YAML loading
# ---------------------------------------------------------------------------------------------


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys, which PyYAML would silently let the last win."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, yaml.Node] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.setdefault(key, key_node)
            except TypeError:  # an unhashable key: the base class reports it with its line
                continue
            if first is not key_node:
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"duplicate key {key!r} (first given on line {first.start_mark.line + 1})",
                    key_node.start_mark,
                )
        return super().construct_mapping(node, deep=deep)


def _yaml_error(source: str, exc: yaml.MarkedYAMLError) -> str:
    mark = exc.problem_mark or exc.context_mark
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    problem = exc.problem or exc.context or "syntax error"
    context = f" ({exc.context})" if exc.context and exc.problem else ""
    return f"{source}: {where}invalid YAML: {problem}{context}"


# ---------------------------------------------------------------------------------------------
# Validation
# ---------------------------------------------------------------------------------------------


class _Invalid:
    """Marks a value that failed validation (its error is already recorded)."""


_INVALID: Any = _Invalid()
_ABSENT: Any = object()


def _valid(*values: object) -> bool:
    return not any(v is _INVALID for v in values)


def _join(path: str, key: object) -> str:
    if isinstance(key, int) and not isinstance(key, bool):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else str(key)


def _describe(value: object) -> str:
    if value is None:
        return "nothing (null)"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return f"a list of {len(value)}"
    if isinstance(value, str):
        return repr(value)
    return f"{type(value).__name__} {value!r}"


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# Converters: raw YAML value -> typed value, or ValueError saying what was expected.


def _int(minimum: int) -> Callable[[object], int]:
    def convert(value: object) -> int:
        if not _is_int(value):
            raise ValueError(f"expected an integer >= {minimum}, got {_describe(value)}")
        if value < minimum:
            raise ValueError(f"{value} is too small (expected an integer >= {minimum})")
        return value

    return convert


def _bool(value: object) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"expected true or false, got {_describe(value)}")
    return value


def _choice(*options: str) -> Callable[[object], str]:
    def convert(value: object) -> str:
        if value not in options:
            raise ValueError(f"{_describe(value)} is not allowed (expected one of: {', '.join(options)})")
        return value  # type: ignore[return-value]

    return convert


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise ValueError(f"expected a string, got {_describe(value)}")
    return value


def _pattern(regex: re.Pattern[str], what: str) -> Callable[[object], str]:
    def convert(value: object) -> str:
        if not isinstance(value, str) or not regex.match(value):
            raise ValueError(f"{_describe(value)} is not {what}")
        return value

    return convert


def _rack(value: object) -> str:
    # `rack: 1` is as natural as `rack: a`; racks are compared as names.
    if _is_int(value):
        return str(value)
    if not isinstance(value, str) or not value:
        raise ValueError(f"expected a rack name, got {_describe(value)}")
    return value


def _positive_duration(value: object) -> float:
    seconds = parse_duration(value)
    if seconds <= 0:
        raise ValueError(f"{value!r} must be longer than zero")
    return seconds


def _positive_range(value: object) -> tuple[float, float]:
    low, high = parse_duration_range(value)
    if low <= 0:
        raise ValueError(f"{value!r} must be longer than zero")
    return low, high


def _probability(value: object) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 <= value <= 1:
        raise ValueError(f"expected a probability between 0 and 1 (e.g. 0.05), got {_describe(value)}")
    return float(value)


def _acks(value: object) -> str:
    normal = {"all": "all", "-1": "all", "1": "1", "0": "0"}
    key = str(value) if _is_int(value) or isinstance(value, str) else None
    if key not in normal:
        raise ValueError(f"{_describe(value)} is not allowed (expected one of: all, -1, 1, 0)")
    return normal[key]


def _producer_rate(value: object) -> float | None:
    if value == "max":
        return None
    rate = parse_rate(value)
    if rate <= 0:
        raise ValueError(f"{value!r} must be above zero (or `max` for no limit)")
    return rate


def _expectation(value: object) -> Expectation:
    if _is_int(value):
        text = str(value)
    elif isinstance(value, str):
        text = value.strip()
    else:
        raise ValueError(f"expected a count such as 0, '>0' or '<=3', got {_describe(value)}")
    match = _EXPECTATION_RE.match(text)
    if match is None:
        raise ValueError(f"{value!r} is not an expectation (expected N, ==N, >N, >=N, <N or <=N with N >= 0)")
    expectation = Expectation(match.group(1) or "==", int(match.group(2)))
    if expectation.op == "<" and expectation.value == 0:
        raise ValueError(f"{value!r} can never hold: a count is never below 0")
    return expectation


@dataclass(frozen=True)
class _Known:
    """What other sections defined, for cross-references; None where that section is broken."""

    broker_ids: tuple[int, ...] | None
    controller_ids: tuple[int, ...] | None
    racks: frozenset[str] | None
    topics: dict[str, int | None] | None  # name -> partitions (None if that count is broken)


class _Parser:
    """Walks one topology, collecting errors; each method returns a spec or _INVALID."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.errors: list[str] = []

    def error(self, path: str, message: str) -> None:
        self.errors.append(f"{self.source}: {path}: {message}" if path else f"{self.source}: {message}")

    def mapping(
        self, value: object, path: str, allowed: Iterable[str], required: Iterable[str] = (), what: str = ""
    ) -> dict[Any, Any] | None:
        allowed = tuple(allowed)
        if not isinstance(value, dict):
            self.error(path, f"expected a mapping{what}, got {_describe(value)}")
            return None
        for key in value:
            if key not in allowed:
                self.error(_join(path, key), f"unknown key (expected one of: {', '.join(allowed)})")
        for key in required:
            if key not in value:
                self.error(_join(path, key), "required key missing")
        return value

    def field(self, m: dict[Any, Any], key: str, path: str, convert: Callable[[object], Any], default: Any = _ABSENT) -> Any:
        if key not in m:
            return _INVALID if default is _ABSENT else default
        try:
            return convert(m[key])
        except ValueError as exc:
            self.error(_join(path, key), str(exc))
            return _INVALID

    def sequence(self, value: object, path: str, what: str, min_len: int = 0) -> list[Any] | None:
        if not isinstance(value, list):
            self.error(path, f"expected a list of {what}, got {_describe(value)}")
            return None
        if len(value) < min_len:
            self.error(path, f"expected at least {min_len} {what}, got {_describe(value)}")
            return None
        return value

    # -- sections -------------------------------------------------------------------------

    def topology(self, data: object) -> Topology | None:
        if data is None:
            self.error("", "the file is empty (expected a mapping with at least name, cluster.brokers and topics)")
            return None
        keys = ("name", "description", "seed", "duration", "timing", "cluster", "protocol", "storage",
                "network", "topics", "workload", "faults", "expect")  # fmt: skip
        if not isinstance(data, dict):
            self.error("", f"expected a mapping at the top level (keys: {', '.join(keys)}), got {_describe(data)}")
            return None
        self.mapping(data, "", keys, required=("name", "topics"))
        m = data
        name = self.field(m, "name", "", _pattern(_NAME_RE, "a name (letters, digits, '.', '_', '-')"))
        description = self.field(m, "description", "", _text, "")
        seed = self.field(m, "seed", "", _int(0), 0)
        duration = self.field(m, "duration", "", _positive_duration, 10.0)
        timing = self.timing(m.get("timing", {}), "timing")
        cluster = self.cluster(m.get("cluster", {}), "cluster")
        protocol = self.protocol(m.get("protocol", {}), "protocol")
        storage = self.storage(m.get("storage", {}), "storage")
        network = self.network(m.get("network", {}), "network")
        brokers = None if cluster is _INVALID else cluster.brokers
        topics = self.topics(m["topics"], "topics", brokers) if "topics" in m else _INVALID
        known = self.known(cluster, topics, m.get("topics"))
        workload = self.workload(m.get("workload", {}), "workload", known)
        total_nodes = None if cluster is _INVALID else len(cluster.brokers) + len(cluster.controllers)
        run_length = None if duration is _INVALID else duration
        faults = self.faults(m.get("faults", []), "faults", known, run_length, total_nodes)
        expect = self.expect(m.get("expect", {}), "expect")
        parts = (name, description, seed, duration, timing, cluster, protocol, storage, network,
                 topics, workload, faults, expect)  # fmt: skip
        if not _valid(*parts) or self.errors:
            return None
        return Topology(*parts, source=self.source)

    def known(self, cluster: Any, topics: Any, raw_topics: object) -> _Known:
        if cluster is _INVALID:
            broker_ids = controller_ids = racks = None
        else:
            broker_ids = tuple(b.id for b in cluster.brokers)
            controller_ids = tuple(c.id for c in cluster.controllers)
            racks = frozenset(b.rack for b in cluster.brokers if b.rack is not None)
        if topics is not _INVALID:
            return _Known(broker_ids, controller_ids, racks, {t.name: t.partitions for t in topics})
        # Topics are broken, but names that did parse still let references be checked, as long
        # as every entry's name parsed (else an unknown name may be the broken one).
        names: dict[str, int | None] = {}
        for entry in raw_topics if isinstance(raw_topics, list) else []:
            if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
                return _Known(broker_ids, controller_ids, racks, None)
            count = entry.get("partitions", 1)
            names[entry["name"]] = count if _is_int(count) and count >= 1 else None
        return _Known(broker_ids, controller_ids, racks, names or None)

    def timing(self, value: object, path: str) -> Timing | Any:
        defaults = Timing()
        fields = [f.name for f in dataclasses.fields(Timing)]
        m = self.mapping(value, path, fields)
        if m is None:
            return _INVALID
        values = {}
        for name in fields:
            if name == "controller_election_timeout":
                convert: Callable[[object], Any] = _positive_range
            elif name == "fetch_max_wait":
                convert = parse_duration
            else:
                convert = _positive_duration
            values[name] = self.field(m, name, path, convert, getattr(defaults, name))
        if not _valid(*values.values()):
            return _INVALID
        if values["session_timeout"] <= values["heartbeat_interval"]:
            self.error(
                _join(path, "session_timeout"),
                f"{format_duration(values['session_timeout'])} must be longer than heartbeat_interval "
                f"({format_duration(values['heartbeat_interval'])}), or every broker is fenced between heartbeats",
            )
            return _INVALID
        return Timing(**values)

    def cluster(self, value: object, path: str) -> ClusterSpec | Any:
        m = self.mapping(value, path, ("controllers", "brokers"), required=("brokers",))
        if m is None:
            return _INVALID
        controllers = self.nodes(m.get("controllers", 1), _join(path, "controllers"), "controller")
        brokers = self.nodes(m["brokers"], _join(path, "brokers"), "broker") if "brokers" in m else _INVALID
        if not _valid(controllers, brokers):
            return _INVALID
        without_rack = [b.id for b in brokers if b.rack is None]
        if without_rack and len(without_rack) < len(brokers):
            self.error(
                _join(path, "brokers"),
                f"brokers {', '.join(map(str, without_rack))} have no rack while others do "
                "(give every broker a rack, or none)",
            )
            return _INVALID
        return ClusterSpec(controllers=controllers, brokers=brokers)

    def nodes(self, value: object, path: str, kind: str) -> tuple[NodeSpec, ...] | Any:
        """A count, a list of {id, rack}, or the shorthand {count, racks}."""
        if _is_int(value):
            if value < 1:
                self.error(path, f"{value} is too small (expected at least one {kind})")
                return _INVALID
            return tuple(NodeSpec(kind, i) for i in range(1, value + 1))
        if isinstance(value, dict):
            self.mapping(value, path, ("count", "racks"), required=("count",))
            count = self.field(value, "count", path, _int(1))
            racks = self.field(value, "racks", path, _rack_list, None)
            if not _valid(count, racks):
                return _INVALID
            return tuple(NodeSpec(kind, i, racks[(i - 1) % len(racks)] if racks else None) for i in range(1, count + 1))
        entries = self.sequence(value, path, f"{kind} ({{id, rack}}) in a list, a count or {{count, racks}}", min_len=1)
        if entries is None:
            return _INVALID
        nodes: list[NodeSpec] = []
        first_index: dict[int, int] = {}
        for index, entry in enumerate(entries):
            entry_path = _join(path, index)
            e = self.mapping(entry, entry_path, ("id", "rack"), required=("id",), what=" {id, rack}")
            if e is None:
                continue
            node_id = self.field(e, "id", entry_path, _int(1))
            rack = self.field(e, "rack", entry_path, _rack, None)
            if not _valid(node_id, rack):
                continue
            if node_id in first_index:
                self.error(
                    _join(entry_path, "id"),
                    f"{node_id} is already the id of {_join(path, first_index[node_id])} (ids must be unique)",
                )
                continue
            first_index[node_id] = index
            nodes.append(NodeSpec(kind, node_id, rack))
        return tuple(nodes) if len(nodes) == len(entries) else _INVALID

    def protocol(self, value: object, path: str) -> ProtocolSpec | Any:
        m = self.mapping(value, path, [f.name for f in dataclasses.fields(ProtocolSpec)])
        if m is None:
            return _INVALID
        d = ProtocolSpec()
        values = {
            "truncation": self.field(m, "truncation", path, _choice("leader-epoch", "high-watermark"), d.truncation),
            "elr": self.field(m, "elr", path, _bool, d.elr),
            "unclean_leader_election": self.field(m, "unclean_leader_election", path, _bool, d.unclean_leader_election),
            "unclean_recovery": self.field(
                m, "unclean_recovery", path, _choice("none", "proactive", "balanced", "manual"), d.unclean_recovery
            ),
            "fencing": self.field(m, "fencing", path, _choice("kraft", "zookeeper"), d.fencing),
        }
        return ProtocolSpec(**values) if _valid(*values.values()) else _INVALID

    def storage(self, value: object, path: str) -> StorageSpec | Any:
        m = self.mapping(value, path, [f.name for f in dataclasses.fields(StorageSpec)])
        if m is None:
            return _INVALID
        d = StorageSpec()
        values = {
            "medium": self.field(m, "medium", path, _choice("disk", "tmpfs"), d.medium),
            "fsync": self.field(m, "fsync", path, _choice("real", "simulated"), d.fsync),
            "writeback": self.field(m, "writeback", path, _positive_duration, d.writeback),
            "segment_bytes": self.field(m, "segment_bytes", path, _segment_bytes, d.segment_bytes),
        }
        return StorageSpec(**values) if _valid(*values.values()) else _INVALID

    def network(self, value: object, path: str) -> NetworkSpec | Any:
        m = self.mapping(value, path, [f.name for f in dataclasses.fields(NetworkSpec)])
        if m is None:
            return _INVALID
        backend = self.field(m, "backend", path, _choice("userspace", "netns"), "userspace")
        # ipc sockets are files and ignore network namespaces (DESIGN 5), so netns means tcp.
        transport = self.field(m, "transport", path, _choice("ipc", "tcp"), "tcp" if backend == "netns" else "ipc")
        if not _valid(backend, transport):
            return _INVALID
        if backend == "netns" and transport == "ipc":
            self.error(_join(path, "transport"), "ipc sockets ignore network namespaces (expected tcp with backend netns)")
            return _INVALID
        return NetworkSpec(backend, transport)

    def topics(self, value: object, path: str, brokers: tuple[NodeSpec, ...] | None) -> tuple[TopicSpec, ...] | Any:
        entries = self.sequence(value, path, "topic {name, partitions, replication_factor, ...}", min_len=1)
        if entries is None:
            return _INVALID
        topics: list[TopicSpec] = []
        seen: dict[str, int] = {}
        for index, entry in enumerate(entries):
            topic = self.topic_spec(entry, _join(path, index), brokers)
            if topic is _INVALID:
                continue
            if topic.name in seen:
                self.error(_join(_join(path, index), "name"), f"{topic.name!r} is already the name of {path}[{seen[topic.name]}]")
                continue
            seen[topic.name] = index
            topics.append(topic)
        return tuple(topics) if len(topics) == len(entries) else _INVALID

    def topic_spec(self, value: object, path: str, brokers: tuple[NodeSpec, ...] | None) -> TopicSpec | Any:
        keys = ("name", "partitions", "replication_factor", "min_insync_replicas", "flush", "placement", "assignment")
        m = self.mapping(value, path, keys, required=("name",))
        if m is None:
            return _INVALID
        name = self.field(m, "name", path, _pattern(_TOPIC_NAME_RE, "a topic name (letters, digits, '.', '_', '-')"))
        partitions = self.field(m, "partitions", path, _int(1), 1)
        default_rf = min(3, len(brokers)) if brokers else 1
        rf = self.field(m, "replication_factor", path, _int(1), default_rf)
        if rf is not _INVALID and brokers is not None and rf > len(brokers):
            self.error(_join(path, "replication_factor"), f"{rf} is larger than the number of brokers ({len(brokers)})")
            rf = _INVALID
        min_isr = self.field(m, "min_insync_replicas", path, _int(1), min(2, rf) if rf is not _INVALID else 1)
        if _valid(rf, min_isr) and min_isr > rf:
            self.error(_join(path, "min_insync_replicas"), f"{min_isr} is larger than replication_factor ({rf})")
            min_isr = _INVALID
        flush = self.field(m, "flush", path, _flush, _DEFAULT_FLUSH)
        placement = self.field(m, "placement", path, _choice("rack-aware", "round-robin", "explicit"), "rack-aware")
        assignment: Any = None
        if placement == "explicit":
            if "assignment" not in m:
                self.error(_join(path, "assignment"), "required with placement: explicit (a mapping partition -> list of broker ids)")
                assignment = _INVALID
            elif _valid(partitions, rf):
                assignment = self.assignment(m["assignment"], _join(path, "assignment"), partitions, rf, brokers)
        elif "assignment" in m and placement is not _INVALID:
            self.error(_join(path, "assignment"), f"only allowed with placement: explicit (placement is {placement})")
            assignment = _INVALID
        parts = (name, partitions, rf, min_isr, flush, placement, assignment)
        return TopicSpec(*parts) if _valid(*parts) else _INVALID

    def assignment(
        self, value: object, path: str, partitions: int, rf: int, brokers: tuple[NodeSpec, ...] | None
    ) -> dict[int, tuple[int, ...]] | Any:
        if not isinstance(value, dict):
            self.error(path, f"expected a mapping partition -> list of broker ids, got {_describe(value)}")
            return _INVALID
        broker_ids = None if brokers is None else {b.id for b in brokers}
        result: dict[int, tuple[int, ...]] = {}
        ok = True
        for key, replicas in value.items():
            key_path = _join(path, key)
            if not _is_int(key) or not 0 <= key < partitions:
                self.error(key_path, f"not a partition of this topic (expected partitions 0..{partitions - 1})")
                ok = False
                continue
            problem = _replica_list_problem(replicas, broker_ids)
            if problem is None and len(replicas) != rf:
                problem = f"has {len(replicas)} replicas (expected replication_factor {rf})"
            if problem is not None:
                self.error(key_path, problem)
                ok = False
                continue
            result[key] = tuple(replicas)
        missing = [p for p in range(partitions) if p not in value]
        if missing:
            self.error(path, f"partitions {', '.join(map(str, missing))} have no replicas (expected every partition 0..{partitions - 1})")
            ok = False
        return dict(sorted(result.items())) if ok else _INVALID

    def workload(self, value: object, path: str, known: _Known) -> WorkloadSpec | Any:
        m = self.mapping(value, path, ("producers", "consumers"))
        if m is None:
            return _INVALID
        producers = self.clients(m.get("producers", []), _join(path, "producers"), known, self.producer)
        consumers = self.clients(m.get("consumers", []), _join(path, "consumers"), known, self.consumer)
        return WorkloadSpec(producers, consumers) if _valid(producers, consumers) else _INVALID

    def clients(self, value: object, path: str, known: _Known, parse: Callable[..., Any]) -> tuple[Any, ...] | Any:
        entries = self.sequence(value, path, "client groups")
        if entries is None:
            return _INVALID
        specs = [parse(entry, _join(path, index), known) for index, entry in enumerate(entries)]
        return tuple(specs) if _valid(*specs) else _INVALID

    def client_topic(self, m: dict[Any, Any], path: str, known: _Known) -> tuple[str, int | None] | Any:
        """The topic of a client group, and its partition count when known."""
        if "topic" not in m:
            if known.topics is not None and len(known.topics) == 1:
                (only,) = known.topics.items()
                return only
            if known.topics is not None:
                self.error(_join(path, "topic"), "required key missing (there is more than one topic)")
            return _INVALID
        topic = m["topic"]
        if not isinstance(topic, str):
            self.error(_join(path, "topic"), f"expected a topic name, got {_describe(topic)}")
            return _INVALID
        if known.topics is None:
            return _INVALID
        if topic not in known.topics:
            self.error(_join(path, "topic"), f"unknown topic {topic!r} (topics: {', '.join(known.topics)})")
            return _INVALID
        return topic, known.topics[topic]

    def producer(self, value: object, path: str, known: _Known) -> ProducerSpec | Any:
        keys = ("count", "topic", "acks", "rate", "batch", "retries", "partitions")
        m = self.mapping(value, path, keys)
        if m is None:
            return _INVALID
        count = self.field(m, "count", path, _int(1), 1)
        topic = self.client_topic(m, path, known)
        acks = self.field(m, "acks", path, _acks, "all")
        rate = self.field(m, "rate", path, _producer_rate, 100.0)
        batch = self.field(m, "batch", path, _int(1), 10)
        retries = self.field(m, "retries", path, _int(0), 5)
        partitions: Any = None
        if "partitions" in m:
            limit = topic[1] if topic is not _INVALID else None
            problem = _partition_list_problem(m["partitions"], limit)
            if problem is not None:
                self.error(_join(path, "partitions"), problem)
                partitions = _INVALID
            else:
                partitions = tuple(m["partitions"])
        parts = (count, topic, acks, rate, batch, retries, partitions)
        if not _valid(*parts):
            return _INVALID
        return ProducerSpec(count, topic[0], acks, rate, batch, retries, partitions)

    def consumer(self, value: object, path: str, known: _Known) -> ConsumerSpec | Any:
        m = self.mapping(value, path, ("count", "topic", "from"))
        if m is None:
            return _INVALID
        count = self.field(m, "count", path, _int(1), 1)
        topic = self.client_topic(m, path, known)
        start = self.field(m, "from", path, _choice("earliest", "latest"), "earliest")
        if not _valid(count, topic, start):
            return _INVALID
        return ConsumerSpec(count, topic[0], start)

    # -- faults ---------------------------------------------------------------------------

    def faults(
        self, value: object, path: str, known: _Known, duration: float | None, total_nodes: int | None
    ) -> tuple[FaultSpec | NemesisSpec, ...] | Any:
        entries = self.sequence(value, path, "faults")
        if entries is None:
            return _INVALID
        specs: list[Any] = []
        for index, entry in enumerate(entries):
            entry_path = _join(path, index)
            if isinstance(entry, dict) and "nemesis" in entry:
                self.mapping(entry, entry_path, ("nemesis",))
                specs.append(self.nemesis(entry["nemesis"], _join(entry_path, "nemesis"), known, duration, total_nodes))
            else:
                specs.append(self.fault(entry, entry_path, known, duration))
        if not _valid(*specs):
            return _INVALID
        return tuple(sorted(specs, key=lambda s: s.at if isinstance(s, FaultSpec) else s.start))

    def fault(self, value: object, path: str, known: _Known, duration: float | None) -> FaultSpec | Any:
        if not isinstance(value, dict):
            self.error(path, f"expected a mapping {{at, do, ...}} or {{nemesis: {{...}}}}, got {_describe(value)}")
            return _INVALID
        do = self.field(value, "do", path, _choice(*FAULT_ACTIONS))
        if "do" not in value:
            self.error(_join(path, "do"), f"required key missing (one of: {', '.join(FAULT_ACTIONS)})")
        at = self.field(value, "at", path, parse_duration)
        if "at" not in value:
            self.error(_join(path, "at"), "required key missing (when the fault fires, e.g. 5s)")
        if at is not _INVALID and duration is not None and at > duration:
            self.error(_join(path, "at"), f"{format_duration(at)} is after the end of the run (duration {format_duration(duration)})")
            at = _INVALID
        if do is _INVALID:
            return _INVALID
        allowed = ("at", "do") + _ACTION_KEYS[do]
        self.mapping(value, path, allowed)
        checker = _FaultChecker(self, path, value, known)
        target, params = checker.check(do)
        if not _valid(at, target) or checker.failed or any(k not in allowed for k in value):
            return _INVALID
        return FaultSpec(at, do, target, params)

    def nemesis(
        self, value: object, path: str, known: _Known, duration: float | None, total_nodes: int | None
    ) -> NemesisSpec | Any:
        m = self.mapping(value, path, ("from", "until", "every", "do", "target", "max_down"), required=("do",))
        if m is None:
            return _INVALID
        start = self.field(m, "from", path, parse_duration, 0.0)
        until = self.field(m, "until", path, parse_duration, duration if duration is not None else _INVALID)
        every = self.field(m, "every", path, _positive_range, (2.0, 4.0))
        do = self.field(m, "do", path, _names_from(NEMESIS_ACTIONS, "nemesis actions"))
        max_down = self.field(m, "max_down", path, _int(1), 1)
        targets: Any = ("random-broker",)
        if "target" in m:
            targets = self.nemesis_targets(m["target"], _join(path, "target"), known)
        if _valid(start, until) and start >= until:
            self.error(_join(path, "until"), f"{format_duration(until)} is not after from ({format_duration(start)})")
            until = _INVALID
        if until is not _INVALID and duration is not None and until > duration:
            self.error(_join(path, "until"), f"{format_duration(until)} is after the end of the run (duration {format_duration(duration)})")
            until = _INVALID
        if max_down is not _INVALID and total_nodes is not None and max_down >= total_nodes:
            self.error(_join(path, "max_down"), f"{max_down} must be less than the number of nodes ({total_nodes})")
            max_down = _INVALID
        parts = (start, until, every, do, targets, max_down)
        return NemesisSpec(*parts) if _valid(*parts) else _INVALID

    def nemesis_targets(self, value: object, path: str, known: _Known) -> tuple[str, ...] | Any:
        entries = self.sequence(value, path, "targets", min_len=1)
        if entries is None:
            return _INVALID
        ok = True
        for index, target in enumerate(entries):
            problem = _target_problem(target, known)
            if problem is None and target in ("clients", "stopped", "paused"):
                problem = f"{target!r} cannot be a nemesis target (the nemesis takes down nodes that are up)"
            if problem is not None:
                self.error(_join(path, index), problem)
                ok = False
        return tuple(entries) if ok else _INVALID

    def expect(self, value: object, path: str) -> dict[str, Expectation] | Any:
        m = self.mapping(value, path, EXPECT_KEYS)
        if m is None:
            return _INVALID
        result: dict[str, Expectation] = {}
        for key in m:
            if key not in EXPECT_KEYS:
                continue
            convert = _converged if key == "converged" else _expectation
            result[key] = self.field(m, key, path, convert)
        if not _valid(*result.values()) or len(result) != len(m):
            return _INVALID
        return result


def _segment_bytes(value: object) -> int:
    size = parse_size(value)
    if size <= 0:
        raise ValueError(f"{value!r} must be above zero")
    return size


def _rack_list(value: object) -> tuple[str, ...]:
    if not isinstance(value, list) or not value:
        raise ValueError(f"expected a non-empty list of rack names, got {_describe(value)}")
    racks = tuple(_rack(r) for r in value)
    if len(set(racks)) != len(racks):
        raise ValueError(f"{value} names a rack twice (expected distinct rack names)")
    return racks


def _converged(value: object) -> Expectation:
    return Expectation("==", int(_bool(value)))


def _names_from(options: tuple[str, ...], what: str) -> Callable[[object], tuple[str, ...]]:
    def convert(value: object) -> tuple[str, ...]:
        if not isinstance(value, list) or not value:
            raise ValueError(f"expected a non-empty list of {what} ({', '.join(options)}), got {_describe(value)}")
        bad = [v for v in value if v not in options]
        if bad:
            raise ValueError(f"unknown {what} {', '.join(map(repr, bad))} (expected some of: {', '.join(options)})")
        return tuple(value)

    return convert


def _flush(value: object) -> FlushPolicy:
    if value == "always":
        return FlushPolicy(always=True)
    if value == "on-roll":
        return FlushPolicy(on_roll=True)
    if not isinstance(value, dict) or not value or set(value) - {"messages", "interval"}:
        raise ValueError(
            f"{_describe(value)} is not a flush policy (expected always, on-roll, or {{messages: N, interval: D}} with either or both keys)"
        )
    messages = _int(1)(value["messages"]) if "messages" in value else None
    interval = _positive_duration(value["interval"]) if "interval" in value else None
    return FlushPolicy(messages=messages, interval=interval)


def _replica_list_problem(replicas: object, broker_ids: set[int] | None) -> str | None:
    if not isinstance(replicas, list) or not replicas or not all(_is_int(r) for r in replicas):
        return f"expected a non-empty list of broker ids, got {_describe(replicas)}"
    if len(set(replicas)) != len(replicas):
        return f"{replicas} names a broker twice (expected distinct broker ids)"
    if broker_ids is not None:
        unknown = [r for r in replicas if r not in broker_ids]
        if unknown:
            return f"no broker {', '.join(map(str, unknown))} (brokers: {', '.join(map(str, sorted(broker_ids)))})"
    return None


def _partition_list_problem(value: object, partitions: int | None) -> str | None:
    if not isinstance(value, list) or not value or not all(_is_int(p) for p in value):
        return f"expected a non-empty list of partition numbers, got {_describe(value)}"
    if len(set(value)) != len(value):
        return f"{value} names a partition twice"
    if partitions is not None:
        outside = [p for p in value if not 0 <= p < partitions]
        if outside:
            return f"no partition {', '.join(map(str, outside))} (the topic has partitions 0..{partitions - 1})"
    return None


def _topic_partition_problem(text: str, known: _Known) -> str | None:
    """None if `text` is TOPIC/P naming a partition that exists (or can't be checked)."""
    match = _TOPIC_PARTITION_RE.match(text)
    if match is None:
        return f"{text!r} is not TOPIC/PARTITION (e.g. orders/0)"
    topic, partition = match.group(1), int(match.group(2))
    if known.topics is None:
        return None
    if topic not in known.topics:
        return f"unknown topic {topic!r} in {text!r} (topics: {', '.join(known.topics)})"
    count = known.topics[topic]
    if count is not None and partition >= count:
        return f"{text!r}: topic {topic} has partitions 0..{count - 1}"
    return None


def _target_problem(target: object, known: _Known) -> str | None:
    """None if `target` follows the target grammar (DESIGN 6) and names things that exist."""
    if not isinstance(target, str):
        return f"expected a target ({TARGET_GRAMMAR}), got {_describe(target)}"
    if target in _TARGET_WORDS:
        return None
    kind, colon, rest = target.partition(":")
    if colon and kind in ("broker", "controller"):
        if not rest.isdigit():
            return f"{target!r}: expected {kind}:N with N a {kind} id"
        ids = known.broker_ids if kind == "broker" else known.controller_ids
        if ids is not None and int(rest) not in ids:
            return f"{target!r}: there is no {kind} {rest} ({kind} ids: {', '.join(map(str, ids))})"
        return None
    if colon and kind == "rack":
        if known.racks is not None and rest not in known.racks:
            racks = ", ".join(sorted(known.racks)) or "no broker has a rack"
            return f"{target!r}: no broker is in rack {rest!r} (racks: {racks})"
        return None
    match = _PARTITION_TARGET_RE.match(target)
    if match is not None:
        return _topic_partition_problem(match.group(2), known)
    return f"unknown target {target!r} (expected one of: {TARGET_GRAMMAR})"


# Keys each fault action takes besides `at` and `do`.
_ACTION_KEYS: dict[str, tuple[str, ...]] = {
    "kill": ("target",),
    "pause": ("target",),
    "resume": ("target",),
    "restart": ("target",),
    "shutdown": ("target",),
    "lossy-crash": ("target", "loss"),
    "disk-loss": ("target",),
    "partition": ("groups", "shape", "target", "from", "to"),
    "heal": (),
    "slow": ("delay", "jitter", "loss", "duplicate", "from", "to"),
    "reassign": ("partition", "replicas"),
    "elect-preferred": ("partition",),
    "elect": ("partition", "target"),
}
_DEFAULT_TARGETS = {"restart": "stopped", "resume": "paused"}
_NETWORK_ACTIONS = frozenset({"partition", "slow"})


class _FaultChecker:
    """The per-action rules of one fault entry; `failed` is set when any was broken."""

    def __init__(self, parser: _Parser, path: str, m: dict[Any, Any], known: _Known) -> None:
        self.parser, self.path, self.m, self.known = parser, path, m, known
        self.failed = False

    def error(self, key: str, message: str) -> None:
        self.parser.error(_join(self.path, key), message)
        self.failed = True

    def require(self, do: str, key: str, what: str) -> bool:
        if key in self.m:
            return True
        self.error(key, f"required key missing ({do} needs {what})")
        return False

    def target(self, key: str, do: str, value: object | None = None) -> str | None:
        value = self.m[key] if value is None else value
        problem = _target_problem(value, self.known)
        if problem is None and value == "clients" and do not in _NETWORK_ACTIONS:
            problem = "clients can only be named by partition and slow faults"
        if problem is not None:
            self.error(key, problem)
            return None
        return value  # type: ignore[return-value]

    def check(self, do: str) -> tuple[str | None, dict[str, Any]]:
        """(target, params) of the fault; target None where the action has none."""
        m = self.m
        params: dict[str, Any] = {}
        target: str | None = None
        if do in ("kill", "pause", "shutdown", "lossy-crash", "disk-loss", "restart", "resume"):
            if do in _DEFAULT_TARGETS and "target" not in m:
                target = _DEFAULT_TARGETS[do]
            elif self.require(do, "target", f"a target ({TARGET_GRAMMAR})"):
                target = self.target("target", do)
        if do == "lossy-crash" and self.require(do, "loss", f"loss: {' | '.join(LOSS_MODES)}"):
            if m["loss"] in LOSS_MODES:
                params["loss"] = m["loss"]
            else:
                self.error("loss", f"{_describe(m['loss'])} is not allowed (expected one of: {', '.join(LOSS_MODES)})")
        if do == "partition":
            target = self.partition(params)
        if do == "slow":
            self.slow(params)
        if do == "elect-preferred" and "partition" in m:
            self.topic_partition(params)
        if do in ("reassign", "elect") and self.require(do, "partition", "partition: TOPIC/P"):
            self.topic_partition(params)
        if do == "reassign" and self.require(do, "replicas", "replicas: [broker ids]"):
            problem = _replica_list_problem(m["replicas"], None if self.known.broker_ids is None else set(self.known.broker_ids))
            if problem is None:
                params["replicas"] = tuple(m["replicas"])
            else:
                self.error("replicas", problem)
        if do == "elect" and self.require(do, "target", "target: broker:N, the operator's choice of leader"):
            if isinstance(m["target"], str) and m["target"].startswith("broker:"):
                target = self.target("target", do)
            else:
                self.error("target", f"{_describe(m['target'])}: elect needs broker:N, the broker to make leader")
        return target, params

    def topic_partition(self, params: dict[str, Any]) -> None:
        value = self.m["partition"]
        problem = _topic_partition_problem(value, self.known) if isinstance(value, str) else (
            f"expected TOPIC/PARTITION (e.g. orders/0), got {_describe(value)}"
        )
        if problem is None:
            params["partition"] = value
        else:
            self.error("partition", problem)

    def partition(self, params: dict[str, Any]) -> str | None:
        m = self.m
        if ("groups" in m) == ("shape" in m):
            self.error(
                "groups" if "groups" in m else "shape",
                f"partition needs exactly one of groups: [[...], [...]] or shape: {' | '.join(PARTITION_SHAPES)}",
            )
            return None
        shape = m.get("shape")
        if "groups" in m:
            groups = self.groups(m["groups"])
            if groups is not None:
                params["groups"] = groups
        elif shape not in PARTITION_SHAPES:
            self.error("shape", f"{_describe(shape)} is not allowed (expected one of: {', '.join(PARTITION_SHAPES)})")
            return None
        else:
            params["shape"] = shape
        uses = {"target": shape == "isolate", "from": shape == "one-way", "to": shape == "one-way"}
        for key, used in uses.items():
            if key in m and not used:
                self.error(key, f"only used with shape: {'isolate' if key == 'target' else 'one-way'}")
        if shape == "isolate" and self.require("shape: isolate", "target", "a target to isolate"):
            return self.target("target", "partition")
        if shape == "one-way":
            for key in ("from", "to"):
                if self.require("shape: one-way", key, f"{key}: a target"):
                    found = self.target(key, "partition")
                    if found is not None:
                        params[key] = found
        return None

    def groups(self, value: object) -> tuple[tuple[str, ...], ...] | None:
        if not isinstance(value, list) or len(value) < 2:
            self.error("groups", f"expected a list of at least two groups of targets, got {_describe(value)}")
            return None
        groups: list[tuple[str, ...]] = []
        for index, group in enumerate(value):
            key = f"groups[{index}]"
            if not isinstance(group, list) or not group:
                self.error(key, f"expected a non-empty list of targets, got {_describe(group)}")
                continue
            members = [self.target(f"{key}[{i}]", "partition", member) for i, member in enumerate(group)]
            if None not in members:
                groups.append(tuple(members))  # type: ignore[arg-type]
        return tuple(groups) if len(groups) == len(value) else None

    def slow(self, params: dict[str, Any]) -> None:
        m = self.m
        effects = ("delay", "jitter", "loss", "duplicate")
        if not any(key in m for key in effects):
            self.error("delay", "required key missing (slow needs at least one of delay, jitter, loss, duplicate)")
        for key in effects:
            if key not in m:
                continue
            try:
                params[key] = parse_duration(m[key]) if key in _DURATION_PARAMS else _probability(m[key])
            except ValueError as exc:
                self.error(key, str(exc))
        for key in ("from", "to"):
            if key in m:
                found = self.target(key, "slow")
                if found is not None:
                    params[key] = found


# ---------------------------------------------------------------------------------------------
# Back to the schema's form
# ---------------------------------------------------------------------------------------------


def _topology_to_dict(t: Topology) -> dict[str, Any]:
    timing = {
        f.name: (format_duration_range if f.name == "controller_election_timeout" else format_duration)(
            getattr(t.timing, f.name)
        )
        for f in dataclasses.fields(Timing)
    }
    return {
        "name": t.name,
        "description": t.description,
        "seed": t.seed,
        "duration": format_duration(t.duration),
        "timing": timing,
        "cluster": {
            "controllers": _controllers_to_yaml(t.cluster.controllers),
            "brokers": [_node_to_yaml(b) for b in t.cluster.brokers],
        },
        "protocol": dataclasses.asdict(t.protocol),
        "storage": {
            "medium": t.storage.medium,
            "fsync": t.storage.fsync,
            "writeback": format_duration(t.storage.writeback),
            "segment_bytes": format_size(t.storage.segment_bytes),
        },
        "network": dataclasses.asdict(t.network),
        "topics": [_topic_to_yaml(topic) for topic in t.topics],
        "workload": {
            "producers": [_producer_to_yaml(p) for p in t.workload.producers],
            "consumers": [{"count": c.count, "topic": c.topic, "from": c.from_} for c in t.workload.consumers],
        },
        "faults": [_fault_to_yaml(f) for f in t.faults],
        "expect": {
            key: bool(e.value) if key == "converged" else (e.value if e.op == "==" else str(e))
            for key, e in t.expect.items()
        },
    }


def _node_to_yaml(node: NodeSpec) -> dict[str, Any]:
    return {"id": node.id} if node.rack is None else {"id": node.id, "rack": node.rack}


def _controllers_to_yaml(controllers: tuple[NodeSpec, ...]) -> int | list[dict[str, Any]]:
    if all(c.rack is None and c.id == i for i, c in enumerate(controllers, start=1)):
        return len(controllers)
    return [_node_to_yaml(c) for c in controllers]


def _flush_to_yaml(flush: FlushPolicy) -> str | dict[str, Any]:
    if flush.always:
        return "always"
    if flush.on_roll:
        return "on-roll"
    form: dict[str, Any] = {}
    if flush.messages is not None:
        form["messages"] = flush.messages
    if flush.interval is not None:
        form["interval"] = format_duration(flush.interval)
    return form


def _topic_to_yaml(topic: TopicSpec) -> dict[str, Any]:
    form: dict[str, Any] = {
        "name": topic.name,
        "partitions": topic.partitions,
        "replication_factor": topic.replication_factor,
        "min_insync_replicas": topic.min_insync_replicas,
        "flush": _flush_to_yaml(topic.flush),
        "placement": topic.placement,
    }
    if topic.assignment is not None:
        form["assignment"] = {p: list(replicas) for p, replicas in topic.assignment.items()}
    return form


def _producer_to_yaml(p: ProducerSpec) -> dict[str, Any]:
    form: dict[str, Any] = {
        "count": p.count,
        "topic": p.topic,
        "acks": p.acks,
        "rate": "max" if p.rate is None else format_rate(p.rate),
        "batch": p.batch,
        "retries": p.retries,
    }
    if p.partitions is not None:
        form["partitions"] = list(p.partitions)
    return form


def _fault_to_yaml(fault: FaultSpec | NemesisSpec) -> dict[str, Any]:
    if isinstance(fault, NemesisSpec):
        return {
            "nemesis": {
                "from": format_duration(fault.start),
                "until": format_duration(fault.until),
                "every": format_duration_range(fault.every),
                "do": list(fault.do),
                "target": list(fault.target),
                "max_down": fault.max_down,
            }
        }
    form: dict[str, Any] = {"at": format_duration(fault.at), "do": fault.do}
    if fault.target is not None:
        form["target"] = fault.target
    for key, value in fault.params.items():
        if key in _DURATION_PARAMS:
            form[key] = format_duration(value)
        elif key == "groups":
            form[key] = [list(group) for group in value]
        elif isinstance(value, tuple):
            form[key] = list(value)
        else:
            form[key] = value
    return form
