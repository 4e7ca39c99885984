"""The whole topology: the section specs together, the lookups runs need, and its schema form."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from faults.fault_spec import FaultSpec, NemesisSpec
from testbed.config.specs import (
    DEFAULT_EXPECT,
    ClusterSpec,
    Expectation,
    NetworkSpec,
    ProtocolSpec,
    StorageSpec,
    Timing,
    TopicSpec,
    WorkloadSpec,
)
from testbed.config.units import format_duration
from testbed.config.yaml_dump import (
    cluster_to_yaml,
    expect_to_yaml,
    fault_to_yaml,
    storage_to_yaml,
    timing_to_yaml,
    topic_to_yaml,
    workload_to_yaml,
)


#: the faults that change the set of topics or their partitions (R40)
TOPIC_ACTIONS = ("create-topic", "add-partitions", "delete-topic")


def fault_topic(do: str, params: dict) -> object:
    """The topic a topic fault (`TOPIC_ACTIONS`) acts on: a create-topic names it inside its
    topic's spec, the others as `topic`."""
    topic = params.get("topic")
    return topic.get("name") if do == "create-topic" and isinstance(topic, dict) else topic


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
    faults: tuple[FaultSpec | NemesisSpec, ...]  # in the file's order (`faults[i]` is the i-th entry)
    # `converged: true` is held as Expectation("==", 1): 1 when the cluster converged.
    expect: dict[str, Expectation]
    source: str
    #: what is valid but will never do what it seems to (`nemesis_section.never_firing`), each
    #: naming its key as written in the file
    notes: tuple[str, ...] = field(default=(), compare=False)

    def topic(self, name: str) -> TopicSpec:
        for topic in self.topics:
            if topic.name == name:
                return topic
        raise KeyError(f"{self.source}: no topic {name!r} (topics: {', '.join(t.name for t in self.topics)})")

    def first_partitions(self, name: str) -> int:
        """How many partitions a topic has when it first exists: the topology's, or those of
        the `create-topic` fault that makes it later (R40)."""
        for topic in self.topics:
            if topic.name == name:
                return topic.partitions
        made = [f for f in self.faults if getattr(f, "do", None) == "create-topic"]
        for f in sorted(made, key=lambda f: f.at):  # the first made, whatever the file's order
            if f.params["topic"]["name"] == name:
                return int(f.params["topic"]["partitions"])
        raise KeyError(f"{self.source}: no topic {name!r} in topics or a create-topic fault")

    def topics_over_run(self, happened: list[tuple[str, dict]] | None = None) -> list[tuple[str, int, int, int, bool]]:
        """(name, partitions, rf, min ISR, gone) of every topic the run has at some point: the
        topology's, those its `create-topic` faults make (R40), with the partitions its
        `add-partitions` faults add; `gone` when a `delete-topic` left it deleted at the end.
        A topic made again after its deletion has the partitions of its last making.

        `happened`: (action, params) of the topic faults that took effect, in the order they
        did (faults.jsonl); without it, the schedule's, as if every one did."""
        found = {tp.name: [tp.partitions, tp.replication_factor, tp.min_insync_replicas, False] for tp in self.topics}
        if happened is None:
            admin = [f for f in self.faults if getattr(f, "do", None) in TOPIC_ACTIONS]
            happened = [(f.do, f.params) for f in sorted(admin, key=lambda f: f.at)]
        for do, params in happened:
            name = fault_topic(do, params)
            if do == "create-topic":
                spec = params["topic"]
                found[name] = [spec["partitions"], spec["replication_factor"], spec["min_insync_replicas"], False]
            elif name in found and do == "add-partitions":
                found[name][0] += params["count"]
            elif name in found:
                found[name][3] = True
        return [(name, *values) for name, values in found.items()]

    @property
    def broker_ids(self) -> tuple[int, ...]:
        return tuple(b.id for b in self.cluster.brokers)

    @property
    def racks(self) -> tuple[str, ...]:
        """Distinct broker racks, in order of first appearance (the rack-alternated order of R34)."""
        return tuple(dict.fromkeys(b.rack for b in self.cluster.brokers if b.rack is not None))

    def to_dict(self) -> dict[str, Any]:
        """Every default filled in, in the schema's form: the `topology.yaml` a run leaves behind."""
        return {
            "name": self.name,
            "description": self.description,
            "seed": self.seed,
            "duration": format_duration(self.duration),
            "timing": timing_to_yaml(self.timing),
            "cluster": cluster_to_yaml(self.cluster),
            "protocol": dataclasses.asdict(self.protocol),
            "storage": storage_to_yaml(self.storage),
            "network": dataclasses.asdict(self.network),
            "topics": [topic_to_yaml(topic) for topic in self.topics],
            "workload": workload_to_yaml(self.workload),
            "faults": [fault_to_yaml(f) for f in self.faults],
            # no expect: block holds the run to the defaults, so those are what it says
            "expect": expect_to_yaml(self.expect or DEFAULT_EXPECT),
        }
