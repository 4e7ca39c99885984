"""The report's administration table (R38-R40): every membership and topic change in firing
order with the broker set after it, from the faults.jsonl end lines the job collects."""
from __future__ import annotations

import json

from testbed.analysis.membership import admin_rows


def line(t: float, do: str, target: str | None = None, params: dict | None = None, effect: dict | None = None) -> dict:
    return {"t": t, "do": do, "target": target, "params": json.dumps(params or {}), "effect": json.dumps(effect or {})}


def test_r38_r39_the_broker_set_follows_each_join_and_leave_and_lists_each_move() -> None:
    plan = {"moves": [{"partition": "orders/0", "from": 1, "to": 4}], "replicas_moved": 1, "lower_bound": 1,
            "balanced": True, "elected": ["orders/0"]}
    rows = admin_rows([
        line(1.5, "rebalance", None, {}, plan),
        line(1.6, "add-broker", None, {"broker": {"id": 4, "rack": "d"}, "rebalance": True},
             {"added": "broker-4", "rebalance": plan}),
        line(3.0, "rebalance", "broker:1", {}, plan | {"moves": []}),
        line(3.2, "remove-broker", "broker:1", {},
             {"removed": "broker:1", "rebalance": {"shutdown": True, "unregistered": True}}),
        line(4.0, "remove-broker", "broker:2", {}, {"error": "remove-broker: no broker 2"}),
    ], [1, 2, 3])
    assert [r[4] for r in rows] == ["1, 2, 3", "1, 2, 3, 4", "1, 2, 3, 4", "2, 3, 4", "2, 3, 4"]
    assert "orders/0: 1 -> 4" in rows[0][3] and "lower bound 1" in rows[0][3]
    assert rows[1][2] == "broker 4 (rack d)" and "broker-4 registered" in rows[1][3]
    assert "a clean shutdown; unregistered" in rows[3][3] and rows[4][3] == "error: remove-broker: no broker 2"


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
