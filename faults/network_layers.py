"""The network faults in force, one layer per fault (DESIGN section 5, userspace backend).

Every `partition` and `slow` adds a layer under the origin of the fault that made it; the
table the nodes hold is the composition of all layers (`faults.network.compose`). A nemesis
undo removes only its own layer, an explicit `heal` all of them. Each layer remembers the
nodes it cut off from the controller (they count as down for a nemesis's `max_down`) and
the link counters when it began, so that its heal can say what it dropped.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from broker.wire.linkfilter import LinkTable
from faults import network

Counters = dict[str, dict[str, int]]


@dataclass(frozen=True)
class Layer:
    table: LinkTable
    isolated: tuple[str, ...]
    counters_at_start: Counters


class NetworkLayers:
    def __init__(self) -> None:
        self._layers: dict[str, Layer] = {}

    def __bool__(self) -> bool:
        return bool(self._layers)

    def origins(self) -> list[str]:
        return list(self._layers)

    def add(self, origin: str, table: LinkTable, isolated: Sequence[str], counters: Counters) -> None:
        self._layers[origin] = Layer(table, tuple(isolated), counters)

    def remove(self, origins: Sequence[str], counters_now: Counters) -> dict[str, Counters]:
        """Drop these layers; for each, the messages its links counted while it was in force."""
        return {o: _delta(counters_now, self._layers.pop(o).counters_at_start)
                for o in origins if o in self._layers}

    def isolated(self) -> set[str]:
        """Nodes some layer cut off from the active controller."""
        return {n for layer in self._layers.values() for n in layer.isolated}

    def compose(self, all_nodes: Sequence[str], seq: int) -> LinkTable:
        return network.compose([layer.table for layer in self._layers.values()], all_nodes, seq)


def merge_counters(parts: Sequence[Counters]) -> Counters:
    """Counters of several layers: overlapping layers saw the same messages, so the largest."""
    out: Counters = {}
    for part in parts:
        for link, counts in part.items():
            agg = out.setdefault(link, {})
            for k, v in counts.items():
                agg[k] = max(agg.get(k, 0), v)
    return out


def _delta(now: Counters, before: Counters) -> Counters:
    out = {}
    for link, counts in now.items():
        d = {k: v - before.get(link, {}).get(k, 0) for k, v in counts.items()}
        if any(d.values()):
            out[link] = d
    return out
