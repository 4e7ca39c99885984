"""A client's metadata refresh (`StepClient.refresh_metadata`) with brokers that do not
answer: a dead, paused or cut-off broker must not cost every refresh its timeout (a producer
refreshes every second, and its writes stalled to one batch a second while a broker was
down), and a removed broker (R39) must be forgotten, not asked for ever. The brokers are
asked at once, so a paused one holds a refresh only until the others have answered
(`CallEach`'s settle time), on virtual time here and in a whole simulated run."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from broker.client import MAX_SILENT_SKIPS, Call, CallEach, StepClient, Steps
from broker.common.errors import Errors
from broker.common.jsonl import read_jsonl
from broker.protocol.messages import MetadataResponse, PartitionMetadata
from testbed.sim.run import run_seed
from testbed.topology import parse_topology

BROKERS = {1: "ipc://b1", 2: "ipc://b2", 3: "ipc://b3"}


def _metadata(offset: int, endpoints: dict[int, str], leader: int = 1) -> MetadataResponse:
    return MetadataResponse(metadata_offset=offset, endpoints=endpoints,
                            partitions=[PartitionMetadata("orders", 0, leader, 1, 1, [1, 2, 3], [1, 2, 3])])


def _refresh(client: StepClient, answer: Callable[[str], Any]) -> tuple[list[str], MetadataResponse | None]:
    """Carry one refresh out, answering each request of its one CallEach with
    `answer(endpoint)`; the endpoints asked."""
    steps: Steps = client.refresh_metadata(["orders"])
    command = next(steps)
    assert isinstance(command, CallEach)
    asked = [endpoint for endpoint, _ in command.calls]
    try:
        steps.send([answer(endpoint) for endpoint in asked])
    except StopIteration as done:
        return asked, done.value
    raise AssertionError("a refresh is one CallEach")


def test_a_silent_broker_is_left_out_of_ever_more_refreshes_and_asked_again_once_it_answers() -> None:
    client = StepClient(BROKERS, "producer-0", 2.0)
    dead = {"ipc://b3"}

    def answer(endpoint: str) -> Any:
        return None if endpoint in dead else _metadata(7, BROKERS)
    asks_of_3 = []
    for _ in range(40):
        asked, best = _refresh(client, answer)
        assert best is not None and best.metadata_offset == 7
        assert {"ipc://b1", "ipc://b2"} <= set(asked)
        asks_of_3.append("ipc://b3" in asked)
    turns = [i for i, a in enumerate(asks_of_3) if a]
    left_out = [b - a - 1 for a, b in zip(turns, turns[1:])]
    assert left_out[:5] == [1, 2, 4, 8, 8] and max(left_out) == MAX_SILENT_SKIPS, turns
    dead.clear()  # it answers again: asked at its next turn, then every time
    while "ipc://b3" not in _refresh(client, answer)[0]:
        pass
    assert all("ipc://b3" in _refresh(client, answer)[0] for _ in range(5))


def test_when_every_broker_is_silent_every_broker_is_asked() -> None:
    client = StepClient(BROKERS, "producer-0", 2.0)
    for _ in range(6):
        asked, best = _refresh(client, lambda endpoint: None)
        assert best is None and sorted(asked) == sorted(BROKERS.values())


def test_a_broker_the_newest_metadata_no_longer_lists_is_forgotten_and_a_new_one_learnt() -> None:
    client = StepClient(BROKERS, "producer-0", 2.0)
    now = {1: "ipc://b1", 2: "ipc://b2", 4: "ipc://b4"}  # broker 3 removed (R39), broker 4 added (R38)

    def answer(endpoint: str) -> Any:
        if endpoint == "ipc://b3":
            return None
        return _metadata(9 if endpoint == "ipc://b2" else 5, now if endpoint == "ipc://b2" else BROKERS)
    _, best = _refresh(client, answer)
    assert best is not None and best.metadata_offset == 9
    assert client.brokers == now
    asked, _ = _refresh(client, answer)
    assert sorted(asked) == ["ipc://b1", "ipc://b2", "ipc://b4"]


def test_a_leader_that_left_a_produce_unanswered_is_not_asked_for_metadata_next() -> None:
    """A dead leader's produce times out; the refresh that follows goes to the others at once
    (it would wait out another timeout on the dead one)."""
    client = StepClient(BROKERS, "producer-0", 2.0)
    _refresh(client, lambda endpoint: _metadata(3, BROKERS, leader=3))
    produce = client.produce("orders", 0, ["v"], "all")
    command = next(produce)
    assert isinstance(command, Call) and command.endpoint == "ipc://b3"
    try:
        produce.send(None)  # no answer in time
    except StopIteration as done:
        assert done.value.appended  # outcome unknown
    asked, best = _refresh(client, lambda endpoint: _metadata(4, BROKERS, leader=1))
    assert "ipc://b3" not in asked and best is not None and best.partitions[0].leader == 1


PAUSED = "broker:4"  # it holds no replica: only the producers' metadata refreshes reach it
PAUSE_TOPOLOGY = {
    "name": "pause-non-replica", "seed": 0, "duration": "6s",
    "cluster": {"controllers": 1, "brokers": [{"id": i, "rack": r} for i, r in ((1, "a"), (2, "b"), (3, "c"), (4, "a"))]},
    "topics": [{"name": "orders", "partitions": 3, "replication_factor": 3, "min_insync_replicas": 2,
                "placement": "explicit", "assignment": {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]}}],
    "workload": {"producers": [{"count": 2, "topic": "orders", "acks": "all", "rate": "200/s", "batch": 10}]},
    "faults": [{"at": "1s", "do": "pause", "target": PAUSED}, {"at": "5s", "do": "resume", "target": PAUSED}],
}


def test_a_paused_broker_that_holds_no_replica_does_not_stall_the_producers(tmp_path: Path) -> None:
    """Producers that follow the topic's partitions refresh their metadata every second. They
    asked the brokers in turn, 1 s each, from the send loop: each refresh that reached the
    paused broker stopped every send for 1 s (gaps of 0.85-1.05 s between acks, twice in a
    3 s pause). Now the paused broker costs a refresh the settle time after the others'
    answers: the longest gap between a producer's acks stays near its 50 ms batch interval."""
    run = tmp_path / "run"
    outcome = run_seed(parse_topology(PAUSE_TOPOLOGY, "pause-non-replica"), run)
    assert outcome.error is None and outcome.converged
    acks: dict[str, list[int]] = {}
    for op in read_jsonl(run / "history.jsonl"):
        if op["f"] == "send" and op["type"] == "ok":
            acks.setdefault(op["process"], []).append(op["time_ns"])
    assert sorted(acks) == ["producer-0", "producer-1"]
    for process, times in acks.items():
        longest = max(b - a for a, b in zip(times, times[1:]))
        assert longest < 0.2e9, f"{process}: {longest / 1e9:.3f} s without an ack"


def test_an_answer_older_than_one_taken_is_not_taken() -> None:
    """KIP-320's rule, by metadata offset: broker 1, cut off from the controller, still names
    itself leader at offset 5 after broker 2 was elected at offset 9. Once the client took 9,
    an answer of 5 alone (the others silent, or left out of this refresh) changes nothing."""
    client = StepClient(BROKERS, "producer-0", 2.0)
    _refresh(client, lambda endpoint: _metadata(9, BROKERS, leader=2))
    assert client.leaders[("orders", 0)].leader == 2
    _, best = _refresh(client, lambda endpoint: _metadata(5, BROKERS, leader=1) if endpoint == "ipc://b1" else None)
    assert best is None and client.leaders[("orders", 0)].leader == 2


def test_a_topic_the_newest_metadata_does_not_know_has_no_leader_left() -> None:
    """R40: `orders` deleted at offset 9. Brokers 2 and 3 answer UNKNOWN_TOPIC_OR_PARTITION;
    broker 1, cut off from the controller, still describes it at offset 5 with itself as
    leader. Only answers that knew the topic counted, so broker 1's won every refresh and
    the producers wrote to its deposed leader for the whole cut (a tester's runs: acks from
    it 9 s after the deletion). The newest answer wins: the topic has no leader, and a send
    fails at once with UNKNOWN_TOPIC_OR_PARTITION, as Kafka's producer has no partition of a
    topic its metadata does not hold."""
    client = StepClient(BROKERS, "producer-0", 2.0)
    _refresh(client, lambda endpoint: _metadata(3, BROKERS, leader=1))
    gone = MetadataResponse(Errors.UNKNOWN_TOPIC_OR_PARTITION, metadata_offset=9, endpoints=BROKERS)
    for _ in range(3):
        _, best = _refresh(client, lambda endpoint: _metadata(5, BROKERS, leader=1) if endpoint == "ipc://b1" else gone)
        assert best is None and ("orders", 0) not in client.leaders
    assert client.partitions_of("orders") == (0,)  # its last partitions: sends to them fail, recorded
    send = client.produce("orders", 0, ["v"], "all")
    command = next(send)
    assert isinstance(command, CallEach)  # it looks again before it gives up
    try:
        send.send([_metadata(5, BROKERS, leader=1) if e == "ipc://b1" else gone for e, _ in command.calls])
    except StopIteration as done:
        assert done.value.error == Errors.UNKNOWN_TOPIC_OR_PARTITION and not done.value.appended
    else:
        raise AssertionError("a send to a deleted topic's deposed leader")
    # made again: the newest answer describes it, with its new leader
    _refresh(client, lambda endpoint: _metadata(12, BROKERS, leader=3))
    assert client.leaders[("orders", 0)].leader == 3
