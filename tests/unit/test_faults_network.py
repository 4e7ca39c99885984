"""Network fault tables, checked by which node pairs can still exchange messages."""
from __future__ import annotations

import itertools
import random

import pytest

from broker.wire.linkfilter import LinkFilter, LinkRule, LinkTable
from faults.network import (
    effective_groups,
    heal_table,
    one_way_table,
    partition_table,
    reachable,
    shape_groups,
    slow_table,
)

NODES = ["controller-1", "broker-1", "broker-2", "broker-3", "broker-4"]
CLIENTS = ["api-0", "producer-0-1", "consumer-1-0", "final-reader"]


def cut_pairs(table: LinkTable, names: list[str]) -> set[tuple[str, str]]:
    """Every ordered pair (a, b) of distinct names for which a's messages cannot reach b."""
    return {(a, b) for a, b in itertools.permutations(names, 2) if not reachable(table, a, b)}


def between(left: list[str], right: list[str]) -> set[tuple[str, str]]:
    """Both directions of every link between two sides."""
    return {(a, b) for a in left for b in right} | {(b, a) for a in left for b in right}


def test_groups_cut_every_pair_across_groups_both_ways():
    table = partition_table([["broker-1", "broker-2"], ["broker-3", "broker-4", "controller-1"]], NODES, seq=4)
    assert table.seq == 4
    assert cut_pairs(table, NODES) == between(["broker-1", "broker-2"], ["broker-3", "broker-4", "controller-1"])


def test_nodes_no_group_names_join_the_last_group():
    table = partition_table([["broker-1"], ["broker-2"]], NODES, seq=1)
    assert cut_pairs(table, NODES) == between(["broker-1"], ["broker-2", "broker-3", "broker-4", "controller-1"])


def test_three_groups():
    groups = [["broker-1"], ["broker-2", "broker-3"], ["broker-4", "controller-1"]]
    table = partition_table(groups, NODES, seq=1)
    expected = set().union(*(between(a, b) for a, b in itertools.combinations(groups, 2)))
    assert cut_pairs(table, NODES) == expected


def test_clients_reach_every_node_unless_a_group_names_them():
    table = partition_table([["broker-1"], ["broker-2", "broker-3", "broker-4", "controller-1"]], NODES, seq=1)
    assert cut_pairs(table, NODES + CLIENTS) == cut_pairs(table, NODES)


def test_a_clients_group_cuts_every_client_from_the_other_groups_only():
    table = partition_table([["broker-1", "clients"], ["broker-2", "broker-3", "broker-4", "controller-1"]],
                            NODES, seq=1)
    others = ["broker-2", "broker-3", "broker-4", "controller-1"]
    assert cut_pairs(table, NODES + CLIENTS) == between(["broker-1", *CLIENTS], others) - {
        (a, b) for a, b in itertools.permutations(CLIENTS, 2)
    }


def test_isolate_cuts_the_target_from_everyone():
    groups = shape_groups("isolate", NODES, ["broker-2"], random.Random(0))
    assert groups == [["broker-2"], ["controller-1", "broker-1", "broker-3", "broker-4"]]
    table = partition_table(groups, NODES, seq=1)
    assert cut_pairs(table, NODES) == between(["broker-2"], [n for n in NODES if n != "broker-2"])


def test_halves_split_every_node_into_two_sides_that_cannot_talk():
    groups = shape_groups("halves", NODES, [], random.Random(1))
    assert sorted(groups[0] + groups[1]) == sorted(NODES)
    assert (len(groups[0]), len(groups[1])) == (2, 3)
    assert cut_pairs(partition_table(groups, NODES, seq=1), NODES) == between(groups[0], groups[1])


def test_halves_are_reproducible_and_vary_with_the_rng():
    draws = {tuple(map(tuple, shape_groups("halves", NODES, [], random.Random(s)))) for s in range(20)}
    assert len(draws) > 1
    assert shape_groups("halves", NODES, [], random.Random(4)) == \
        shape_groups("halves", list(reversed(NODES)), [], random.Random(4))


def test_bridge_node_talks_to_everyone_while_the_halves_cannot_talk():
    groups = shape_groups("bridge", NODES, [], random.Random(2))
    (bridge,) = set(groups[0]) & set(groups[1])
    left = [n for n in groups[0] if n != bridge]
    right = [n for n in groups[1] if n != bridge]
    assert sorted([bridge, *left, *right]) == sorted(NODES) and len(left) == 2 and len(right) == 2
    table = partition_table(groups, NODES, seq=1)
    assert cut_pairs(table, NODES) == between(left, right)
    assert all(reachable(table, bridge, n) and reachable(table, n, bridge) for n in NODES if n != bridge)


@pytest.mark.parametrize("shape, nodes, target, message", [
    ("isolate", NODES, [], "needs at least one node"),
    ("isolate", NODES, ["broker-9"], "not cluster nodes"),
    ("isolate", ["broker-1"], ["broker-1"], "is every node"),
    ("halves", ["broker-1"], [], "at least two"),
    ("bridge", ["broker-1", "broker-2"], [], "at least three"),
    ("one-way", NODES, [], "unknown group shape"),
])
def test_shape_groups_refuses_what_it_cannot_build(shape, nodes, target, message):
    with pytest.raises(ValueError, match=message):
        shape_groups(shape, nodes, target, random.Random(0))


def test_partition_table_refuses_unknown_names_and_a_single_group():
    with pytest.raises(ValueError, match="not cluster nodes"):
        partition_table([["broker-1"], ["broker-7"]], NODES, seq=1)
    with pytest.raises(ValueError, match="at least two groups"):
        partition_table([NODES], NODES, seq=1)


def test_one_way_drops_only_from_to():
    table = one_way_table(["broker-1"], ["controller-1", "broker-2"], NODES, seq=2)
    assert cut_pairs(table, NODES) == {("broker-1", "controller-1"), ("broker-1", "broker-2")}


def test_one_way_to_clients():
    table = one_way_table(["broker-1"], ["clients"], NODES, seq=2)
    assert cut_pairs(table, NODES + CLIENTS) == {("broker-1", c) for c in CLIENTS}
    with pytest.raises(ValueError, match="not cluster nodes"):
        one_way_table(["broker-1"], ["nobody"], NODES, seq=2)


def test_heal_reaches_everything():
    table = heal_table(9)
    assert table.seq == 9 and table.rules == {}
    assert cut_pairs(table, NODES + CLIENTS) == set()


def test_slow_degrades_both_directions_between_from_and_to_and_nothing_else():
    table = slow_table(["broker-1"], ["broker-2", "broker-3"], 0.2, 0.05, 0.1, 0.01, seq=3)
    rule = LinkRule(delay=0.2, jitter=0.05, loss=0.1, duplicate=0.01)
    f = LinkFilter(table)
    slowed = between(["broker-1"], ["broker-2", "broker-3"])
    for a, b in itertools.permutations(NODES, 2):
        assert f.rule_for(a, b) == (rule if (a, b) in slowed else None)
    assert cut_pairs(table, NODES) == set()


def test_slow_everywhere_uses_the_wildcard_and_covers_clients():
    table = slow_table(["*"], ["*"], 0.1, 0.0, 0.0, 0.0, seq=3)
    assert table.rules == {("*", "*"): LinkRule(delay=0.1)}
    assert LinkFilter(table).rule_for("api-0", "broker-1") == LinkRule(delay=0.1)


def test_slow_of_one_node_to_everyone():
    table = slow_table(["broker-2"], ["*"], 0.1, 0.0, 0.0, 0.0, seq=3)
    f = LinkFilter(table)
    assert f.rule_for("broker-2", "broker-1") == f.rule_for("producer-0-1", "broker-2") == LinkRule(delay=0.1)
    assert f.rule_for("broker-1", "broker-3") is None


def test_certain_loss_is_unreachable_but_partial_loss_and_delay_are_not():
    table = LinkTable(1, {("a", "b"): LinkRule(loss=1.0), ("a", "c"): LinkRule(loss=0.9, delay=5.0)})
    assert not reachable(table, "a", "b")
    assert reachable(table, "a", "c") and reachable(table, "b", "a")


def test_tables_survive_the_control_op_encoding():
    table = partition_table([["broker-1", "clients"], ["broker-2"]], NODES, seq=5)
    assert LinkTable.from_dict(table.to_dict()) == table


def test_compose_keeps_a_partition_under_a_later_slow() -> None:
    """Layered faults: a slow on every link must not lift a partition's drops."""
    from faults.network import compose
    nodes = ["controller-1", "broker-1", "broker-2", "broker-3"]
    cut = partition_table([["broker-1"], ["controller-1", "broker-2", "broker-3"]], nodes, 1)
    slow = slow_table(nodes, nodes, 0.05, 0.0, 0.0, 0.0, 2)
    both = compose([cut, slow], nodes, 3)
    assert not reachable(both, "broker-1", "broker-2") and not reachable(both, "controller-1", "broker-1")
    rule = LinkFilter(both).rule_for("broker-2", "broker-3")
    assert rule is not None and rule.delay == 0.05 and not rule.drop
    assert reachable(compose([slow], nodes, 4), "broker-1", "broker-2")
    assert compose([], nodes, 5).rules == {}


def test_compose_keeps_clients_rules() -> None:
    from faults.network import compose
    nodes = ["controller-1", "broker-1"]
    t = partition_table([["clients"], ["controller-1", "broker-1"]], nodes, 1)
    both = compose([t], nodes, 2)
    assert not reachable(both, "producer-0-1", "broker-1") and reachable(both, "controller-1", "broker-1")


def test_the_nodes_no_group_names_are_in_the_last_group_and_the_record_says_so() -> None:
    """`[[clients], [broker:3]]` cuts the clients from every node and `[[broker:3], [clients]]`
    cuts broker 3 from every node (the unnamed nodes join the last group): the order of the
    groups is the fault, so the recorded groups are those applied (a new user read the
    recorded `[['clients'], ['broker-3']]` as "the clients lose broker 3")."""
    assert effective_groups([["clients"], ["broker-3"]], NODES) == [
        ["clients"], ["broker-3", "controller-1", "broker-1", "broker-2", "broker-4"]]
    assert effective_groups([["broker-3"], ["clients"]], NODES) == [
        ["broker-3"], ["clients", "controller-1", "broker-1", "broker-2", "broker-4"]]
    table = partition_table([["broker-3"], ["clients"]], NODES, seq=1)
    assert cut_pairs(table, [*NODES, "clients"]) == between(["broker-3"], ["clients", "controller-1", "broker-1",
                                                                           "broker-2", "broker-4"])
