"""A producer given no `partitions` of its own sends to the partitions of its topic as the
newest metadata lists them (R40), looked at every `METADATA_MAX_AGE`, as a Kafka producer's
partitioner takes the partition count of its current metadata: partitions an
`add-partitions` adds take writes, and a partition that is gone takes none. A tester's
producer on a topic deleted and made again with 1 partition instead of 2 kept sending to t/1 to the end (25-30 UNKNOWN_TOPIC_OR_PARTITION a second, 5
acks a second on t/0): the partitions it chose among were every one any metadata answer had
ever listed.

The loops run here against a fake cluster on a fake clock (`_FakeCluster`), and the whole
sim runs the tester's topology (`test_the_sim_...`)."""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from broker.client import Call, CallEach, Collect, Sleep, Start, StepClient, Steps
from broker.common.errors import Errors
from broker.common.jsonl import read_jsonl
from broker.protocol.messages import (
    MetadataRequest,
    MetadataResponse,
    PartitionMetadata,
    ProduceRequest,
    ProduceResponse,
)
from testbed.clients.client_config import ClientConfig, ProducerSettings
from testbed.clients.history import History
from testbed.clients.loops import METADATA_MAX_AGE, Clock, Stop, client_loop
from testbed.clients.stats import Tally
from testbed.sim.run import run_seed
from testbed.topology import parse_topology

BROKERS = {1: "ipc://b1", 2: "ipc://b2", 3: "ipc://b3"}
#: what a request to the fake cluster takes, in its seconds
RTT = 0.001


class _FakeCluster:
    """The topic `t` over time: `changes` is [(at, partitions or None: no such topic)], the
    metadata offset growing with each change. It answers metadata and produce requests as a
    broker does (a produce to a partition it does not have: UNKNOWN_TOPIC_OR_PARTITION) and
    carries a loop's steps out on its own clock."""

    def __init__(self, changes: list[tuple[float, tuple[int, ...] | None]]) -> None:
        self.changes = changes
        self.now = 0.0
        self.next_offset: dict[int, int] = defaultdict(int)

    def state(self) -> tuple[int, tuple[int, ...] | None]:
        offset, partitions = 0, None
        for i, (at, parts) in enumerate(self.changes):
            if at <= self.now:
                offset, partitions = 10 * (i + 1), parts
        return offset, partitions

    def answer(self, msg: Any) -> Any:
        offset, partitions = self.state()
        if isinstance(msg, MetadataRequest):
            if partitions is None:
                return MetadataResponse(Errors.UNKNOWN_TOPIC_OR_PARTITION, metadata_offset=offset, endpoints=BROKERS)
            return MetadataResponse(metadata_offset=offset, endpoints=BROKERS, partitions=[
                PartitionMetadata("t", p, 1, 1, 1, [1, 2, 3], [1, 2, 3]) for p in partitions])
        assert isinstance(msg, ProduceRequest)
        if partitions is None or msg.partition not in partitions:
            return ProduceResponse("t", msg.partition, Errors.UNKNOWN_TOPIC_OR_PARTITION)
        base = self.next_offset[msg.partition]
        self.next_offset[msg.partition] += 1
        return ProduceResponse("t", msg.partition, Errors.NONE, base_offset=base)

    def run(self, steps: Steps, stop: Stop, until: float) -> None:
        started: list[tuple[Any, Any]] = []
        value: Any = None
        while True:
            if self.now >= until:
                stop.requested = True
            try:
                command = steps.send(value)
            except StopIteration:
                return
            value = None
            if isinstance(command, Call):
                self.now += RTT
                value = self.answer(command.msg)
            elif isinstance(command, CallEach):
                self.now += RTT
                value = [self.answer(msg) for _, msg in command.calls]
            elif isinstance(command, Start):
                started.append((command.tag, self.answer(command.msg)))
            elif isinstance(command, Collect):
                self.now += RTT if started else command.wait
                value, started = started, []
            elif isinstance(command, Sleep):
                self.now += command.seconds
            else:
                raise TypeError(command)


def _produce(tmp_path: Path, changes: list[tuple[float, tuple[int, ...] | None]], in_flight: int,
             until: float = 6.0) -> list[dict]:
    """A producer at 100/s, batch 5, following the topic's partitions, for `until` fake seconds;
    its history records."""
    fake = _FakeCluster(changes)
    settings = ProducerSettings(acks="all", rate=100.0, batch=5, retries=5, retry_backoff=0.05, in_flight=in_flight)
    cfg = ClientConfig(process="producer-0", topic="t", partitions=(0, 1), brokers=BROKERS,
                       history=tmp_path / "history.jsonl", supervisor_pid=0, stats_endpoint=None,
                       request_timeout=2.0, producer=settings, follow_partitions=True)
    drive(fake, cfg, until)
    return list(read_jsonl(cfg.history))


def drive(fake: _FakeCluster, cfg: ClientConfig, until: float) -> None:
    """The loop `cfg` asks for, run on the fake cluster's clock for `until` fake seconds,
    its history written to `cfg.history`."""
    history = History(cfg.history, cfg.process, clock_ns=lambda: int(fake.now * 1e9))
    stop = Stop()
    client = StepClient(BROKERS, cfg.process, cfg.request_timeout)
    clock = Clock(lambda: fake.now, lambda: int(fake.now * 1e9))
    try:
        fake.run(client_loop(cfg, client, history, Tally(), clock, stop), stop, until)
    finally:
        history.close()


def _first_sends(records: list[dict]) -> list[tuple[float, int]]:
    """(time, partition) of each batch's first attempt: a retry sends values sent before."""
    seen: set[str] = set()
    out = []
    for r in records:
        if r["type"] == "invoke" and r["value"] not in seen:
            seen.add(r["value"])
            out.append((r["time_ns"] / 1e9, r["partition"]))
    return out


@pytest.mark.parametrize("in_flight", [1, 5])
def test_a_partition_gone_with_its_topic_made_again_smaller_takes_no_new_batch(tmp_path: Path,
                                                                             in_flight: int) -> None:
    made_again = 2.0
    records = _produce(tmp_path, [(0.0, (0, 1)), (1.0, None), (made_again, (0,))], in_flight)
    # the metadata is looked at within METADATA_MAX_AGE of the topic's making (and the look itself is a request)
    deadline = made_again + METADATA_MAX_AGE + 0.1
    late = [(t, p) for t, p in _first_sends(records) if t >= deadline and p == 1]
    assert late == [], f"records first sent to t/1, gone since {made_again}s: {late[:3]} ... ({len(late)})"
    # and t/0 takes the whole load: 20 batches of 5 a second, not the 1 left over by t/1's retries
    acked = [r for r in records if r["type"] == "ok" and r["time_ns"] / 1e9 >= deadline + 1.0]
    assert {r["partition"] for r in acked} == {0}
    assert len(acked) >= 0.9 * 100 * (6.0 - deadline - 1.0)


@pytest.mark.parametrize("in_flight", [1, 5])
def test_partitions_an_add_partitions_adds_take_writes(tmp_path: Path, in_flight: int) -> None:
    records = _produce(tmp_path, [(0.0, (0, 1)), (2.0, (0, 1, 2, 3))], in_flight)
    after = {p for t, p in _first_sends(records) if t >= 2.0 + METADATA_MAX_AGE + 0.1}
    assert after == {0, 1, 2, 3}
    assert {p for t, p in _first_sends(records) if t < 2.0} == {0, 1}


@pytest.mark.parametrize("in_flight", [1, 5])
def test_a_topic_deleted_for_good_is_still_sent_to_and_its_failures_recorded(tmp_path: Path, in_flight: int) -> None:
    """No metadata describes the topic any more: the producer keeps its last partitions, and
    every send to them fails with UNKNOWN_TOPIC_OR_PARTITION, in the history."""
    records = _produce(tmp_path, [(0.0, (0, 1)), (1.0, None)], in_flight)
    late = [r for r in records if r["time_ns"] / 1e9 >= 2.0]
    assert {r["partition"] for r in late if r["type"] == "invoke"} == {0, 1}
    completions = [r for r in late if r["type"] != "invoke"]
    assert completions and all(r["type"] == "fail" and r["error"] == "UNKNOWN_TOPIC_OR_PARTITION"
                               for r in completions)


def test_a_lagging_brokers_older_answer_does_not_take_back_the_partitions_of_a_newer_one() -> None:
    client = StepClient(BROKERS, "producer-0", 2.0)

    def answer(offset: int, partitions: tuple[int, ...]) -> MetadataResponse:
        return MetadataResponse(metadata_offset=offset, endpoints=BROKERS, partitions=[
            PartitionMetadata("t", p, 1, 1, 1, [1, 2, 3], [1, 2, 3]) for p in partitions])

    def refresh(*answers: MetadataResponse | None) -> None:
        """One refresh, brokers 1, 2, 3 answering `answers` to its one CallEach."""
        steps = client.refresh_metadata(["t"])
        next(steps)
        try:
            steps.send(list(answers))
        except StopIteration:
            pass

    refresh(answer(5, (0, 1)), answer(5, (0, 1)), answer(5, (0, 1)))
    assert client.partitions_of("t") == (0, 1)
    refresh(answer(9, (0,)), answer(5, (0, 1)), answer(5, (0, 1)))  # made again with 1: broker 1 knows
    assert client.partitions_of("t") == (0,)
    refresh(None, answer(5, (0, 1)), answer(5, (0, 1)))  # broker 1 silent, the others lag
    assert client.partitions_of("t") == (0,)
    assert client.partitions_of("other") == ()


RECREATE = {
    "name": "recreate-smaller", "seed": 1, "duration": "8s",
    "cluster": {"controllers": 1, "brokers": [{"id": 1, "rack": "a"}, {"id": 2, "rack": "b"}, {"id": 3, "rack": "c"}]},
    "topics": [{"name": "t", "partitions": 2, "replication_factor": 3, "min_insync_replicas": 2}],
    "workload": {"producers": [{"count": 1, "topic": "t", "acks": "all", "rate": "100/s", "batch": 5}]},
    "faults": [{"at": "1s", "do": "delete-topic", "topic": "t"},
               {"at": "2s", "do": "create-topic",
                "topic": {"name": "t", "partitions": 1, "replication_factor": 3, "min_insync_replicas": 2}}],
}


def test_the_sim_producer_stops_choosing_a_partition_gone_with_the_topic_made_again_smaller(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    outcome = run_seed(parse_topology(RECREATE, "recreate-smaller"), run_dir)
    assert outcome.error is None and outcome.converged
    [made] = [r for r in read_jsonl(run_dir / "faults.jsonl") if r["do"] == "create-topic" and r["phase"] == "end"]
    assert "error" not in (made.get("effect") or {}), made
    # every partition led when the fault ended: the producer's next look at the metadata,
    # within METADATA_MAX_AGE (plus the look's own requests), sees t with 1 partition
    deadline = made["time_ns"] / 1e9 + METADATA_MAX_AGE + 0.5
    producer = [r for r in read_jsonl(run_dir / "history.jsonl") if r["process"] == "producer-0"]
    late = [(t, p) for t, p in _first_sends(producer) if t >= deadline and p == 1]
    assert late == [], f"records first sent to t/1 after {deadline:.3f}s: {late[:3]} ... ({len(late)})"
    # the workload ends at the last record of the producer; from the deadline on, t/0 takes the load
    end = max(r["time_ns"] for r in producer) / 1e9
    acked = [r for r in producer if r["type"] == "ok" and r["time_ns"] / 1e9 >= deadline]
    assert end - deadline > 2.0 and len(acked) >= 0.8 * 100 * (end - deadline)
