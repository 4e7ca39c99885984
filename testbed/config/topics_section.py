"""The topics section: partition counts, replication, flush policy and replica placement."""
from __future__ import annotations

import re
from typing import Any

from broker.storage.flush import DEFAULT_FLUSH
from testbed.config import scalars
from testbed.config.references import replica_list_problem
from testbed.config.specs import NodeSpec, TopicSpec
from testbed.config.walker import INVALID, Walker, describe, is_int, join, valid

#: Kafka's own rules: at most 249 characters (a partition's directory is `<topic>-<partition>`),
#: and neither `.` nor `..`
TOPIC_NAME_RE = re.compile(r"^(?!\.\.?\Z)[A-Za-z0-9._-]{1,249}\Z")


def parse_topics(w: Walker, value: object, path: str, brokers: tuple[NodeSpec, ...] | None) -> tuple[TopicSpec, ...] | Any:
    entries = w.sequence(value, path, "topic {name, partitions, replication_factor, ...}", min_len=1)
    if entries is None:
        return INVALID
    topics: list[TopicSpec] = []
    seen: dict[str, int] = {}
    for index, entry in enumerate(entries):
        topic = parse_topic(w, entry, join(path, index), brokers)
        if topic is INVALID:
            continue
        if topic.name in seen:
            w.error(join(join(path, index), "name"), f"{topic.name!r} is already the name of {path}[{seen[topic.name]}]")
            continue
        seen[topic.name] = index
        topics.append(topic)
    return tuple(topics) if len(topics) == len(entries) else INVALID


def parse_topic(w: Walker, value: object, path: str, brokers: tuple[NodeSpec, ...] | None,
                rf_checked_later: bool = False) -> TopicSpec | Any:
    """One topic entry: of the topics section, or of a `create-topic` fault (the same fields;
    its replication factor is checked against the brokers of the moment it fires, so
    `rf_checked_later`)."""
    keys = ("name", "partitions", "replication_factor", "min_insync_replicas", "flush", "placement", "assignment",
            "placement_seed")
    m = w.mapping(value, path, keys, required=("name",))
    if m is None:
        return INVALID
    name = w.field(m, "name", path, scalars.pattern(TOPIC_NAME_RE, "a topic name (at most 249 letters, digits, '.', '_', '-'; not '.' or '..')"))
    partitions = w.field(m, "partitions", path, scalars.integer(1, scalars.MAX_PARTITIONS), 1)
    default_rf = min(3, len(brokers)) if brokers else 1
    rf = w.field(m, "replication_factor", path, scalars.integer(1, scalars.MAX_NODES), default_rf)
    if rf is not INVALID and brokers is not None and rf > len(brokers) and not rf_checked_later:
        w.error(join(path, "replication_factor"), f"{rf} is larger than the number of brokers ({len(brokers)})")
        rf = INVALID
    min_isr = w.field(m, "min_insync_replicas", path, scalars.integer(1), min(2, rf) if rf is not INVALID else 1)
    if valid(rf, min_isr) and min_isr > rf:
        w.error(join(path, "min_insync_replicas"), f"{min_isr} is larger than replication_factor ({rf})")
        min_isr = INVALID
    flush = w.field(m, "flush", path, scalars.flush, DEFAULT_FLUSH)
    placement = w.field(m, "placement", path, scalars.choice("rack-aware", "round-robin", "explicit"), "rack-aware")
    assignment: Any = None
    if placement == "explicit":
        if "assignment" not in m:
            w.error(join(path, "assignment"), "required with placement: explicit (a mapping partition -> list of broker ids)")
            assignment = INVALID
        elif valid(partitions, rf):
            assignment = _parse_assignment(w, m["assignment"], join(path, "assignment"), partitions, rf, brokers)
    elif "assignment" in m and placement is not INVALID:
        w.error(join(path, "assignment"), f"only allowed with placement: explicit (placement is {placement})")
        assignment = INVALID
    placement_seed = w.field(m, "placement_seed", path, scalars.integer(0, 2**63 - 1), None)
    if placement_seed is not None and placement == "explicit":
        w.error(join(path, "placement_seed"), "only allowed with placement: round-robin or rack-aware "
                                              "(placement is explicit: the assignment says where every replica goes)")
        placement_seed = INVALID
    parts = (name, partitions, rf, min_isr, flush, placement, assignment, placement_seed)
    return TopicSpec(*parts) if valid(*parts) else INVALID


def _parse_assignment(
    w: Walker, value: object, path: str, partitions: int, rf: int, brokers: tuple[NodeSpec, ...] | None
) -> dict[int, tuple[int, ...]] | Any:
    if not isinstance(value, dict):
        w.error(path, f"expected a mapping partition -> list of broker ids, got {describe(value)}")
        return INVALID
    broker_ids = None if brokers is None else {b.id for b in brokers}
    result: dict[int, tuple[int, ...]] = {}
    ok = True
    for key, replicas in value.items():
        key_path = join(path, key)
        if not is_int(key) or not 0 <= key < partitions:
            quoted = f" (the key is the string {key!r}: write it unquoted)" if isinstance(key, str) else ""
            w.error(key_path, f"not a partition of this topic (expected partitions 0..{partitions - 1}){quoted}")
            ok = False
            continue
        problem = replica_list_problem(replicas, broker_ids)
        if problem is None and len(replicas) != rf:
            problem = f"has {len(replicas)} replicas (expected replication_factor {rf})"
        if problem is not None:
            w.error(key_path, problem)
            ok = False
            continue
        result[key] = tuple(replicas)
    missing = [p for p in range(partitions) if p not in value]
    if missing:
        shown = ", ".join(map(str, missing[:20])) + (f" and {len(missing) - 20:,} more" if len(missing) > 20 else "")
        w.error(path, f"partitions {shown} have no replicas (expected every partition 0..{partitions - 1})")
        ok = False
    return dict(sorted(result.items())) if ok else INVALID
