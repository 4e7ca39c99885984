"""The network faults as link tables (DESIGN section 5, `backend: userspace`): pure.

Every network fault becomes one whole `LinkTable` that the supervisor pushes to every node
with a fresh sequence number; the nodes' `LinkFilter`s do the rest. Nothing here sends
anything, so each shape can be checked exhaustively with `reachable` over every node pair.

Names in groups and link lists are cluster node names (`broker-1`), or `"clients"`, which
the filter matches against every transport that is not a cluster node (the workload). A
client has no filter of its own: a cut between clients and nodes is enforced on the node
side (the receiver drops, the sender drops its answers), which is why clients can be named
but need no names of their own.
"""
from __future__ import annotations

import random
from collections.abc import Iterable, Sequence

from broker.wire.linkfilter import CLIENTS, WILDCARD, LinkFilter, LinkRule, LinkTable

_DROP = LinkRule(drop=True)
GROUP_SHAPES: tuple[str, ...] = ("isolate", "halves", "bridge")


def partition_table(groups: Sequence[Sequence[str]], all_nodes: Sequence[str], seq: int) -> LinkTable:
    """Drop every message between two names that share no group, both ways.

    A node of `all_nodes` that no group names joins the last group: a topology's
    `groups: [[rack:a], [rack:b, rack:c, controllers]]` reads as "rack a against the rest",
    and a node forgotten by the author should not silently end up alone. A name in two
    groups (the bridge) talks to both. Clients are cut only when a group names `"clients"`;
    otherwise they reach every node (DESIGN section 6).
    """
    if len(groups) < 2:
        raise ValueError(f"a partition needs at least two groups, got {len(groups)}")
    _check_names([name for group in groups for name in group], all_nodes)
    named = {name for group in groups for name in group}
    members = [set(group) for group in effective_groups(groups, all_nodes)]
    universe = [*all_nodes, *([CLIENTS] if CLIENTS in named else [])]
    rules = {
        (a, b): _DROP
        for a in universe
        for b in universe
        if a != b and not any(a in group and b in group for group in members)
    }
    return LinkTable(seq, rules)


def effective_groups(groups: Sequence[Sequence[str]], all_nodes: Sequence[str]) -> list[list[str]]:
    """The groups as the partition applies them: every node of `all_nodes` that no group
    names is in the last group (`partition_table`), so the record of a partition says
    where each node really was."""
    named = {name for group in groups for name in group}
    rest = [node for node in all_nodes if node not in named]
    return [list(group) for group in groups[:-1]] + [[*groups[-1], *rest]] if groups else []


def shape_groups(shape: str, nodes: Sequence[str], target_nodes: Sequence[str],
                 rng: random.Random) -> list[list[str]]:
    """The groups of a partition shape, for `partition_table`.

    - `isolate`: `target_nodes` against every other node;
    - `halves`: the nodes shuffled and cut in two (the second half gets the odd one);
    - `bridge`: Jepsen's bridge, two halves that share one node, which can therefore talk to
      everyone while the halves cannot talk to each other.
    `nodes` is sorted before shuffling so the result depends only on the set and the rng.
    """
    if shape == "isolate":
        if not target_nodes:
            raise ValueError("shape isolate needs at least one node to isolate")
        _check_names(target_nodes, nodes)
        rest = [node for node in nodes if node not in target_nodes]
        if not rest:
            raise ValueError(f"shape isolate: {list(target_nodes)} is every node, nothing is left on the other side")
        return [list(target_nodes), rest]
    shuffled = sorted(nodes)
    rng.shuffle(shuffled)
    if shape == "halves":
        if len(shuffled) < 2:
            raise ValueError(f"shape halves needs at least two nodes, got {len(shuffled)}")
        middle = len(shuffled) // 2
        return [shuffled[:middle], shuffled[middle:]]
    if shape == "bridge":
        if len(shuffled) < 3:
            raise ValueError(f"shape bridge needs at least three nodes, got {len(shuffled)}")
        bridge, rest = shuffled[0], shuffled[1:]
        middle = len(rest) // 2
        return [[*rest[:middle], bridge], [bridge, *rest[middle:]]]
    raise ValueError(f"unknown group shape {shape!r} (expected one of: {', '.join(GROUP_SHAPES)})")


def one_way_table(from_nodes: Sequence[str], to_nodes: Sequence[str], all_nodes: Sequence[str],
                  seq: int) -> LinkTable:
    """Drop messages from `from_nodes` to `to_nodes` only; the other direction flows.

    Requests and their answers travel on opposite links, so a one-way cut still breaks
    request/response between the two sides, but each side keeps hearing the other's
    requests: the asymmetric case where a leader goes on receiving fetches it cannot answer.
    """
    _check_names([*from_nodes, *to_nodes], all_nodes)
    return LinkTable(seq, {(a, b): _DROP for a, b in _links(from_nodes, to_nodes)})


def slow_table(from_nodes: Sequence[str], to_nodes: Sequence[str], delay: float, jitter: float,
               loss: float, duplicate: float, seq: int) -> LinkTable:
    """Degrade the links between `from_nodes` and `to_nodes`, in both directions.

    DESIGN section 6 says `slow` acts "on the links between from and to": a slow link slows
    the answers as well as the requests. `"*"` on either side stands for everyone, nodes
    and clients alike (the schema's "default all").
    """
    rule = LinkRule(delay=delay, jitter=jitter, loss=loss, duplicate=duplicate)
    links = _links(from_nodes, to_nodes)
    return LinkTable(seq, {link: rule for pair in links for link in (pair, pair[::-1])})


def heal_table(seq: int) -> LinkTable:
    """No rules at all: every message flows again."""
    return LinkTable(seq)


def compose(tables: Sequence[LinkTable], all_nodes: Sequence[str], seq: int) -> LinkTable:
    """One table that applies every network fault in force at once.

    A filter takes the most specific rule whole, so two faults cannot simply be pushed as
    one table of overlapping rules (a `slow` on `*` would not reach a link a partition names,
    and a specific slow rule would lift a wildcard drop). Instead every ordered pair over the
    nodes and `clients` gets the combination of what each table says of it: dropped if any
    drops it, else the largest delay, jitter, loss and duplication.
    """
    names = [*dict.fromkeys(all_nodes), CLIENTS]
    filters = [LinkFilter(t) for t in tables]
    rules: dict[tuple[str, str], LinkRule] = {}
    for src in names:
        for dst in names:
            if src == dst:
                continue
            found = [r for f in filters if (r := f.rule_for(src, dst)) is not None]
            if not found:
                continue
            if any(r.drop for r in found):
                rules[(src, dst)] = _DROP
            else:
                rules[(src, dst)] = LinkRule(delay=max(r.delay for r in found), jitter=max(r.jitter for r in found),
                                             loss=max(r.loss for r in found),
                                             duplicate=max(r.duplicate for r in found))
    return LinkTable(seq, rules)


def reachable(table: LinkTable, a: str, b: str) -> bool:
    """Whether a message from `a` can reach `b` under `table` (one direction; ask both ways
    for a conversation). Delay and partial loss still reach; drop or certain loss do not."""
    rule = LinkFilter(table).rule_for(a, b)
    return rule is None or not (rule.drop or rule.loss >= 1.0)


def _links(from_nodes: Iterable[str], to_nodes: Iterable[str]) -> list[tuple[str, str]]:
    """Every ordered (from, to) pair of two different names, in a stable order."""
    to_list = list(dict.fromkeys(to_nodes))
    return [(a, b) for a in dict.fromkeys(from_nodes) for b in to_list if a != b or a == WILDCARD]


def _check_names(names: Iterable[str], all_nodes: Sequence[str]) -> None:
    unknown = sorted({name for name in names if name not in all_nodes and name != CLIENTS})
    if unknown:
        raise ValueError(f"not cluster nodes: {unknown} (nodes: {', '.join(all_nodes)}, or {CLIENTS!r})")
