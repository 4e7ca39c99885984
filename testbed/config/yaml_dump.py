"""Section specs back to the schema's own form, for `Topology.to_dict`.

The `topology.yaml` a run leaves behind must reproduce the run, so every default is written out
and every value in the form the parser reads: durations and sizes as strings, lists not tuples.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from faults.fault_spec import DURATION_PARAMS, FaultSpec, NemesisSpec
from testbed.config.specs import (
    ClusterSpec,
    Expectation,
    FlushPolicy,
    NodeSpec,
    ProducerSpec,
    StorageSpec,
    Timing,
    TopicSpec,
    WorkloadSpec,
)
from testbed.config.units import (
    format_duration,
    format_duration_range,
    format_rate,
    format_size,
)


def timing_to_yaml(timing: Timing) -> dict[str, Any]:
    return {
        f.name: (format_duration_range if f.name == "controller_election_timeout" else format_duration)(
            getattr(timing, f.name)
        )
        for f in dataclasses.fields(Timing)
    }


def cluster_to_yaml(cluster: ClusterSpec) -> dict[str, Any]:
    return {
        "controllers": _controllers_to_yaml(cluster.controllers),
        "brokers": [_node_to_yaml(b) for b in cluster.brokers],
        "allow_even_quorum": cluster.allow_even_quorum,
        "metadata_snapshot_records": cluster.metadata_snapshot_records,
    }


def storage_to_yaml(storage: StorageSpec) -> dict[str, Any]:
    return {
        "medium": storage.medium,
        "fsync": storage.fsync,
        "writeback": format_duration(storage.writeback),
        "segment_bytes": format_size(storage.segment_bytes),
    }


def workload_to_yaml(workload: WorkloadSpec) -> dict[str, Any]:
    return {
        "producers": [_producer_to_yaml(p) for p in workload.producers],
        "consumers": [{"count": c.count, "topic": c.topic, "from": c.from_} for c in workload.consumers],
    }


def expect_to_yaml(expect: dict[str, Expectation]) -> dict[str, Any]:
    return {
        key: bool(e.value) if key == "converged" else (e.value if e.op == "==" else str(e))
        for key, e in expect.items()
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


def topic_to_yaml(topic: TopicSpec) -> dict[str, Any]:
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
    if topic.placement_seed is not None:
        form["placement_seed"] = topic.placement_seed
    return form


def _producer_to_yaml(p: ProducerSpec) -> dict[str, Any]:
    form: dict[str, Any] = {
        "count": p.count,
        "topic": p.topic,
        "acks": p.acks if p.acks == "all" else int(p.acks),  # as written: `acks: 1`, not '1'
        "rate": "max" if p.rate is None else format_rate(p.rate),
        "batch": p.batch,
        "retries": p.retries,
        "in_flight": p.in_flight,
    }
    if p.partitions is not None:
        form["partitions"] = list(p.partitions)
    return form


def fault_to_yaml(fault: FaultSpec | NemesisSpec) -> dict[str, Any]:
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
        if key in DURATION_PARAMS:
            form[key] = format_duration(value)
        elif key == "groups":
            form[key] = [list(group) for group in value]
        elif isinstance(value, tuple):
            form[key] = list(value)
        else:
            form[key] = value
    return form
