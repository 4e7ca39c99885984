"""R40: a topic fault that falls due while another on the same topic is under way (its wait
lets due faults fire, `FaultInjector.while_waiting`) waits for it: found by a tester, whose
`create-topic` due 50 ms after a `delete-topic` of its name fired inside the delete's wait for
an active controller, found the name still taken (TOPIC_ALREADY_EXISTS), and the delete then
took the topic for the rest of the run."""
from __future__ import annotations

from pathlib import Path

from faults.schedule import ScheduledFault
from faults.targets import ClusterView
from tests.unit.test_fault_shutdown_restart import run_schedule


class _SlowTopics:
    """The part of a cluster the injector drives here: a topic deletion waits 0.5 s of the
    schedule's clock (no controller active yet), letting due faults fire meanwhile, as
    processes do; a creation of a name that exists is refused."""

    def __init__(self) -> None:
        self.clock = 0.0
        self.topics = {"scratch", "other"}
        self.while_waiting = lambda: None

    def view(self) -> ClusterView:
        return ClusterView({"broker-1": None}, {"controller-1": None}, "controller-1",
                           frozenset(), frozenset(), {}, {}, {})

    def delete_topic(self, name: str, timeout: float | None = None) -> dict:
        for _ in range(5):
            self.clock += 0.1
            self.while_waiting()
        self.topics.discard(name)
        return {"deleted": name}

    def create_topic(self, topic: dict, timeout: float | None = None) -> dict:
        if topic["name"] in self.topics:
            return {"error": "create-topic: TOPIC_ALREADY_EXISTS"}
        self.topics.add(topic["name"])
        return {"created": topic["name"]}


def test_a_topic_fault_due_while_another_on_its_topic_waits_comes_after_it(tmp_path: Path) -> None:
    cluster = _SlowTopics()
    schedule = [ScheduledFault(1.0, "delete-topic", None, {"topic": "scratch"}, "faults[0]"),
                ScheduledFault(1.05, "create-topic", None, {"topic": {"name": "scratch"}}, "faults[1]"),
                ScheduledFault(2.0, "delete-topic", None, {"topic": "other"}, "faults[2]"),
                ScheduledFault(2.1, "create-topic", None, {"topic": {"name": "third"}}, "faults[3]")]
    ends = run_schedule(cluster, schedule, tmp_path / "faults.jsonl")
    # another topic's fault fires inside the wait, as any fault due then does
    assert ends == [("faults[0]", {"deleted": "scratch"}), ("faults[1]", {"created": "scratch"}),
                    ("faults[3]", {"created": "third"}), ("faults[2]", {"deleted": "other"})]
    assert cluster.topics == {"scratch", "third"}


class _CutOffTopics(_SlowTopics):
    """A deletion that waits until the links are healed (a broker holding a replica is cut
    off from the controller), up to 3 s of the schedule's clock."""

    def __init__(self) -> None:
        super().__init__()
        self.cut = True
        self.seq = 0

    def node_names(self) -> list[str]:
        return ["broker-1", "controller-1"]

    def next_link_seq(self) -> int:
        self.seq += 1
        return self.seq

    def push_links(self, table: object) -> dict[str, bool]:
        self.cut = False  # the only layer here is healed away
        return {"broker-1": True, "controller-1": True}

    def link_counters(self) -> dict[str, dict]:
        return {}

    def network_rules(self) -> None:
        return None

    def delete_topic(self, name: str, timeout: float | None = None) -> dict:
        for _ in range(60):
            if not self.cut:
                self.topics.discard(name)
                return {"deleted": name}
            self.clock += 0.05
            self.while_waiting()
        return {"deleted": name, "error": "timed out"}


def test_a_heal_due_behind_a_held_topic_fault_fires_at_its_time(tmp_path: Path) -> None:
    """A trial's schedule: a delete waits for a broker cut off from the controller, the
    create of its name due meanwhile is held for it, and the heal due after the create,
    the one fault that lets the delete end, was held behind the create: the cut lasted to
    the end of the workload. Faults on the links alone fire at their time past held ones;
    the held create still comes after its delete, and another fault after it keeps its
    place behind it."""
    cluster = _CutOffTopics()
    schedule = [ScheduledFault(1.0, "delete-topic", None, {"topic": "scratch"}, "faults[0]"),
                ScheduledFault(1.05, "create-topic", None, {"topic": {"name": "scratch"}}, "faults[1]"),
                ScheduledFault(1.1, "create-topic", None, {"topic": {"name": "third"}}, "faults[2]"),
                ScheduledFault(1.5, "heal", None, {}, "faults[3]")]
    ends = run_schedule(cluster, schedule, tmp_path / "faults.jsonl")
    assert [origin for origin, _ in ends] == ["faults[3]", "faults[0]", "faults[1]", "faults[2]"]
    assert ends[1] == ("faults[0]", {"deleted": "scratch"}) and ends[2] == ("faults[1]", {"created": "scratch"})
    assert cluster.topics == {"scratch", "other", "third"}
