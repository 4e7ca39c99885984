"""A consumer of a topic that topic faults change (R40) reads its share of the topic's
partitions as the newest metadata lists them, looked at every `METADATA_MAX_AGE`, as a
subscribed Kafka consumer is assigned the partitions an `add-partitions` adds. A tester saw
consumers keep the partition list they started with: the partitions added later were
written to and never read.

The loops run against the fake cluster of `test_producer_partitions` on its fake clock; the
client configurations are built from topologies as the supervisor and the sim build them."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from broker.common.errors import Errors
from broker.protocol.messages import FetchPartitionResult, FetchRequest, FetchResponse
from testbed.clients.client_config import ClientConfig, ConsumerSettings
from testbed.clients.loops import METADATA_MAX_AGE
from testbed.supervisor.client_configs import build_client_configs
from testbed.topology import parse_topology
from tests.unit.test_producer_partitions import BROKERS, _FakeCluster, drive

GROWN = 2.0  # when the fake topic grows from 2 partitions to 5


class _FetchingCluster(_FakeCluster):
    """The fake cluster answering a consumer's fetches too: no records (a fetch waits its
    `max_wait_ms`, as an empty long poll does), each fetch noted with its time."""

    def __init__(self, changes: list[tuple[float, tuple[int, ...] | None]]) -> None:
        super().__init__(changes)
        self.fetched: list[tuple[float, int]] = []

    def answer(self, msg: Any) -> Any:
        if not isinstance(msg, FetchRequest):
            return super().answer(msg)
        [p] = msg.partitions
        self.fetched.append((self.now, p.partition))
        self.now += msg.max_wait_ms / 1000
        return FetchResponse(partitions=[FetchPartitionResult("t", p.partition, high_watermark=0, log_end_offset=0)])


def _consume(tmp_path: Path, share: tuple[int, int], partitions: tuple[int, ...], follow: bool,
             until: float = 5.0) -> list[tuple[float, int]]:
    """(time, partition) of every fetch of consumer `share` on a topic of 2 partitions that
    has 5 from `GROWN` on."""
    fake = _FetchingCluster([(0.0, (0, 1)), (GROWN, (0, 1, 2, 3, 4))])
    cfg = ClientConfig(process=f"consumer-{share[0]}", topic="t", partitions=partitions, brokers=BROKERS,
                       history=tmp_path / "history.jsonl", supervisor_pid=0, stats_endpoint=None,
                       request_timeout=2.0, consumer=ConsumerSettings(from_="earliest", max_wait=0.1),
                       follow_partitions=follow, share_of=share)
    drive(fake, cfg, until)
    return fake.fetched


def _after_growth(fetched: list[tuple[float, int]]) -> set[int]:
    return {p for t, p in fetched if t >= GROWN + METADATA_MAX_AGE + 0.2}


def test_r40_a_following_consumer_reads_the_partitions_an_add_partitions_adds(tmp_path: Path) -> None:
    fetched = _consume(tmp_path, (0, 1), (0, 1), follow=True)
    assert {p for t, p in fetched if t < GROWN} == {0, 1}
    assert _after_growth(fetched) == {0, 1, 2, 3, 4}


def test_r40_each_consumer_of_a_split_takes_its_own_share_of_the_new_partitions(tmp_path: Path) -> None:
    """Partition p to consumer p mod count, those added later too; the consumer whose share
    was empty at the start has one once the topic grows."""
    assert _after_growth(_consume(tmp_path, (0, 3), (0,), follow=True)) == {0, 3}
    assert _after_growth(_consume(tmp_path, (1, 3), (1,), follow=True)) == {1, 4}
    late = _consume(tmp_path, (2, 3), (), follow=True)
    assert {p for t, p in late if t < GROWN} == set() and _after_growth(late) == {2}


def test_a_consumer_of_a_topic_no_fault_changes_keeps_its_partitions(tmp_path: Path) -> None:
    assert _after_growth(_consume(tmp_path, (0, 1), (0, 1), follow=False)) == {0, 1}


def _topology(faults: list[dict]) -> dict:
    return {"name": "consumers", "seed": 1, "duration": "4s",
            "cluster": {"controllers": 1, "brokers": [{"id": 1}, {"id": 2}, {"id": 3}]},
            "topics": [{"name": "t", "partitions": 2, "replication_factor": 3, "min_insync_replicas": 2},
                       {"name": "u", "partitions": 1, "replication_factor": 3, "min_insync_replicas": 2}],
            "workload": {"producers": [{"count": 1, "topic": "t", "acks": "all", "rate": "10/s"}],
                         "consumers": [{"count": 3, "topic": "t"}, {"count": 2, "topic": "u"}]},
            "faults": faults}


def test_only_consumers_of_a_topic_a_topic_fault_changes_follow_it(tmp_path: Path) -> None:
    """The configurations the supervisor (and the sim) start: consumers of `t`, which an
    `add-partitions` grows, follow it, each with its share, the one with no partition yet
    included; consumers of `u`, which no fault touches, keep their partitions and make no
    metadata request a second."""
    grown = parse_topology(_topology([{"at": "1s", "do": "add-partitions", "topic": "t", "count": 2}]), "grown")
    configs = build_client_configs(grown, {1: "ipc://b1"}, tmp_path / "h.jsonl", None, 1.0)
    consumers = {name: c for name, c in configs.items() if c.consumer is not None}
    assert {n: (c.topic, c.partitions, c.follow_partitions, c.share_of) for n, c in consumers.items()} == {
        "consumer-0": ("t", (0,), True, (0, 3)), "consumer-1": ("t", (1,), True, (1, 3)),
        "consumer-2": ("t", (), True, (2, 3)), "consumer-3": ("u", (0,), False, (0, 2))}
    plain = parse_topology(_topology([]), "plain")
    configs = build_client_configs(plain, {1: "ipc://b1"}, tmp_path / "h.jsonl", None, 1.0)
    assert not any(c.follow_partitions for c in configs.values() if c.consumer is not None)
    assert sorted(configs) == ["consumer-0", "consumer-1", "consumer-3", "producer-0"]  # no share, no consumer
    loaded = ClientConfig.load(_written(tmp_path, consumers["consumer-2"]))
    assert loaded == consumers["consumer-2"]


def _written(tmp_path: Path, cfg: ClientConfig) -> Path:
    path = tmp_path / f"{cfg.process}.json"
    path.write_text(cfg.to_json())
    return path


class _TruncatedCluster(_FakeCluster):
    """A partition whose committed log went from 10 records down to 4 (a loss): a fetch past
    its HWM is out of range, and each fetch's offset is noted."""

    def __init__(self) -> None:
        super().__init__([(0.0, (0,))])
        self.offsets: list[int] = []
        self.hwm = 10

    def answer(self, msg: Any) -> Any:
        if not isinstance(msg, FetchRequest):
            return super().answer(msg)
        [p] = msg.partitions
        self.offsets.append(p.fetch_offset)
        self.now += 0.05
        hwm, self.hwm = self.hwm, 4  # the loss, right after the consumer's first look
        if p.fetch_offset > hwm:
            return FetchResponse(partitions=[FetchPartitionResult("t", 0, Errors.OFFSET_OUT_OF_RANGE, hwm, hwm)])
        return FetchResponse(partitions=[FetchPartitionResult("t", 0, high_watermark=hwm, log_end_offset=hwm)])


def test_a_latest_consumer_past_the_log_end_resets_to_the_hwm(tmp_path: Path) -> None:
    """trial28: a `from: latest` consumer whose position the committed log fell below read the
    partition again from offset 0; Kafka's `auto.offset.reset=latest` resets to the log end
    (an `earliest` one to the log's start, 0, as before)."""
    fake = _TruncatedCluster()
    cfg = ClientConfig(process="consumer-0", topic="t", partitions=(0,), brokers=BROKERS,
                       history=tmp_path / "history.jsonl", supervisor_pid=0, stats_endpoint=None,
                       request_timeout=2.0, consumer=ConsumerSettings(from_="latest", max_wait=0.1))
    drive(fake, cfg, 0.5)
    # its start (the HWM, asked at offset 0), past the end once the log lost 6, then the new HWM
    assert fake.offsets[:4] == [0, 10, 4, 4], fake.offsets
