"""The netns backend's kernel rules, rendered from link tables (faults/kernel_rules.py)."""
from __future__ import annotations

import random

import pytest

from broker.wire.linkfilter import LinkFilter, LinkRule, LinkTable
from faults import kernel_rules, network

NODES = ["controller-1", "broker-1", "broker-2", "broker-3"]
NAMES = [*NODES, "clients"]
ADDRESSES = {n: f"10.200.0.{10 + i}" for i, n in enumerate(NAMES)}


def _tables() -> list[LinkTable]:
    rng = random.Random(4)
    return [
        network.partition_table([["broker-1"], ["broker-2", "broker-3", "controller-1"]], NODES, 1),
        network.partition_table([["broker-1", "clients"], ["broker-2", "broker-3"]], NODES, 1),
        network.partition_table(network.shape_groups("halves", NODES, [], rng), NODES, 1),
        network.partition_table(network.shape_groups("bridge", NODES, [], rng), NODES, 1),
        network.one_way_table(["broker-1"], ["controller-1"], NODES, 1),
        network.compose([network.partition_table([["broker-1"], ["broker-2", "broker-3"]], NODES, 0),
                         network.slow_table(["*"], ["*"], 0.02, 0.0, 0.1, 0.0, 0)], NODES, 1),
        LinkTable(1, {("*", "broker-2"): LinkRule(drop=True), ("broker-1", "broker-2"): LinkRule(delay=0.01)}),
        network.heal_table(1),
    ]


@pytest.mark.parametrize("table", _tables())
def test_split_cuts_in_the_kernel_exactly_the_unreachable_links(table: LinkTable) -> None:
    """DESIGN 5: the kernel drops a link if and only if the userspace filter would drop it;
    what the kernel does not do (delay, loss, duplication) is left to the filter whole."""
    drops, rest = kernel_rules.split(table, NAMES)
    for a in NAMES:
        for b in NAMES:
            if a == b:
                continue
            rule = LinkFilter(table).rule_for(a, b)
            assert ((a, b) in drops) == bool(rule is not None and rule.drop), (a, b)
            assert rest.rules.get((a, b)) == (rule if rule is not None and not rule.drop else None)
    assert rest.seq == table.seq and not any(r.drop for r in rest.rules.values())


def test_a_specific_slow_rule_under_a_wildcard_drop_keeps_its_own_link() -> None:
    table = _tables()[6]
    drops, rest = kernel_rules.split(table, NAMES)
    assert ("broker-1", "broker-2") not in drops and rest.rules[("broker-1", "broker-2")].delay == 0.01
    assert {("controller-1", "broker-2"), ("broker-3", "broker-2"), ("clients", "broker-2")} <= set(drops)


def test_the_script_replaces_the_ruleset_in_one_transaction_with_one_rule_per_link() -> None:
    script = kernel_rules.nft_script([("broker-1", "broker-2"), ("clients", "broker-3")], ADDRESSES)
    lines = script.splitlines()
    assert lines[:3] == ["table bridge isrlab", "delete table bridge isrlab", "table bridge isrlab {"]
    assert "hook forward" in script
    assert ('ip saddr 10.200.0.11 ip daddr 10.200.0.12 counter drop comment "broker-1->broker-2"' in script)
    assert ('ip saddr 10.200.0.14 ip daddr 10.200.0.13 counter drop comment "clients->broker-3"' in script)
    assert sum("drop" in line for line in lines) == 2
    assert "drop" not in kernel_rules.nft_script([], ADDRESSES)


def test_a_link_to_a_name_without_an_address_is_refused_before_anything_is_applied() -> None:
    with pytest.raises(ValueError, match=r"no address for \['broker-9'\]"):
        kernel_rules.nft_script([("broker-1", "broker-9")], ADDRESSES)


def test_counters_are_read_back_by_each_rule_s_link() -> None:
    listing = {"nftables": [
        {"metainfo": {"version": "1.0.6"}},
        {"table": {"family": "bridge", "name": "isrlab"}},
        {"rule": {"comment": "broker-1->broker-2", "expr": [{"match": {}}, {"counter": {"packets": 7, "bytes": 420}},
                                                           {"drop": None}]}},
        {"rule": {"comment": "broker-2->broker-1", "expr": [{"counter": {"packets": 0, "bytes": 0}}, {"drop": None}]}},
        {"rule": {"expr": [{"counter": {"packets": 3}}]}},  # not ours: no comment
    ]}
    assert kernel_rules.counters(listing) == {"broker-1->broker-2": {"dropped_packets": 7}}


def test_slow_links_become_one_netem_class_per_source_on_the_port_towards_the_destination() -> None:
    """Where the kernel has netem: each ordered pair gets its own delay, on the bridge port
    towards its destination, picked by its source address; other ports get their default."""
    slow = {("broker-1", "broker-2"): LinkRule(delay=0.02, jitter=0.005),
            ("broker-3", "broker-2"): LinkRule(loss=0.1, duplicate=0.05),
            ("broker-2", "broker-1"): LinkRule(delay=0.0015)}
    ports = {n: f"p{i}" for i, n in enumerate(NAMES)}
    lines = kernel_rules.tc_script(slow, ADDRESSES, ports).splitlines()
    assert [line for line in lines if line.startswith("qdisc del")] == [f"qdisc del dev {p} root" for p in ports.values()]
    p2 = [line for line in lines if " p2 " in line]
    assert p2[1:3] == ["qdisc add dev p2 root handle 1: htb default 1", "class add dev p2 parent 1: classid 1:1 htb rate 10gbit"]
    assert "qdisc add dev p2 parent 1:10 handle 10: netem limit 100000 delay 20000us 5000us" in p2
    assert "filter add dev p2 parent 1: protocol ip prio 1 u32 match ip src 10.200.0.11/32 flowid 1:10" in p2
    assert "qdisc add dev p2 parent 1:11 handle 11: netem limit 100000 delay 0us loss 10% duplicate 5%" in p2
    assert "filter add dev p2 parent 1: protocol ip prio 1 u32 match ip src 10.200.0.13/32 flowid 1:11" in p2
    assert "qdisc add dev p1 parent 1:10 handle 10: netem limit 100000 delay 1500us" in lines
    assert not [line for line in lines if " p3 " in line and not line.startswith("qdisc del")]
    assert kernel_rules.slow_rules_text(slow, ADDRESSES)[0] == (
        "ip src 10.200.0.11 -> 10.200.0.12: netem limit 100000 delay 20000us 5000us  # broker-1->broker-2")
