"""The report's overview lanes (`plots.lane_segments`) agree with its Availability table."""
from __future__ import annotations

import re

from testbed.analysis.plots import label_rows, lane_segments, leader_labels, overview

RED, GREEN, PURPLE = "#c0392b", "#2e8b57", "#7d3c98"


def test_a_killed_leader_reads_as_no_leader_from_the_kill_not_from_its_fencing() -> None:
    """trial30: the controller kept broker 2 as the leader with a full ISR until it fenced it at
    3.59 s; the lane was green to then, while the Availability table beside it said no leader
    and no acks=all service from the kill at 3.023 s."""
    changes = [{"t": 0.4, "leader": 2, "isr": [2, 1, 3], "replicas": [2, 1, 3]},
               {"t": 3.59, "leader": 1, "isr": [1, 3], "replicas": [2, 1, 3]}]
    windows = [{"kind": "no-acks-all", "start_s": 3.023, "end_s": 3.6},
               {"kind": "no-leader", "start_s": 3.023, "end_s": 3.59}]
    segments = lane_segments(changes, windows, 10.0)
    assert segments[0] == (0.4, 3.59, GREEN)  # the controller's view, drawn first
    assert segments[-2:] == [(3.023, 3.6, PURPLE), (3.023, 3.59, RED)]  # the table's, drawn over it


def test_a_lane_names_its_leader_at_time_0_and_never_over_the_label_before() -> None:
    """The partition is made, and led, before the workload's time 0: its first leader was
    written off the plot. Leaders that change within 3% of the span wrote "b1b2" (trial30):
    the label names the one that lasted."""
    changes = [{"t": -0.7, "leader": 3}, {"t": -0.2, "leader": 1}, {"t": 4.0, "leader": -1},
               {"t": 4.1, "leader": 2}, {"t": 4.15, "leader": 1}, {"t": 7.0, "leader": 1}, {"t": 8.0, "leader": 2}]
    assert leader_labels(changes, 10.0) == [(0.0, 1), (4.1, 1), (8.0, 2)]


def test_fault_labels_close_in_time_go_to_rows_of_their_own() -> None:
    """trial30: "kill broker:1" and "kill broker:2", 47 ms apart, were written over each other;
    trial31: a nemesis's faults over the three rows there were, a fourth over the first."""
    assert label_rows([(2.006, 2.5), (2.053, 2.55), (3.0, 3.4), (3.1, 3.5), (3.2, 3.6), (3.3, 3.7)]) == \
        [0, 1, 0, 1, 2, 3]


def test_a_truncation_that_cut_records_is_marked_over_its_lane() -> None:
    """trial30: a lab's key moment, broker 1 truncated 355 -> 5, was only in a cause sentence."""
    lane = [{"kind": "partition-changed", "topic": "orders", "partition": 0, "t": 0.0, "leader": 1, "isr": [1, 2],
             "replicas": [1, 2]}]
    cut = {"kind": "truncated", "topic": "orders", "partition": 0, "t": 2.0, "node": "broker-1", "from": 355, "to": 5}
    level = {**cut, "from": 5}  # a truncation to its own end removed nothing
    assert "a replica truncated" in overview([*lane, cut], [], 4.0)
    assert "a replica truncated" not in overview([*lane, level], [], 4.0)


def test_a_label_past_the_right_edge_is_cut_to_the_room_there_is_not_clipped() -> None:
    """trial31: a partition's label of 100 characters was clipped mid-name at the right edge."""
    lane = [{"kind": "partition-changed", "topic": "orders", "partition": 0, "t": 0.0, "leader": 1, "isr": [1],
             "replicas": [1]}]
    groups = "partition halves [broker-4,broker-3,controller-3 | controller-2,broker-1,controller-1,broker-2]"
    svg = overview(lane, [(6.2, 7.0, groups)], 12.6)
    assert groups not in svg and " partition halves [broker-4,broker-3,controller-3 | controll…" in svg
    assert " partition halves [brok…" in overview(lane, [(11.7, 12.0, groups)], 12.6)  # ends at the edge


def test_what_follows_the_workload_is_washed_out_and_its_leaders_unnamed() -> None:
    """trial33: the controlled shutdowns after the workload drew red and orange "outages" the
    Availability table (which ends with the workload) has not, and their leaders' labels were
    cut at the right edge."""
    lane = [{"kind": "partition-changed", "topic": "orders", "partition": 0, "t": t, "leader": leader,
             "isr": isr, "replicas": [1, 2, 3]}
            for t, leader, isr in ((0.0, 1, [1, 2, 3]), (4.0, 2, [2, 3]), (10.3, 3, [3]))]
    svg = overview(lane, [], 10.8, [], workload_end=10.0)
    assert {"b2"} <= texts(svg) and "b3" not in texts(svg)  # a leader after the workload's end is not named
    assert 'style="fill: #ffffff; opacity: 0.65' in svg  # the wash over the lanes after it
    assert "b3" in texts(overview(lane, [], 10.8, [], workload_end=None))


def texts(svg: str) -> set[str]:
    """The words the figure writes: matplotlib heads each text with a comment holding it. A bare
    substring test matched "b3" inside a random clip-path id (ci of 8362542: pb31fa24305)."""
    return {text.strip() for text in re.findall(r"<!-- (.*?) -->", svg)}
