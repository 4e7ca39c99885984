"""The network faults as kernel packet filter rules (DESIGN section 5, `backend: netns`): pure.

On the netns backend every node and the clients sit in namespaces of their own, joined by a
bridge in a namespace of its own. A cut link becomes one nftables rule in the bridge's
namespace, on its forward hook: `ip saddr A ip daddr B drop`. Dropping at the bridge is what
a switch losing a link does: the sender's packets leave and are never seen, so TCP hangs and
retransmits (a drop on the sender's own output hook would fail its send at once, EPERM, which
no real partition does). One ruleset for the whole run, replaced in one nft transaction, so
a partition and its heal change every link at the same instant.

Only `drop` goes to the kernel. The rest of a rule (delay, jitter, loss, duplication) stays
with the nodes' userspace filter: the kernels this was built on lack `netem`
(CONFIG_NET_SCH_NETEM), and a `slow` fault done half in the kernel and half in userspace
would be harder to read than one done whole in userspace.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

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
