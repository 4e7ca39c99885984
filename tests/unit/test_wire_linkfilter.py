"""The userspace link filter alone: rule lookup, verdicts, counters, table parsing."""
from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.wire.linkfilter import (
    DELIVER,
    DROP,
    LinkFilter,
    LinkRule,
    LinkTable,
    Verdict,
    is_client,
)


def rng() -> random.Random:
    return random.Random(1)


def test_no_rules_delivers_everything_and_counts_nothing():
    f = LinkFilter()
    assert f.decide("a", "b", rng()) is DELIVER
    assert f.admits("a", "b")
    assert f.counters() == {}


def test_most_specific_rule_wins():
    f = LinkFilter(LinkTable(1, {
        ("*", "*"): LinkRule(delay=0.5),
        ("a", "*"): LinkRule(delay=0.2),
        ("*", "b"): LinkRule(delay=0.3),
        ("a", "b"): LinkRule(drop=True),
    }))
    assert f.rule_for("a", "b") == LinkRule(drop=True)
    assert f.rule_for("a", "c") == LinkRule(delay=0.2)
    assert f.rule_for("c", "b") == LinkRule(delay=0.3)
    assert f.rule_for("c", "d") == LinkRule(delay=0.5)


def test_drop_is_one_way_and_counted_per_link():
    f = LinkFilter(LinkTable(1, {("a", "b"): LinkRule(drop=True)}))
    assert f.decide("a", "b", rng()) is DROP
    assert f.decide("b", "a", rng()) is DELIVER
    assert not f.admits("a", "b")
    assert f.admits("b", "a")
    assert f.counters() == {("a", "b"): {"dropped": 2, "delayed": 0, "duplicated": 0}}


def test_receiver_applies_only_drop():
    f = LinkFilter(LinkTable(1, {("a", "b"): LinkRule(loss=1.0, delay=1.0)}))
    assert f.admits("a", "b")
    assert f.decide("a", "b", rng()).dropped


def test_delay_jitter_and_duplicate():
    f = LinkFilter(LinkTable(1, {("a", "b"): LinkRule(delay=0.1, jitter=0.05, duplicate=1.0)}))
    r = rng()
    verdicts = [f.decide("a", "b", r) for _ in range(200)]
    assert all(v.copies == 2 and 0.05 <= v.delay <= 0.15 for v in verdicts)
    assert len({v.delay for v in verdicts}) > 100
    assert f.counters()[("a", "b")] == {"dropped": 0, "delayed": 200, "duplicated": 200}


def test_jitter_never_makes_a_negative_delay():
    f = LinkFilter(LinkTable(1, {("*", "*"): LinkRule(delay=0.01, jitter=1.0)}))
    r = rng()
    assert all(f.decide("a", "b", r).delay >= 0 for _ in range(500))


def test_loss_is_a_probability_and_reproducible_from_the_rng():
    table = LinkTable(1, {("a", "b"): LinkRule(loss=0.3)})
    runs = []
    for _ in range(2):
        f, r = LinkFilter(table), random.Random(7)
        runs.append([f.decide("a", "b", r).dropped for _ in range(2000)])
    assert runs[0] == runs[1]
    assert 450 < sum(runs[0]) < 750


def test_update_ignores_a_table_that_is_not_newer():
    f = LinkFilter()
    assert f.update(LinkTable(0, {("a", "b"): LinkRule(drop=True)}))
    assert f.decide("a", "b", rng()) is DROP  # the resolution cache is cleared on update
    assert not f.update(LinkTable(0, {}))
    assert f.update(LinkTable(5, {}))
    assert not f.update(LinkTable(3, {("a", "b"): LinkRule(drop=True)}))
    assert f.decide("a", "b", rng()) is DELIVER
    assert f.table.seq == 5


@pytest.mark.parametrize("name, client", [
    ("broker-1", False), ("controller-12", False), ("api-0", True), ("producer-0-1", True),
    ("consumer-1-2", True), ("final-reader", True), ("broker-x", True), ("broker-1-1", True),
])
def test_clients_are_the_names_that_are_not_cluster_nodes(name, client):
    assert is_client(name) is client


def test_clients_key_matches_every_client_on_either_side_and_never_a_node():
    f = LinkFilter(LinkTable(1, {("clients", "broker-1"): LinkRule(drop=True),
                                 ("broker-1", "clients"): LinkRule(drop=True)}))
    for client in ("api-0", "producer-0-1", "consumer-2-0", "final-reader"):
        assert not f.admits(client, "broker-1")
        assert f.decide("broker-1", client, rng()) is DROP
        assert f.decide(client, "broker-2", rng()) is DELIVER
    assert f.decide("broker-2", "broker-1", rng()) is DELIVER
    assert f.decide("controller-1", "broker-1", rng()) is DELIVER


def test_clients_key_sits_between_a_name_and_the_wildcard():
    f = LinkFilter(LinkTable(1, {
        ("*", "*"): LinkRule(delay=0.5),
        ("clients", "*"): LinkRule(delay=0.4),
        ("api-0", "clients"): LinkRule(delay=0.3),
        ("*", "broker-1"): LinkRule(delay=0.2),
        ("clients", "broker-1"): LinkRule(delay=0.1),
        ("api-0", "broker-1"): LinkRule(drop=True),
    }))
    assert f.rule_for("api-0", "broker-1") == LinkRule(drop=True)
    assert f.rule_for("api-0", "final-reader") == LinkRule(delay=0.3)
    assert f.rule_for("api-1", "broker-1") == LinkRule(delay=0.1)
    assert f.rule_for("api-1", "broker-2") == LinkRule(delay=0.4)
    assert f.rule_for("controller-1", "broker-1") == LinkRule(delay=0.2)
    assert f.rule_for("controller-1", "broker-2") == LinkRule(delay=0.5)


RULES = st.builds(LinkRule, drop=st.booleans(), delay=st.floats(0, 10), jitter=st.floats(0, 1),
                  loss=st.floats(0, 1), duplicate=st.floats(0, 1))
NAMES = st.sampled_from(["*", "broker-1", "broker-2", "controller-1", "clients"])


@given(st.integers(-5, 2**40), st.dictionaries(st.tuples(NAMES, NAMES), RULES, max_size=6))
def test_table_round_trips_through_to_dict(seq, rules):
    table = LinkTable(seq, rules)
    assert LinkTable.from_dict(table.to_dict()) == table


@pytest.mark.parametrize("data, message", [
    ([], "exactly the keys"),
    ({"seq": 1}, "exactly the keys"),
    ({"seq": "1", "rules": []}, "seq must be an int"),
    ({"seq": 1, "rules": {}}, "must be a list"),
    ({"seq": 1, "rules": [["a", "b"]]}, "link rule 0: expected [src, dst, rule]"),
    ({"seq": 1, "rules": [["a", 2, {}]]}, "expected [str, str, dict]"),
    ({"seq": 1, "rules": [["a", "b", {"drop": 1}]]}, "drop must be a bool"),
    ({"seq": 1, "rules": [["a", "b", {"loss": 1.5}]]}, "loss is a probability"),
    ({"seq": 1, "rules": [["a", "b", {"delay": -1}]]}, "delay must be a finite number >= 0"),
    ({"seq": 1, "rules": [["a", "b", {"delay": float("inf")}]]}, "finite"),
    ({"seq": 1, "rules": [["a", "b", {"slow": 1}]]}, "unknown keys ['slow']"),
    ({"seq": 1, "rules": [["a", "b", {}], ["a", "b", {}]]}, "appears twice"),
])
def test_from_dict_rejects_bad_tables_with_a_clear_message(data, message):
    with pytest.raises(ValueError) as info:
        LinkTable.from_dict(data)
    assert message in str(info.value)


def test_verdict_values():
    assert Verdict(0).dropped and not Verdict(1).dropped and not Verdict(2, 0.1).dropped
