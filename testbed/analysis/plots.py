"""The report's plots as inline SVG: the overview and the series with matplotlib (Agg
backend), the partition timelines written by hand, since matplotlib's cost is per axes (about
0.13 s a partition) and its SVG of 24 partitions is 1.5 MB.

SVG rather than plotly: a report with 24 partition timelines stays small and needs no
script, where plotly inlines 3.5 MB of JavaScript into every file.
"""
from __future__ import annotations

import html
import io
import math
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.transforms import offset_copy


def _svg(fig: plt.Figure) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg"):]


def fault_bands(spans: list[dict]) -> list[tuple[float, float, str]]:
    """(start, end, label) per applied fault, from its start to its undo (`faultspans`)."""
    return [(f["start"], f["end"], f"{f['do']} {fault_subject(f)}") for f in spans]


def fault_subject(fault: dict) -> str:
    """What a fault acted on, as the report names it: its target, else the nodes it resolved
    to; a partition's groups as applied, after its shape (trial30: a partition read only
    "partition", its groups nowhere but the topology)."""
    subject = fault.get("target") or ", ".join(fault.get("resolved") or [])
    groups = fault.get("groups") or []
    if not groups:
        return subject
    cut = " | ".join(",".join(g) for g in groups)
    return " ".join(x for x in (fault.get("shape"), subject, f"[{cut}]") if x)


def _shade(ax: plt.Axes, bands: list[tuple[float, float, str]]) -> None:
    for start, end, _ in bands:
        ax.axvspan(start, max(end, start + 0.05), color="#e74c3c", alpha=0.18, lw=0)


def _finish(axes: tuple[plt.Axes, ...], bands: list[tuple[float, float, str]]) -> str:
    """The x label under the last axes, faults as red bands on every axes, small ticks; the SVG."""
    axes[-1].set_xlabel("seconds since the workload started", fontsize=7)
    for ax in axes:
        _shade(ax, bands)
        ax.tick_params(labelsize=7)
    return _svg(axes[0].figure)


_STATES = (("no leader", "#c0392b"), ("ISR short of the replicas", "#f39c12"), ("ISR full", "#2e8b57"),
           ("no acks=all service", "#7d3c98"))
#: the Availability table's windows, drawn over the controller's states in this order
_WINDOWS = (("no-acks-all", _STATES[3][1]), ("no-leader", _STATES[0][1]))


def lane_segments(changes: list[dict], windows: list[dict], end: float) -> list[tuple[float, float, str]]:
    """One partition's lane as (start, stop, colour), drawn in order: its state from the
    controller's changes (no leader, ISR short, ISR full), then over it the Availability
    table's windows of that partition (no acks=all service, then no leader). From the
    controller's changes alone, a killed or cut-off leader stayed "ISR full" until it was
    fenced, while the table beside it said no leader from the fault on (trial30)."""
    out = []
    for i, e in enumerate(changes):
        until = changes[i + 1]["t"] if i + 1 < len(changes) else end
        led = e["leader"] is not None and e["leader"] >= 0
        state = 0 if not led else 1 if len(e["isr"] or []) < len(e["replicas"] or []) else 2
        out.append((e["t"], until, _STATES[state][1]))
    for kind, color in _WINDOWS:
        out += [(w["start_s"], w["end_s"], color) for w in windows if w["kind"] == kind]
    return out


def overview(events: list[dict], bands: list[tuple[float, float, str]], end: float,
             windows: list[dict] | None = None, workload_end: float | None = None) -> str:
    """The whole run at a glance: the faults on a strip at the top, then one lane per
    partition coloured by its state (`lane_segments`, with `windows`, the Availability
    table's), with the leader's broker id written where it changes, and a dashed line at the
    workload's end: what follows is the final read and the controlled shutdowns, whose
    leaderless partitions read as an outage without it (trial30); a black mark over a lane
    where a replica of it truncated records away (the loss's moment in a lab)."""
    changes: dict[tuple[str, int], list[dict]] = {}
    cuts: dict[tuple[str, int], list[float]] = defaultdict(list)
    for e in events:
        if e["kind"] == "partition-changed":
            changes.setdefault((e["topic"], e["partition"]), []).append(e)
        elif e["kind"] == "truncated" and (e["to"] or 0) < (e["from"] or 0):  # a replica lost records
            cuts[(e["topic"], e["partition"])].append(e["t"])
    keys = sorted(changes)
    span = max(end, 0.1)
    after = workload_end if workload_end is not None and 0 < workload_end < end else None
    texts = [(start, f" {_shortened(label, _LABEL_CHARS)}", "left", "black") for start, _, label in bands]
    if workload_end is not None and 0 < workload_end < end:
        texts.append((workload_end, "workload ended ", "right", "#555"))
    texts = [_within(span, *t) for t in texts]
    placed = label_rows([(at - w if ha == "right" else at, at if ha == "right" else at + w)
                         for at, text, ha, _ in texts for w in [len(text) * _CHAR * span]])
    n_rows = max(3, max(placed, default=0) + 1)
    height = 0.9 + 0.22 * max(len(keys), 1) + 0.12 * (n_rows - 3)
    _, (strip, lanes) = plt.subplots(2, 1, figsize=(9, height), sharex=True,
                                     height_ratios=[0.5 * n_rows / 3, max(len(keys), 1) * 0.3])
    for row, key in enumerate(keys):
        rows = changes[key]
        mine = [w for w in windows or () if (w["topic"], w["partition"]) == key]
        for start, stop, color in lane_segments(rows, mine, end):
            lanes.plot([start, stop], [row, row], color=color, lw=7, solid_capstyle="butt")
        for at, leader in leader_labels(rows, end):
            if after is None or at < after:  # (the shutdowns' moves after it are not named: cut at the edge)
                lanes.text(at, row, f" b{leader}", fontsize=6, va="center", color="white")
        if cuts[key]:
            lanes.plot(cuts[key], [row - 0.32] * len(cuts[key]), ls="none", marker="v", ms=3.5, color="black")
    lanes.set_yticks(range(len(keys)), [f"{t}/{p}" for t, p in keys])
    lanes.set_ylim(max(len(keys), 1) - 0.5, -0.5)  # (a run with no partition: one empty lane, no warning)
    lanes.tick_params(axis="y", labelsize=6)
    for label, color in _STATES:
        lanes.plot([], [], color=color, lw=5, label=label)
    if any(cuts.values()):
        lanes.plot([], [], ls="none", marker="v", ms=3.5, color="black", label="a replica truncated")
    # under the axis title at any height: 26 pt below the lanes, the ticks' and the title's room
    below = offset_copy(lanes.transAxes, lanes.figure, y=-26, units="points")
    lanes.legend(fontsize=6, loc="upper center", bbox_to_anchor=(0.5, 0), bbox_transform=below, ncols=5,
                 frameon=False)
    strip.set_yticks([])
    strip.set_title("faults (red, from each fault to its undo) and every partition's state", fontsize=9, loc="left")
    if after is not None:
        for ax in (strip, lanes):
            ax.axvline(after, color="#555", lw=0.8, ls="--")
        # the final read and the controlled shutdowns, washed out: their leaderless moments
        # read as outages (trial33), which the Availability table, ending with the workload, has not
        lanes.axvspan(after, span, color="white", alpha=0.65, lw=0, zorder=2.5)
    for (at, text, ha, color), row in zip(texts, placed):
        strip.text(at, 1 - (row + 0.5) / n_rows, text, fontsize=6, va="center", ha=ha, color=color, clip_on=True,
                   transform=strip.get_xaxis_transform())
    strip.set_xlim(0, span)
    return _finish((strip, lanes), bands)


_CHAR = 0.0065  # the width of one character of a 6 pt label, as a share of the overview's time span
_LABEL_CHARS = 60  # a fault's label on the strip at most (a partition's groups in full are in the Recovery table)


def _shortened(text: str, most: int) -> str:
    return text if len(text) <= most else text[:most - 1] + "…"


def _within(span: float, at: float, text: str, ha: str, color: str) -> tuple[float, str, str, str]:
    """A label that would run past the right edge, cut to the room there is, or, with room
    for fewer than 12 characters, ending at the edge (cut to 24, to stay near its band)."""
    room = int((span - at) / (_CHAR * span))
    if ha == "right" or len(text) <= room:
        return at, text, ha, color
    return (at, _shortened(text, room), ha, color) if room >= 12 else (span, _shortened(text, 24), "right", color)


def label_rows(spans: list[tuple[float, float]]) -> list[int]:
    """A row of the strip for each label (`spans`: where each would be written, in seconds):
    the first row whose labels so far end before it begins, else a new row below them. Two
    kills 47 ms apart were written over each other (trial30), and a nemesis's five faults
    in 3 s over three rows (trial31)."""
    ends: list[float] = []
    out = []
    for begin, finish in spans:
        row = next((r for r, e in enumerate(ends) if e <= begin), len(ends))
        if row == len(ends):
            ends.append(finish)
        ends[row] = finish
        out.append(row)
    return out


def leader_labels(rows: list[dict], end: float) -> list[tuple[float, int]]:
    """Where a lane names its leader (`rows`: its partition's changes in time order): at each
    change of leader, the one in office at time 0 at 0 (the partition was made before the
    workload began); a change within 3% of the span after the last label, which it would
    overwrite (trial30: "b1b2"), renames that label instead: it names the leader that lasted."""
    out: list[tuple[float, int]] = []
    previous = None
    for e in rows:
        leader = e["leader"] if e["leader"] is not None and e["leader"] >= 0 else None
        if leader is not None and leader != previous:
            at = max(e["t"], 0.0)
            if out and at - out[-1][0] < 0.03 * max(end, 0.1):
                at = out.pop()[0]
            out.append((at, leader))
        previous = leader
    return out


def series_plot(series: list[dict], bands: list[tuple[float, float, str]], workload_end: float | None = None) -> str:
    """Records per second and p50/p99 latency of sends and polls, with faults as red bands;
    the operations that failed or ended unknown, per second, dotted (trial30: a 0.6 s stall
    of 40 indeterminate sends hid inside a second of 400 acknowledged records)."""
    _, (rate, lat) = plt.subplots(2, 1, figsize=(9, 3.2), sharex=True)
    highest = 0.0  # the highest latency drawn, in ms
    for f, color in (("send", "#2c7fb8"), ("poll", "#41ab5d")):
        rows = [s for s in series if s["f"] == f]
        if not rows:
            continue
        rate.step(*rate_steps(rows, workload_end), where="post", color=color, label=f"{f} records/s")
        if any(s["not_ok"] for s in rows):  # failed or indeterminate: what a stall shows within its second
            rate.step(*rate_steps([{**s, "records": s["not_ok"]} for s in rows], workload_end), where="post",
                      color=color, lw=0.8, ls=":", label=f"{f} not ok/s")
        # a second without a completed operation has no latency: the line breaks there (NaN)
        # instead of drawing one across the stall
        at = {s["second"]: s for s in rows}
        xs = list(range(min(at), max(at) + 1))
        for q, ls in (("p50", "-"), ("p99", "--")):
            ys = [math.nan if at.get(x, {}).get(f"{q}_ms") is None else at[x][f"{q}_ms"] for x in xs]
            lat.plot(xs, ys, color=color, lw=1, ls=ls, label=f"{f} {q}")
            highest = max([highest, *(y for y in ys if not math.isnan(y))])
    rate.set_ylim(bottom=0)  # a rate of 80/s read as 0 on an axis from 70 (trial31)
    for ax in (rate, lat):  # beside the panel, not over its lines (a steady rate ran under the legend)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0, frameon=False)
    lat.set_ylabel("latency ms", fontsize=7)
    lat.set_yscale("symlog", linthresh=1)
    _latency_ticks(lat, highest)
    return _finish((rate, lat), bands)


def _latency_ticks(ax: plt.Axes, highest: float) -> None:
    """From 0 (symlog drew half the panel for negative milliseconds) to a decade above the
    highest latency, each decade labelled in plain milliseconds (one `10^0` was the only
    label of some panels, and a p99 spike ran into the top edge: trial33)."""
    decades = max(1, math.ceil(math.log10(max(highest, 1.0)) + 0.15))
    ax.set_ylim(0, 10 ** decades)
    ax.set_yticks([0, *(10 ** k for k in range(decades + 1))],
                  ["0", *(f"{10 ** k:g}" for k in range(decades + 1))])


def rate_steps(rows: list[dict], workload_end: float | None) -> tuple[list[float], list[float]]:
    """The step line of one kind's records per second (`rows`: its `figures.series`): every
    second from the first to the last at its rate, 0 where nothing completed (the series has
    no row for it, and the line bridged the stall), and the last second, which the
    workload's end cuts short, as a rate over the part the workload ran (it drew as a fall:
    trial30). A second with under 0.2 s of the workload in it (the requests in flight at a
    10 s workload's end) is left out, where its rate would be a spike."""
    count = {s["second"]: s["records"] for s in rows}
    if workload_end is not None and any(x < workload_end - 0.2 for x in count):
        count = {x: n for x, n in count.items() if x < workload_end - 0.2}
        # to the workload's end: a stall that outlived its fault ends the run at 0 (trial31)
        count.setdefault(max(0, math.ceil(workload_end - 0.2) - 1), 0)
    first, last = min(count), max(count)
    cut = min(1.0, workload_end - last) if workload_end is not None and workload_end > last else 1.0
    xs = [float(x) for x in range(first, last + 1)]
    ys = [count.get(x, 0) / (cut if x == last else 1.0) for x in range(first, last + 1)]
    return xs + [last + cut], ys + ys[-1:]


_W, _LEFT, _RIGHT = 900, 56, 12  # the timelines' width and the margins of their panels, in px
_PLOT = _W - _LEFT - _RIGHT
_TITLE, _LANE, _PANEL_GAP, _HWM, _GAP = 16, 12, 4, 64, 14  # heights in px
_LANES = (("#1f3b73", 7), ("#5b9bd5", 4), ("#f39c12", 4))  # leader, ISR, ELR: colour and bar height in px
_PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
            "#17becf")  # matplotlib's tab10


def partition_timelines(partitions: list[tuple[str, list[dict]]], bands: list[tuple[float, float, str]],
                        end: float) -> str:
    """Per partition (title, its events in time order): leader, ISR and ELR membership per
    broker (lanes) from the controller's changes, and below it each replica's HWM from the
    brokers' events, with faults as red bands and one time axis under the last partition."""
    if not partitions:
        return ""
    span = max(end, 0.1)
    scale = _PLOT / span  # px a second
    ticks = [(_LEFT + v * scale, v) for v in _ticks(span, 6.5)]
    split = [(title, *_split(events, scale)) for title, events in partitions]
    colors = {node: _PALETTE[i % len(_PALETTE)]  # a node has the same colour in every partition
              for i, node in enumerate(sorted({node for _, _, columns in split for node in columns}))}
    body: list[str] = []
    top = 0.0
    for title, changes, columns in split:
        brokers = sorted({b for e in changes for b in e["replicas"] or []})
        lanes_top = top + _TITLE
        lanes_h = len(brokers) * _LANE + 4 if brokers else 0
        hwm_top = lanes_top + lanes_h + (_PANEL_GAP if brokers else 0)
        for start, stop, label in bands:
            x0, x1 = (_x(t, scale) for t in (start, max(stop, start + 0.05)))
            body.append(f'<rect x="{_n(x0)}" y="{_n(lanes_top)}" width="{_n(x1 - x0)}" '
                        f'height="{_n(hwm_top + _HWM - lanes_top)}" fill="#e74c3c" opacity=".18">'
                        f"<title>{html.escape(label)}</title></rect>")
        body.append(f'<text x="{_LEFT}" y="{_n(top + 11)}" font-size="10">{html.escape(title)}</text>')
        if brokers:
            body += _lanes_panel(changes, brokers, end, scale, lanes_top, lanes_h, ticks)
        body += _hwm_panel(columns, colors, top, hwm_top, ticks)
        top = hwm_top + _HWM + _GAP
    axis = top - _GAP
    body.append('<path d="' + "".join(f"M{_n(x)} {_n(axis)}v4" for x, _ in ticks) + '" stroke="#555"/>')
    body += [f'<text x="{_n(x)}" y="{_n(axis + 14)}" text-anchor="middle">{_seconds(v)}</text>' for x, v in ticks]
    body.append(f'<text x="{_n(_LEFT + _PLOT / 2)}" y="{_n(axis + 30)}" text-anchor="middle">'
                "seconds since the workload started</text>")
    height = _n(axis + 36)
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{height}" viewBox="0 0 {_W} {height}" '
            'style="max-width:100%;height:auto" font-family="sans-serif" font-size="8">' + "".join(body) + "</svg>")


def _split(events: list[dict], scale: float) -> tuple[list[dict], dict[str, dict[int, float]]]:
    """The controller's changes, and per node its HWM (the `to` of a truncation) as the last
    value in each pixel column: a node reports its HWM thousands of times in a run."""
    changes: list[dict] = []
    columns: dict[str, dict[int, float]] = defaultdict(dict)
    for e in events:
        kind = e["kind"]
        if kind == "partition-changed":
            changes.append(e)
        else:
            value = e["to"] if kind == "truncated" else e["hwm"]
            if value is not None:
                columns[e["node"]][int(e["t"] * scale)] = value
    return changes, columns


def _n(v: float) -> str:
    """A coordinate to a tenth of a pixel, without a trailing .0."""
    return f"{v:.1f}".removesuffix(".0")


def _x(t: float, scale: float) -> float:
    return _LEFT + min(max(t * scale, 0.0), _PLOT)


def _ticks(top: float, intervals: float, least: float = 0.0) -> list[float]:
    """0 to `top` in steps of 1, 2 or 5 x 10^k (at least `least`), the step that gives the
    number of intervals nearest to `intervals`."""
    unit = 10 ** math.floor(math.log10(top / intervals))
    step = max(min((m * unit for m in (1, 2, 5, 10)), key=lambda s: abs(math.log(top / s / intervals))), least)
    return [i * step for i in range(int(top / step + 1e-9) + 1)]


def _seconds(v: float) -> str:
    return f"{round(v, 6):g}"


def _count(v: float) -> str:
    return f"{v / 1e6:g}M" if v >= 1e6 else f"{v / 1e3:g}k" if v >= 1e4 else f"{v:g}"


def _grid(ticks: list[tuple[float, float]], top: float, height: float, rows: list[float]) -> list[str]:
    """A panel's frame and its light gridlines at the time ticks (and at the heights `rows`)."""
    d = "".join(f"M{_n(x)} {_n(top)}v{_n(height)}" for x, _ in ticks) + "".join(
        f"M{_LEFT} {_n(y)}h{_PLOT}" for y in rows)
    return [f'<path d="{d}" stroke="#e6e6e6"/>',
            f'<rect x="{_LEFT}" y="{_n(top)}" width="{_PLOT}" height="{_n(height)}" fill="none" stroke="#999"/>']


def _lanes_panel(changes: list[dict], brokers: list[int], end: float, scale: float, top: float, height: float,
                 ticks: list[tuple[float, float]]) -> list[str]:
    """A bar per broker for each run of changes in which its role (leader, else ISR, else ELR)
    stays the same: one bar per change would repeat the same bar for every ISR change."""
    out = _grid(ticks, top, height, [])
    for i, b in enumerate(brokers):
        mid = top + 2 + (i + 0.5) * _LANE
        out.append(f'<text x="{_LEFT - 4}" y="{_n(mid + 3)}" text-anchor="end">{html.escape(f"b{b}")}</text>')
        runs: list[tuple[float, tuple[str, int] | None]] = []
        for e in changes:
            role = next((lane for lane, member in zip(_LANES, (e["leader"] == b, b in (e["isr"] or []),
                                                               b in (e["elr"] or []))) if member), None)
            if not runs or runs[-1][1] != role:
                runs.append((e["t"], role))
        for k, (start, role) in enumerate(runs):
            x0, x1 = _x(start, scale), _x(runs[k + 1][0] if k + 1 < len(runs) else end, scale)
            if role is not None and x1 > x0:
                color, width = role
                out.append(f'<rect x="{_n(x0)}" y="{_n(mid - width / 2)}" width="{_n(x1 - x0)}" height="{width}" '
                           f'fill="{color}"/>')
    return out


def _hwm_panel(columns: dict[str, dict[int, float]], colors: dict[str, str], title_top: float, top: float,
               ticks: list[tuple[float, float]]) -> list[str]:
    """Each node's HWM as a post-step line from 0 to the highest value drawn, the legend at the
    right of the partition's title."""
    peak = max([1, *(max(values.values()) for values in columns.values())])
    rows = _ticks(peak, 2.5, least=1)
    bottom = top + _HWM
    vscale = (_HWM - 6) / peak
    out = _grid(ticks, top, _HWM, [bottom - v * vscale for v in rows[1:]])
    out += [f'<text x="{_LEFT - 4}" y="{_n(bottom - v * vscale + 3)}" text-anchor="end">{_count(v)}</text>'
            for v in rows]
    mid = _n(top + _HWM / 2)
    out.append(f'<text x="12" y="{mid}" text-anchor="middle" transform="rotate(-90 12 {mid})">HWM</text>')
    right = _W - _RIGHT
    for node in sorted(columns, reverse=True):  # from the right
        right -= 25 + 5 * len(node)  # about 5 px a character at 8 px
        out.append(f'<path d="M{_n(right)} {_n(title_top + 8)}h12" stroke="{colors[node]}" stroke-width="2"/>'
                   f'<text x="{_n(right + 15)}" y="{_n(title_top + 11)}">{html.escape(node)}</text>')
    # in whole tenths of a px from the panel's bottom left corner: short numbers, quick to write
    out += [f'<path transform="translate({_LEFT} {_n(bottom)}) scale(.1)" d="{_steps(columns[node], vscale * 10)}" '
            f'fill="none" stroke="{colors[node]}" stroke-width="10"/>' for node in sorted(columns)]
    return out


def _steps(columns: dict[int, float], tenths: float) -> str:
    """A post-step line through the pixel columns where the value's height, in tenths of a px
    upwards, changes."""
    items = sorted(columns.items())
    if items[0][0] < 0 or items[-1][0] > _PLOT:  # reports before 0 or after the end: at the edge, the last one
        edge: dict[int, float] = {}
        for column, value in items:
            edge[min(max(column, 0), _PLOT)] = value
        items = list(edge.items())
    x0, y0 = items[0][0], -round(items[0][1] * tenths)
    d = [f"M{x0 * 10} {y0}"]
    for x, value in items:
        y = -round(value * tenths)
        if y != y0:
            d.append(f"h{(x - x0) * 10}v{y - y0}")
            x0, y0 = x, y
    last = items[-1][0]  # the line runs on to the last report, as one that changed nothing
    return "".join(d) + (f"h{(last - x0) * 10}" if last > x0 else "")
