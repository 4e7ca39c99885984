"""The report's plots as inline SVG (matplotlib, Agg backend).

SVG rather than plotly: a report with 24 partition timelines stays in the hundreds of
kilobytes and needs no script, where plotly inlines 3.5 MB of JavaScript into every file.
"""
from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

_LANES = (("leader", "#1f3b73", 7), ("isr", "#5b9bd5", 4), ("elr", "#f39c12", 4))


def _svg(fig: plt.Figure) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg"):]


def fault_bands(spans: list[dict]) -> list[tuple[float, float, str]]:
    """(start, end, label) per applied fault, from its start to its undo (`faultspans`)."""
    return [(f["start"], f["end"], f"{f['do']} {f['target'] or ', '.join(f['resolved'] or [])}") for f in spans]


def _shade(ax: plt.Axes, bands: list[tuple[float, float, str]]) -> None:
    for start, end, _ in bands:
        ax.axvspan(start, max(end, start + 0.05), color="#e74c3c", alpha=0.18, lw=0)


def _finish(axes: tuple[plt.Axes, ...], bands: list[tuple[float, float, str]]) -> str:
    """The x label under the last axes, faults as red bands on every axes, small ticks; the SVG."""
    axes[-1].set_xlabel("seconds since the run started", fontsize=7)
    for ax in axes:
        _shade(ax, bands)
        ax.tick_params(labelsize=7)
    return _svg(axes[0].figure)


_STATES = (("no leader", "#c0392b"), ("ISR short of the replicas", "#f39c12"), ("ISR full", "#2e8b57"))


def overview(events: list[dict], bands: list[tuple[float, float, str]], end: float) -> str:
    """The whole run at a glance: the faults on a strip at the top, then one lane per
    partition coloured by its state (no leader, ISR short, ISR full) from the controller's
    changes, with the leader's broker id written where it changes."""
    changes: dict[tuple[str, int], list[dict]] = {}
    for e in events:
        if e["kind"] == "partition-changed":
            changes.setdefault((e["topic"], e["partition"]), []).append(e)
    keys = sorted(changes)
    height = 0.9 + 0.22 * max(len(keys), 1)
    _, (strip, lanes) = plt.subplots(2, 1, figsize=(9, height), sharex=True,
                                     height_ratios=[0.5, max(len(keys), 1) * 0.3])
    for row, key in enumerate(keys):
        rows = changes[key]
        for i, e in enumerate(rows):
            until = rows[i + 1]["t"] if i + 1 < len(rows) else end
            led = e["leader"] is not None and e["leader"] >= 0
            state = 0 if not led else 1 if len(e["isr"] or []) < len(e["replicas"] or []) else 2
            lanes.plot([e["t"], until], [row, row], color=_STATES[state][1], lw=7, solid_capstyle="butt")
            if led and (i == 0 or rows[i - 1]["leader"] != e["leader"]):
                lanes.text(e["t"], row, f" b{e['leader']}", fontsize=6, va="center", color="white")
    lanes.set_yticks(range(len(keys)), [f"{t}/{p}" for t, p in keys])
    lanes.set_ylim(len(keys) - 0.5, -0.5)
    lanes.tick_params(axis="y", labelsize=6)
    for label, color in _STATES:
        lanes.plot([], [], color=color, lw=5, label=label)
    lanes.legend(fontsize=6, loc="upper center", bbox_to_anchor=(0.5, -0.25 / height * 3), ncols=3, frameon=False)
    strip.set_yticks([])
    strip.set_title("faults (red, from each fault to its undo) and every partition's state", fontsize=9, loc="left")
    for start, stop, label in bands:
        strip.text(start, 0.5, f" {label}", fontsize=6, va="center", clip_on=True)
    strip.set_xlim(0, max(end, 0.1))
    return _finish((strip, lanes), bands)


def partition_timeline(events: list[dict], bands: list[tuple[float, float, str]], end: float,
                       title: str) -> str:
    """Leader, ISR and ELR membership per broker (lanes) from the controller's changes, and
    each replica's HWM from the brokers' events, with faults as red bands."""
    changes = [e for e in events if e["kind"] == "partition-changed"]
    brokers = sorted({b for e in changes for b in (e["replicas"] or [])})
    _, (lanes, hwm) = plt.subplots(2, 1, figsize=(9, 2.6), sharex=True, height_ratios=[1, 1.2])
    for i, e in enumerate(changes):
        until = changes[i + 1]["t"] if i + 1 < len(changes) else end
        for b in brokers:
            member = {"leader": e["leader"] == b, "isr": b in (e["isr"] or []), "elr": b in (e["elr"] or [])}
            for role, color, width in _LANES:
                if member[role]:
                    lanes.plot([e["t"], until], [b, b], color=color, lw=width, solid_capstyle="butt")
                    break
    lanes.set_yticks(brokers, [f"b{b}" for b in brokers])
    lanes.set_ylim(min(brokers, default=0) - 0.6, max(brokers, default=0) + 0.6)
    lanes.set_title(title, fontsize=9, loc="left")
    by_node: dict[str, list[tuple[float, float]]] = {}
    for e in events:
        value = e["to"] if e["kind"] == "truncated" else e["hwm"]
        if e["kind"] != "partition-changed" and value is not None:
            by_node.setdefault(e["node"], []).append((e["t"], value))
    for node, points in sorted(by_node.items()):
        hwm.step([p[0] for p in points], [p[1] for p in points], where="post", lw=1, label=node)
    if by_node:
        hwm.legend(fontsize=6, loc="upper left", ncols=len(by_node))
    hwm.set_ylabel("HWM", fontsize=7)
    return _finish((lanes, hwm), bands)


def series_plot(series: list[dict], bands: list[tuple[float, float, str]]) -> str:
    """Records per second and p50/p99 latency of sends and polls, with faults as red bands."""
    _, (rate, lat) = plt.subplots(2, 1, figsize=(9, 3.2), sharex=True)
    for f, color in (("send", "#2c7fb8"), ("poll", "#41ab5d")):
        rows = [s for s in series if s["f"] == f]
        xs = [s["second"] for s in rows]
        rate.step(xs, [s["records"] for s in rows], where="post", color=color, label=f"{f} records/s")
        lat.plot(xs, [s["p50_ms"] for s in rows], color=color, lw=1, label=f"{f} p50")
        lat.plot(xs, [s["p99_ms"] for s in rows], color=color, lw=1, ls="--", label=f"{f} p99")
    rate.legend(fontsize=7)
    lat.legend(fontsize=7, ncols=4)
    lat.set_ylabel("latency ms", fontsize=7)
    lat.set_yscale("symlog", linthresh=1)
    return _finish((rate, lat), bands)
