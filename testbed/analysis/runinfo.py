"""What each run was configured to do, from its resolved `topology.yaml`, as small Spark
tables the checks join with (racks, MinISR, protocol setting) and the expectations; and
when its workload started (`summary.json`), time 0 of every time the analysis reports."""
from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from pyspark.sql import DataFrame
from pyspark.sql.connect.session import SparkSession
from pyspark.sql.types import (
    BooleanType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from testbed.common.run_files import FINAL_FILES, STARTED, VIRTUAL_CLOCK
from testbed.config.loader import FAST_SAFE_LOADER
from testbed.config.parser import TopologyError, parse_topology
from testbed.config.specs import DEFAULT_EXPECT, Expectation
from testbed.config.topology_spec import TOPIC_ACTIONS, Topology, fault_topic


@dataclass(frozen=True)
class RunInfo:
    run_dir: Path
    topology: Topology | None
    problem: str | None  # why the topology could not be read, if it could not
    #: when the workload started (`time_ns` clock), the schedule's time 0; None when the run
    #: left no `summary.json` (its supervisor was killed) or had no workload (the Python API)
    workload_start_ns: int | None = None
    #: the run's id in its judgment (`ingest.run_ids`): its directory's name, or more of its
    #: path when another run judged with it has the same name
    id: str | None = None
    #: the history records `summary.json` counted as the run ended (None without its counts)
    operations: int | None = None
    #: why `summary.json`, which the run wrote at its end, cannot be read
    summary_problem: str | None = None
    #: when the workload ended (`time_ns` clock): `duration` after its start times the run's
    #: `--time-scale`; None when `summary.json` does not say (an older run, or a hand-made one)
    workload_end_ns: int | None = None
    #: the clients not running at the workload's time 0, with the seconds after it each
    #: joined (None: never); `summary.json`'s `clients_late`
    clients_late: dict[str, float | None] = field(default_factory=dict)
    #: the size of each file of `final/` as the run wrote it (`summary.json`'s `final_bytes`;
    #: empty for an older or hand-made run)
    final_bytes: dict[str, int] = field(default_factory=dict)
    #: a run of the deterministic simulation (`summary.json`'s `clock: virtual`): its times
    #: are the event loop's, not wall time
    virtual_clock: bool = False

    @property
    def workload_seconds(self) -> float | None:
        """How long the workload ran, in the report's seconds: from `summary.json`, else the
        topology's `duration` (a run at `--time-scale` 1), else None."""
        if self.workload_start_ns is not None and self.workload_end_ns is not None:
            return (self.workload_end_ns - self.workload_start_ns) / 1e9
        return self.topology.duration if self.topology is not None else None

    @property
    def run_id(self) -> str:
        return self.id or self.run_dir.name

    @property
    def expect(self) -> dict[str, Expectation]:
        if self.topology is None or not self.topology.expect:
            return dict(DEFAULT_EXPECT)
        return dict(self.topology.expect)

    @property
    def protocol_setting(self) -> str:
        """The protocol knobs as one label, the summary's grouping key."""
        if self.topology is None:
            return "unknown"
        p = self.topology.protocol
        return (f"truncation={p.truncation} elr={str(p.elr).lower()} "
                f"unclean_leader_election={str(p.unclean_leader_election).lower()} "
                f"unclean_recovery={p.unclean_recovery} fencing={p.fencing}")


def _read_yaml(text: str) -> object:
    """`text`'s value, read by libyaml (300 runs of a sim sweep read their topologies in 2.8 s
    with the pure-Python loader); a text that is not YAML raises the pure-Python loader's
    error, which quotes the line at fault where libyaml's only names it."""
    try:
        return yaml.load(text, Loader=FAST_SAFE_LOADER)  # noqa: S506 - a safe loader
    except yaml.YAMLError:
        return yaml.safe_load(text)


def _started(run_dir: Path) -> int | None:
    """The workload's time 0 as `STARTED` says it, for a run without its summary.json."""
    try:
        value = json.loads((run_dir / STARTED).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return _moment(value if isinstance(value, dict) else None, "workload_start_ns")


def load_run_info(run_dir: Path, run_id: str | None = None) -> RunInfo:
    path = run_dir / "topology.yaml"
    summary, summary_problem = _read_summary(run_dir)
    start, operations = _moment(summary, "workload_start_ns"), _operations_of(summary)
    if start is None and summary is None:
        start = _started(run_dir)
    end = _moment(summary, "workload_end_ns")
    late = summary.get("clients_late") if summary is not None else None
    late = {str(k): v if isinstance(v, int | float) and not isinstance(v, bool) else None
            for k, v in late.items()} if isinstance(late, dict) else {}

    sizes = summary.get("final_bytes") if summary is not None else None
    sizes = {name: n for name, n in sizes.items() if name in FINAL_FILES and isinstance(n, int)
             and not isinstance(n, bool)} if isinstance(sizes, dict) else {}
    virtual = summary is not None and summary.get("clock") == VIRTUAL_CLOCK

    def info(topology: Topology | None, problem: str | None) -> RunInfo:
        return RunInfo(run_dir, topology, problem, start, run_id, operations, summary_problem, end, late, sizes,
                       virtual)
    try:
        data = _read_yaml(path.read_text(encoding="utf-8"))
        return info(parse_topology(data, str(path)), None)
    except FileNotFoundError:
        return info(None, f"{path}: missing")
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        return info(None, f"{path}: unreadable ({exc})")
    except TopologyError as exc:
        return info(None, "; ".join(exc.errors))


def workload_start(run_dir: Path) -> int | None:
    """`summary.json`'s `workload_start_ns`; None when it has none (or is missing or torn)."""
    return _moment(_read_summary(run_dir)[0], "workload_start_ns")


def finished(run_dir: Path) -> bool:
    """Whether the run got to its end: `summary.json` is written after the last line of every
    record file and the final state, so what is missing or cut there was changed after the run."""
    return (run_dir / "summary.json").exists()


def _read_summary(run_dir: Path) -> tuple[dict | None, str | None]:
    """`summary.json` as a mapping, and why it cannot be read if it exists and cannot: the
    run writes it whole at its end, so a damaged one was damaged after the run."""
    path = run_dir / "summary.json"
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None, None
    except (OSError, ValueError) as exc:
        return None, f"{path}: unreadable ({exc}); the run writes it whole at its end, so it was changed after the run"
    if not isinstance(value, dict):
        return None, f"{path}: expected a mapping of the run's counts, got {type(value).__name__}"
    return value, None


def _moment(summary: dict | None, key: str) -> int | None:
    """A `time_ns` of `summary.json` (`workload_start_ns`, `workload_end_ns`), if it is one."""
    value = summary.get(key) if summary is not None else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _operations_of(summary: dict | None) -> int | None:
    """How many history records the run counted as it ended (`counts.Counts`: one per line)."""
    ops = summary.get("operations") if summary is not None else None
    if not isinstance(ops, dict) or not all(isinstance(n, int) and not isinstance(n, bool) for n in ops.values()):
        return None
    return sum(ops.values())


def topic_faults_done(run_dir: Path) -> list[tuple[str, dict]] | None:
    """(action, params) of the topic faults (R40) that took effect, from faults.jsonl's end
    lines, in the order they began: a fault that failed or never fired made no topic. None
    without the file (the schedule then says what the run has). A fault commits its change
    when it begins and may then wait (a delete for every broker to drop its replicas): a
    `create-topic` fired inside a delete's wait ends first, and in the order of the end lines
    the topic made again was taken for deleted at the end.

    A fault whose end says it failed may have taken effect all the same: the controller's
    answer was lost, or the wait for the brokers timed out, after the change was committed
    (a tester's delete-topic "did not answer" while its topic was deleted, and the run was
    taken for one that never converged). For those, the events decide (`_committed`): the
    topic deleted, or partitions of it created, after the fault began."""
    try:
        text = (run_dir / "faults.jsonl").read_text(encoding="utf-8")
    except OSError:
        return None
    done: list[tuple[int, str, dict, int | None]] = []  # began, and the start of a fault that says it failed
    started: dict[str, int] = {}  # origin -> time_ns of its start line
    for line in text.splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue  # a torn last line: the supervisor was killed while writing it
        if not (isinstance(rec, dict) and rec.get("do") in TOPIC_ACTIONS and isinstance(rec.get("params"), dict)):
            continue
        if rec.get("phase") == "start" and isinstance(rec.get("time_ns"), int):
            started[str(rec.get("origin"))] = rec["time_ns"]
        effect = rec.get("effect")
        if rec.get("phase") != "end" or not isinstance(effect, dict) or "skipped" in effect:
            continue
        began = started.get(str(rec.get("origin")), -1)
        order = began if began >= 0 or not isinstance(rec.get("time_ns"), int) else rec["time_ns"]  # no start: its end
        done.append((order, rec["do"], rec["params"], began if "error" in effect else None))
    commits = _committed(run_dir) if any(at is not None for *_, at in done) else []
    return [(do, params) for _, do, params, at in sorted(done, key=lambda d: d[0])
            if at is None or any(t >= at and kind == _EVIDENCE[do] and topic == fault_topic(do, params)
                                 for t, kind, topic in commits)]


def brokers_added(run_dir: Path) -> list[tuple[int, str | None]]:
    """(id, rack) of each broker an `add-broker` of faults.jsonl added (its end line says
    `added`), a scheduled one's or the Python API's."""
    out = []
    for rec in _end_lines(run_dir, '"add-broker"'):
        params, effect = rec.get("params"), rec["effect"]
        broker = params.get("broker") if isinstance(params, dict) else None
        if rec.get("do") == "add-broker" and effect.get("added") and isinstance(broker, dict):
            broker_id, rack = broker.get("id"), broker.get("rack")
            if isinstance(broker_id, int) and not isinstance(broker_id, bool):
                out.append((broker_id, rack if isinstance(rack, str) else None))
    return out


def faults_failed(run_dir: Path) -> list[str]:
    """`origin do: error` of each fault whose end line in faults.jsonl says it failed (a
    target that resolved to no node, an admin request the controller refused), in the order
    they ended: a run whose `create-topic` was refused ended with a plain OK (trial32)."""
    return [f"{rec.get('origin')} {rec.get('do')}: {rec['effect']['error']}"
            for rec in _end_lines(run_dir, '"error"') if rec["effect"].get("error")]


def faults_not_acted(run_dir: Path, t0_ns: int | None) -> list[tuple[float | None, str, str, str]]:
    """(seconds from `t0_ns` it ended, `do`, origin, why) of each fault that did not act: it
    failed (its error), or a nemesis skipped it (`max_down`). The terminal said them, the
    report nowhere (trial38: a skipped nemesis partition)."""
    out = []
    for needle in ('"error"', '"skipped"'):
        for rec in _end_lines(run_dir, needle):
            effect = rec["effect"]
            why = (str(effect["error"]) if effect.get("error") else
                   f"skipped ({effect['skipped']}: it would take down more nodes than the nemesis allows)"
                   if effect.get("skipped") else None)
            at = rec.get("time_ns")
            if why is not None:
                out.append((round((at - t0_ns) / 1e9, 3) if isinstance(at, int) and t0_ns is not None else None,
                            str(rec.get("do")), str(rec.get("origin")), why))
    return sorted(out, key=lambda x: (x[0] is None, x[0] or 0.0))


def _end_lines(run_dir: Path, needle: str) -> Iterator[dict]:
    """The end lines of faults.jsonl holding `needle` (a cheap test before parsing), each a
    mapping whose `effect` is one; none without the file. A torn or foreign line is passed
    over: the supervisor may have been killed while writing it."""
    try:
        text = (run_dir / "faults.jsonl").read_text(encoding="utf-8")
    except OSError:
        return
    for line in text.splitlines():
        if needle not in line:
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict) and rec.get("phase") == "end" and isinstance(rec.get("effect"), dict):
            yield rec


#: what `_committed` finds when a topic fault took effect
_EVIDENCE = {"create-topic": "create", "add-partitions": "create", "delete-topic": "delete"}


def _committed(run_dir: Path) -> list[tuple[int, str, object]]:
    """(time_ns, "create" or "delete", topic) of the commits that make or delete topics'
    partitions, from events.jsonl (read only when a topic fault says it failed): the
    controller's, or a broker's deletion of its replicas of a deleted topic (the controller
    whose batch held the deletion may have lost its leadership before another committed it)."""
    out: list[tuple[int, str, object]] = []
    try:
        with open(run_dir / "events.jsonl", encoding="utf-8", errors="replace") as f:
            for line in f:
                if '"topic-deleted"' not in line and not ('"partition-changed"' in line and '"create"' in line):
                    continue
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                if not isinstance(rec, dict) or not isinstance(rec.get("time_ns"), int):
                    continue
                if rec.get("kind") == "topic-deleted" or (rec.get("kind") == "replica-deleted"
                                                          and rec.get("reason") == "topic-deleted"):
                    out.append((rec["time_ns"], "delete", rec.get("topic")))
                elif rec.get("kind") == "partition-changed" and rec.get("reason") == "create":
                    out.append((rec["time_ns"], "create", rec.get("topic")))
    except OSError:
        pass
    return out


@dataclass(frozen=True)
class ConfigTables:
    topics: DataFrame  # run_id, topic, partitions, rf, min_isr, gone (deleted by the end: R40)
    brokers: DataFrame  # run_id, broker_id, rack, added (by an add-broker, not the topology's)
    runs: DataFrame  # run_id, elr, kraft, n_racks, workload_start_ns (null when unknown), duration_ns
    #: some run deletes a topic (R40): its acknowledged values are then not owed to the end
    deletes_topics: bool = False


_TOPICS = StructType([StructField("run_id", StringType()), StructField("topic", StringType()),
                      StructField("partitions", IntegerType()), StructField("rf", IntegerType()),
                      StructField("min_isr", IntegerType()), StructField("gone", BooleanType())])
_BROKERS = StructType([StructField("run_id", StringType()), StructField("broker_id", IntegerType()),
                       StructField("rack", StringType()), StructField("added", BooleanType())])
_RUNS = StructType([StructField("run_id", StringType()), StructField("elr", BooleanType()),
                    StructField("kraft", BooleanType()), StructField("n_racks", IntegerType()),
                    StructField("workload_start_ns", LongType()), StructField("duration_ns", LongType())])


def config_tables(spark: SparkSession, infos: list[RunInfo]) -> ConfigTables:
    topics, brokers, runs = [], [], []
    deletes = False
    for info in infos:
        t = info.topology
        if t is None:
            continue
        done = topic_faults_done(info.run_dir)
        topics += [(info.run_id, *row) for row in t.topics_over_run(done)]
        # R38: the brokers the run added, scheduled or by the Python API (recorded alike)
        racks = {b.id: b.rack for b in t.cluster.brokers}
        racks |= {f.params["broker"]["id"]: f.params["broker"]["rack"] for f in t.faults
                  if getattr(f, "do", None) == "add-broker" and f.params["broker"]["id"] not in racks}
        racks |= {i: rack for i, rack in brokers_added(info.run_dir) if i not in racks}
        brokers += [(info.run_id, i, rack, i not in t.broker_ids) for i, rack in racks.items()]
        runs.append((info.run_id, t.protocol.elr, t.protocol.fencing == "kraft", len(t.racks),
                     info.workload_start_ns, int(t.duration * 1e9)))
        deletes |= any(getattr(f, "do", None) == "delete-topic" for f in t.faults)
        deletes |= any(do == "delete-topic" for do, _ in done or [])
    return ConfigTables(spark.createDataFrame(topics, _TOPICS), spark.createDataFrame(brokers, _BROKERS),
                        spark.createDataFrame(runs, _RUNS), deletes)
