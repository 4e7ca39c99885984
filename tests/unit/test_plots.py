"""The hand-written partition timelines: well-formed SVG, lanes by role, fault bands, thinned
HWM lines, escaped text and the degenerate inputs (no Spark: plain event dicts)."""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest

from testbed.analysis.plots import fault_bands, fault_subject, partition_timelines, rate_steps

NS = "{http://www.w3.org/2000/svg}"
LEADER, ISR, ELR, FAULT = "#1f3b73", "#5b9bd5", "#f39c12", "#e74c3c"
BANDS = [(1.0, 2.0, "kill broker-1"), (6.0, 6.0, "pause <broker-2>")]


def event(kind: str, t: float, node: str = "broker-1", **fields) -> dict:
    base = {"kind": kind, "node": node, "topic": "orders", "partition": 0, "t": t, "leader": None, "isr": None,
            "elr": None, "replicas": None, "hwm": None, "reason": None, "from": None, "to": None}
    return base | fields


def change(t: float, leader: int | None, isr: list[int] | None, elr: list[int] | None = None,
           replicas: tuple[int, ...] | None = (1, 2, 3)) -> dict:
    return event("partition-changed", t, "controller-1", leader=leader, isr=isr, elr=elr,
                 replicas=None if replicas is None else list(replicas))


def parse(svg: str) -> ET.Element:
    root = ET.fromstring(svg)
    assert root.tag == f"{NS}svg"
    return root


def texts(root: ET.Element) -> list[str]:
    return [t.text for t in root.iter(f"{NS}text")]


def rects(root: ET.Element, fill: str) -> list[ET.Element]:
    return [r for r in root.iter(f"{NS}rect") if r.get("fill") == fill]


def lines(root: ET.Element) -> list[str]:
    """The `d` of each HWM line (the paths drawn in tenths of a px)."""
    return [p.get("d") for p in root.iter(f"{NS}path") if p.get("transform")]


def vertices(d: str) -> list[tuple[int, int]]:
    """The corners of a line drawn as `M x y` then relative `h` and `v` steps."""
    x, y = map(int, re.match(r"M(-?\d+) (-?\d+)", d).groups())
    corners = [(x, y)]
    for command, n in re.findall(r"([hv])(-?\d+)", d):
        x, y = (x + int(n), y) if command == "h" else (x, y + int(n))
        corners.append((x, y))
    return corners


ROLES = [change(0.0, 1, [1, 2]), change(5.0, -1, [2], elr=[1])]


def test_each_partition_has_its_title_lanes_and_one_fault_band_per_fault():
    hwm = [event("hwm-advanced", i / 10, hwm=i) for i in range(100)]
    svg = partition_timelines([("orders/0", ROLES + hwm), ("orders/1", ROLES)], BANDS, 10.0)
    root = parse(svg)
    assert [texts(root).count(title) for title in ("orders/0", "orders/1")] == [1, 1]
    assert texts(root).count("seconds since the workload started") == 1
    assert len(rects(root, FAULT)) == len(BANDS) * 2
    assert [r.find(f"{NS}title").text for r in rects(root, FAULT)] == [label for _, _, label in BANDS] * 2
    lanes, hwm_panel = rects(root, "none")[:2]  # orders/0's frames: a band covers both
    band = rects(root, FAULT)[0]
    assert float(band.get("y")) == float(lanes.get("y"))
    assert float(band.get("y")) + float(band.get("height")) == float(hwm_panel.get("y")) + float(hwm_panel.get("height"))
    assert len(lines(root)) == 1  # orders/1 has no HWM reports


def test_a_bar_per_run_of_the_same_role_on_that_brokers_lane():
    """b1 leads until 5 s then is in the ELR, b2 is in the ISR throughout, b3 in neither."""
    root = parse(partition_timelines([("orders/0", ROLES)], [], 10.0))
    labels = {t.text: float(t.get("y")) for t in root.iter(f"{NS}text") if re.fullmatch(r"b\d+", t.text or "")}
    assert sorted(labels) == ["b1", "b2", "b3"]

    def lane(r: ET.Element) -> str:
        mid = float(r.get("y")) + float(r.get("height")) / 2
        return min(labels, key=lambda b: abs(labels[b] - mid))

    (leader,), (isr,), (elr,) = rects(root, LEADER), rects(root, ISR), rects(root, ELR)
    assert (lane(leader), lane(isr), lane(elr)) == ("b1", "b2", "b1")
    assert float(leader.get("height")) > float(isr.get("height"))
    assert float(leader.get("width")) == pytest.approx(float(isr.get("width")) / 2, abs=0.1)
    assert float(elr.get("x")) == pytest.approx(float(leader.get("x")) + float(leader.get("width")), abs=0.1)


def test_hwm_lines_are_thinned_to_changes_and_pixel_columns():
    climbing = [event("hwm-advanced", i / 100, hwm=i) for i in range(10_000)]
    flat = [event("hwm-advanced", i / 100, node="broker-2", hwm=7) for i in range(10_000)]
    root = parse(partition_timelines([("orders/0", climbing + flat)], [], 100.0))
    climb, level = lines(root)
    assert len(re.findall(r"-?\d+", climb)) < 2_000  # at most a step per pixel column, not 10,000
    assert len(re.findall(r"-?\d+", level)) == 3  # the start, then one run on to the last report
    ys = [y for _, y in vertices(climb)]
    assert ys == sorted(ys, reverse=True) and ys[-1] < ys[0]  # only up (y grows down the page)
    assert vertices(climb)[-1][0] == vertices(level)[-1][0]  # both run on to their last report
    assert len(partition_timelines([("orders/0", climbing)], [], 100.0)) < 20_000


def test_a_truncation_draws_its_new_end():
    events = [event("hwm-advanced", 1.0, hwm=100), event("truncated", 5.0, to=40),
              event("became-follower", 6.0, hwm=None), event("hwm-advanced", 9.0, hwm=100)]
    (d,) = lines(parse(partition_timelines([("orders/0", events)], [], 10.0)))
    ys = [y for _, y in vertices(d)]
    top, dip, back = [y for i, y in enumerate(ys) if i == 0 or y != ys[i - 1]]
    assert back == top and dip / top == pytest.approx(0.4, abs=0.01)  # 100, down to 40, up to 100


def test_text_is_escaped():
    events = [change(0.0, 1, [1]), event("hwm-advanced", 0.5, node="n<1>&", hwm=3)]
    svg = partition_timelines([("a<b/0", events)], [(0.0, 1.0, 'x"<y>')], 1.0)
    assert "a&lt;b/0" in svg and "n&lt;1&gt;&amp;" in svg
    root = parse(svg)
    assert {"a<b/0", "n<1>&"} <= set(texts(root))
    assert rects(root, FAULT)[0].find(f"{NS}title").text == 'x"<y>'


def test_the_time_axis_has_nice_ticks_from_zero_to_the_end():
    for end, expected in ((10.0, [0, 2, 4, 6, 8, 10]), (0.0, [0, 0.02, 0.04, 0.06, 0.08, 0.1]),
                          (3600.0, [500 * i for i in range(8)])):
        root = parse(partition_timelines([("orders/0", [])], [], end))
        ticks = [float(t.text) for t in root.iter(f"{NS}text")
                 if t.get("text-anchor") == "middle" and t.get("transform") is None and t.text[0].isdigit()]
        assert ticks == pytest.approx(expected)


def test_degenerate_inputs():
    assert partition_timelines([], BANDS, 10.0) == ""
    no_changes = [event("hwm-advanced", 0.0, hwm=0), event("truncated", 0.0, to=None)]
    no_replicas = [change(0.0, None, None, None, replicas=None)]
    root = parse(partition_timelines([("t/0", no_changes), ("t/1", no_replicas), ("t/2", ROLES), ("t/3", [])],
                                     BANDS, 0.0))
    assert [texts(root).count(f"t/{p}") for p in range(4)] == [1, 1, 1, 1]
    assert [t for t in texts(root) if re.fullmatch(r"b\d+", t or "")] == ["b1", "b2", "b3"]  # t/2's lanes only
    assert len(rects(root, FAULT)) == len(BANDS) * 4


def test_no_leader_and_missing_sets_draw_no_bar():
    leaderless = [change(0.0, None, None, None, replicas=(1, 2)), change(4.0, -1, [2], None, replicas=(1, 2))]
    root = parse(partition_timelines([("orders/0", leaderless)], [], 10.0))
    assert rects(root, LEADER) == [] and rects(root, ELR) == []
    (isr,), panel = rects(root, ISR), rects(root, "none")[0]  # b2 from 4 s to the end; the lanes' frame
    assert float(isr.get("width")) == pytest.approx(0.6 * float(panel.get("width")), abs=0.1)


def test_the_throughput_line_drops_to_0_where_nothing_completed_and_rates_the_last_second_over_its_part():
    """trial30: a second in which nothing completed has no row of the series, and the step
    line bridged it at the second before's rate; the last second, 0.3 s of the workload, drew
    as a fall to a third of the rate."""
    rows = [{"f": "send", "second": s, "records": n} for s, n in ((0, 100), (1, 100), (3, 100), (4, 30))]
    xs, ys = rate_steps(rows, workload_end=4.3)
    assert xs == [0.0, 1.0, 2.0, 3.0, 4.0, 4.3]
    assert ys[:4] == [100, 100, 0, 100] and ys[4] == pytest.approx(100) and ys[5] == ys[4]
    xs, ys = rate_steps(rows, workload_end=None)  # a run whose end is not known: whole seconds
    assert xs[-1] == 5.0 and ys[-2:] == [30, 30]
    xs, ys = rate_steps(rows, workload_end=4.0004)  # a sliver: the sends in flight at the end
    assert xs[-1] == 4.0 and max(ys) == 100


def test_a_partition_is_named_by_its_shape_and_groups_as_applied():
    """trial30: a partition read only "partition" in the overview and the Recovery table."""
    halves = {"do": "partition", "target": None, "resolved": [], "shape": "halves",
              "groups": [["broker-1", "broker-2"], ["broker-3", "controller-1", "clients"]]}
    assert fault_subject(halves) == "halves [broker-1,broker-2 | broker-3,controller-1,clients]"
    isolate = {**halves, "shape": "isolate", "target": "leader-of orders/0", "groups": [["broker-2"], ["broker-1"]]}
    assert fault_subject(isolate) == "isolate leader-of orders/0 [broker-2 | broker-1]"
    assert fault_subject({"do": "kill", "target": None, "resolved": ["broker-1"]}) == "broker-1"
    assert fault_bands([{**halves, "start": 1.0, "end": 2.0}]) == [(1.0, 2.0, "partition " + fault_subject(halves))]


def test_the_throughput_line_runs_to_the_workloads_end_through_a_stall_that_outlived_its_fault():
    """trial31: nothing completed in the last second of a 9 s workload, and the line ended at 8."""
    rows = [{"f": "send", "second": s, "records": 100} for s in range(8)]
    xs, ys = rate_steps(rows, workload_end=9.0)
    assert xs[-2:] == [8.0, 9.0] and ys[-2:] == [0, 0]
    xs, ys = rate_steps(rows, workload_end=8.1)  # a sliver of the 9th second: not drawn
    assert xs[-1] == 8.0 and ys[-1] == 100


def test_the_latency_axis_starts_at_0_and_labels_each_decade_above_the_highest():
    """trial33: symlog drew half the latency panel for negative milliseconds, some panels had
    one label (`10^0`), and a p99 spike ran into the top edge."""
    import matplotlib.pyplot as plt

    from testbed.analysis.plots import _latency_ticks
    _, ax = plt.subplots()
    ax.set_yscale("symlog", linthresh=1)
    _latency_ticks(ax, 1100.0)
    assert ax.get_ylim() == (0, 10_000)
    assert [t.get_text() for t in ax.get_yticklabels()] == ["0", "1", "10", "100", "1000", "10000"]
    _latency_ticks(ax, 0.4)  # sub-millisecond: still 0 to 10
    assert ax.get_ylim() == (0, 10)
    plt.close("all")
