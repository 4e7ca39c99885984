"""Every protocol mode acted on, proven on real processes and judged by the pipeline. Each
test is a pair on the same schedule and seed, safe setting against unsafe: loss in one,
none in the other, with the cause of every loss asserted.

- R32 balanced (seed 001 5.3.3: broker 2 is chosen) against R31 legacy unclean election;
- R32 proactive (elects from whoever answered, within the timeout) against balanced;
- R32 manual (leaderless until `elect`): the operator choosing the complete log or not;
- R13 + R13a (seed 004, HW truncation followed by an immediate election) against
  leader-epoch truncation, and R13's divergence after seed 004's double power loss;
- R30 Last Replica Standing (`elr: false`) against ELR;
- R35 reassignment and R36 preferred election under an acks=all workload.
The runs of every selected test of the module run four at a time, each under a supervisor
process of its own (`runs_at_once`), and are judged together in one Spark job
(`judged_runs`): a judgment of a few small runs costs 10-15 s of the JVM's CPU whatever
their size, and the module's eight judgments, one per test, were an eighth of the suite's
CPU. Each test names its runs with `@runs(builder)`; running one test runs only its own.
"""
from __future__ import annotations

import copy
import fcntl
import hashlib
import inspect
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from broker.common.jsonl import read_jsonl
from testbed.analysis.pipeline import analyze_runs
from testbed.analysis.verdict import RunVerdict
from testbed.experiment.runner import Outcome
from testbed.topology import parse_topology
from tests.integration.conftest import TIME_SCALE, topology_dict
from tests.integration.runs_at_once import run_clusters
from tests.unit.analysis_fixtures import spark  # noqa: F401  (the shared session fixture)

#: the module's runs, judged together, run as one unit of a worker (`conftest.longest_first`)
#: the first test's setup runs and judges them all: 140 s alone on the idle machine, 187 s in CI
pytestmark = [pytest.mark.integration, pytest.mark.slow(seconds=240, group="protocol-modes"),
              pytest.mark.timeout(900)]
#: how many of the module's runs run at once: the clusters each use under a second of CPU, their
#: supervisors about two, over the 15-30 s of a run at the suite's time scale
AT_ONCE = 4

#: nothing is flushed but by a segment roll, and the OS writes nothing back during the run:
#: a lossy crash loses every record the broker wrote
NOTHING_FLUSHED = {"storage": {"writeback": "1m"}}


def one_partition(replicas: list[int], *, brokers: int = 3, min_isr: int = 2, **overrides: Any) -> dict:
    overrides.setdefault("duration", "5s")
    d = topology_dict(partitions=1, brokers=brokers, min_isr=min_isr, **overrides)
    topic = d["topics"][0]
    topic.update({"replication_factor": len(replicas), "placement": "explicit", "assignment": {0: replicas},
                  "flush": "on-roll"})
    d["workload"] = {"producers": [{"count": 1, "topic": "orders", "acks": "all", "rate": "100/s", "batch": 5}]}
    d.update(NOTHING_FLUSHED)
    return d


def with_protocol(d: dict, name: str, **protocol: Any) -> dict:
    d = copy.deepcopy(d)
    d["name"] = name
    d["protocol"] = protocol
    return d


Test = TypeVar("Test", bound=Callable[..., None])
#: each test's runs: the topologies its `@runs` builder makes (with the test's parameters)
BUILDERS: dict[str, Callable[..., list[dict]]] = {}


def runs(build: Callable[..., list[dict]]) -> Callable[[Test], Test]:
    """Name `build` as the decorated test's runs (`judged_runs` runs and judges them)."""
    def register(test: Test) -> Test:
        BUILDERS[test.__name__] = build
        return test
    return register


def _topologies(item: pytest.Item) -> list[dict]:
    build = BUILDERS[item.originalname]
    params = getattr(item, "callspec", None)
    wanted = inspect.signature(build).parameters
    return build(**{k: v for k, v in (params.params if params else {}).items() if k in wanted})


@pytest.fixture(scope="module")
def judged_runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, worker_id: str,
                spark: object) -> dict[str, list[tuple[Outcome, RunVerdict]]]:  # noqa: F811
    """The runs of every test of this module the session selected, by test name, each with its
    verdict: run `AT_ONCE` at a time and judged in one Spark job. Under xdist the first worker
    to need them runs and judges them while any other that needs them waits on a lock, then
    reads what the first left (`conftest.longest_first` keeps the module's tests together, so
    the other rarely does)."""
    items = [i for i in request.session.items if i.module is request.module and i.originalname in BUILDERS]
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if worker_id != "master" else base  # the session's directory, shared by workers
    tag = hashlib.sha256("\n".join(i.name for i in items).encode()).hexdigest()[:12]
    saved = shared / f"protocol-modes-{tag}.pickle"
    with open(shared / f"protocol-modes-{tag}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not saved.exists():
            saved.write_bytes(pickle.dumps(_run_and_judge(items, shared / f"protocol-modes-{tag}")))
    return pickle.loads(saved.read_bytes())  # written by this test session, so trusted


def _run_and_judge(items: list[pytest.Item], root: Path) -> dict[str, list[tuple[Outcome, RunVerdict]]]:
    named = [(item.name, d, root / f"{k:02d}-{d['name']}")
             for k, (item, d) in enumerate((item, d) for item in items for d in _topologies(item))]
    topologies = [parse_topology(d, d["name"]) for _, d, _ in named]
    order = sorted(range(len(named)), key=lambda k: -topologies[k].duration)  # the longest first
    outcomes = dict(zip(order, run_clusters([topologies[k] for k in order], root, TIME_SCALE,
                                            [named[k][2] for k in order], AT_ONCE)))
    verdicts = {v.run_dir: v for v in analyze_runs([run_dir for _, _, run_dir in named])}
    judged: dict[str, list[tuple[Outcome, RunVerdict]]] = {}
    for k, (test, _, run_dir) in enumerate(named):
        judged.setdefault(test, []).append((outcomes[k], verdicts[run_dir]))
    return judged


def runs_of(judged_runs: dict[str, list[tuple[Outcome, RunVerdict]]],
            request: pytest.FixtureRequest) -> list[tuple[Outcome, RunVerdict]]:
    """The calling test's runs with their verdicts, each of which ran and acknowledged writes."""
    mine = judged_runs[request.node.name]
    for out, _ in mine:
        assert out.counts is not None, f"{out.run_dir.name}: the run failed, see {out.run_dir}"
        assert out.counts.acknowledged.get("all", 0) > 0, f"{out.run_dir.name}: nothing was acknowledged"
    return mine


def events(out: Outcome, kind: str) -> list[dict]:
    return [e for e in read_jsonl(out.run_dir / "events.jsonl") if e["kind"] == kind]


def lost(v: RunVerdict) -> dict:
    return v.results["checks"]["lost_writes"]


def assert_no_loss(v: RunVerdict) -> None:
    assert v.results["converged"] is True, v.results["problems"]
    assert lost(v)["count"] == 0, lost(v)["examples"][:3]


def assert_loss_caused_by(v: RunVerdict, words: str) -> None:
    loss = lost(v)
    assert loss["count"] > 0, f"expected lost writes in {v.run_dir}"
    assert loss["unattributed"] == 0
    assert all(words in e["cause"] for e in loss["examples"]), loss["examples"][:3]


# a power outage of the whole cluster, one broker after the other (seed 001 5.3.3): 1 and 3
# lose what they never flushed, 2 is killed with its page cache, and so its log, intact.
# Broker 1 comes back first: R31 elects the first live replica, and restarted together the
# one that registered first won (a CI run's legacy part elected broker 2 and lost nothing).
OUTAGE = [{"at": "1s", "do": "lossy-crash", "target": "broker:1", "loss": "unsynced"},
          {"at": "2s", "do": "kill", "target": "broker:2"},
          {"at": "3s", "do": "lossy-crash", "target": "broker:3", "loss": "unsynced"},
          {"at": "4s", "do": "restart", "target": "broker:1"},
          {"at": "4500ms", "do": "restart", "target": "stopped"}]


def balanced_against_legacy() -> list[dict]:
    base = one_partition([1, 2, 3], faults=OUTAGE)
    return [with_protocol(base, "balanced", unclean_recovery="balanced"),
            with_protocol(base, "legacy", unclean_recovery="none", unclean_leader_election=True)]


@runs(balanced_against_legacy)
def test_r32_balanced_recovery_elects_broker_2_and_loses_nothing_where_r31_unclean_election_loses(
        judged_runs: dict, request: pytest.FixtureRequest) -> None:
    (balanced, vb), (legacy, vl) = runs_of(judged_runs, request)
    # R27, R29: fenced one by one, ELR [2, 3]; restarted unclean, they move to LastKnownELR
    changes = [(e["leader"], e["isr"], e["elr"], e["last_known_elr"]) for e in events(balanced, "partition-changed")]
    assert (-1, [], [2, 3], []) in changes and (-1, [], [], [2, 3]) in changes, changes
    assert all(not e["clean"] for e in events(balanced, "registered")[-3:])
    [recovery] = events(balanced, "unclean-recovery")
    assert recovery["mode"] == "balanced" and recovery["leader"] == 2
    infos = {i["broker"]: i["leo"] for i in recovery["log_infos"]}
    assert set(infos) == {2, 3} and infos[2] > infos[3]  # broker 3 lost its log, broker 2 kept it
    assert_no_loss(vb)
    assert_loss_caused_by(vl, "by unclean leader election")


def proactive_against_balanced() -> list[dict]:
    schedule = [{"at": "1s", "do": "lossy-crash", "target": "broker:1", "loss": "unsynced"},
                {"at": "2s", "do": "kill", "target": "broker:2"},
                {"at": "3s", "do": "kill", "target": "broker:3"},
                {"at": "4s", "do": "restart", "target": "broker:1"}]
    # The workload outlasts proactive's round (from broker 1's answer, after its restart at 4s,
    # unclean_recovery_timeout: about 6.1s): with a workload that ends within it, the end-of-run
    # restart of brokers 2 and 3 raced the round's deadline, and under load broker 2 answered in it.
    base = one_partition([1, 2, 3], faults=schedule, duration="8s")
    return [with_protocol(base, "proactive", unclean_recovery="proactive"),
            with_protocol(base, "balanced", unclean_recovery="balanced")]


@runs(proactive_against_balanced)
def test_r32_proactive_elects_whoever_answers_within_the_timeout_where_balanced_waits(
        judged_runs: dict, request: pytest.FixtureRequest) -> None:
    """Every broker goes down; only broker 1, which lost its log, comes back during the run.
    Proactive asks every replica, gets broker 1's answer alone and elects it once
    unclean_recovery_timeout has passed since (availability); balanced waits for the
    LastKnownELR (safety)."""
    (proactive, vp), (balanced, vb) = runs_of(judged_runs, request)
    first = events(proactive, "unclean-recovery")[0]
    assert first["mode"] == "proactive" and first["leader"] == 1
    assert [i["broker"] for i in first["log_infos"]] == [1]
    registered = max(e["time_ns"] for e in events(proactive, "registered") if e["broker_id"] == 1)
    waited = (first["time_ns"] - registered) / 1e9
    assert waited <= 2.0 * TIME_SCALE + 2.0, f"elected {waited:.1f}s after broker 1 came back"
    assert_loss_caused_by(vp, "by unclean recovery (proactive, from the log infos: broker 1 epoch")
    assert all(e["leader"] != 1 for e in events(balanced, "unclean-recovery"))
    assert_no_loss(vb)


def manual(choice: int) -> list[dict]:
    # The elect comes 2 s after the restart: the chosen broker must have registered again by
    # then (at 500 ms, a loaded CI machine sometimes had it refused as not yet registered).
    schedule = [*OUTAGE, {"at": "6s", "do": "elect", "partition": "orders/0", "target": f"broker:{choice}"}]
    return [with_protocol(one_partition([1, 2, 3], faults=schedule, duration="8s"), f"manual-{choice}",
                          unclean_recovery="manual")]


@runs(manual)
@pytest.mark.parametrize("choice, safe", [(2, True), (1, False)])
def test_r32_manual_stays_leaderless_until_the_operator_elects(judged_runs: dict, request: pytest.FixtureRequest,
                                                                choice: int, safe: bool) -> None:
    [(out, verdict)] = runs_of(judged_runs, request)
    changes = events(out, "partition-changed")
    waiting = [e for e in changes if e["reason"] == "manual-election-required"]
    assert waiting and waiting[0]["leader"] == -1
    elected = next(e for e in changes if e["time_ns"] > waiting[0]["time_ns"] and e["leader"] >= 0)
    start, end = [f for f in read_jsonl(out.run_dir / "faults.jsonl") if f["do"] == "elect"]
    assert end["effect"]["elected"] == ["orders/0"]
    assert elected["time_ns"] > start["time_ns"], "led again before the operator's elect"
    assert (elected["leader"], elected["reason"]) == (choice, "unclean-recovery")
    if safe:
        assert_no_loss(verdict)
    else:
        assert_loss_caused_by(verdict, "by unclean recovery")


def seed_004() -> list[dict]:
    schedule = [{"at": "2s", "do": "kill", "target": "broker:1"},
                {"at": "2050ms", "do": "kill", "target": "broker:2"},
                {"at": "2100ms", "do": "restart", "target": "broker:1"}]
    base = one_partition([2, 1], brokers=2, min_isr=1, faults=schedule, duration="6s")
    base["timing"]["session_timeout"] = "2s"
    base.pop("storage")
    return [with_protocol(base, "hw-truncation", truncation="high-watermark", fencing="zookeeper"),
            with_protocol(base, "leader-epoch", truncation="leader-epoch", fencing="zookeeper")]


@runs(seed_004)
def test_r13_r13a_seed_004_hw_truncation_then_immediate_election_loses_where_leader_epochs_do_not(
        judged_runs: dict, request: pytest.FixtureRequest) -> None:
    """Seed 004, "High watermark truncation followed by immediate leader election": follower A
    (broker 1) restarts faster than session_timeout, which the ZooKeeper-era controller misses
    (R13a: it keeps its ISR membership); it truncates to its HW checkpoint (R13) and cannot
    fetch, for leader B (broker 2) has just died; A is elected with the shorter log."""
    (hw, vh), (epochs, ve) = runs_of(judged_runs, request)
    assert any(e["node"] == "broker-1" and e["reason"] == "high-watermark" for e in events(hw, "truncated"))
    assert_loss_caused_by(vh, "when broker 1 (its LEO ")
    assert not any(e["reason"] == "high-watermark" for e in events(epochs, "truncated"))
    assert_no_loss(ve)


def double_power_loss() -> list[dict]:
    schedule = [{"at": "2s", "do": "lossy-crash", "target": "broker:2", "loss": "unsynced"},
                {"at": "2100ms", "do": "kill", "target": "broker:1"},
                {"at": "3s", "do": "restart", "target": "broker:2"},
                {"at": "7s", "do": "restart", "target": "broker:1"}]
    base = one_partition([1, 2], brokers=2, min_isr=1, faults=schedule, duration="10s")
    return [with_protocol(base, "divergence-hw", truncation="high-watermark", unclean_leader_election=True,
                          unclean_recovery="none"),
            with_protocol(base, "divergence-epoch", truncation="leader-epoch", unclean_leader_election=True,
                          unclean_recovery="none")]


@runs(double_power_loss)
def test_r13_seed_004_double_power_loss_diverges_with_hw_truncation_and_not_with_leader_epochs(
        judged_runs: dict, request: pytest.FixtureRequest) -> None:
    """Seed 004, "Replica divergence on restart after multiple hard failures": B (broker 2)
    loses power and its log, A (broker 1) is killed; B comes back empty and is elected unclean
    (R31) in a new epoch; A comes back later. Under R13 A cuts its log only to its own HW
    checkpoint and keeps old records where B now holds others: the logs diverge below both
    HWMs (I3). With leader epochs A truncates to where B's epoch begins (R9, R10)."""
    (hw, vh), (epochs, ve) = runs_of(judged_runs, request)
    assert vh.results["checks"]["log_divergence"]["count"] > 0
    assert ve.results["checks"]["log_divergence"]["count"] == 0
    for v in (vh, ve):  # both lose what the empty B's unclean election threw away
        assert_loss_caused_by(v, "by unclean leader election")


def last_replica_standing() -> list[dict]:
    schedule = [{"at": "1s", "do": "pause", "target": "followers-of orders/0"},
                {"at": "2500ms", "do": "lossy-crash", "target": "broker:1", "loss": "unsynced"},
                {"at": "3s", "do": "restart", "target": "broker:1"},
                {"at": "4s", "do": "resume"}]
    base = one_partition([1, 2, 3], faults=schedule)
    return [with_protocol(base, "elr-false", elr=False, unclean_recovery="none"),
            with_protocol(base, "elr-true", elr=True, unclean_recovery="none")]


@runs(last_replica_standing)
def test_r30_last_replica_standing_loses_without_elr_and_not_with_it(judged_runs: dict,
                                                                     request: pytest.FixtureRequest) -> None:
    """R30: the followers pause past session_timeout and leave the ISR ([1]); the leader then
    loses power and comes back with an emptied log. Without ELR it is the last replica
    standing and is elected again (loss); with ELR it is excluded (R29) and a follower from
    the ELR leads once it is back (no loss)."""
    (lrs, vl), (elr, ve) = runs_of(judged_runs, request)
    assert_loss_caused_by(vl, "when broker 1 (its LEO ")
    assert not any(e["elr"] for e in events(lrs, "partition-changed"))
    assert any(e["elr"] == [2, 3] for e in events(elr, "partition-changed"))
    assert_no_loss(ve)


def reassignment() -> list[dict]:
    schedule = [{"at": "1s", "do": "reassign", "partition": "orders/0", "replicas": [4, 2, 3]},
                {"at": "3s", "do": "elect-preferred", "partition": "orders/0"},
                {"at": "3500ms", "do": "elect", "partition": "orders/0", "target": "broker:2"}]
    d = one_partition([1, 2, 3], brokers=4, faults=schedule)
    d.pop("storage")
    return [with_protocol(d, "reassign")]


@runs(reassignment)
def test_r35_r36_reassignment_and_preferred_election_under_acks_all_lose_nothing(
        judged_runs: dict, request: pytest.FixtureRequest) -> None:
    """R35 moves orders/0 from [1, 2, 3] to [4, 2, 3] while a producer writes with acks=all;
    R36 then has nothing to do (4, the new preferred replica, leads): no error, its partition
    named as not needing one; an `elect` the controller refuses (the partition is led) is
    recorded with its reason as an error and the run goes on."""
    [(out, verdict)] = runs_of(judged_runs, request)
    assert_no_loss(verdict)
    reasons = [e["reason"] for e in events(out, "partition-changed")]
    assert reasons.count("reassign") == 2, reasons  # grow, then complete
    final = [r for r in read_jsonl(out.run_dir / "final" / "replicas.jsonl") if r["partition"] == 0]
    assert sorted(r["node"] for r in final) == ["broker-2", "broker-3", "broker-4"]
    assert not [r for r in read_jsonl(out.run_dir / "final" / "logs.jsonl") if r["node"] == "broker-1"]
    assert [e["node"] for e in events(out, "replica-deleted")] == ["broker-1"]
    ends = {f["do"]: f for f in read_jsonl(out.run_dir / "faults.jsonl") if f["phase"] == "end"}
    assert ends["reassign"]["effect"]["accepted"] is True
    # R36 had nothing to do, which is what it was asked for (trial25 N2: it read as an error)
    preferred = ends["elect-preferred"]["effect"]
    assert "error" not in preferred and preferred["elected"] == [], preferred
    assert preferred["refused"]["orders/0"].startswith("ELECTION_NOT_NEEDED"), preferred
    assert "ELECTION_NOT_NEEDED" in ends["elect"]["effect"]["error"]
