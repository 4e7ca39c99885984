"""The workload section: producer and consumer groups, each bound to a topic that exists."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from testbed.config import scalars
from testbed.config.references import Known, partition_list_problem
from testbed.config.specs import ConsumerSpec, ProducerSpec, WorkloadSpec
from testbed.config.walker import INVALID, Walker, describe, join, valid


def parse_workload(w: Walker, value: object, path: str, known: Known) -> WorkloadSpec | Any:
    m = w.mapping(value, path, ("producers", "consumers"))
    if m is None:
        return INVALID
    producers = _parse_clients(w, m.get("producers", []), join(path, "producers"), known, _parse_producer)
    consumers = _parse_clients(w, m.get("consumers", []), join(path, "consumers"), known, _parse_consumer)
    return WorkloadSpec(producers, consumers) if valid(producers, consumers) else INVALID


def _parse_clients(w: Walker, value: object, path: str, known: Known, parse: Callable[..., Any]) -> tuple[Any, ...] | Any:
    entries = w.sequence(value, path, "client groups")
    if entries is None:
        return INVALID
    specs = [parse(w, entry, join(path, index), known) for index, entry in enumerate(entries)]
    return tuple(specs) if valid(*specs) else INVALID


def _client_topic(w: Walker, m: dict[Any, Any], path: str, known: Known) -> tuple[str, int | None] | Any:
    """The topic of a client group, and its partition count when known."""
    if "topic" not in m:
        if known.topics is not None and len(known.topics) == 1:
            (only,) = known.topics.items()
            return only
        if known.topics is not None:
            w.error(join(path, "topic"), "required key missing (there is more than one topic)")
        return INVALID
    topic = m["topic"]
    if not isinstance(topic, str):
        w.error(join(path, "topic"), f"expected a topic name, got {describe(topic)}")
        return INVALID
    if known.topics is None:
        return INVALID
    if topic not in known.topics:
        w.error(join(path, "topic"), f"unknown topic {topic!r} (topics: {', '.join(known.topics)})")
        return INVALID
    return topic, known.topics[topic]


def _parse_producer(w: Walker, value: object, path: str, known: Known) -> ProducerSpec | Any:
    keys = ("count", "topic", "acks", "rate", "batch", "retries", "partitions", "in_flight")
    m = w.mapping(value, path, keys)
    if m is None:
        return INVALID
    count = w.field(m, "count", path, scalars.integer(1, scalars.MAX_CLIENTS), 1)
    topic = _client_topic(w, m, path, known)
    acks = w.field(m, "acks", path, scalars.acks, "all")
    rate = w.field(m, "rate", path, scalars.producer_rate, 100.0)
    batch = w.field(m, "batch", path, scalars.integer(1, scalars.MAX_BATCH), 10)
    retries = w.field(m, "retries", path, scalars.integer(0, scalars.MAX_RETRIES), 5)
    in_flight = w.field(m, "in_flight", path, scalars.integer(1, scalars.MAX_BATCH), 1)
    partitions: Any = None
    if "partitions" in m:
        limit = topic[1] if topic is not INVALID else None
        problem = partition_list_problem(m["partitions"], limit)
        if problem is not None:
            w.error(join(path, "partitions"), problem)
            partitions = INVALID
        else:
            partitions = tuple(m["partitions"])
    parts = (count, topic, acks, rate, batch, retries, partitions, in_flight)
    if not valid(*parts):
        return INVALID
    return ProducerSpec(count, topic[0], acks, rate, batch, retries, partitions, in_flight)


def _parse_consumer(w: Walker, value: object, path: str, known: Known) -> ConsumerSpec | Any:
    m = w.mapping(value, path, ("count", "topic", "from"))
    if m is None:
        return INVALID
    count = w.field(m, "count", path, scalars.integer(1, scalars.MAX_CLIENTS), 1)
    topic = _client_topic(w, m, path, known)
    start = w.field(m, "from", path, scalars.choice("earliest", "latest"), "earliest")
    if not valid(count, topic, start):
        return INVALID
    return ConsumerSpec(count, topic[0], start)

# -- faults ---------------------------------------------------------------------------
