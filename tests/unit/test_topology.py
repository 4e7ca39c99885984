"""The topology loader: every malformed file is refused with file, key path and the fix."""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from testbed.config.specs import DEFAULT_EXPECT
from testbed.config.units import (
    format_duration,
    format_rate,
    format_size,
    parse_duration,
    parse_duration_range,
    parse_rate,
    parse_size,
)
from testbed.matrix.spec import is_matrix_file
from testbed.topology import (
    CHECK_NAMES,
    FEATURE_NAMES,
    Expectation,
    FaultSpec,
    FlushPolicy,
    NemesisSpec,
    NodeSpec,
    Timing,
    TopologyError,
    load_topology,
    not_yet_acted_on,
    parse_topology,
)

TOPOLOGIES = Path(__file__).resolve().parents[2] / "topologies"
SRC = "t.yaml"


def base() -> dict[str, Any]:
    return {
        "name": "t",
        "cluster": {"brokers": [{"id": 1, "rack": "a"}, {"id": 2, "rack": "b"}, {"id": 3, "rack": "c"}]},
        "topics": [{"name": "orders", "partitions": 6, "replication_factor": 3}],
    }


def errors_of(data: object) -> list[str]:
    with pytest.raises(TopologyError) as info:
        parse_topology(data, SRC)
    assert str(info.value) == "\n".join(info.value.errors)
    return info.value.errors


def with_(path: str, value: object) -> dict[str, Any]:
    """base() with the value at a dotted path set (an int part indexes a list)."""
    data = base()
    node: Any = data
    parts = path.split(".")
    for part in parts[:-1]:
        key: Any = int(part) if part.isdigit() else part
        if isinstance(node, dict) and key not in node:
            node[key] = {}
        node = node[key]
    node[parts[-1]] = value
    return data


def fault(**entry: object) -> dict[str, Any]:
    data = base()
    data["faults"] = [entry]
    return data


def nemesis(**entry: object) -> dict[str, Any]:
    data = base()
    data["faults"] = [{"nemesis": {"do": ["kill"], **entry}}]
    return data


MALFORMED = [
    pytest.param(with_("storage.fsinc", "real"), "storage.fsinc",
                 ["unknown key (expected one of: medium, fsync, writeback, segment_bytes)"], id="unknown-storage-key"),
    pytest.param(with_("topics.0.replication_factor", 4), "topics[0].replication_factor",
                 ["4 is larger than the number of brokers (3)"], id="rf-above-brokers"),
    pytest.param({k: v for k, v in base().items() if k != "name"}, "name", ["required key missing"], id="no-name"),
    # names that name files: a tester's 240-character name passed, and the run then crashed
    pytest.param(with_("name", "x" * 101), "name", ["(101 characters)", "at most 100 ASCII letters"],
                 id="name-too-long"),  # its quotes were counted: 103 (trial29)
    pytest.param(with_("topics.0.name", "t" * 250), "topics[0].name", ["at most 249 letters"], id="topic-name-too-long"),
    pytest.param(with_("duration", 5), "duration", ["bare number", "write 5s, or 5ms"], id="bare-duration"),
    pytest.param(with_("seed", True), "seed", ["expected an integer", "bool"], id="bool-seed"),
    pytest.param(with_("timing.session_timeout", "50ms"), "timing.session_timeout",
                 ["longer than heartbeat_interval"], id="session-below-heartbeat"),
    pytest.param(with_("timing.controller_election_timeout", "600ms..300ms"),
                 "timing.controller_election_timeout", ["low end is above the high end"], id="inverted-range"),
    pytest.param(with_("timing.controller_election_timeout", "400ms"),
                 "timing.controller_election_timeout", ["wider than one value", "low < high"], id="flat-range"),
    pytest.param(with_("timing.controller_election_timeout", "50ms..600ms"),
                 "timing.controller_election_timeout", ["longer than heartbeat_interval"], id="range-below-heartbeat"),
    pytest.param(with_("cluster.controllers", 4), "cluster.controllers",
                 ["tolerates 1 failed", "allow_even_quorum: true"], id="even-quorum"),
    pytest.param(with_("cluster.controllers", 0), "cluster.controllers", ["at least one controller"],
                 id="no-controller"),
    pytest.param(with_("cluster.metadata_snapshot_records", 0), "cluster.metadata_snapshot_records",
                 ["too small", ">= 1"], id="no-snapshot-interval"),
    pytest.param(with_("timing.heartbeat", "1s"), "timing.heartbeat", ["unknown key", "heartbeat_interval"],
                 id="unknown-timing-key"),
    pytest.param(with_("cluster.brokers", [{"id": 1}, {"id": 1}]), "cluster.brokers[1].id",
                 ["already the id of cluster.brokers[0]", "unique"], id="duplicate-broker-id"),
    pytest.param(with_("cluster.brokers", []), "cluster.brokers", ["expected at least 1 broker ({id, rack})"], id="no-brokers"),
    pytest.param(with_("cluster", {"controllers": 3}), "cluster.brokers", ["required key missing"], id="brokers-missing"),
    pytest.param(with_("cluster.brokers", [{"id": 0}]), "cluster.brokers[0].id", ["too small", ">= 1"], id="broker-id-0"),
    pytest.param(with_("cluster.brokers", [{"id": 1, "rack": "a"}, {"id": 2}]), "cluster.brokers",
                 ["brokers 2 have no rack"], id="mixed-racks"),
    pytest.param(with_("cluster.controllers", 0), "cluster.controllers", ["at least one controller"], id="no-controllers"),
    pytest.param(with_("protocol.truncation", "kip-101"), "protocol.truncation",
                 ["expected one of: leader-epoch, high-watermark"], id="bad-truncation"),
    pytest.param(with_("protocol.elr", "yes"), "protocol.elr", ["expected true or false"], id="elr-string"),
    pytest.param(with_("storage.segment_bytes", "1MB"), "storage.segment_bytes", ["not a size", "MiB"], id="size-mb"),
    pytest.param(with_("storage.segment_bytes", 1), "storage.segment_bytes",
                 ["1 is smaller than the header of one record batch", "at least 24B"], id="segment-below-a-header"),
    pytest.param(with_("timing.fetch_max_wait", "2s"), "timing.fetch_max_wait",
                 ["2s is longer than replica_lag_max (1s)", "replica.fetch.wait.max.ms"], id="fetch-wait-above-lag"),
    pytest.param(with_("storage.writeback", 5), "storage.writeback", ["write 5s"], id="bare-writeback"),
    pytest.param(with_("network", {"backend": "netns", "transport": "ipc"}),
                 "network.transport", ["expected tcp with backend netns"], id="netns-ipc"),
    pytest.param(with_("topics", []), "topics", ["expected at least 1 topic {name", "got a list of 0"], id="no-topics"),
    pytest.param(with_("topics.0.min_insync_replicas", 4), "topics[0].min_insync_replicas",
                 ["4 is larger than replication_factor (3)"], id="minisr-above-rf"),
    pytest.param(with_("topics.0.partitions", 0), "topics[0].partitions", ["too small"], id="zero-partitions"),
    pytest.param(with_("topics", [{"name": "orders"}, {"name": "orders"}]), "topics[1].name",
                 ["already the name of topics[0]"], id="duplicate-topic"),
    pytest.param(with_("topics.0.name", "a/b"), "topics[0].name", ["not a topic name"], id="slash-in-topic"),
    pytest.param(with_("topics.0.flush", "sometimes"), "topics[0].flush",
                 ["not a flush policy", "always, on-roll"], id="bad-flush"),
    pytest.param(with_("topics.0.flush", {"every": "1s"}), "topics[0].flush",
                 ["unknown key every", "{messages: N, interval: D}"], id="flush-unknown-key"),
    pytest.param(with_("topics.0.flush", {"messages": 0}), "topics[0].flush",
                 ["messages: 0 is too small"], id="flush-messages"),
    pytest.param(with_("topics.0.assignment", {0: [1, 2, 3]}), "topics[0].assignment",
                 ["only allowed with placement: explicit"], id="assignment-without-explicit"),
    pytest.param(with_("topics.0.placement", "explicit"), "topics[0].assignment",
                 ["required with placement: explicit"], id="explicit-without-assignment"),
    pytest.param(with_("topics.0.placement", "round robin"), "topics[0].placement",
                 ["expected one of: rack-aware, round-robin, explicit"], id="bad-placement"),
    pytest.param(with_("topics.0.placement_seed", -1), "topics[0].placement_seed",
                 ["-1"], id="negative-placement-seed"),
    pytest.param(with_("topics.0.placement_seed", "ten"), "topics[0].placement_seed",
                 ["ten"], id="placement-seed-not-a-number"),
    pytest.param(with_("workload.producers", [{"topic": "payments"}]), "workload.producers[0].topic",
                 ["unknown topic 'payments'", "orders"], id="unknown-producer-topic"),
    pytest.param(with_("workload.producers", [{"acks": 2}]), "workload.producers[0].acks",
                 ["expected one of: all, -1, 1, 0"], id="acks-2"),
    pytest.param(with_("workload.producers", [{"acks": True}]), "workload.producers[0].acks",
                 ["bool True is not allowed"], id="acks-bool"),
    pytest.param(with_("workload.producers", [{"rate": "fast"}]), "workload.producers[0].rate",
                 ["not a rate", "500/s"], id="bad-rate"),
    pytest.param(with_("workload.producers", [{"rate": "MAX"}]), "workload.producers[0].rate",  # trial28
                 ["'MAX' is not a rate", "or `max` for no limit"], id="rate-MAX"),
    pytest.param(with_("workload.producers", [{"partitions": [0, 6]}]), "workload.producers[0].partitions",
                 ["no partition 6", "0..5"], id="producer-partition-range"),
    pytest.param(with_("workload.consumers", [{"from": "beginning"}]), "workload.consumers[0].from",
                 ["expected one of: earliest, latest"], id="consumer-from"),
    pytest.param(fault(at="1s", do="explode", target="broker:1"), "faults[0].do",
                 ["'explode' is not allowed", "kill, pause"], id="unknown-action"),
    pytest.param(fault(at="1s", do="kill"), "faults[0].target", ["required key missing", "kill needs a target"],
                 id="kill-without-target"),
    pytest.param(fault(at="1s", do="kill", target="broker:9"), "faults[0].target",
                 ["there is no broker 9", "1, 2, 3"], id="unknown-broker"),
    pytest.param(fault(at="1s", do="kill", target="controller:2"), "faults[0].target",
                 ["there is no controller 2"], id="unknown-controller"),
    pytest.param(fault(at="1s", do="pause", target="rack:z"), "faults[0].target",
                 ["no node is in rack 'z'", "a, b, c"], id="unknown-rack"),
    pytest.param(fault(at="1s", do="kill", target="leader-of payments/0"), "faults[0].target",
                 ["unknown topic 'payments'"], id="leader-of-unknown-topic"),
    pytest.param(fault(at="1s", do="kill", target="isr-of orders/6"), "faults[0].target",
                 ["partitions 0..5"], id="isr-of-unknown-partition"),
    pytest.param(fault(at="1s", do="kill", target="the leader"), "faults[0].target",
                 ["unknown target", "leader-of TOPIC/P"], id="unknown-target"),
    pytest.param(fault(at="1s", do="kill", target="clients"), "faults[0].target",
                 ["only be named by partition and slow"], id="kill-clients"),
    pytest.param(fault(at="11s", do="heal"), "faults[0].at", ["after the end of the run (duration 10s)"],
                 id="at-after-end"),
    pytest.param(fault(at=3, do="heal"), "faults[0].at", ["write 3s"], id="bare-at"),
    pytest.param(fault(do="heal"), "faults[0].at", ["required key missing"], id="no-at"),
    pytest.param(fault(at="1s", do="heal", target="brokers"), "faults[0].target",
                 ["unknown key (expected one of: at, do)"], id="heal-with-target"),
    pytest.param(fault(at="1s", do="lossy-crash", target="broker:1"), "faults[0].loss",
                 ["required key missing", "unsynced | partial | torn"], id="lossy-crash-without-loss"),
    pytest.param(fault(at="1s", do="lossy-crash", target="broker:1", loss="all"), "faults[0].loss",
                 ["expected one of: unsynced, partial, torn"], id="lossy-crash-bad-loss"),
    pytest.param(fault(at="1s", do="partition"), "faults[0].shape",
                 ["exactly one of groups", "shape"], id="partition-without-shape"),
    pytest.param(fault(at="1s", do="partition", groups=[["broker:1"]]), "faults[0].groups",
                 ["at least two groups"], id="one-group"),
    pytest.param(fault(at="1s", do="partition", groups=[["broker:1"], ["broker:2", "rack:q"]]),
                 "faults[0].groups[1][1]", ["no node is in rack 'q'"], id="group-member"),
    pytest.param(fault(at="1s", do="partition", shape="one-way", **{"from": "broker:1"}), "faults[0].to",
                 ["required key missing", "one-way needs to"], id="one-way-without-to"),
    pytest.param(fault(at="1s", do="partition", shape="isolate"), "faults[0].target",
                 ["required key missing", "a target to isolate"], id="isolate-without-target"),
    pytest.param(fault(at="1s", do="partition", shape="halves", target="broker:1"), "faults[0].target",
                 ["only used with shape: isolate"], id="halves-with-target"),
    pytest.param(fault(at="1s", do="slow"), "faults[0].delay", ["at least one of delay, jitter, loss, duplicate"],
                 id="slow-nothing"),
    pytest.param(fault(at="1s", do="slow", loss=5), "faults[0].loss", ["probability between 0 and 1"],
                 id="slow-loss-percent"),
    pytest.param(fault(at="1s", do="slow", duplicate="150%"), "faults[0].duplicate",
                 ["probability between 0 and 1", "percentage"], id="slow-duplicate-over-100-percent"),
    pytest.param(fault(at="1s", do="slow", loss="5 percent"), "faults[0].loss", ["percentage (e.g. 5%)"],
                 id="slow-loss-words"),
    pytest.param(fault(at="1s", do="reassign", partition="orders/0", replicas=[1, 2, 7]), "faults[0].replicas",
                 ["no broker 7"], id="reassign-unknown-broker"),
    pytest.param(fault(at="1s", do="reassign", replicas=[1, 2]), "faults[0].partition",
                 ["required key missing", "TOPIC/P"], id="reassign-without-partition"),
    pytest.param(fault(at="1s", do="elect", partition="orders/0", target="random-broker"), "faults[0].target",
                 ["elect needs broker:N"], id="elect-random"),
    pytest.param(fault(at="1s", do="elect-preferred", partition="orders"), "faults[0].partition",
                 ["not TOPIC/PARTITION"], id="elect-preferred-no-partition-number"),
    pytest.param(fault(at="1s", do="reassign", partition="orders/0", replicas=[1, 1]), "faults[0].replicas",
                 ["names a broker twice"], id="reassign-repeated-broker"),
    pytest.param(fault(at="1s", do="reassign", partition="orders/0", replicas=[]), "faults[0].replicas",
                 ["non-empty list of broker ids"], id="reassign-empty"),
    pytest.param(fault(at="1s", do="partition", groups=[["broker:1", "broker:1"], ["broker:2"]]), "faults[0].groups[0]",
                 ["names broker:1 twice"], id="partition-group-twice"),
    pytest.param(fault(at="1s", do="partition", shape="one-way", **{"from": "broker:1", "to": "broker:1"}),
                 "faults[0].to", ["from a target to itself acts on no link"], id="one-way-to-itself"),
    pytest.param(fault(at="1s", do="slow", delay="5ms", **{"from": "leader-of orders/0", "to": "leader-of orders/0"}),
                 "faults[0].to", ["slow link from a target to itself"], id="slow-to-itself"),
    pytest.param(fault(at="1s", do="reassign", partition="orders/0", replicas=["broker:1", 2, 3]),
                 "faults[0].replicas", ["expected broker ids (integers", "got 'broker:1'"], id="reassign-names"),
    pytest.param(fault(at="1s", do="reassign", partition="orders/9", replicas=[1]), "faults[0].partition",
                 ["partitions 0..5"], id="reassign-unknown-partition"),
    pytest.param(fault(at="1s", do="elect", partition="nope/0", target="broker:1"), "faults[0].partition",
                 ["unknown topic 'nope'"], id="elect-unknown-topic"),
    # R38/R39: the admin commands that change the broker set
    pytest.param(fault(at="1s", do="add-broker", broker={"id": 2, "rack": "d"}), "faults[0].broker.id",
                 ["broker 2 is in use at 1s", "needs a new id"], id="add-broker-id-in-use"),
    pytest.param(fault(at="1s", do="add-broker", broker={"id": 4}), "faults[0].broker.rack",
                 ["brokers have racks, so the new one needs one"], id="add-broker-no-rack"),
    pytest.param(fault(at="1s", do="add-broker", broker={"id": 0, "rack": "d"}), "faults[0].broker.id",
                 ["0 is too small", "integer >= 1"], id="add-broker-id-zero"),
    pytest.param(fault(at="1s", do="add-broker", broker={"id": 4, "rack": "d", "zone": 1}),
                 "faults[0].broker.zone", ["unknown key", "id, rack"], id="add-broker-unknown-key"),
    pytest.param(fault(at="1s", do="add-broker", broker=4), "faults[0].broker",
                 ["expected a mapping {id, rack}"], id="add-broker-bare-id"),
    pytest.param(fault(at="1s", do="add-broker", broker={"id": 4, "rack": "d"}, rebalance="yes"),
                 "faults[0].rebalance", ["expected true or false"], id="add-broker-rebalance-string"),
    pytest.param(fault(at="1s", do="remove-broker", target="broker:9"), "faults[0].target",
                 ["broker 9 is not in the cluster at 1s"], id="remove-broker-unknown"),
    pytest.param(fault(at="1s", do="remove-broker", target="broker:1"), "faults[0].target",
                 ["leaves 2 brokers, fewer than the replication factor 3 of topic 'orders'"],
                 id="remove-broker-below-rf"),
    pytest.param(fault(at="1s", do="remove-broker", target="rack:a"), "faults[0].target",
                 ["remove-broker needs broker:N"], id="remove-broker-rack"),
    pytest.param(fault(at="1s", do="elect", partition="orders/0", target="broker:x"), "faults[0].target",
                 ["broker:x"], id="elect-broker-not-a-number"),
    pytest.param(fault(at="1s", do="create-topic", topic={"name": "orders"}), "faults[0].topic.name",
                 ["topic 'orders' exists at 1s", "create-topic needs a new name"], id="create-topic-duplicate"),
    pytest.param(fault(at="1s", do="create-topic", topic={"name": "t2", "replication_factor": 4}),
                 "faults[0].topic.replication_factor", ["4 is more than the 3 brokers in the cluster at 1s"],
                 id="create-topic-rf"),
    pytest.param(fault(at="1s", do="create-topic", topic={"name": "t2", "partition": 2}),
                 "faults[0].topic.partition", ["unknown key"], id="create-topic-unknown-key"),
    pytest.param(fault(at="1s", do="create-topic"), "faults[0].topic", ["required key missing"],
                 id="create-topic-without-topic"),
    pytest.param(fault(at="1s", do="delete-topic", topic="nope"), "faults[0].topic",
                 ["no topic 'nope' at 1s", "delete-topic needs an existing topic"], id="delete-topic-unknown"),
    pytest.param(fault(at="1s", do="delete-topic", topic=["orders"]), "faults[0].topic",
                 ["expected a topic name"], id="delete-topic-list"),
    pytest.param(fault(at="1s", do="add-partitions", topic="nope", count=1), "faults[0].topic",
                 ["no topic 'nope' at 1s", "add-partitions needs an existing topic"], id="add-partitions-unknown"),
    pytest.param(fault(at="1s", do="add-partitions", topic="orders", count=0), "faults[0].count",
                 ["0 is too small"], id="add-partitions-zero"),
    pytest.param(fault(at="1s", do="add-partitions", topic="orders"), "faults[0].count",
                 ["required key missing", "how many partitions to add"], id="add-partitions-no-count"),
    # the limit is of the topic over the run: each add within it, the two together past it, in
    # firing order (the later one is first in the file)
    pytest.param({**base(), "faults": [{"at": "2s", "do": "add-partitions", "topic": "orders", "count": 5},
                                       {"at": "1s", "do": "add-partitions", "topic": "orders", "count": 9990}]},
                 "faults[0].count", ["5 more partitions would give topic orders 10,001 at 2s (it has 9,996 then)",
                                     "(10,000)"], id="add-partitions-past-the-topic-limit"),
    pytest.param(nemesis(**{"from": "5s", "until": "5s"}), "faults[0].nemesis.until",
                 ["is not after from (5s)"], id="nemesis-empty-window"),
    pytest.param(nemesis(until="20s"), "faults[0].nemesis.until", ["after the end of the run"], id="nemesis-too-long"),
    pytest.param(nemesis(every="0s..1s"), "faults[0].nemesis.every", ["longer than zero"], id="nemesis-every-zero"),
    pytest.param(nemesis(max_down=4), "faults[0].nemesis.max_down",
                 ["less than the number of nodes (4)"], id="nemesis-max-down"),
    pytest.param(nemesis(do=["kill", "restart"]), "faults[0].nemesis.do",
                 ["unknown nemesis actions 'restart'"], id="nemesis-restart"),
    pytest.param(nemesis(target=["stopped"]), "faults[0].nemesis.target[0]",
                 ["cannot be a nemesis target"], id="nemesis-stopped"),
    pytest.param(with_("expect.lost_write", 0), "expect.lost_write",
                 ["unknown key", "lost_writes, lost_writes_acks1"], id="expect-typo"),
    pytest.param(with_("expect.lost_writes", "~0"), "expect.lost_writes",
                 ["not an expectation", ">=N"], id="expect-bad-form"),
    pytest.param(with_("expect.lost_writes", "<0"), "expect.lost_writes", ["can never hold"], id="expect-below-zero"),
    pytest.param(with_("expect.converged", 1), "expect.converged", ["expected true or false"], id="converged-int"),
    # Found by fuzzing `validate`: each hung, crashed or was accepted, and could never run.
    pytest.param(with_("topics.0.partitions", 2**40), "topics[0].partitions",
                 ["too large", "from 1 to 10,000"], id="partitions-beyond-one-host"),
    pytest.param(with_("cluster.brokers", {"count": 10**12}), "cluster.brokers.count",
                 ["too large", "from 1 to 100"], id="broker-count-beyond-one-host"),
    pytest.param(with_("cluster.controllers", 10**12 + 1), "cluster.controllers",
                 ["too many", "at most 100"], id="controller-count-beyond-one-host"),
    pytest.param(with_("cluster.brokers", [{"id": 2**31}]), "cluster.brokers[0].id",
                 ["too large"], id="broker-id-beyond-int32"),
    pytest.param({**base(), "workload": {"producers": [{"count": 10**12}]}}, "workload.producers[0].count",
                 ["too large"], id="clients-beyond-one-host"),
    pytest.param(with_("seed", 2**63), "seed", ["too large"], id="seed-beyond-64-bits"),
    pytest.param({**base(), "workload": {"producers": [{"retries": 10**23}]}}, "workload.producers[0].retries",
                 ["too large", "from 0 to 2,147,483,647"], id="retries-beyond-int32"),
    pytest.param(with_("duration", "9" * 400 + "s"), "duration", ["expected a finite duration"], id="infinite-duration"),
    pytest.param({**base(), "workload": {"producers": [{"rate": float("nan")}]}}, "workload.producers[0].rate",
                 ["expected a finite rate, got NaN"], id="nan-rate"),
    pytest.param(fault(at="1s", do="kill", target="broker:\u00b2".encode().decode("unicode_escape")),
                 "faults[0].target", ["expected broker:N"], id="superscript-digit-id"),
    pytest.param(fault(at="1s", do="kill", target="broker:\u0661".encode().decode("unicode_escape")),
                 "faults[0].target", ["expected broker:N"], id="arabic-indic-digit-id"),
    pytest.param(fault(at="1s", do="remove-broker", target="broker:\u00b2".encode().decode("unicode_escape")),
                 "faults[0].target", ["remove-broker needs broker:N"], id="superscript-digit-remove-broker"),
    pytest.param(fault(at="1s", do="kill", target="leader-of orders/" + "1" * 4301), "faults[0].target",
                 ["is not TOPIC/PARTITION"], id="partition-number-of-4301-digits"),
    pytest.param(fault(at="1s", do="kill", target="leader-of orders/0\n".encode().decode("unicode_escape")),
                 "faults[0].target", ["unknown target"], id="target-with-a-newline"),
    pytest.param(nemesis(**{"from": "0s", "until": "10s", "every": "1us..2us"}), "faults[0].nemesis.every",
                 ["10,000,000 faults", "every at least 1ms"], id="nemesis-too-often"),
    pytest.param({**base(), "faults": [{"nemsis": {"do": ["kill"]}}]}, "faults[0].nemsis",
                 ["unknown key", "{nemesis: {...}}"], id="nemesis-typo-named"),
    pytest.param(with_("topics.0.name", ".."), "topics[0].name", ["not '.' or '..'"], id="topic-named-dot-dot"),
    pytest.param(with_("topics.0.name", "."), "topics[0].name", ["not '.' or '..'"], id="topic-named-dot"),
]


@pytest.mark.parametrize(("data", "path", "words"), MALFORMED)
def test_malformed_topology_names_the_key_and_the_fix(data: dict[str, Any], path: str, words: list[str]) -> None:
    errors = errors_of(data)
    prefix = f"{SRC}: {path}: "
    matching = [e for e in errors if e.startswith(prefix)]
    assert matching, f"no error at {path}: {errors}"
    assert any(all(word in e for word in words) for e in matching), matching


def test_the_limits_of_a_topics_partitions_a_fetchs_wait_and_a_segment_are_inclusive() -> None:
    """10,000 partitions over the run, a fetch that waits as long as replica_lag_max (Kafka's
    `<=`), a segment of one batch's header: each at its limit is valid."""
    data = {**base(), "faults": [{"at": "1s", "do": "add-partitions", "topic": "orders", "count": 9994}],
            "timing": {"replica_lag_max": "1s", "fetch_max_wait": "1s"}, "storage": {"segment_bytes": 24}}
    t = parse_topology(data, SRC)
    assert (t.topics_over_run()[0][1], t.timing.fetch_max_wait, t.storage.segment_bytes) == (10_000, 1.0, 24)


def test_a_slow_link_inside_a_group_is_valid() -> None:
    """From a group to itself (`brokers` to `brokers`, `rack:a` to `rack:a`) a slow fault acts
    on the links inside the group; only one node to itself names no link."""
    for group in ("brokers", "rack:a"):
        parse_topology(fault(at="1s", do="slow", delay="5ms", **{"from": group, "to": group}), SRC)


def test_a_links_loss_and_duplication_may_be_written_as_percentages() -> None:
    """As netem writes them (`loss 5%`): the same probabilities as 0.05 and 0.02."""
    as_percent = parse_topology(fault(at="1s", do="slow", loss="5%", duplicate=" 2.5 %"), SRC)
    as_number = parse_topology(fault(at="1s", do="slow", loss=0.05, duplicate=0.025), SRC)
    assert as_percent.faults == as_number.faults
    assert as_percent.faults[0].params == {"loss": 0.05, "duplicate": 0.025}


def test_r39_a_removed_brokers_id_is_not_added_back() -> None:
    """validate and the run agree (a new user's run refused what validate passed)."""
    data = base()
    data["faults"] = [{"at": "1s", "do": "add-broker", "broker": {"id": 4, "rack": "d"}},
                      {"at": "2s", "do": "remove-broker", "target": "broker:4"},
                      {"at": "3s", "do": "add-broker", "broker": {"id": 4, "rack": "d"}}]
    [error] = errors_of(data)
    assert error.startswith(f"{SRC}: faults[2].broker.id: broker 4 was removed earlier in the run"), error
    data["faults"][2]["broker"]["id"] = 5
    parse_topology(data, SRC)  # valid



def test_r38_r39_a_network_fault_names_brokers_in_the_cluster_when_it_fires() -> None:
    """`from`, `to` and a group's members name brokers as `target:` does: a one-way cut, slow
    link or group of a broker removed before it, or added only after it, acts on nobody."""
    data = base()
    data["cluster"]["brokers"].append({"id": 4, "rack": "d"})
    data["faults"] = [{"at": "1s", "do": "remove-broker", "target": "broker:4"},
                      {"at": "2s", "do": "partition", "shape": "one-way", "from": "broker:4", "to": "controllers"},
                      {"at": "3s", "do": "slow", "delay": "5ms", "from": "brokers", "to": "broker:4"},
                      {"at": "4s", "do": "partition", "groups": [["controllers"], ["broker:1", "broker:5"]]},
                      {"at": "5s", "do": "add-broker", "broker": {"id": 5, "rack": "e"}}]
    assert errors_of(data) == [
        f"{SRC}: faults[1].from: broker 4 is not in the cluster at 2s (brokers then: [1, 2, 3])",
        f"{SRC}: faults[2].to: broker 4 is not in the cluster at 3s (brokers then: [1, 2, 3])",
        f"{SRC}: faults[3].groups[1][1]: broker 5 is not in the cluster at 4s (brokers then: [1, 2, 3])"]
    data["faults"][0]["at"] = "9s"
    data["faults"][3]["at"] = "6s"
    parse_topology(data, SRC)

def test_r40_a_fault_naming_a_partition_of_a_deleted_topic_is_refused() -> None:
    data = base()
    data["faults"] = [{"at": "1s", "do": "delete-topic", "topic": "orders"},
                      {"at": "2s", "do": "reassign", "partition": "orders/0", "replicas": [1, 3, 2]},
                      {"at": "3s", "do": "pause", "target": "leader-of orders/1"}]
    data["workload"] = {}
    assert [e.split(": ")[1] for e in errors_of(data)] == ["faults[1].partition", "faults[2].target"]
    assert "topic 'orders' does not exist at 2s (topics then: none)" in errors_of(data)[0]


def test_r40_a_topic_made_again_is_named_with_the_partitions_it_has_then() -> None:
    """A topic deleted and made again has the partitions of its new making from then on: a
    tester's file that made `orders` again with more partitions was refused, and one that
    made it with fewer, then named a partition it no longer had, was accepted (the run then
    resolved the kill's target to nobody and the controller refused the election)."""
    data = base()
    data["workload"] = {}
    data["faults"] = [{"at": "1s", "do": "delete-topic", "topic": "orders"},
                      {"at": "2s", "do": "create-topic", "topic": {"name": "orders", "partitions": 8,
                                                                   "replication_factor": 2}},
                      {"at": "4s", "do": "kill", "target": "leader-of orders/7"},
                      {"at": "5s", "do": "elect", "partition": "orders/7", "target": "broker:1"}]
    parse_topology(data, SRC)  # valid: orders/7 exists from 2s
    data["faults"][1]["topic"]["partitions"] = 2
    data["faults"][2]["target"] = "leader-of orders/4"
    data["faults"][3]["partition"] = "orders/5"
    assert errors_of(data) == [
        f"{SRC}: faults[2].target: 'leader-of orders/4': topic orders has partitions 0..1 at 4s",
        f"{SRC}: faults[3].partition: 'orders/5': topic orders has partitions 0..1 at 5s"]
    data["faults"][2]["at"] = "0.5s"  # before the deletion: the topic's first 6 partitions
    assert [e.split(": ")[1] for e in errors_of(data)] == ["faults[3].partition"]
    data["faults"].insert(2, {"at": "3s", "do": "add-partitions", "topic": "orders", "count": 4})
    parse_topology(data, SRC)  # orders/5 exists again from 3s


def test_r40_a_network_fault_naming_a_partition_of_a_deleted_or_remade_topic_is_refused() -> None:
    """`from`, `to` and a group's members are partition selectors as `target:` is, checked
    against the topic as it is when the fault fires: a tester's one-way cut from `leader-of
    orders/1` after `orders` was made again with one partition, and a slow link, one-way cut
    and groups naming `orders` after its deletion, were accepted, and each resolved to nobody."""
    data = base()
    data["workload"] = {}
    remade = {"name": "orders", "partitions": 1, "replication_factor": 3, "min_insync_replicas": 2}
    data["faults"] = [{"at": "1s", "do": "delete-topic", "topic": "orders"},
                      {"at": "2s", "do": "create-topic", "topic": remade},
                      {"at": "3s", "do": "partition", "shape": "one-way", "from": "leader-of orders/1",
                       "to": "controllers"},
                      {"at": "4s", "do": "slow", "delay": "5ms", "from": "brokers", "to": "isr-of orders/2"},
                      {"at": "5s", "do": "partition", "groups": [["controllers"], ["broker:1", "followers-of orders/3"]]}]
    assert errors_of(data) == [
        f"{SRC}: faults[2].from: 'leader-of orders/1': topic orders has partitions 0..0 at 3s",
        f"{SRC}: faults[3].to: 'isr-of orders/2': topic orders has partitions 0..0 at 4s",
        f"{SRC}: faults[4].groups[1][1]: 'followers-of orders/3': topic orders has partitions 0..0 at 5s"]
    del data["faults"][1]  # deleted and not made again
    for fault_ in data["faults"][1:]:
        fault_["at"] = "3s"
    errors = errors_of(data)
    assert [e.split(": ")[1] for e in errors] == ["faults[1].from", "faults[2].to", "faults[3].groups[1][1]"]
    assert errors[0] == (f"{SRC}: faults[1].from: 'leader-of orders/1': topic 'orders' does not exist at 3s "
                         "(topics then: none): deleted before it, or made only after it")
    data["faults"] = data["faults"][1:]  # not deleted: orders has 6 partitions
    parse_topology(data, SRC)


def test_r40_every_partition_named_out_of_range_is_reported_with_its_selector_and_time() -> None:
    """A partition that exists only later in the run, or never, is an error at every fault
    that names it, each with its key path, its selector as written and its time: a tester's
    file got only the error of its 3 s kill (as `'orders/3': ...`, without `leader-of` or the
    time), and the 1 s kill's error only once the other was fixed."""
    data = base()
    data["topics"][0]["partitions"] = 2
    data["faults"] = [{"at": "1s", "do": "kill", "target": "leader-of orders/2"},
                      {"at": "2s", "do": "add-partitions", "topic": "orders", "count": 1},
                      {"at": "3s", "do": "kill", "target": "leader-of orders/3"},
                      {"at": "4s", "do": "lossy-crash", "target": "isr-of orders/5", "loss": "all"},
                      {"at": "5s", "do": "partition", "groups": [["leader-of orders/4"], ["clients"]]}]
    errors = errors_of(data)
    assert errors[2].startswith(f"{SRC}: faults[3].loss: "), errors  # its own error, and its target's too
    assert errors[:2] + errors[3:] == [
        f"{SRC}: faults[0].target: 'leader-of orders/2': topic orders has partitions 0..1 at 1s",
        f"{SRC}: faults[2].target: 'leader-of orders/3': topic orders has partitions 0..2 at 3s",
        f"{SRC}: faults[3].target: 'isr-of orders/5': topic orders has partitions 0..2 at 4s",
        f"{SRC}: faults[4].groups[0][0]: 'leader-of orders/4': topic orders has partitions 0..2 at 5s"]
    data["faults"][3]["loss"] = "torn"
    data["faults"][1]["count"] = 4  # orders/2..5 from 2s
    assert errors_of(data) == [
        f"{SRC}: faults[0].target: 'leader-of orders/2': topic orders has partitions 0..1 at 1s"]
    data["faults"][0]["at"] = "2.5s"
    parse_topology(data, SRC)



def test_r40_a_partition_the_run_never_has_is_refused_where_firing_order_cannot_be_followed() -> None:
    """A broken add-partitions leaves the topics of each moment unknown, and a broken `at`
    leaves its fault out of the order: a partition the run never has is refused still."""
    data = base()
    data["faults"] = [{"at": "1s", "do": "add-partitions", "topic": "orders", "count": 0},
                      {"at": "2s", "do": "kill", "target": "leader-of orders/9"},
                      {"at": "2", "do": "slow", "delay": "5ms", "to": "isr-of orders/7"}]
    errors = errors_of(data)
    assert [e.split(": ")[1] for e in errors] == ["faults[0].count", "faults[1].target", "faults[2].at",
                                                  "faults[2].to"]
    assert errors[1::2] == [f"{SRC}: faults[1].target: 'leader-of orders/9': topic orders has partitions 0..5",
                            f"{SRC}: faults[2].to: 'isr-of orders/7': topic orders has partitions 0..5"]
    data["faults"][0]["count"] = 4
    assert [e.split(": ")[1] for e in errors_of(data)] == ["faults[2].at"]  # orders/9 exists from 1s

def test_a_nemesis_target_of_more_nodes_than_max_down_is_noted_as_never_firing() -> None:
    """The injector skips a nemesis fault that would take down more than `max_down` nodes: a
    tester's nemesis on `followers-of orders/2` (two followers at RF 3) with max_down 1 was
    drawn 16 times and skipped 16 times, and nothing said so."""
    from testbed.topology import never_firing
    data = nemesis(**{"do": ["kill", "partition-isolate", "slow"], "target": ["random-broker", "followers-of orders/2",
                                                                             "controllers"], "max_down": 1})
    assert never_firing(parse_topology(data, SRC)) == [
        f"{SRC}: faults[0].nemesis.target[1]: followers-of orders/2 is at least 2 nodes, more than max_down 1: "
        "kill and partition-isolate of it are skipped every time they are drawn (max_down 2 lets them fire)"]
    data["faults"][0]["nemesis"]["max_down"] = 2
    assert never_firing(parse_topology(data, SRC)) == []
    data["faults"][0]["nemesis"]["target"] = ["brokers"]
    data["faults"][0]["nemesis"]["do"] = ["pause"]
    [note] = never_firing(parse_topology(data, SRC))
    assert "brokers is at least 3 nodes, more than max_down 2: pause of it is skipped" in note


def test_r31_with_r32_is_valid_and_noted_as_the_legacy_election_acting_first() -> None:
    from testbed.topology import never_firing
    data = with_("protocol", {"unclean_leader_election": True, "unclean_recovery": "balanced"})
    [note] = never_firing(parse_topology(data, SRC))
    assert note.startswith(f"{SRC}: protocol.unclean_recovery: balanced acts only where no replica can lead"), note
    assert never_firing(parse_topology(with_("protocol", {"unclean_leader_election": True}), SRC)) == []


def test_every_timing_rule_broken_is_named_at_once_and_a_default_is_called_one() -> None:
    data = base()
    data["timing"] = {"heartbeat_interval": "1s", "session_timeout": "500ms"}
    assert [e.split(": ")[1] for e in errors_of(data)] == ["timing.controller_election_timeout",
                                                         "timing.session_timeout"]
    assert "(the default) must be longer than heartbeat_interval (1s)" in errors_of(data)[0]


def test_the_examples_of_the_brief_read_exactly() -> None:
    assert errors_of(with_("storage.fsinc", 1)) == [
        "t.yaml: storage.fsinc: unknown key (expected one of: medium, fsync, writeback, segment_bytes)"
    ]
    assert errors_of(with_("topics.0.replication_factor", 4)) == [
        "t.yaml: topics[0].replication_factor: 4 is larger than the number of brokers (3)"
    ]


def test_all_errors_are_collected_at_once() -> None:
    data = base()
    data["storage"] = {"fsinc": "real", "writeback": 5}
    data["topics"][0]["replication_factor"] = 4
    data["workload"] = {"producers": [{"topic": "nope", "acks": 7}]}
    data["faults"] = [{"at": "1s", "do": "kill", "target": "broker:9"}, {"at": "2s", "do": "explode"}]
    data["expect"] = {"lost": 0}
    paths = [e.split(": ")[1] for e in errors_of(data)]
    assert paths == [
        "storage.fsinc",
        "storage.writeback",
        "topics[0].replication_factor",
        "workload.producers[0].topic",
        "workload.producers[0].acks",
        "faults[0].target",
        "faults[1].do",
        "expect.lost",
    ]


def test_a_faults_errors_are_told_by_entry_though_its_partition_is_checked_in_firing_order() -> None:
    """R40: a partition's range is checked in firing order, after every entry is read; its error
    came after the last entry's, away from the rest of its own (trial36)."""
    data = base()
    data["faults"] = [{"at": "2s", "do": "reassign", "partition": "orders/9", "replicas": [1, 2, 3, 1]},
                      {"at": "1s", "do": "kill", "target": "broker-7"},
                      {"at": "3s", "do": "reassign", "partition": "orders/0", "replicas": [1, 1]}]
    data["expect"] = {"lost": 0}
    paths = [e.split(": ")[1] for e in errors_of(data)]
    assert paths == ["faults[0].replicas", "faults[0].partition", "faults[1].target", "faults[2].replicas",
                     "expect.lost"], paths


def test_a_broken_cluster_does_not_cascade_into_target_errors() -> None:
    data = fault(at="1s", do="kill", target="broker:9")
    data["cluster"]["brokers"] = "three"
    errors = errors_of(data)
    assert [e.split(": ")[1] for e in errors] == ["cluster.brokers"]


def test_top_level_must_be_a_mapping() -> None:
    assert errors_of([1, 2]) == [
        "t.yaml: expected a mapping at the top level (keys: name, description, seed, duration, timing, cluster, "
        "protocol, storage, network, topics, workload, faults, expect), got a list of 2"
    ]
    assert "empty" in errors_of(None)[0]


def test_yaml_syntax_error_names_the_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("name: x\ntopics: [\n  {name: a\ncluster: {}\n")
    with pytest.raises(TopologyError) as info:
        load_topology(path)
    (message,) = info.value.errors
    assert message.startswith(f"{path}: line ")
    assert "invalid YAML" in message


@pytest.mark.parametrize("written, read", [("010", 10), ("007", 7), ("-0", 0), ("+12", 12)])
def test_an_integer_of_the_digits_0_9_is_read_in_base_10(tmp_path: Path, written: str, read: int) -> None:
    """PyYAML reads YAML 1.1, where a tester's `seed: 010` was seed 8 and `partitions: 010` 8."""
    path = tmp_path / "t.yaml"
    path.write_text(f"name: t\nseed: {written}\ncluster: {{brokers: {{count: 3}}}}\ntopics: [{{name: o}}]\n")
    assert load_topology(path).seed == abs(read)


@pytest.mark.parametrize("written, key, shown", [("seed: 0x10", "seed", "'0x10'"), ("seed: 1_000", "seed", "'1_000'"),
                                                 ("seed: 0o7", "seed", "'0o7'"), ("duration: 1:30", "duration", "'1:30'")])
def test_other_number_forms_of_yaml_1_1_are_named_not_read(tmp_path: Path, written: str, key: str, shown: str) -> None:
    """Hexadecimal, underscores and sexagesimal passed as 16, 1000 and 90 without a word (a
    `1:30` duration was then "90 is a bare number", a value the user never wrote)."""
    path = tmp_path / "t.yaml"
    path.write_text(f"name: t\n{written}\ncluster: {{brokers: {{count: 3}}}}\ntopics: [{{name: o}}]\n")
    with pytest.raises(TopologyError) as info:
        load_topology(path)
    [error] = info.value.errors
    assert error.startswith(f"{path}: {key}: ") and shown in error


def test_duplicate_yaml_keys_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "dup.yaml"
    path.write_text("name: x\nseed: 1\nseed: 2\n")
    with pytest.raises(TopologyError) as info:
        load_topology(path)
    assert info.value.errors == [f"{path}: line 3, column 1: invalid YAML: duplicate key 'seed' (first given on line 2)"]


def test_yaml_too_deep_or_too_long_to_read_is_an_error_not_a_crash(tmp_path: Path) -> None:
    deep, long = tmp_path / "deep.yaml", tmp_path / "long.yaml"
    deep.write_text("name: x\ntopics: " + "[" * 1000 + "]" * 1000 + "\n")
    long.write_text("name: x\nseed: " + "9" * 4301 + "\n")
    date = tmp_path / "date.yaml"
    date.write_text("name: x\nseed: 2026-13-45\n")  # YAML's timestamp, a month Python refuses
    for path, words in ((deep, "nested too deeply"), (long, "more than 4,300 digits"),
                        (date, "a value that cannot be read (month must be in 1..12)")):
        with pytest.raises(TopologyError) as info:
            load_topology(path)
        (message,) = info.value.errors
        assert message.startswith(f"{path}: invalid YAML") and words in message, message


def test_a_missing_partitions_list_is_cut_short() -> None:
    data = with_("topics.0.partitions", 10_000)
    data["topics"][0].update(placement="explicit", assignment={0: [1, 2, 3]})
    [message] = [e for e in errors_of(data) if "have no replicas" in e]
    assert "partitions 1, 2, 3" in message and "and 9,979 more" in message and len(message) < 300


def test_missing_file_and_non_mapping_file(tmp_path: Path) -> None:
    with pytest.raises(TopologyError, match=r"nowhere\.yaml: no such file"):
        load_topology(tmp_path / "nowhere.yaml")
    path = tmp_path / "list.yaml"
    path.write_text("- a\n- b\n")
    with pytest.raises(TopologyError, match=r"list\.yaml: expected a mapping at the top level"):
        load_topology(path)


def test_defaults_fill_everything_but_name_brokers_and_topics() -> None:
    t = parse_topology(base(), SRC)
    assert (t.seed, t.duration, t.description, t.source) == (0, 10.0, "", SRC)
    assert t.timing == Timing(0.1, 0.6, 1.0, 0.05, (0.3, 0.6), 5.0, 2.0)
    assert t.cluster.controllers == (NodeSpec("controller", 1),)
    assert (t.protocol.truncation, t.protocol.elr, t.protocol.unclean_leader_election) == ("leader-epoch", True, False)
    assert (t.protocol.unclean_recovery, t.protocol.fencing) == ("balanced", "kraft")
    assert (t.storage.medium, t.storage.fsync, t.storage.writeback, t.storage.segment_bytes) == (
        "disk", "simulated", 5.0, 1 << 20)
    assert (t.network.backend, t.network.transport) == ("userspace", "ipc")
    topic = t.topic("orders")
    assert (topic.min_insync_replicas, topic.placement, topic.assignment) == (2, "rack-aware", None)
    assert topic.flush == FlushPolicy(always=False, on_roll=False, messages=1000, interval=1.0)
    assert t.workload.producers == () and t.workload.consumers == () and t.faults == () and t.expect == {}


def test_every_timing_protocol_and_storage_key_is_read_not_defaulted() -> None:
    data = base()
    data["timing"] = {"heartbeat_interval": "50ms", "session_timeout": "1s", "replica_lag_max": "2s",
                      "fetch_max_wait": "0s", "controller_election_timeout": "1s..2s",
                      "hw_checkpoint_interval": "1s", "unclean_recovery_timeout": "3s"}
    data["protocol"] = {"truncation": "high-watermark", "elr": False, "unclean_leader_election": True,
                        "unclean_recovery": "manual", "fencing": "zookeeper"}
    data["storage"] = {"medium": "tmpfs", "fsync": "real", "writeback": "2m", "segment_bytes": "64KiB"}
    t = parse_topology(data, SRC)
    assert t.timing == Timing(0.05, 1.0, 2.0, 0.0, (1.0, 2.0), 1.0, 3.0)
    assert dataclasses.astuple(t.protocol) == ("high-watermark", False, True, "manual", "zookeeper")
    assert dataclasses.astuple(t.storage) == ("tmpfs", "real", 120.0, 65536)


def test_min_insync_defaults_to_min_of_two_and_rf() -> None:
    data = base()
    data["topics"] = [{"name": "one", "replication_factor": 1}, {"name": "two"}]
    t = parse_topology(data, SRC)
    assert t.topic("one").min_insync_replicas == 1
    assert (t.topic("two").partitions, t.topic("two").replication_factor, t.topic("two").min_insync_replicas) == (1, 3, 2)


def test_client_defaults_and_acks_normalisation() -> None:
    data = base()
    data["workload"] = {
        "producers": [{}, {"acks": -1}, {"acks": "1", "rate": "30/m"}, {"acks": 0, "rate": "max", "partitions": [2, 0]}],
        "consumers": [{}],
    }
    t = parse_topology(data, SRC)
    first, minus_one, one, zero = t.workload.producers
    assert (first.count, first.topic, first.acks, first.rate, first.batch, first.retries, first.partitions) == (
        1, "orders", "all", 100.0, 10, 5, None)
    assert [p.acks for p in t.workload.producers] == ["all", "all", "1", "0"]
    assert one.rate == 0.5 and zero.rate is None and zero.partitions == (2, 0)
    (consumer,) = t.workload.consumers
    assert (consumer.count, consumer.topic, consumer.from_) == (1, "orders", "earliest")
    assert minus_one.acks == "all"


def test_producer_in_flight_defaults_to_one_and_must_be_positive() -> None:
    data = base()
    data["workload"] = {"producers": [{}, {"in_flight": 5}]}
    t = parse_topology(data, SRC)
    assert [p.in_flight for p in t.workload.producers] == [1, 5]
    assert t.to_dict()["workload"]["producers"][1]["in_flight"] == 5
    for bad, why in ((0, "0 is too small (expected an integer >= 1)"), (-2, "-2 is too small (expected an integer >= 1)"),
                     ("5", "expected an integer >= 1, got '5'")):
        data["workload"] = {"producers": [{"in_flight": bad}]}
        assert errors_of(data) == [f"t.yaml: workload.producers[0].in_flight: {why}"]


def test_client_topic_is_required_with_several_topics() -> None:
    data = base()
    data["topics"].append({"name": "payments"})
    data["workload"] = {"consumers": [{}]}
    assert errors_of(data) == ["t.yaml: workload.consumers[0].topic: required key missing (there is more than one topic)"]


def test_broker_shorthand_assigns_racks_round_robin() -> None:
    data = with_("cluster", {"controllers": 3, "brokers": {"count": 6, "racks": ["a", "b", "c"]}})
    t = parse_topology(data, SRC)
    assert [(b.id, b.rack) for b in t.cluster.brokers] == [(1, "a"), (2, "b"), (3, "c"), (4, "a"), (5, "b"), (6, "c")]
    assert [c.name for c in t.cluster.controllers] == ["controller-1", "controller-2", "controller-3"]
    assert t.broker_ids == (1, 2, 3, 4, 5, 6) and t.racks == ("a", "b", "c")
    assert t.cluster.brokers[0].name == "broker-1"


def test_controllers_as_a_list_and_racks_as_ints() -> None:
    data = with_("cluster.controllers", [{"id": 7, "rack": 1}, {"id": 9}, {"id": 11}])
    t = parse_topology(data, SRC)
    assert t.cluster.controllers == (NodeSpec("controller", 7, "1"), NodeSpec("controller", 9),
                                     NodeSpec("controller", 11))


def test_a_rack_that_only_a_controller_is_in_is_a_target() -> None:
    data = with_("cluster.controllers", [{"id": 5, "rack": "z"}])
    data["faults"] = [{"at": "1s", "do": "kill", "target": "rack:z"}]
    assert parse_topology(data, SRC).faults[0].target == "rack:z"


def test_explicit_assignment_is_checked_partition_by_partition() -> None:
    data = base()
    data["topics"][0] |= {"partitions": 3, "placement": "explicit", "assignment": {0: [1, 2], 1: [1, 1, 2], 5: [1, 2, 3]}}
    errors = errors_of(data)
    assert errors == [
        "t.yaml: topics[0].assignment[0]: has 2 replicas (expected replication_factor 3)",
        "t.yaml: topics[0].assignment[1]: [1, 1, 2] names a broker twice (expected distinct broker ids)",
        "t.yaml: topics[0].assignment[5]: not a partition of this topic (expected partitions 0..2)",
        "t.yaml: topics[0].assignment: partitions 2 have no replicas (expected every partition 0..2)",
    ]
    data["topics"][0]["assignment"] = {"0": [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]}
    assert errors_of(data) == [  # a tester's quoted keys: the message said only "not a partition"
        "t.yaml: topics[0].assignment.0: not a partition of this topic (expected partitions 0..2) "
        "(the key is the string '0': write it unquoted)",
        "t.yaml: topics[0].assignment: partitions 0 have no replicas (expected every partition 0..2)"]
    data["topics"][0]["assignment"] = {1: [2, 3, 1], 0: [1, 2, 3], 2: [3, 1, 2]}
    topic = parse_topology(data, SRC).topic("orders")
    assert topic.assignment == {0: (1, 2, 3), 1: (2, 3, 1), 2: (3, 1, 2)}


def test_flush_forms() -> None:
    def flush_of(value: object) -> FlushPolicy:
        return parse_topology(with_("topics.0.flush", value), SRC).topic("orders").flush

    assert flush_of("always") == FlushPolicy(always=True, on_roll=False, messages=None, interval=None)
    assert flush_of("on-roll") == FlushPolicy(always=False, on_roll=True, messages=None, interval=None)
    assert flush_of({"messages": 5}) == FlushPolicy(messages=5)
    assert flush_of({"interval": "250ms"}) == FlushPolicy(interval=0.25)
    policy = flush_of({"messages": 5, "interval": "2s"})
    assert FlushPolicy(**policy.to_dict()) == policy
    assert policy.to_dict() == {"messages": 5, "interval": 2.0}


def test_netns_defaults_to_tcp_and_transport_can_be_chosen() -> None:
    assert parse_topology(with_("network.backend", "netns"), SRC).network.transport == "tcp"
    assert parse_topology(with_("network.transport", "tcp"), SRC).network.transport == "tcp"


def test_every_fault_action_and_target_form_is_accepted() -> None:
    data = base()
    data["cluster"]["controllers"] = 3
    data["protocol"] = {"unclean_recovery": "manual"}
    data["faults"] = [
        {"at": "9s", "do": "restart"},
        {"at": "1s", "do": "kill", "target": "broker:1"},
        {"at": "1s", "do": "pause", "target": "controller:2"},
        {"at": "2s", "do": "resume"},
        {"at": "2s", "do": "shutdown", "target": "active-controller"},
        {"at": "2s", "do": "lossy-crash", "target": "followers-of orders/1", "loss": "torn"},
        {"at": "2s", "do": "disk-loss", "target": "stopped"},
        {"at": "3s", "do": "partition", "groups": [["leader-of any", "clients"], ["isr-of orders/5", "brokers"]]},
        {"at": "3s", "do": "partition", "shape": "isolate", "target": "random-controller"},
        {"at": "3s", "do": "partition", "shape": "halves"},
        {"at": "3s", "do": "partition", "shape": "bridge"},
        {"at": "3s", "do": "partition", "shape": "one-way", "from": "clients", "to": "controllers"},
        {"at": "4s", "do": "heal"},
        {"at": "4s", "do": "slow", "delay": "20ms", "jitter": "5ms", "loss": 0.1, "duplicate": 0, "from": "rack:a", "to": "paused"},
        {"at": "5s", "do": "reassign", "partition": "orders/2", "replicas": [3, 2]},
        {"at": "5s", "do": "elect-preferred"},
        {"at": "5s", "do": "elect-preferred", "partition": "orders/3"},
        {"at": "6s", "do": "elect", "partition": "orders/4", "target": "broker:2"},
        {"at": "7s", "do": "kill", "target": "random-broker"},
        {"nemesis": {"from": "1s", "until": "8s", "every": "1s", "target": ["leader-of any"],
                     "do": ["pause", "shutdown", "disk-loss", "partition-isolate", "partition-bridge", "slow", "elect-preferred"]}},
    ]
    t = parse_topology(data, SRC)
    # in the file's order, so that faults[i] is one entry everywhere (the schedule sorts by time)
    assert [f.at if isinstance(f, FaultSpec) else f.start for f in t.faults] == [
        9, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 3, 4, 4, 5, 5, 5, 6, 7, 1]
    faults = [f for f in t.faults if isinstance(f, FaultSpec)]
    assert [f.do for f in faults[1:3]] == ["kill", "pause"]
    assert faults[0] == FaultSpec(9.0, "restart", "stopped", {})
    resume = next(f for f in faults if f.do == "resume")
    assert resume.target == "paused"
    slow = next(f for f in faults if f.do == "slow")
    assert slow.params == {"delay": 0.02, "jitter": 0.005, "loss": 0.1, "duplicate": 0.0, "from": "rack:a", "to": "paused"}
    reassign = next(f for f in faults if f.do == "reassign")
    assert reassign.params == {"partition": "orders/2", "replicas": (3, 2)}
    groups = next(f for f in faults if f.params.get("groups"))
    assert groups.params["groups"] == (("leader-of any", "clients"), ("isr-of orders/5", "brokers"))
    (nem,) = [f for f in t.faults if isinstance(f, NemesisSpec)]
    assert (nem.start, nem.until, nem.every, nem.max_down) == (1.0, 8.0, (1.0, 1.0), 1)
    assert roundtrip(t) == t


def test_nemesis_defaults() -> None:
    t = parse_topology(nemesis(), SRC)
    assert t.faults == (NemesisSpec(0.0, 10.0, (2.0, 4.0), ("kill",), ("random-broker",), 1),)


def test_nemesis_entry_takes_no_other_keys() -> None:
    data = base()
    data["faults"] = [{"nemesis": {"do": ["kill"]}, "at": "1s"}]
    assert errors_of(data) == ["t.yaml: faults[0].at: unknown key (expected one of: nemesis)"]


def roundtrip(t: Any) -> Any:
    """`t` written out and read back; a topology without expectations is written with the
    defaults it is held to, so it reads back as one that states them."""
    dumped = yaml.safe_dump(t.to_dict(), sort_keys=False)
    back = dataclasses.replace(parse_topology(yaml.safe_load(dumped), t.source), source=t.source)
    if not t.expect:
        assert back.expect == DEFAULT_EXPECT
        return dataclasses.replace(back, expect={})
    return back


def test_to_dict_round_trips_the_design_example() -> None:
    t = load_topology(TOPOLOGIES / "rack-outage.yaml")
    again = parse_topology(t.to_dict(), "elsewhere.yaml")
    assert again.source == "elsewhere.yaml"
    assert dataclasses.replace(again, source=t.source) == t
    assert roundtrip(t) == t
    resolved = t.to_dict()
    assert resolved["timing"]["controller_election_timeout"] == "300ms..600ms"
    assert resolved["storage"]["segment_bytes"] == "1MiB"
    assert resolved["faults"][8]["nemesis"]["every"] == "2s..4s"  # the file's ninth entry, as it has it


def test_to_dict_round_trips_unusual_values() -> None:
    data = base()
    data["cluster"] = {"controllers": [{"id": 5, "rack": "x"}], "brokers": {"count": 4}}
    data["topics"] = [
        {"name": "a", "partitions": 2, "replication_factor": 2, "placement": "explicit", "flush": "always",
         "assignment": {0: [1, 2], 1: [3, 4]}},
        {"name": "b", "flush": {"interval": "1.5s"}, "placement": "round-robin"},
    ]
    data["workload"] = {"producers": [{"topic": "a", "rate": 0.3, "acks": 1}], "consumers": [{"topic": "b", "from": "latest"}]}
    data["expect"] = {"lost_writes": ">0", "duplicates": "<=3", "unseen": ">=1", "poll_skips": "<2", "converged": False}
    data["storage"] = {"segment_bytes": 1000, "writeback": "2m"}
    t = parse_topology(data, SRC)
    assert roundtrip(t) == t
    assert t.to_dict()["expect"] == {"lost_writes": ">0", "duplicates": "<=3", "unseen": ">=1", "poll_skips": "<2",
                                     "converged": False}


def test_seed_argument_overrides_the_file() -> None:
    assert load_topology(TOPOLOGIES / "rack-outage.yaml").seed == 7
    assert load_topology(TOPOLOGIES / "rack-outage.yaml", seed=3).seed == 3


SHIPPED = sorted(p for p in TOPOLOGIES.rglob("*.yaml") if not is_matrix_file(p))


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: str(p.relative_to(TOPOLOGIES)))
def test_every_shipped_topology_loads(path: Path) -> None:  # the matrix files (a base: key) are test_matrix's
    t = load_topology(path)
    assert roundtrip(t) == t


def test_shipped_quickstart_and_kill_leader() -> None:
    quick = load_topology(TOPOLOGIES / "quickstart.yaml")
    assert quick.faults == () and quick.expect == {"lost_writes": Expectation("==", 0)}
    assert [(b.id, b.rack) for b in quick.cluster.brokers] == [(1, "a"), (2, "b"), (3, "c")]
    (producers,) = quick.workload.producers
    assert (producers.count, producers.rate, producers.acks) == (2, 200.0, "all")
    kill = load_topology(TOPOLOGIES / "kill-leader.yaml")
    assert kill.faults == (FaultSpec(3.0, "kill", "leader-of orders/0", {}), FaultSpec(6.0, "restart", "stopped", {}))
    assert dataclasses.replace(kill, name=quick.name, description=quick.description, faults=(), source=quick.source) == quick


def test_timing_scaled_multiplies_everything() -> None:
    scaled = Timing().scaled(2)
    assert scaled == Timing(0.2, 1.2, 2.0, 0.1, (0.6, 1.2), 10.0, 4.0)
    with pytest.raises(ValueError, match="time scale must be positive, got 0"):
        Timing().scaled(0)


@pytest.mark.parametrize(
    ("text", "op", "value", "form", "holds", "fails"),
    [(0, "==", 0, "0", 0, 1), ("0", "==", 0, "0", 0, 2), ("==2", "==", 2, "2", 2, 3), (">0", ">", 0, ">0", 1, 0),
     (">=1", ">=", 1, ">=1", 1, 0), ("<3", "<", 3, "<3", 2, 3), ("<=3", "<=", 3, "<=3", 3, 4)],
)
def test_expectations(text: object, op: str, value: int, form: str, holds: int, fails: int) -> None:
    t = parse_topology(with_("expect.lost_writes", text), SRC)
    expectation = t.expect["lost_writes"]
    assert (expectation.op, expectation.value, str(expectation)) == (op, value, form)
    assert expectation.holds(holds) and not expectation.holds(fails)


def test_every_check_name_is_an_expect_key() -> None:
    data = base()
    data["expect"] = {name: 0 for name in CHECK_NAMES} | {"converged": True}
    t = parse_topology(data, SRC)
    assert t.expect["converged"] == Expectation("==", 1) and len(t.expect) == len(CHECK_NAMES) + 1


def test_not_yet_acted_on_lists_only_unsupported_features_in_use() -> None:
    assert not_yet_acted_on(parse_topology(base(), SRC), frozenset()) == []
    data = base()
    data["cluster"]["controllers"] = 3
    data["protocol"] = {"truncation": "high-watermark", "elr": False, "unclean_leader_election": True,
                        "unclean_recovery": "proactive", "fencing": "zookeeper"}
    data["storage"] = {"medium": "tmpfs", "fsync": "real"}
    data["network"] = {"backend": "netns"}
    data["topics"][0] |= {"partitions": 1, "placement": "explicit", "assignment": {0: [1, 2, 3]}}
    data["faults"] = [{"at": "1s", "do": "heal"}]
    data["expect"] = {"lost_writes": 0}
    t = parse_topology(data, SRC)
    notes = not_yet_acted_on(t, frozenset())
    used = FEATURE_NAMES - {"unclean-recovery:none", "unclean-recovery:manual"}
    assert len(notes) == len(used)
    assert all(any(f"'{feature}'" in note for note in notes) for feature in used)
    assert "t.yaml: protocol.unclean_recovery: proactive: this build does not act on it yet" in "\n".join(notes)
    assert not_yet_acted_on(t, FEATURE_NAMES) == []
    assert not_yet_acted_on(t, used - {"fsync:real"}) == [
        "t.yaml: storage.fsync: real: this build does not act on it yet (feature 'fsync:real')"
    ]
    with pytest.raises(ValueError, match="unknown feature"):
        not_yet_acted_on(t, frozenset({"time-travel"}))


def test_topic_lookup() -> None:
    t = parse_topology(base(), SRC)
    with pytest.raises(KeyError, match="no topic 'payments'"):
        t.topic("payments")


# -- durations, sizes, rates ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("250ms", 0.25), ("5s", 5.0), ("2m", 120.0), ("1.5s", 1.5), ("10us", 1e-5), ("0s", 0.0), (" 3 ms", 0.003)],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    ("value", "words"),
    [(5, "write 5s"), (1.5, "write 1.5s"), ("5", "write 5s"), ("5 sec", "not a duration"), ("-1s", "not a duration"),
     ("1h", "not a duration"), (None, "null"), (True, "bool"),
     (float("nan"), "expected a duration such as 250ms or 5s, got nan"), (float("inf"), "got inf")],
)
def test_parse_duration_refuses(value: object, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        parse_duration(value)


def test_format_duration_picks_readable_units() -> None:
    assert [format_duration(s) for s in (0.25, 5, 120, 0, 1e-5, 0.0015)] == ["250ms", "5s", "2m", "0s", "10us", "1500us"]


@given(st.floats(min_value=0, allow_nan=False, allow_infinity=False))
def test_format_then_parse_duration_is_exact(seconds: float) -> None:
    assert parse_duration(format_duration(seconds)) == seconds


@given(st.integers(min_value=0, max_value=10**9), st.sampled_from(["us", "ms", "s", "m"]))
def test_parse_then_format_duration_is_stable(amount: int, unit: str) -> None:
    seconds = parse_duration(f"{amount}{unit}")
    assert parse_duration(format_duration(seconds)) == seconds


def test_duration_ranges() -> None:
    assert parse_duration_range("300ms..600ms") == (0.3, 0.6)
    assert parse_duration_range("2s") == (2.0, 2.0)
    with pytest.raises(ValueError, match="low end"):
        parse_duration_range("2s..1s")
    with pytest.raises(ValueError, match="write 300s"):
        parse_duration_range("300..600ms")


@pytest.mark.parametrize(
    ("value", "size"), [(1000, 1000), ("100B", 100), ("64KiB", 65536), ("1MiB", 1 << 20), ("1.5GiB", 3 << 29)]
)
def test_parse_size(value: object, size: int) -> None:
    assert parse_size(value) == size
    assert parse_size(format_size(size)) == size


@pytest.mark.parametrize("value", ["1MB", "1.5B", "lots", True, 1.5])
def test_parse_size_refuses(value: object) -> None:
    with pytest.raises(ValueError):
        parse_size(value)


@pytest.mark.parametrize(("value", "rate"), [("500/s", 500.0), ("30/m", 0.5), (20, 20.0), (2.5, 2.5), ("1 / s", 1.0)])
def test_parse_rate(value: object, rate: float) -> None:
    assert parse_rate(value) == rate
    assert parse_rate(format_rate(rate)) == rate


@pytest.mark.parametrize("value", ["500", "500/h", "fast", True, None])
def test_parse_rate_refuses(value: object) -> None:
    with pytest.raises(ValueError):
        parse_rate(value)


@given(st.floats(min_value=1e-6, max_value=1e9, allow_nan=False))
def test_format_then_parse_rate_is_exact(rate: float) -> None:
    assert parse_rate(format_rate(rate)) == rate


def test_null_member_of_a_partition_group_is_an_error_not_a_crash() -> None:
    data = {"name": "x", "cluster": {"brokers": [{"id": 1}, {"id": 2}]}, "topics": [{"name": "t"}],
            "faults": [{"at": "1s", "do": "partition", "groups": [[None], ["broker:1"]]}]}
    with pytest.raises(TopologyError) as e:
        parse_topology(data, "x.yaml")
    assert "x.yaml: faults[0].groups[0][0]: expected a target" in str(e.value)


def test_elect_must_name_a_replica_of_its_partition() -> None:
    """`elect` names the operator's choice of leader: it must be a replica of the partition, as
    placed at the start (R34, the run's seed) or as a `reassign` of the run moves it."""
    data = base()
    data["cluster"]["brokers"].append({"id": 4, "rack": "a"})
    data["topics"] = [{"name": "orders", "partitions": 1, "replication_factor": 2, "placement": "explicit",
                       "assignment": {0: [1, 2]}}]
    data["faults"] = [{"at": "1s", "do": "elect", "partition": "orders/0", "target": "broker:3"}]
    errors = errors_of(data)
    assert any(e.startswith(f"{SRC}: faults[0].target: ") and "broker 3 is not a replica of orders/0" in e
               and "[1, 2]" in e for e in errors), errors
    data["faults"] = [{"at": "1s", "do": "reassign", "partition": "orders/0", "replicas": [3, 4]},
                      {"at": "2s", "do": "elect", "partition": "orders/0", "target": "broker:3"}]
    assert parse_topology(data, SRC).faults[1].target == "broker:3"


def test_a_run_acts_on_every_setting_of_the_schema() -> None:
    """Issues 8, 9 and 14: every protocol mode, the controller quorum and the netns backend
    are acted on; a run has no "not yet acted on" line left to print."""
    from testbed.experiment.runner import SUPPORTED

    data = base()
    data["cluster"]["controllers"] = 3
    data["protocol"] = {"truncation": "high-watermark", "elr": False, "unclean_leader_election": True,
                        "unclean_recovery": "manual", "fencing": "zookeeper"}
    data["network"] = {"backend": "netns"}
    data["storage"] = {"medium": "tmpfs", "fsync": "real"}
    assert not_yet_acted_on(parse_topology(data, SRC), SUPPORTED) == []
    assert SUPPORTED == FEATURE_NAMES


def test_an_even_quorum_runs_when_asked_for_and_says_so_in_the_resolved_topology() -> None:
    data = with_("cluster.controllers", 4)
    data["cluster"]["allow_even_quorum"] = True
    t = parse_topology(data, SRC)
    assert len(t.cluster.controllers) == 4 and t.to_dict()["cluster"]["allow_even_quorum"] is True
    assert parse_topology(base(), SRC).to_dict()["cluster"]["allow_even_quorum"] is False  # every default filled in


def test_the_resolved_topology_states_the_default_expectations_a_run_without_any_is_held_to() -> None:
    """DESIGN section 7: topology.yaml is the resolved topology, every default filled in."""
    assert parse_topology(base(), SRC).to_dict()["expect"] == {
        "lost_writes": 0, "inconsistent_offsets": 0, "log_divergence": 0, "leader_conflicts": 0}


def test_r38_r39_the_broker_set_is_followed_through_the_run() -> None:
    """validate follows the broker set in firing order: a broker added at 1 s may be removed at
    2 s, after which removing another would leave fewer brokers than the topic's RF."""
    data = base()
    data["faults"] = [{"at": "1s", "do": "add-broker", "broker": {"id": 4, "rack": "d"}, "rebalance": False},
                      {"at": "2s", "do": "remove-broker", "target": "broker:4"},
                      {"at": "3s", "do": "remove-broker", "target": "broker:2"}]
    errors = errors_of(data)
    assert errors == [f"{SRC}: faults[2].target: removing broker 2 leaves 2 brokers, fewer than the replication "
                      f"factor 3 of topic 'orders'; its partitions could not be placed elsewhere"]
    data["faults"] = data["faults"][:2]
    topo = parse_topology(data, SRC)
    assert [f.params for f in topo.faults][0] == {"broker": {"id": 4, "rack": "d"}, "rebalance": False}
    assert parse_topology(yaml.safe_load(yaml.safe_dump(topo.to_dict())), SRC).faults == topo.faults


def test_r40_the_topic_set_is_followed_through_the_run() -> None:
    """validate follows the topics in firing order: a topic created at 1 s may be grown at
    2 s and deleted at 3 s, and its name taken again at 4 s; clients may name it from the
    start (they wait for it), and references to its added partitions pass."""
    data = base()
    data["workload"] = {"producers": [{"topic": "t2", "acks": "all", "rate": "10/s", "partitions": [0, 3]}]}
    data["faults"] = [{"at": "1s", "do": "create-topic", "topic": {"name": "t2", "partitions": 2}},
                      {"at": "2s", "do": "add-partitions", "topic": "t2", "count": 2},
                      {"at": "3s", "do": "delete-topic", "topic": "t2"},
                      {"at": "4s", "do": "create-topic", "topic": {"name": "t2"}},
                      {"at": "5s", "do": "delete-topic", "topic": "orders"}]
    topo = parse_topology(data, SRC)
    assert topo.first_partitions("t2") == 2 and topo.faults[1].params == {"topic": "t2", "count": 2}
    # over the run: t2 grew to 4, was deleted, and came back with 1 partition (its last making's,
    # which the convergence owes): not gone; orders is gone
    assert topo.topics_over_run() == [("orders", 6, 3, 2, True), ("t2", 1, 3, 2, False)]
    # what took effect, not the schedule: the second making never happened
    done = [("create-topic", topo.faults[0].params), ("add-partitions", topo.faults[1].params)]
    assert topo.topics_over_run(done) == [("orders", 6, 3, 2, False), ("t2", 4, 3, 2, False)]
    assert topo.faults[0].params["topic"]["replication_factor"] == 3  # the topics section's default, written out
    assert parse_topology(yaml.safe_load(yaml.safe_dump(topo.to_dict())), SRC).faults == topo.faults
    data["faults"].append({"at": "6s", "do": "add-partitions", "topic": "orders", "count": 1})
    assert errors_of(data) == [f"{SRC}: faults[5].topic: no topic 'orders' at 6s (topics then: t2); "
                               f"add-partitions needs an existing topic"]


def test_r39_r40_brokers_and_topics_are_followed_together() -> None:
    """One walk in firing order for both sets: broker 4 joins, so a topic at RF 4 may be
    created; removing a broker is then refused (R39: that topic's partitions could not keep
    RF 4) until the topic is deleted. A topic created after removals may not ask for more
    replicas than the brokers of that moment."""
    data = base()
    data["topics"][0]["replication_factor"] = 2
    data["faults"] = [{"at": "1s", "do": "add-broker", "broker": {"id": 4, "rack": "d"}},
                      {"at": "2s", "do": "create-topic", "topic": {"name": "wide", "replication_factor": 4}},
                      {"at": "2.5s", "do": "add-partitions", "topic": "wide", "count": 1},
                      {"at": "3s", "do": "delete-topic", "topic": "wide"},
                      {"at": "4s", "do": "remove-broker", "target": "broker:1"},
                      {"at": "5s", "do": "create-topic", "topic": {"name": "late", "replication_factor": 3}}]
    assert parse_topology(data, SRC).faults[5].params["topic"]["replication_factor"] == 3
    data["faults"][3]["at"] = "4.5s"  # the removal now comes while `wide` (RF 4) exists
    data["faults"].append({"at": "6s", "do": "remove-broker", "target": "broker:2"})
    data["faults"].append({"at": "7s", "do": "create-topic", "topic": {"name": "later", "replication_factor": 3}})
    assert errors_of(data) == [
        f"{SRC}: faults[4].target: removing broker 1 leaves 3 brokers, fewer than the replication factor 4 "
        f"of topic 'wide'; its partitions could not be placed elsewhere",
        f"{SRC}: faults[6].target: removing broker 2 leaves 2 brokers, fewer than the replication factor 3 "
        f"of topic 'late'; its partitions could not be placed elsewhere",
        f"{SRC}: faults[7].topic.replication_factor: 3 is more than the 2 brokers in the cluster at 7s ([3, 4])"]


def test_r38_r39_a_fault_may_name_a_broker_while_it_is_in_the_cluster() -> None:
    """validate follows the broker set in firing order for every fault that names a broker,
    as it does for add-broker and remove-broker: an added broker may be killed, reassigned
    to, partitioned and found in its rack after it joins; before it joins, or after a
    broker leaves, naming it is an error (a new user's kill of a removed broker passed
    validate and failed at run time)."""
    data = base()
    data["faults"] = [{"at": "1s", "do": "add-broker", "broker": {"id": 6, "rack": "d"}},
                      {"at": "2s", "do": "kill", "target": "broker:6"},
                      {"at": "3s", "do": "restart"},
                      {"at": "4s", "do": "reassign", "partition": "orders/0", "replicas": [6, 1, 3]},
                      {"at": "5s", "do": "partition", "groups": [["broker:6"], ["brokers", "controllers"]]},
                      {"at": "6s", "do": "heal"},
                      {"at": "7s", "do": "pause", "target": "rack:d"},
                      {"at": "8s", "do": "resume"}]
    assert parse_topology(data, SRC).faults[1].target == "broker:6"
    early = base()
    early["faults"] = [{"at": "1s", "do": "kill", "target": "broker:6"},
                       {"at": "2s", "do": "add-broker", "broker": {"id": 6, "rack": "c"}},
                       {"at": "3s", "do": "remove-broker", "target": "broker:2"},
                       {"at": "4s", "do": "reassign", "partition": "orders/0", "replicas": [2, 1, 3]},
                       {"at": "5s", "do": "kill", "target": "broker:2"}]
    assert errors_of(early) == [
        f"{SRC}: faults[0].target: broker 6 is not in the cluster at 1s (brokers then: [1, 2, 3])",
        f"{SRC}: faults[3].replicas: broker 2 is not in the cluster at 4s (brokers then: [1, 3, 6])",
        f"{SRC}: faults[4].target: broker 2 is not in the cluster at 5s (brokers then: [1, 3, 6])"]


def test_r38_r39_a_rack_target_names_a_broker_in_the_cluster_when_it_fires() -> None:
    """`rack:X` as a target, `from`, `to` or group member acts on the rack's brokers in the
    cluster when it fires: a rack whose brokers were all removed before it, or are added only
    after it, would act on no node (a tester's kill of such a rack passed validate). A rack
    with a controller in it still names that controller."""
    data = base()
    data["cluster"]["brokers"] += [{"id": 4, "rack": "d"}, {"id": 5, "rack": "c"}]
    data["topics"][0]["replication_factor"] = 2
    data["faults"] = [{"at": "1s", "do": "remove-broker", "target": "broker:4"},
                      {"at": "2s", "do": "kill", "target": "rack:d"},
                      {"at": "3s", "do": "partition", "shape": "one-way", "from": "rack:d", "to": "rack:b"},
                      {"at": "4s", "do": "partition", "groups": [["rack:e"], ["brokers", "controllers"]]},
                      {"at": "5s", "do": "add-broker", "broker": {"id": 6, "rack": "e"}},
                      {"at": "6s", "do": "remove-broker", "target": "broker:3"},
                      {"at": "7s", "do": "pause", "target": "rack:c"}]
    assert errors_of(data) == [
        f"{SRC}: faults[1].target: rack d has no broker in the cluster at 2s (its brokers [4] are removed before "
        f"it or added only after it; brokers then: [1, 2, 3, 5])",
        f"{SRC}: faults[2].from: rack d has no broker in the cluster at 3s (its brokers [4] are removed before "
        f"it or added only after it; brokers then: [1, 2, 3, 5])",
        f"{SRC}: faults[3].groups[0][0]: rack e has no broker in the cluster at 4s (its brokers [6] are removed "
        f"before it or added only after it; brokers then: [1, 2, 3, 5])"]
    data["faults"] = data["faults"][4:] + [{"at": "8s", "do": "kill", "target": "rack:e"}]
    parse_topology(data, SRC)  # rack c keeps broker 5; rack e has broker 6 from 5s
    data["cluster"]["controllers"] = [{"id": 1, "rack": "d"}]
    data["faults"] = [{"at": "1s", "do": "remove-broker", "target": "broker:4"},
                      {"at": "2s", "do": "kill", "target": "rack:d"}]
    parse_topology(data, SRC)  # rack d still holds the controller


def test_a_nemesis_partition_into_halves_past_its_max_down_is_named_as_never_firing() -> None:
    """The injector skips a fault that would put more than max_down nodes out of reach, and a
    partition into halves cuts off at least half of them: with max_down 1 it was drawn and
    skipped every time (the shipped nemesis.yaml's did, unnoticed). validate, --dry-run, a
    run and the sim say so."""
    from testbed.topology import never_firing
    data = base()
    data["duration"] = "10s"
    data["faults"] = [{"nemesis": {"from": "1s", "until": "9s", "every": "1s", "do": ["kill", "partition-halves"],
                                   "target": ["random-broker"], "max_down": 1}}]
    assert never_firing(parse_topology(data, SRC)) == [
        f"{SRC}: faults[0].nemesis: partition-halves cuts off at least 2 of the 4 nodes, more than max_down 1: it is "
        f"skipped every time it is drawn (max_down 2 lets it fire whichever half the active controller is in)"]
    # named where it is in the file, though the faults are kept in firing order
    data["faults"].append({"at": "0.5s", "do": "pause", "target": "broker:1"})
    data["faults"].reverse()
    topology = parse_topology(data, SRC)
    assert [type(f).__name__ for f in topology.faults] == ["FaultSpec", "NemesisSpec"]
    assert [n.split(": ")[1] for n in never_firing(topology)] == ["faults[1].nemesis"]
    data["faults"][1]["nemesis"]["max_down"] = 2
    assert never_firing(parse_topology(data, SRC)) == []
    assert never_firing(load_topology(TOPOLOGIES / "nemesis.yaml")) == []


def test_a_disk_loss_that_may_strike_the_only_controller_is_noted() -> None:
    """The injector keeps the only controller's data directory (its log is all the metadata
    there is) and kills it instead: a tester's `disk-loss` of controller:1 did so with nothing
    said before the run but `kept` in the effect (trial23 F6)."""
    from testbed.topology import never_firing
    data = base()
    data["cluster"]["controllers"] = 1
    data["faults"] = [{"at": "1s", "do": "disk-loss", "target": "controller:1"},
                      {"at": "2s", "do": "disk-loss", "target": "broker:1"},
                      {"nemesis": {"from": "1s", "until": "3s", "every": "1s", "do": ["kill", "disk-loss"],
                                   "target": ["random-broker", "active-controller"], "max_down": 1}}]
    notes = never_firing(parse_topology(data, SRC))
    assert [n.split(": ")[1] for n in notes] == ["faults[0]", "faults[2].nemesis"]
    assert "a disk-loss of the only controller keeps its data directory" in notes[0]
    data["cluster"]["controllers"] = 3
    assert never_firing(parse_topology(data, SRC)) == []


def test_consumers_beyond_their_topics_partitions_are_noted_unless_a_topic_fault_may_give_them_one() -> None:
    """trial31: 10 consumers over 6 partitions started 6, with nothing said."""
    from testbed.topology import never_firing
    data = base()
    data["workload"] = {"consumers": [{"topic": "orders", "count": 10}, {"topic": "orders", "count": 6}]}
    [note] = never_firing(parse_topology(data, SRC))
    assert note.endswith("workload.consumers[0].count: 10 consumers share the 6 partition(s) of orders: 4 get "
                         "none and are not started"), note
    data["faults"] = [{"at": "1s", "do": "add-partitions", "topic": "orders", "count": 12}]
    assert never_firing(parse_topology(data, SRC)) == []


def test_a_producer_whose_one_batch_outlasts_the_run_is_noted() -> None:
    """The rate paces whole batches: a tester's `rate: 100/s` with `batch: 100000` sent its
    100,000 values at 0 s of a 5 s run, 200 times the rate it read as (trial23)."""
    from testbed.topology import never_firing
    data = base()
    data["duration"] = "5s"
    data["workload"] = {"producers": [{"topic": "orders", "rate": "100/s", "batch": 100000},
                                      {"topic": "orders", "rate": "100/s", "batch": 10},
                                      {"topic": "orders", "rate": "max", "batch": 100000}]}
    assert never_firing(parse_topology(data, SRC)) == [
        f"{SRC}: workload.producers[0]: a batch of 100,000 at 100/s is one batch every 1000s, not less than the "
        f"run's 5s: each producer sends its one batch at the start, all at once (the rate paces batches)"]


def test_a_reassignment_below_the_topics_min_isr_is_noted() -> None:
    """Valid, as Kafka takes it, but acks=all is then acknowledged with fewer copies than
    MinISR (R20: min(MinISR, RF)); a tester's move of an RF 3, MinISR 2 partition to one
    replica went unsaid (trial23 N6)."""
    from testbed.topology import never_firing
    data = base()
    data["faults"] = [{"at": "1s", "do": "reassign", "partition": "orders/0", "replicas": [1]},
                      {"at": "2s", "do": "reassign", "partition": "orders/1", "replicas": [1, 2]}]
    assert never_firing(parse_topology(data, SRC)) == [
        f"{SRC}: faults[0].replicas: 1 replica(s), fewer than the min_insync_replicas of orders (2): acks=all writes "
        f"are then acknowledged with 1 copy (R20: the ISR must reach min(MinISR, RF))"]


def test_an_add_broker_missing_only_its_rack_still_counts_in_the_membership_walk() -> None:
    """trial34: `add-broker {id: 4}` in a racked cluster stopped the walk of the broker set at
    its own error; the removal leaving too few brokers and the id in use after it came out
    only once the rack was added. Every one of them is said in one pass now."""
    data = base()
    data["faults"] = [{"at": "1s", "do": "remove-broker", "target": "broker:3"},
                      {"at": "2s", "do": "add-broker", "broker": {"id": 4}},
                      {"at": "3s", "do": "add-broker", "broker": {"id": 4, "rack": "d"}}]
    errors = errors_of(data)
    assert f"{SRC}: faults[1].broker.rack: the cluster's brokers have racks, so the new one needs one" in errors
    assert any(e.startswith(f"{SRC}: faults[0].target: removing broker 3 leaves 2 brokers") for e in errors), errors
    assert any(e.startswith(f"{SRC}: faults[2].broker.id: broker 4 is in use at 3s") for e in errors), errors
