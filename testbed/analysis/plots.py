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
