"""`--dry-run` shows, before anything runs, the replicas each partition will have at the
start (R34, as the run's seed places them): a rack-blind placement's single-rack partitions
are visible there (a teacher asked for it to set lab 11's prediction question); and each
fault's origin is its entry's key path in the file, as validate's errors name it."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from faults.schedule import ScheduledFault, build_schedule
from testbed.experiment.dry_run import describe, format_schedule
from testbed.topology import TopologyError, load_topology, parse_topology

TOPOLOGIES = Path(__file__).resolve().parents[2] / "topologies"


def _placed(text: str) -> list[tuple[list[str], str]]:
    """Each partition's racks and what follows them, from a dry run's replicas section."""
    section = text.split("# replicas at the start")[1].split("# fault schedule")[0]
    rows = [line for line in section.splitlines()[1:] if line.strip()]
    assert rows and all(line.startswith("orders/") and "  racks " in line for line in rows)
    split = [line.split("  racks ")[1].partition("  ") for line in rows]
    return [(racks.split(", "), note) for racks, _, note in split]


def test_dry_run_lists_each_partitions_replicas_and_their_racks_and_names_a_placement_violation() -> None:
    """trial38: `clicks/2: [1, 4]  racks a, a` did not say the run would count it (I9)."""
    aware = _placed(describe(load_topology(TOPOLOGIES / "scenarios" / "rack-outage-rack-aware.yaml")))
    assert all(len(set(racks)) == len(racks) and note == "" for racks, note in aware)  # R34: a rack each
    blind = _placed(describe(load_topology(TOPOLOGIES / "scenarios" / "rack-outage-rack-blind.yaml")))
    short = [(racks, note) for racks, note in blind if len(set(racks)) < len(racks)]
    assert short, "the rack-blind placement puts some partition on fewer racks"
    assert all(note == f"(spans {len(set(racks))} of min(RF, racks) = {len(racks)}: a placement violation, I9)"
               for racks, note in short), short
    assert all(note == "" for racks, note in blind if len(set(racks)) == len(racks))


UNSORTED = {
    "name": "t", "duration": "10s",
    "cluster": {"brokers": [{"id": 1, "rack": "a"}, {"id": 2, "rack": "b"}, {"id": 3, "rack": "c"}]},
    "topics": [{"name": "orders", "partitions": 3, "replication_factor": 3}],
    "faults": [{"at": "5s", "do": "kill", "target": "broker:1"},
               {"at": "1s", "do": "pause", "target": "broker:2"},
               {"nemesis": {"from": "6s", "until": "8s", "every": "3s..3s", "do": ["kill"], "target": ["broker:3"]}},
               {"at": "2s", "do": "resume"}],
}


def test_an_unsorted_faults_list_keeps_the_files_numbering_in_the_schedule_and_the_dry_run() -> None:
    """A tester's file listed a 5 s kill before a 1 s pause: the schedule sorted by time and
    numbered the pause faults[0], where validate's errors call the kill faults[0]."""
    t = parse_topology(UNSORTED, "t.yaml")
    assert [(f.at, f.origin) for f in build_schedule(t)] == [
        (1.0, "faults[1]"), (2.0, "faults[3]"), (5.0, "faults[0]"), (6.0, "faults[2].nemesis#0"),
        (7.0, "faults[2].nemesis#0.undo")]
    shown = describe(t)
    resolved = yaml.safe_load(shown.split("# resolved topology")[1].split("\n\n")[0])
    assert [f.get("at") for f in resolved["faults"]] == ["5s", "1s", None, "2s"]  # as the file has them
    schedule = shown.split("# fault schedule (time, action, target, params, origin)\n")[1].splitlines()
    assert [line.split()[-1] for line in schedule] == [
        "faults[1]", "faults[3]", "faults[0]", "faults[2].nemesis#0", "faults[2].nemesis#0.undo"]
    broken = {**UNSORTED, "faults": [*UNSORTED["faults"][:1], {"at": "1s", "do": "pause", "target": "broker:9"},
                                     *UNSORTED["faults"][2:]]}
    with pytest.raises(TopologyError, match=r"t.yaml: faults\[1\].target: 'broker:9'"):
        parse_topology(broken, "t.yaml")  # the entry the schedule calls faults[1]


def test_format_schedule_prints_one_line_per_fault_with_durations_as_yaml_spells_them() -> None:
    """trial38: `delay=0.02` on the dry run beside `delay 20ms` on the run's progress line."""
    schedule = [
        ScheduledFault(5.0, "kill", "leader-of orders/0", {}, "faults[0]"),
        ScheduledFault(10.0, "partition", None, {"groups": (("rack:a",), ("rack:b", "controllers"))}, "faults[1]"),
        ScheduledFault(12.5, "slow", None, {"from": "broker:1", "delay": 0.1, "jitter": 0.005, "loss": 0.02}, "faults[2].nemesis#0"),
        ScheduledFault(13.0, "heal", None, {"undo_of": "faults[2].nemesis#0"}, "faults[2].nemesis#0.undo"),
    ]
    lines = format_schedule(schedule).splitlines()
    assert len(lines) == 4
    assert lines[0].split() == ["5.000s", "kill", "leader-of", "orders/0", "faults[0]"]
    assert lines[1].split() == ["10.000s", "partition", "-", "groups=[[rack:a],[rack:b,controllers]]", "faults[1]"]
    assert lines[2].split() == ["12.500s", "slow", "-", "delay=100ms", "from=broker:1", "jitter=5ms", "loss=0.02",
                              "faults[2].nemesis#0"]
    assert lines[3].split() == ["13.000s", "heal", "-", "undo_of=faults[2].nemesis#0", "faults[2].nemesis#0.undo"]
    assert format_schedule([]) == "(no faults)"
