"""The faults section: one-shot fault entries and the rules of each action, nemesis entries aside.

Each action takes its own keys (DESIGN 6), so an entry is checked against the rules of its `do`,
and a key that action does not take is an error rather than silently ignored.
"""
from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from faults.fault_spec import (
    DURATION_PARAMS,
    FAULT_ACTIONS,
    LOSS_MODES,
    PARTITION_SHAPES,
    FaultSpec,
    NemesisSpec,
)
from faults.targets import TargetError, broker_id
from testbed.config import scalars
from testbed.config.nemesis_section import parse_nemesis
from testbed.config.references import (
    ONLY_CONTROLLER_KEPT,
    TARGET_GRAMMAR,
    Known,
    may_name_only_controller,
    names_one_node,
    partition_named,
    replica_list_problem,
    target_problem,
    topic_named,
    topic_partition_problem,
)
from testbed.config.specs import NodeSpec
from testbed.config.topics_section import TOPIC_NAME_RE, parse_topic
from testbed.config.units import format_duration, parse_duration
from testbed.config.walker import INVALID, Walker, describe, is_digits, is_int, join, valid
from testbed.config.yaml_dump import topic_to_yaml

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
    "add-broker": ("broker", "rebalance"),
    "remove-broker": ("target",),
    "create-topic": ("topic",),
    "delete-topic": ("topic",),
    "add-partitions": ("topic", "count"),
}
#: a key some fault action takes (an entry whose `do` is missing or wrong is checked against these)
_ANY_FAULT_KEY = frozenset({"at", "do"}).union(*_ACTION_KEYS.values())
#: the actions whose validity depends on the brokers and topics of the moment they fire
_ADMIN_ACTIONS = frozenset({"add-broker", "remove-broker", "create-topic", "delete-topic", "add-partitions"})
_DEFAULT_TARGETS = {"restart": "stopped", "resume": "paused"}
_NETWORK_ACTIONS = frozenset({"partition", "slow"})
_BROKER_ACTIONS = frozenset({"add-broker", "remove-broker"})
_TOPIC_ACTIONS = _ADMIN_ACTIONS - _BROKER_ACTIONS


@dataclass
class _Entry:
    """One fault entry as read: its fault (INVALID when any rule was broken), its time (INVALID
    when that was), the action it names (None when that is unknown), and each of its selectors
    that names a partition (key path in the entry, the selector as written), which the walk
    in firing order checks against the topic as it is then."""

    spec: Any
    at: Any = INVALID
    do: str | None = None
    partition_refs: list[tuple[str, str]] = field(default_factory=list)
    #: the id of a broken add-broker whose id is right (its rack is wrong): the walk goes on
    #: with it, so that the membership errors after it are said in the same pass
    added_id: int | None = None


def parse_faults(
    w: Walker, value: object, path: str, known: Known, duration: float | None, total_nodes: int | None
) -> tuple[FaultSpec | NemesisSpec, ...] | Any:
    entries = w.sequence(value, path, "faults")
    if entries is None:
        return INVALID
    # Whether a partition exists depends on the moment a fault fires (R40: add-partitions,
    # delete-topic, create-topic), so where the topics are known the entries are read without
    # the partition ranges, and the walk in firing order checks those, with the time.
    by_moment = known.initial_partitions is not None and known.topics is not None
    reading = dataclasses.replace(known, topics=dict.fromkeys(known.topics or ())) if by_moment else known
    first_error = len(w.errors)
    read: list[_Entry] = []
    for index, entry in enumerate(entries):
        entry_path = join(path, index)
        if isinstance(entry, dict) and "nemesis" in entry:
            w.mapping(entry, entry_path, ("nemesis",))
            read.append(_Entry(parse_nemesis(w, entry["nemesis"], join(entry_path, "nemesis"), known, duration,
                                             total_nodes), do="nemesis"))
        else:
            read.append(_read_fault(w, entry, entry_path, reading, duration))
    specs = [e.spec for e in read]
    if valid(*specs):
        _check_elect_targets(w, specs, path, known)
    _check_firing_order(w, read, path, known, by_moment)
    # the checks in firing order come last: told by entry, a fault's errors read together
    w.errors[first_error:] = sorted(w.errors[first_error:], key=_entry_index(w.source, path))
    if not valid(*specs):
        return INVALID
    # In the file's order, not by time: `faults[i]` is then the same entry in validate's
    # errors, the resolved topology, --dry-run's schedule and faults.jsonl's origins.
    return tuple(specs)


def _entry_index(source: str, path: str) -> Callable[[str], int]:
    entry = re.compile(re.escape(f"{source}: {path}[") + r"(\d+)\]")
    return lambda error: int(m.group(1)) if (m := entry.match(error)) else -1


def action_keys(do: str) -> tuple[str, ...]:
    """The keys fault action `do` takes besides `at` and `do` (none for an unknown action)."""
    return _ACTION_KEYS.get(do, ())


def parse_fault_entry(source: str, entry: dict[str, Any], known: Known) -> tuple[FaultSpec | None, list[str]]:
    """One fault as a topology's `faults:` entry would give it, checked against `known` (the
    Python API's `Cluster.fault`: the cluster as it is now): the fault, or every problem."""
    w = Walker(source)
    spec = _read_fault(w, entry, "fault", known, None).spec
    if w.errors or spec is INVALID:
        return None, w.errors or [f"{source}: fault: invalid"]
    return spec, []


def _check_elect_targets(w: Walker, specs: list[Any], path: str, known: Known) -> None:
    """`elect` must name a replica of its partition: one placed there at the start, or one a
    `reassign` of the run moves there. A partition that a `create-topic` or `add-partitions`
    fault makes is placed when it fires, so its replicas are not known here."""
    if known.replicas is None:
        return
    moved: dict[str, set[int]] = {}
    placed_later: set[str] = set()
    for spec in specs:
        if isinstance(spec, FaultSpec) and spec.do == "reassign":
            moved.setdefault(spec.params["partition"], set()).update(spec.params["replicas"])
        elif isinstance(spec, FaultSpec) and spec.do == "create-topic":
            placed_later.add(spec.params["topic"]["name"])
    for index, spec in enumerate(specs):
        if not (isinstance(spec, FaultSpec) and spec.do == "elect"):
            continue
        partition = spec.params["partition"]
        if partition not in known.replicas or topic_named(partition) in placed_later:
            continue
        broker = broker_id(str(spec.target))
        replicas = known.replicas.get(partition, ())
        if broker not in replicas and broker not in moved.get(partition, set()):
            w.error(join(join(path, index), "target"),
                    f"broker {broker} is not a replica of {partition} (its replicas: {list(replicas)}); "
                    f"elect needs one of them")


def _check_firing_order(w: Walker, read: list[_Entry], path: str, known: Known, by_moment: bool) -> None:
    """R38-R40 over the run, in the order the faults fire, following the broker set and the
    topics (with their replication factors) together: an added broker's id is not in use, a
    removed broker exists then and its removal leaves as many brokers as every topic then
    needs; a created topic's name is free then and its replication factor fits the brokers
    then; a deleted or grown topic exists then; any other fault that names a broker names one
    in the cluster then, and one that names a partition names one of the topic as it is then
    (a topic made again may have fewer or more partitions than before).

    A fault broken otherwise is walked too, for its partitions: each wrong one is its own
    error, all reported at once. Either side is skipped when its section is broken, or when
    an entry that may change it (an admin action of that side, or an unknown action) is
    broken: its own error says why. An add-broker broken only past its id (its rack) still
    adds that id: trial34's missing rack hid three membership errors after it. With `by_moment` the entries were read without the
    partition ranges; when the topics cannot be followed, those are checked against every
    partition the run ever has instead."""
    def blocks(entry: _Entry, actions: frozenset[str]) -> bool:
        known_change = entry.added_id is not None and entry.at is not INVALID  # its broker set is known
        return entry.spec is INVALID and (entry.do is None or entry.do in actions) and not known_change

    brokers = None if known.broker_ids is None or any(blocks(e, _BROKER_ACTIONS) for e in read) \
        else set(known.broker_ids) - known.added_brokers
    topics = None if known.replication is None or any(blocks(e, _TOPIC_ACTIONS) for e in read) \
        else dict(known.replication)  # name -> RF, the topology's
    partitions = dict(known.initial_partitions or {})  # name -> partitions then
    faults = [(i, e) for i, e in enumerate(read) if e.do != "nemesis" and e.at is not INVALID]
    ordered = sorted(faults, key=lambda item: item[1].at)
    removed: set[int] = set()
    ever = set(topics or {}) | {e.spec.params["topic"]["name"] for _, e in ordered
                                if e.do == "create-topic" and e.spec is not INVALID}
    for index, item in ordered:
        entry, when, spec = join(path, index), format_duration(item.at), item.spec
        if item.added_id is not None and spec is INVALID:  # its rack is wrong, its id is not
            if brokers is not None:
                _added_step(w, item.added_id, entry, when, brokers, removed)
        elif spec is not INVALID and spec.do in ("add-broker", "remove-broker"):
            if brokers is not None:
                _broker_step(w, spec, entry, when, brokers, topics or {}, removed)
        elif spec is not INVALID and spec.do in _ADMIN_ACTIONS:
            if topics is not None:
                _topic_step(w, spec, entry, when, topics, brokers, partitions)
        else:
            if brokers is not None and spec is not INVALID:
                _named_brokers_step(w, spec, entry, when, brokers, known)
            if topics is not None:
                _named_topic_step(w, item.partition_refs, entry, when, topics, ever, partitions)
    if not by_moment:
        return  # the entries were read with the partition ranges
    # What the walk did not see: every entry when the topics could not be followed, else the
    # entries whose time is broken (they are in no order).
    unwalked = [(i, e) for i, e in enumerate(read) if e.do != "nemesis" and (topics is None or e.at is INVALID)]
    for index, item in unwalked:
        for key, value in item.partition_refs:
            problem = topic_partition_problem(value, known) if key == "partition" else target_problem(value, known)
            if problem is not None:
                w.error(join(join(path, index), key), problem)


def _selectors(spec: FaultSpec) -> list[tuple[str, str]]:
    """(key path in the entry, selector as written) of each target a fault names: `target`,
    a one-way cut's or slow link's `from` and `to`, each member of a partition's groups."""
    found = [("target", spec.target), ("from", spec.params.get("from")), ("to", spec.params.get("to"))]
    for j, group in enumerate(spec.params.get("groups") or ()):
        found.extend((f"groups[{j}][{k}]", member) for k, member in enumerate(group))
    return [(key, value) for key, value in found if isinstance(value, str)]


def _named_brokers_step(w: Walker, spec: FaultSpec, entry: str, when: str, brokers: set[int],
                        known: Known) -> None:
    """A fault that names a broker (`broker:N` as its `target`, `from`, `to` or in a group, a
    reassignment's replicas) names one in the cluster when it fires: added before it (R38),
    not removed (R39). A `rack:X` names one at least, unless a controller is in that rack."""
    for key, value in _selectors(spec):
        if value.startswith("rack:"):
            _rack_step(w, value[len("rack:"):], join(entry, key), when, brokers, known)
            continue
        try:
            named = broker_id(value)
        except TargetError:  # another kind of target
            continue
        if named not in brokers:
            w.error(join(entry, key), f"broker {named} is not in the cluster at {when} "
                    f"(brokers then: {sorted(brokers)})")
    if spec.do == "reassign":
        gone = [r for r in spec.params.get("replicas", []) if is_int(r) and r not in brokers]
        if gone:
            w.error(join(entry, "replicas"), f"broker {', '.join(map(str, gone))} is not in the cluster at {when} "
                    f"(brokers then: {sorted(brokers)})")


def _rack_step(w: Walker, rack: str, key: str, when: str, brokers: set[int], known: Known) -> None:
    """`rack:X` names a node when its fault fires: one of the rack's brokers is in the cluster
    then, or a controller is in the rack. One whose brokers are all removed before it, or
    added only after it, would act on no node. An unknown rack is its own error."""
    if known.broker_racks is None or rack not in (known.racks or ()) or rack in known.controller_racks:
        return
    members = sorted(b for b, r in known.broker_racks.items() if r == rack)
    if not set(members) & brokers:
        w.error(key, f"rack {rack} has no broker in the cluster at {when} (its brokers {members} are removed "
                     f"before it or added only after it; brokers then: {sorted(brokers)})")


def _named_topic_step(w: Walker, refs: list[tuple[str, str]], entry: str, when: str, topics: dict[str, int],
                      ever: set[str], partitions: dict[str, int]) -> None:
    """A fault that names a partition (`partition: T/P`, `leader-of T/P` as its `target`, `from`,
    `to` or in a group) names one of a topic that exists when it fires: one deleted before it,
    or made only after it, has none to act on (an unknown topic is its own error); and the
    partition is one the topic has then."""
    for key, value in refs:
        named = partition_named(value)
        if named is None:
            continue
        topic, partition = named
        if topic in ever and topic not in topics:
            w.error(join(entry, key), f"{value!r}: topic {topic!r} does not exist at {when} (topics then: "
                    f"{', '.join(sorted(topics)) or 'none'}): deleted before it, or made only after it")
        elif topic in partitions and partition >= partitions[topic]:
            w.error(join(entry, key), f"{value!r}: topic {topic} has partitions 0..{partitions[topic] - 1} "
                    f"at {when}")


def _broker_step(w: Walker, spec: FaultSpec, entry: str, when: str, brokers: set[int], topics: dict[str, int],
                 removed: set[int]) -> None:
    if spec.do == "add-broker":
        _added_step(w, spec.params["broker"]["id"], entry, when, brokers, removed)
        return
    broker = broker_id(str(spec.target))
    if broker not in brokers:
        w.error(join(entry, "target"), f"broker {broker} is not in the cluster at {when} "
                f"(brokers then: {sorted(brokers)})")
        return
    brokers.discard(broker)
    removed.add(broker)
    for topic, rf in sorted(topics.items()):
        if rf > len(brokers):
            w.error(join(entry, "target"), f"removing broker {broker} leaves {len(brokers)} brokers, fewer than "
                    f"the replication factor {rf} of topic {topic!r}; its partitions could not be placed elsewhere")
            return


def membership_problems(source: str, spec: FaultSpec, brokers: set[int], replication: dict[str, int],
                        removed: set[int]) -> list[str]:
    """What R38 and R39 refuse of an `add-broker` or `remove-broker` fired now on a cluster of
    `brokers` (`removed` gone for good) whose topics have `replication` factors: the checks a
    topology's walk in firing order makes, for the Python API's `fault()` (trial35: a second
    `add_broker(4)` was refused only by the controller, its fault recorded as failed)."""
    w = Walker(source)
    _broker_step(w, spec, "fault", "this moment", set(brokers), replication, set(removed))
    return w.errors


def _added_step(w: Walker, broker: int, entry: str, when: str, brokers: set[int], removed: set[int]) -> None:
    if broker in brokers:
        w.error(join(join(entry, "broker"), "id"), f"broker {broker} is in use at {when} "
                f"(brokers then: {sorted(brokers)}); add-broker needs a new id")
    elif broker in removed:
        w.error(join(join(entry, "broker"), "id"), f"broker {broker} was removed earlier in the run, and a run "
                f"does not bring a removed broker back (R39): add-broker needs a new id")
    brokers.add(broker)


def topic_problems(source: str, spec: FaultSpec, topics: dict[str, int], brokers: set[int],
                   partitions: dict[str, int]) -> list[str]:
    """What R40 refuses of a `create-topic`, `delete-topic` or `add-partitions` fired now on a
    cluster of `brokers` holding `topics` (name -> replication factor) of `partitions`: the
    checks a topology's walk in firing order makes, for the Python API's `fault()` (trial38:
    a delete of a topic that did not exist was refused only by the controller, and recorded
    as a failed fault of the run)."""
    w = Walker(source)
    _topic_step(w, spec, "fault", "this moment", dict(topics), set(brokers), dict(partitions))
    return w.errors


def _topic_step(w: Walker, spec: FaultSpec, entry: str, when: str, topics: dict[str, int],
                brokers: set[int] | None, partitions: dict[str, int]) -> None:
    if spec.do == "create-topic":
        name, rf = spec.params["topic"]["name"], spec.params["topic"]["replication_factor"]
        if name in topics:
            w.error(join(join(entry, "topic"), "name"), f"topic {name!r} exists at {when} (topics then: "
                    f"{', '.join(sorted(topics))}); create-topic needs a new name")
        elif brokers is not None and rf > len(brokers):
            w.error(join(join(entry, "topic"), "replication_factor"), f"{rf} is more than the {len(brokers)} "
                    f"brokers in the cluster at {when} ({sorted(brokers)})")
        topics[name] = rf
        partitions[name] = spec.params["topic"]["partitions"]
        return
    name = spec.params["topic"]
    if name not in topics:
        w.error(join(entry, "topic"), f"no topic {name!r} at {when} (topics then: "
                f"{', '.join(sorted(topics)) or 'none'}); {spec.do} needs an existing topic")
    elif spec.do == "delete-topic":
        del topics[name]
        partitions.pop(name, None)
    elif name in partitions and partitions[name] + spec.params["count"] > scalars.MAX_PARTITIONS:
        # the limit is of a topic, not of one fault: two adds of 9,000 made 18,000
        w.error(join(entry, "count"), f"{spec.params['count']:,} more partitions would give topic {name} "
                f"{partitions[name] + spec.params['count']:,} at {when} (it has {partitions[name]:,} then), more than "
                f"a topic may have ({scalars.MAX_PARTITIONS:,})")
    elif name in partitions:
        partitions[name] += spec.params["count"]


def _read_fault(w: Walker, value: object, path: str, known: Known, duration: float | None) -> _Entry:
    if not isinstance(value, dict):
        w.error(path, f"expected a mapping {{at, do, ...}} or {{nemesis: {{...}}}}, got {describe(value)}")
        return _Entry(INVALID)
    do = w.field(value, "do", path, scalars.choice(*FAULT_ACTIONS))
    if "do" not in value:
        w.error(join(path, "do"), f"required key missing (one of: {', '.join(FAULT_ACTIONS)})")
    at = w.field(value, "at", path, parse_duration)
    if "at" not in value:
        w.error(join(path, "at"), "required key missing (when the fault fires, e.g. 5s)")
    if at is not INVALID and duration is not None and at > duration:
        w.error(join(path, "at"), f"{format_duration(at)} is after the end of the run (duration {format_duration(duration)})")
        at = INVALID
    if do is INVALID:  # which keys belong is not known; those of no action at all are named still
        for key in value:
            if key not in _ANY_FAULT_KEY:
                w.error(join(path, key), "unknown key (a fault entry is {at, do, ...} with the keys of its "
                                         "action, or {nemesis: {...}})")
        return _Entry(INVALID, at)
    allowed = ("at", "do") + _ACTION_KEYS[do]
    w.mapping(value, path, allowed)
    checker = _FaultChecker(w, path, value, known)
    target, params = checker.check(do)
    if not valid(at, target) or checker.failed or any(k not in allowed for k in value):
        return _Entry(INVALID, at, do, checker.partition_refs, checker.added_id)
    if do == "disk-loss" and may_name_only_controller(target, known):
        w.note(path, ONLY_CONTROLLER_KEPT)
    return _Entry(FaultSpec(at, do, target, params), at, do, checker.partition_refs)


class _FaultChecker:
    """The per-action rules of one fault entry; `failed` is set when any was broken."""

    def __init__(self, w: Walker, path: str, m: dict[Any, Any], known: Known) -> None:
        self.w, self.path, self.m, self.known = w, path, m, known
        self.failed = False
        #: (key, selector as written) of each selector read that names a partition
        self.partition_refs: list[tuple[str, str]] = []
        self.added_id: int | None = None  # an add-broker's id, read whatever else is wrong with it

    def error(self, key: str, message: str) -> None:
        self.w.error(join(self.path, key), message)
        self.failed = True

    def require(self, do: str, key: str, what: str) -> bool:
        if key in self.m:
            return True
        self.error(key, f"required key missing ({do} needs {what})")
        return False

    _FROM_ENTRY = object()

    def target(self, key: str, do: str, value: object = _FROM_ENTRY) -> str | None:
        """Check one target; `value` is given for list members (which may be null), read
        from the entry otherwise."""
        value = self.m[key] if value is self._FROM_ENTRY else value
        problem = target_problem(value, self.known)
        if problem is None and value == "clients" and do not in _NETWORK_ACTIONS:
            problem = "clients can only be named by partition and slow faults"
        if problem is not None:
            self.error(key, problem)
            return None
        if isinstance(value, str) and partition_named(value) is not None:
            self.partition_refs.append((key, value))
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
                self.error("loss", f"{describe(m['loss'])} is not allowed (expected one of: {', '.join(LOSS_MODES)})")
        if do == "partition":
            target = self.partition(params)
        if do == "slow":
            self.slow(params)
        if do == "elect-preferred" and "partition" in m:
            self.topic_partition(params)
        if do in ("reassign", "elect") and self.require(do, "partition", "partition: TOPIC/P"):
            self.topic_partition(params)
        if do == "reassign" and self.require(do, "replicas", "replicas: [broker ids]"):
            problem = replica_list_problem(m["replicas"], None if self.known.broker_ids is None else set(self.known.broker_ids))
            if problem is None:
                params["replicas"] = tuple(m["replicas"])
                self.below_min_isr(params)
            else:
                self.error("replicas", problem)
        if do == "add-broker" and self.require(do, "broker", "broker: {id, rack}"):
            self.new_broker(params)
        if do == "add-broker":
            params["rebalance"] = self.w.field(m, "rebalance", self.path, scalars.boolean, True)
            self.failed |= not valid(params["rebalance"])
        if do == "remove-broker":
            target = self.broker_target(do, "the broker to take offline", at_start=False)
        if do == "elect":
            target = self.broker_target(do, "the broker to make leader", at_start=True)
        if do == "create-topic" and self.require(do, "topic", "topic: {name, partitions, replication_factor, ...}"):
            self.new_topic(params)
        if do in ("delete-topic", "add-partitions") and self.require(do, "topic", "topic: the name of a topic"):
            self.topic_name(params)
        if do == "add-partitions" and self.require(do, "count", "count: how many partitions to add"):
            params["count"] = self.w.field(m, "count", self.path, scalars.integer(1, scalars.MAX_PARTITIONS))
            self.failed |= not valid(params["count"])
        return target, params

    def new_topic(self, params: dict[str, Any]) -> None:
        """`topic:` of create-topic, read as a topics-section entry (defaults from the starting
        brokers; its replication factor against the brokers when it fires: `_check_admin_order`)."""
        ids = self.known.broker_ids
        brokers = None if ids is None else tuple(NodeSpec("broker", b, None) for b in ids)
        spec = parse_topic(self.w, self.m["topic"], join(self.path, "topic"), brokers, rf_checked_later=True)
        if spec is INVALID:
            self.failed = True
            return
        params["topic"] = topic_to_yaml(spec)  # as a topics entry: faults.jsonl and topology.yaml show it so

    def topic_name(self, params: dict[str, Any]) -> None:
        value = self.m["topic"]
        if isinstance(value, str) and TOPIC_NAME_RE.match(value):
            params["topic"] = value
        else:
            self.error("topic", f"expected a topic name, got {describe(value)}")

    def new_broker(self, params: dict[str, Any]) -> None:
        """`broker: {id, rack}` of add-broker, read as the cluster section reads a broker; a
        rack exactly when the cluster's brokers have racks."""
        path = join(self.path, "broker")
        entry = self.w.mapping(self.m["broker"], path, ("id", "rack"), required=("id",), what=" {id, rack}")
        broker_id = rack = INVALID
        if entry is not None:
            broker_id = self.w.field(entry, "id", path, scalars.integer(1, scalars.MAX_NODE_ID))
            rack = self.w.field(entry, "rack", path, scalars.rack, None)
        if entry is None or not valid(broker_id, rack) or "id" not in entry:
            self.failed = True
            return
        self.added_id = broker_id
        if self.known.racks is not None and bool(self.known.racks) != (rack is not None):
            self.w.error(join(path, "rack"), "the cluster's brokers have racks, so the new one needs one"
                         if self.known.racks else "the cluster's brokers have no rack, so the new one takes none")
            self.failed = True
            return
        params["broker"] = {"id": broker_id, "rack": rack}

    def broker_target(self, do: str, purpose: str, at_start: bool) -> str | None:
        """`target: broker:N`, the one form `elect` and `remove-broker` take. With `at_start`
        the broker must be one the cluster starts with; otherwise `_check_admin_order` checks
        it against the brokers of the moment it fires (one an earlier add-broker added)."""
        if not self.require(do, "target", f"target: broker:N, {purpose}"):
            return None
        value = self.m["target"]
        if isinstance(value, str) and value.startswith("broker:"):
            if at_start:
                return self.target("target", do)
            if is_digits(value.split(":", 1)[1]):
                return value
        self.error("target", f"{describe(value)}: {do} needs broker:N, {purpose}")
        return None

    def below_min_isr(self, params: dict[str, Any]) -> None:
        """A move to fewer replicas than the topic's MinISR is valid (Kafka takes it), but
        acks=all is then acknowledged by fewer copies than MinISR (R20: the ISR must reach
        min(MinISR, RF)): noted, as a tester's reassignment to one replica was not."""
        topic = str(params.get("partition", "")).rpartition("/")[0]
        need = (self.known.min_isr or {}).get(topic)
        have = len(params["replicas"])
        if need is not None and have < need:
            self.w.note(join(self.path, "replicas"), f"{have} replica(s), fewer than the min_insync_replicas of {topic} "
                        f"({need}): acks=all writes are then acknowledged with {have} cop{'y' if have == 1 else 'ies'} "
                        f"(R20: the ISR must reach min(MinISR, RF))")

    def topic_partition(self, params: dict[str, Any]) -> None:
        value = self.m["partition"]
        problem = topic_partition_problem(value, self.known) if isinstance(value, str) else (
            f"expected TOPIC/PARTITION (e.g. orders/0), got {describe(value)}"
        )
        if problem is None:
            params["partition"] = value
            self.partition_refs.append(("partition", value))
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
            self.error("shape", f"{describe(shape)} is not allowed (expected one of: {', '.join(PARTITION_SHAPES)})")
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
            self.ends_differ(params, "one-way cut")
        return None

    def groups(self, value: object) -> tuple[tuple[str, ...], ...] | None:
        if not isinstance(value, list) or len(value) < 2:
            self.error("groups", f"expected a list of at least two groups of targets, got {describe(value)}")
            return None
        groups: list[tuple[str, ...]] = []
        for index, group in enumerate(value):
            key = f"groups[{index}]"
            if not isinstance(group, list) or not group:
                self.error(key, f"expected a non-empty list of targets, got {describe(group)}")
                continue
            members = [self.target(f"{key}[{i}]", "partition", member) for i, member in enumerate(group)]
            twice = sorted({str(m) for m in members if m is not None and members.count(m) > 1})
            if twice:
                self.error(key, f"names {', '.join(twice)} twice (expected each target once in a group)")
            elif None not in members:
                groups.append(tuple(members))  # type: ignore[arg-type]
        return tuple(groups) if len(groups) == len(value) else None

    def ends_differ(self, params: dict[str, Any], what: str) -> None:
        """A one-way cut or a slow link from one node to itself acts on no link (from a group
        to itself, `brokers` to `brokers`, it acts on the links inside the group)."""
        if (params.get("from") is not None and params.get("from") == params.get("to")
                and names_one_node(str(params["to"]))):
            self.error("to", f"{params['to']} is also from: a {what} from a target to itself acts on no link "
                             f"(expected two different targets)")

    def slow(self, params: dict[str, Any]) -> None:
        m = self.m
        effects = ("delay", "jitter", "loss", "duplicate")
        if not any(key in m for key in effects):
            self.error("delay", "required key missing (slow needs at least one of delay, jitter, loss, duplicate)")
        for key in effects:
            if key not in m:
                continue
            try:
                params[key] = parse_duration(m[key]) if key in DURATION_PARAMS else scalars.probability(m[key])
            except ValueError as exc:
                self.error(key, str(exc))
        for key in ("from", "to"):
            if key in m:
                found = self.target(key, "slow")
                if found is not None:
                    params[key] = found
        self.ends_differ(params, "slow link")
