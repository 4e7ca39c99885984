"""The report's administration table (R38-R40): every membership and topic change in firing
order with the broker set after it, from the faults.jsonl end lines the job collects."""
from __future__ import annotations

import json

from testbed.analysis.membership import admin_rows
from testbed.analysis.runinfo import brokers_added


def line(t: float, do: str, target: str | None = None, params: dict | None = None, effect: dict | None = None,
         origin: str | None = None) -> dict:
    return {"t": t, "do": do, "target": target, "params": json.dumps(params or {}), "effect": json.dumps(effect or {}),
            "origin": origin}


def test_r38_r39_the_broker_set_follows_each_join_and_leave_and_lists_each_move() -> None:
    plan = {"moves": [{"partition": "orders/0", "from": 1, "to": 4}], "replicas_moved": 1, "lower_bound": 1,
            "balanced": True, "elected": ["orders/0"]}
    rows = admin_rows([
        line(1.5, "rebalance", None, {}, plan, origin="faults[0]"),
        line(1.6, "add-broker", None, {"broker": {"id": 4, "rack": "d"}, "rebalance": True},
             {"added": "broker-4", "rebalance": plan}, origin="faults[0]"),
        line(3.0, "rebalance", "broker:1", {}, plan | {"moves": []}, origin="faults[1]"),
        line(3.2, "remove-broker", "broker:1", {},
             {"removed": "broker:1", "rebalance": {"shutdown": True, "unregistered": True}}, origin="faults[1]"),
        line(4.0, "remove-broker", "broker:2", {}, {"error": "remove-broker: no broker 2"}),
    ], [1, 2, 3])
    # the add-broker's rebalance moved a replica onto broker 4, registered before it (trial32)
    assert [r[4] for r in rows] == ["1, 2, 3, 4", "1, 2, 3, 4", "1, 2, 3, 4", "2, 3, 4", "2, 3, 4"]
    assert rows[0][3].startswith("1 replica move (a balanced plan needs at least 1; balanced): orders/0: 1 -> 4")
    assert rows[1][2] == "broker 4 (rack d)" and "broker-4 registered" in rows[1][3]
    assert "a clean shutdown; unregistered" in rows[3][3] and rows[4][3] == "error: remove-broker: no broker 2"


def test_r38_r39_the_broker_set_follows_what_was_done_beside_an_error() -> None:
    """An add-broker whose rebalance gave up still added its broker, and a remove-broker whose
    unregistration the controller refused still shut its broker down for good: the broker set
    after each follows `added` and `removed`, not the `error` beside them."""
    rows = admin_rows([
        line(1.6, "add-broker", None, {"broker": {"id": 4, "rack": "d"}, "rebalance": True},
             {"added": "broker-4", "error": "add-broker: the workload ended while it waited"}),
        line(3.2, "remove-broker", "broker:1", {},
             {"removed": "broker:1", "error": "remove-broker: not unregistered: INVALID_REPLICA_ASSIGNMENT",
              "rebalance": {"shutdown": True, "unregistered": False, "unregister_error": "INVALID_REPLICA_ASSIGNMENT"}}),
    ], [1, 2, 3])
    assert [r[4] for r in rows] == ["1, 2, 3, 4", "2, 3, 4"]
    assert rows[0][3] == "error: add-broker: the workload ended while it waited"


def test_r40_topic_changes_name_their_topic() -> None:
    rows = admin_rows([
        line(1.0, "create-topic", None, {"topic": {"name": "later", "partitions": 3}},
             {"created": "later", "partitions": 3}),
        line(2.0, "add-partitions", None, {"topic": "orders", "count": 2}, {"topic": "orders", "partitions": [4, 5]}),
        line(3.0, "delete-topic", None, {"topic": "doomed"}, {"deleted": "doomed", "partitions": 2}),
    ], [1, 2, 3])
    assert [(r[1], r[2]) for r in rows] == [("create-topic", "later"), ("add-partitions", "orders"),
                                            ("delete-topic", "doomed")]
    assert "3 partitions" in rows[0][3] and "partitions 4, 5 added" in rows[1][3] and "2 partitions" in rows[2][3]


def test_r40_a_topic_fault_that_says_it_failed_counts_when_the_controller_committed_it(tmp_path) -> None:
    """Found by a tester: a delete-topic whose answer never came ("the controller did not
    answer") was committed all the same; the analysis still expected the topic's replicas
    at the end, and the run was taken for one that never converged. A failed topic fault now
    counts when the controller's events show its change after the fault began; a refusal,
    which commits nothing, still does not."""
    from testbed.analysis.runinfo import topic_faults_done

    def fault(origin: str, do: str, params: dict, at: int, effect: dict) -> str:
        line = {"do": do, "target": None, "resolved": [], "params": params, "origin": origin}
        return "".join(json.dumps({**line, "time_ns": t, "phase": phase, "effect": e}) + "\n"
                       for t, phase, e in ((at, "start", {}), (at + 5, "end", effect)))
    lost = {"error": "the controller did not answer"}
    (tmp_path / "faults.jsonl").write_text(
        fault("faults[0]", "delete-topic", {"topic": "scratch"}, 100, lost)
        + fault("faults[1]", "add-partitions", {"topic": "orders", "count": 2}, 200, {"error": "timed out"})
        + fault("faults[2]", "create-topic", {"topic": {"name": "inv", "partitions": 1}}, 300, lost)
        + fault("faults[3]", "create-topic", {"topic": {"name": "orders", "partitions": 1}}, 400,
                {"error": "create-topic orders: TOPIC_ALREADY_EXISTS"})
        + fault("faults[4]", "add-partitions", {"topic": "pay", "count": 1}, 500, {"topic": "pay", "partitions": [3]}))
    events = [{"kind": "partition-changed", "topic": "inv", "partition": 0, "reason": "create", "time_ns": 50},
              {"kind": "replica-deleted", "topic": "scratch", "partition": 1, "reason": "topic-deleted", "time_ns": 102},
              {"kind": "partition-changed", "topic": "orders", "partition": 4, "reason": "create", "time_ns": 204},
              {"kind": "partition-changed", "topic": "orders", "partition": 0, "reason": "leader-change", "time_ns": 401}]
    (tmp_path / "events.jsonl").write_text("".join(json.dumps({"node": "controller-1", **e}) + "\n" for e in events))
    assert topic_faults_done(tmp_path) == [("delete-topic", {"topic": "scratch"}),
                                           ("add-partitions", {"topic": "orders", "count": 2}),
                                           ("add-partitions", {"topic": "pay", "count": 1})]


def test_r40_topic_faults_count_in_the_order_they_began(tmp_path) -> None:
    """Found by a tester: a delete-topic that waited for a broker until its timeout ended after
    the create-topic fired inside its wait had made the topic again, and in the order of the
    end lines the topic was taken for deleted at the end (left out of the convergence)."""
    from testbed.analysis.runinfo import topic_faults_done

    def line(origin: str, do: str, params: dict, at: int, phase: str, effect: dict | None = None) -> str:
        return json.dumps({"do": do, "target": None, "resolved": [], "params": params, "origin": origin,
                           "time_ns": at, "phase": phase, "effect": effect or {}}) + "\n"
    create = {"topic": {"name": "orders", "partitions": 1}}
    (tmp_path / "faults.jsonl").write_text(
        line("faults[0]", "delete-topic", {"topic": "orders"}, 100, "start")
        + line("faults[1]", "create-topic", create, 200, "start")
        + line("faults[1]", "create-topic", create, 205, "end", {"created": "orders", "partitions": 1})
        + line("faults[0]", "delete-topic", {"topic": "orders"}, 900, "end",
               {"deleted": "orders", "partitions": 1, "error": "timed out waiting for topic orders gone"}))
    (tmp_path / "events.jsonl").write_text(json.dumps(
        {"node": "controller-1", "kind": "topic-deleted", "topic": "orders", "time_ns": 102}) + "\n")
    assert topic_faults_done(tmp_path) == [("delete-topic", {"topic": "orders"}), ("create-topic", create)]


def test_r38_the_brokers_added_come_from_faults_jsonl_whoever_fired_them(tmp_path) -> None:
    """A broker the Python API added (`Cluster.add_broker`, recorded as the fault since
    trial23) is in no topology's `faults:`: its rack comes from its faults.jsonl end line. An
    add-broker that failed added nothing; damaged lines are skipped."""
    lines = [
        {"do": "add-broker", "phase": "start", "params": {"broker": {"id": 4, "rack": "d"}}, "effect": {}},
        {"do": "add-broker", "phase": "end", "params": {"broker": {"id": 4, "rack": "d"}, "rebalance": False},
         "effect": {"added": "broker-4"}, "origin": "api[0]"},
        {"do": "add-broker", "phase": "end", "params": {"broker": {"id": 5, "rack": "e"}},
         "effect": {"error": "add-broker: broker id 5 is in use"}},
        {"do": "add-broker", "phase": "end", "params": {"broker": {"id": 6, "rack": None}}, "effect": {"added": "broker-6"}},
        {"do": "add-broker", "phase": "end", "params": {"broker": {"id": True}}, "effect": {"added": "x"}},
        ["add-broker"],
    ]
    (tmp_path / "faults.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + '\n{"do": "add-broker", "pha')
    assert brokers_added(tmp_path) == [(4, "d"), (6, None)]
    assert brokers_added(tmp_path / "nowhere") == []
