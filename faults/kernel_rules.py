"""The network faults as kernel packet filter rules (DESIGN section 5, `backend: netns`): pure.

On the netns backend every node and the clients sit in namespaces of their own, joined by a
bridge in a namespace of its own. A cut link becomes one nftables rule in the bridge's
namespace, on its forward hook: `ip saddr A ip daddr B drop`. Dropping at the bridge is what
a switch losing a link does: the sender's packets leave and are never seen, so TCP hangs and
retransmits (a drop on the sender's own output hook would fail its send at once, EPERM, which
no real partition does). One ruleset for the whole run, replaced in one nft transaction, so
a partition and its heal change every link at the same instant.

The rest of a rule (delay, jitter, loss, duplication) is a `tc netem` qdisc where the kernel
has one (`tc_script`): on the bridge's port towards the destination, an htb class per slowed
source, picked by a u32 filter on the source address, with netem under it, so each ordered
pair gets its own delay. Where the kernel lacks netem (CONFIG_NET_SCH_NETEM, as on the
machines this was first built on), that rest stays with the nodes' userspace filters, whole.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from math import ceil

from broker.wire.linkfilter import LinkFilter, LinkRule, LinkTable

#: the nftables table of a run, in the bridge's namespace (family bridge)
TABLE = "isrlab"
CHAIN = "links"


def split(table: LinkTable, names: Sequence[str]) -> tuple[list[tuple[str, str]], LinkTable]:
    """The links the kernel must cut, and the table left for the nodes' userspace filter.

    Every ordered pair of `names` (the nodes and `clients`) is resolved through the table's
    wildcards first, so a drop on `*` becomes explicit links and a slow rule that a specific
    drop overrode does not come back once the drop is taken out.
    """
    f = LinkFilter(table)
    drops: list[tuple[str, str]] = []
    rest: dict[tuple[str, str], LinkRule] = {}
    for a in names:
        for b in names:
            if a == b:
                continue
            rule = f.rule_for(a, b)
            if rule is None:
                continue
            if rule.drop:
                drops.append((a, b))
            else:
                rest[(a, b)] = rule
    return drops, LinkTable(table.seq, rest)


def link_name(src: str, dst: str) -> str:
    """The key of a link in counters and rule comments, as the nodes' filters write it."""
    return f"{src}->{dst}"


def nft_script(drops: Sequence[tuple[str, str]], addresses: Mapping[str, str]) -> str:
    """An `nft -f` script that replaces the run's ruleset with these cuts, atomically.

    The first line creates the table if it is missing so that the delete cannot fail; nft
    applies a whole file as one transaction. Each rule carries its link as a comment, by
    which its counter is read back (`counters`).
    """
    unknown = sorted({n for link in drops for n in link if n not in addresses})
    if unknown:
        raise ValueError(f"no address for {unknown} (known: {', '.join(sorted(addresses))})")
    lines = [f"table bridge {TABLE}", f"delete table bridge {TABLE}", f"table bridge {TABLE} {{",
             f"  chain {CHAIN} {{", "    type filter hook forward priority 0; policy accept;"]
    lines += [f'    ip saddr {addresses[a]} ip daddr {addresses[b]} counter drop comment "{link_name(a, b)}"'
              for a, b in drops]
    lines += ["  }", "}"]
    return "\n".join(lines) + "\n"


def rules_text(drops: Sequence[tuple[str, str]], addresses: Mapping[str, str]) -> list[str]:
    """The rules of `nft_script`, one line each, for faults.jsonl."""
    return [f"ip saddr {addresses[a]} ip daddr {addresses[b]} drop  # {link_name(a, b)}" for a, b in drops]


def counters(listing: Mapping) -> dict[str, dict[str, int]]:
    """Packets dropped per link, from `nft -j list table bridge isrlab` (parsed JSON)."""
    out: dict[str, dict[str, int]] = {}
    for item in listing.get("nftables", []):
        rule = item.get("rule") if isinstance(item, dict) else None
        if not isinstance(rule, dict) or not isinstance(rule.get("comment"), str):
            continue
        for expr in rule.get("expr", []):
            counter = expr.get("counter") if isinstance(expr, dict) else None
            if isinstance(counter, dict) and counter.get("packets"):
                out[rule["comment"]] = {"dropped_packets": int(counter["packets"])}
    return out


#: netem's queue, in packets: its default (1,000) would drop at full speed under a delay
NETEM_LIMIT = 100_000
#: every htb class's rate: shaping is not the point, only the classification
HTB_RATE = "10gbit"


def tc_script(slow: Mapping[tuple[str, str], LinkRule], addresses: Mapping[str, str],
              ports: Mapping[str, str]) -> str:
    """A `tc -force -batch` script for the bridge's namespace that replaces every port's egress
    qdisc: netem for each slowed (source, destination) pair, on the port towards the
    destination; nothing on a port that no slowed link ends at (the kernel's default)."""
    lines = []
    for dst, port in ports.items():
        lines.append(f"qdisc del dev {port} root")
        incoming = sorted((src, rule) for (src, d), rule in slow.items() if d == dst)
        if not incoming:
            continue
        lines += [f"qdisc add dev {port} root handle 1: htb default 1",
                  f"class add dev {port} parent 1: classid 1:1 htb rate {HTB_RATE}"]
        for k, (src, rule) in enumerate(incoming, start=10):
            lines += [f"class add dev {port} parent 1: classid 1:{k} htb rate {HTB_RATE}",
                      f"qdisc add dev {port} parent 1:{k} handle {k}: {netem(rule)}",
                      f"filter add dev {port} parent 1: protocol ip prio 1 u32 match ip src "
                      f"{addresses[src]}/32 flowid 1:{k}"]
    return "\n".join(lines) + "\n"


def netem(rule: LinkRule) -> str:
    """netem's arguments for a link rule: delay and jitter in microseconds, percentages."""
    words = [f"netem limit {NETEM_LIMIT}", f"delay {ceil(rule.delay * 1e6)}us"]
    if rule.jitter:
        words.append(f"{ceil(rule.jitter * 1e6)}us")
    if rule.loss:
        words.append(f"loss {rule.loss * 100:g}%")
    if rule.duplicate:
        words.append(f"duplicate {rule.duplicate * 100:g}%")
    return " ".join(words)


def slow_rules_text(slow: Mapping[tuple[str, str], LinkRule], addresses: Mapping[str, str]) -> list[str]:
    """The netem of `tc_script`, one line per link, for faults.jsonl."""
    return [f"ip src {addresses[a]} -> {addresses[b]}: {netem(rule)}  # {link_name(a, b)}"
            for (a, b), rule in sorted(slow.items())]
