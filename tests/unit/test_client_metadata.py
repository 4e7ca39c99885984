"""A client's metadata refresh (`StepClient.refresh_metadata`) with brokers that do not
answer: a dead, paused or cut-off broker must not cost every refresh its timeout (a producer
refreshes every second, and its writes stalled to one batch a second while a broker was
down), and a removed broker (R39) must be forgotten, not asked for ever."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from broker.client import MAX_SILENT_SKIPS, Call, StepClient, Steps
from broker.protocol.messages import MetadataResponse, PartitionMetadata

BROKERS = {1: "ipc://b1", 2: "ipc://b2", 3: "ipc://b3"}


def _metadata(offset: int, endpoints: dict[int, str], leader: int = 1) -> MetadataResponse:
    return MetadataResponse(metadata_offset=offset, endpoints=endpoints,
                            partitions=[PartitionMetadata("orders", 0, leader, 1, 1, [1, 2, 3], [1, 2, 3])])


def _refresh(client: StepClient, answer: Callable[[str], Any]) -> tuple[list[str], MetadataResponse | None]:
    """Carry one refresh out, answering each Call with `answer(endpoint)`; the endpoints asked."""
    asked: list[str] = []
    steps: Steps = client.refresh_metadata(["orders"])
    value = None
    while True:
        try:
            command = steps.send(value)
        except StopIteration as done:
            return asked, done.value
        assert isinstance(command, Call)
        asked.append(command.endpoint)
        value = answer(command.endpoint)


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
