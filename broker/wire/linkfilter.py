"""The userspace network fault filter (DESIGN section 5, `backend: userspace`): pure.

The supervisor pushes a `LinkTable` (with a sequence number, so a late push of an old
table cannot undo a newer one) to every node; each node's transport asks its
`LinkFilter` what to do with every message on a link (source name, destination name).

A rule's key may use `"*"` on either side, or `"clients"`, which stands for every name that
is not a cluster node (`broker-N`, `controller-N`): the workload's transports are named
`api-N`, `producer-N-M`, `consumer-N-M`, `final-reader`, and a partition that names the
group `clients` must cut all of them without knowing their names in advance. The most
specific rule wins, whole (rules do not combine): each side is tried as its own name, then
`"clients"` (for a client only), then `"*"`, the source side varying slowest, so without
clients the order is (src, dst), (src, "*"), ("*", dst), ("*", "*").

Where the verdict is applied: the sender applies the full verdict (`decide`: drop, loss,
delay, jitter, duplication); the receiver applies only `drop` (`admits`). Dropping is
idempotent, so checking it on both ends costs nothing and still cuts a sender that has
no filter (a client); applying loss or delay on both ends would apply them twice.

Every message the filter drops, delays or duplicates is counted per link so that a run
can record what a partition did (DESIGN section 7, faults.jsonl `effect`).
"""
from __future__ import annotations

import itertools
import math
import random
import re
from dataclasses import dataclass, field, fields
from typing import Any

WILDCARD = "*"
CLIENTS = "clients"
#: The names cluster nodes go by (NodeSpec.name); every other transport name is a client.
_NODE_NAME = re.compile(r"(?:broker|controller)-\d+")


def is_client(name: str) -> bool:
    """True for a name the `"clients"` key matches: anything but a cluster node's name."""
    return _NODE_NAME.fullmatch(name) is None


def _lookup_keys(name: str) -> tuple[str, ...]:
    """The keys that can stand for `name` in a rule, most specific first."""
    return (name, CLIENTS, WILDCARD) if is_client(name) else (name, WILDCARD)


@dataclass(frozen=True, slots=True)
class LinkRule:
    """What happens to messages on one link; the defaults deliver everything at once."""
    drop: bool = False
    delay: float = 0.0  # seconds
    jitter: float = 0.0  # seconds, uniform in [-jitter, +jitter] around delay (never < 0)
    loss: float = 0.0  # probability of losing a message
    duplicate: float = 0.0  # probability of delivering it twice

    def __post_init__(self) -> None:
        if type(self.drop) is not bool:
            raise ValueError(f"drop must be a bool, got {self.drop!r}")
        for name in ("delay", "jitter", "loss", "duplicate"):
            value = getattr(self, name)
            if type(value) not in (int, float) or not math.isfinite(value) or value < 0:
                raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
        for name in ("loss", "duplicate"):
            if getattr(self, name) > 1:
                raise ValueError(f"{name} is a probability, got {getattr(self, name)!r}")


_RULE_FIELDS = tuple(f.name for f in fields(LinkRule))
_DEFAULT_RULE = LinkRule()


@dataclass(frozen=True)
class LinkTable:
    seq: int
    rules: dict[tuple[str, str], LinkRule] = field(default_factory=dict)

    def to_dict(self) -> dict:
        """A msgpack/JSON-ready form, for the supervisor's `links` control request."""
        return {
            "seq": self.seq,
            "rules": [
                [src, dst, {name: getattr(rule, name) for name in _RULE_FIELDS
                            if getattr(rule, name) != getattr(_DEFAULT_RULE, name)}]
                for (src, dst), rule in self.rules.items()
            ],
        }

    @classmethod
    def from_dict(cls, data: Any) -> LinkTable:
        """Parse `to_dict`'s form; raises ValueError naming what is wrong and where."""
        if type(data) is not dict or set(data) != {"seq", "rules"}:
            raise ValueError("link table must be a dict with exactly the keys 'seq' and 'rules'")
        seq, raw_rules = data["seq"], data["rules"]
        if type(seq) is not int:
            raise ValueError(f"link table seq must be an int, got {seq!r}")
        if type(raw_rules) is not list:
            raise ValueError("link table rules must be a list of [src, dst, rule]")
        rules: dict[tuple[str, str], LinkRule] = {}
        for i, entry in enumerate(raw_rules):
            if type(entry) not in (list, tuple) or len(entry) != 3:
                raise ValueError(f"link rule {i}: expected [src, dst, rule], got {entry!r}")
            src, dst, params = entry
            if type(src) is not str or type(dst) is not str or type(params) is not dict:
                raise ValueError(f"link rule {i}: expected [str, str, dict], got {entry!r}")
            unknown = set(params) - set(_RULE_FIELDS)
            if unknown:
                raise ValueError(f"link rule {i} ({src} -> {dst}): unknown keys {sorted(map(str, unknown))}")
            if (src, dst) in rules:
                raise ValueError(f"link rule {i}: ({src} -> {dst}) appears twice")
            try:
                rules[(src, dst)] = LinkRule(**params)
            except ValueError as e:
                raise ValueError(f"link rule {i} ({src} -> {dst}): {e}") from None
        return cls(seq, rules)


@dataclass(frozen=True, slots=True)
class Verdict:
    """What to do with one outgoing message: send `copies` copies (0: drop) after `delay` s."""
    copies: int
    delay: float = 0.0

    @property
    def dropped(self) -> bool:
        return self.copies == 0


DELIVER = Verdict(1)
DROP = Verdict(0)

_DROPPED, _DELAYED, _DUPLICATED = 0, 1, 2
_COUNTER_NAMES = ("dropped", "delayed", "duplicated")


class LinkFilter:
    """The current link table of one node, the verdicts it gives, and what they did."""

    def __init__(self, table: LinkTable | None = None) -> None:
        self._table = LinkTable(-1)
        #: the table has no rule: every message passes (`decide` DELIVER, `admits` True), which
        #: a sender and a receiver may read without the calls (the simulated network, twice a
        #: message); kept with the table by `update`
        self.passes_all = True
        self._resolved: dict[tuple[str, str], LinkRule | None] = {}
        self._counts: dict[tuple[str, str], list[int]] = {}
        if table is not None:
            self.update(table)

    @property
    def table(self) -> LinkTable:
        return self._table

    def update(self, table: LinkTable) -> bool:
        """Install `table` unless it is not newer than the current one (a stale push)."""
        if table.seq <= self._table.seq:
            return False
        self._table = table
        self.passes_all = not table.rules
        self._resolved.clear()
        return True

    def rule_for(self, src: str, dst: str) -> LinkRule | None:
        """The rule that governs src -> dst, the most specific key winning."""
        key = (src, dst)
        try:
            return self._resolved[key]
        except KeyError:
            pass
        rules = self._table.rules
        rule = next((rules[k] for k in itertools.product(_lookup_keys(src), _lookup_keys(dst)) if k in rules),
                    None)
        self._resolved[key] = rule
        return rule

    def decide(self, src: str, dst: str, rng: random.Random) -> Verdict:
        """The sender's verdict for one message on src -> dst (counted when not plain delivery)."""
        if not self._table.rules:
            return DELIVER  # nothing to look up: most messages of most runs
        rule = self.rule_for(src, dst)
        if rule is None:
            return DELIVER
        if rule.drop or (rule.loss and rng.random() < rule.loss):
            self._count(src, dst, _DROPPED)
            return DROP
        copies = 2 if rule.duplicate and rng.random() < rule.duplicate else 1
        delay = rule.delay
        if rule.jitter:
            delay = max(0.0, delay + rng.uniform(-rule.jitter, rule.jitter))
        if copies == 1 and delay == 0:
            return DELIVER
        if copies == 2:
            self._count(src, dst, _DUPLICATED)
        if delay > 0:
            self._count(src, dst, _DELAYED)
        return Verdict(copies, delay)

    def admits(self, src: str, dst: str) -> bool:
        """The receiver's check: False (and counted as dropped) when src -> dst is cut."""
        if not self._table.rules:
            return True
        rule = self.rule_for(src, dst)
        if rule is None or not rule.drop:
            return True
        self._count(src, dst, _DROPPED)
        return False

    def counters(self) -> dict[tuple[str, str], dict[str, int]]:
        """Per link (src, dst): messages dropped, delayed and duplicated so far."""
        return {link: dict(zip(_COUNTER_NAMES, counts)) for link, counts in self._counts.items()}

    def _count(self, src: str, dst: str, which: int) -> None:
        counts = self._counts.get((src, dst))
        if counts is None:
            counts = self._counts[(src, dst)] = [0, 0, 0]
        counts[which] += 1
