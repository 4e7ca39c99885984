"""Real runs judged by the pipeline (issue 4): a SIGKILLed leader under acks=all comes out
clean, with the kill drawn from its start to the restart; acks=1 writes that only the
killed leader held come out as acks=1 losses, each attributed to the election of a
follower without them and to the truncation of the old leader when it came back."""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from broker.common.errors import Errors
from broker.common.jsonl import read_jsonl
from faults.injector import FaultInjector
from faults.schedule import ScheduledFault
from testbed import Cluster as ApiCluster
from testbed.analysis.pipeline import analyze_runs
from testbed.analysis.verdict import RunVerdict
from testbed.clients.final_read import final_read
from testbed.clients.history import History
from testbed.experiment.final_state import write_logs, write_replicas
from testbed.experiment.runner import run_experiment
from testbed.supervisor.cluster import Cluster
from testbed.topology import CHECK_NAMES, parse_topology
from tests.integration.conftest import TIME_SCALE, committed_duplicates, topology_dict
from tests.unit.analysis_fixtures import spark  # noqa: F401  (the shared session fixture)

pytestmark = pytest.mark.integration


def finish_run(c: Cluster) -> None:
    """What a run does after its workload (testbed/experiment.py): wait for convergence, read
    every partition to its end as `final-reader`, record the replicas, stop the nodes and
    record their logs from the files."""
    c.wait_until(lambda s: s.fully_replicated(), timeout=c.scaled(30), what="convergence")
    partitions = [(tp.name, p) for tp in c.topology.topics for p in range(tp.partitions)]
    reader = History(c.dir.history, "final-reader")
    final_read(c.client(), reader, partitions, time.monotonic() + c.scaled(20), time.monotonic)
    reader.close()
    write_replicas(c.dir.final / "replicas.jsonl", c.status())
    c.stop_all()
    write_logs(c.dir.final / "logs.jsonl", {s.name: c.dir.data_dir(s.name) for s in c.topology.cluster.brokers})


def test_a_killed_leader_under_acks_all_is_judged_clean(tmp_path: Path, spark: object) -> None:  # noqa: F811
    faults = [{"at": "1s", "do": "kill", "target": "leader-of orders/0"},
              {"at": "2500ms", "do": "restart", "target": "stopped"}]
    topo = parse_topology(topology_dict(partitions=2, duration="4s", faults=faults), "test")
    out = run_experiment(topo, runs_dir=tmp_path / "runs", time_scale=TIME_SCALE)
    assert out.verdict is not None, f"run failed, see {out.run_dir}"
    r = out.verdict.results
    assert out.verdict.ok is True and out.exit_code == 0, r["problems"]
    # A send that timed out after its append is retried and appended again (no idempotence):
    # such duplicates are allowed, and counted exactly as the files show them.
    assert r["checks"]["duplicates"]["count"] == committed_duplicates(out.run_dir)
    others = [n for n in CHECK_NAMES if n != "duplicates"]
    assert {n: r["checks"][n]["count"] for n in others} == dict.fromkeys(others, 0)
    assert r["converged"] is True
    [kill] = r["figures"]["faults"]  # the restart undoes the kill: it is not a fault of its own
    assert kill["do"] == "kill" and kill["until_s"] > kill["at_s"]
    assert kill["to_first_ack_s"] is not None and kill["to_first_ack_s"] > 0
    series = r["figures"]["series"]
    assert sum(s["records"] for s in series if s["f"] == "send") == out.counts.acknowledged["all"]
    assert (out.run_dir / "report.html").stat().st_size > 10_000


def _fire(runner: FaultInjector, n: int, do: str, target: str) -> dict:
    end = runner.fire(ScheduledFault(0.0, do, target, {}, f"faults[{n}]"))
    assert "error" not in end["effect"] and "skipped" not in end["effect"], end
    return end


def test_acks1_writes_only_the_killed_leader_held_are_lost_and_attributed(tmp_path: Path,
                                                                          spark: object) -> None:  # noqa: F811
    """Followers paused (for much less than the session timeout, so they stay in the ISR),
    acks=1 writes acknowledged by the leader alone, the leader SIGKILLed, the followers
    resumed: the controller elects a follower without those writes (R25), and the old
    leader truncates them when it comes back (R10). The first acks=1 batch completes the
    fetch each follower had parked at the leader before it was paused, so only the second
    batch is held by the leader alone."""
    topo = parse_topology(topology_dict(partitions=1), "test")
    c = Cluster(topo, run_dir=tmp_path / "run", runs_dir=tmp_path / "runs", time_scale=TIME_SCALE)
    try:
        c.start()
        committed = c.produce("orders", 0, [f"all-{i}" for i in range(5)], acks="all")
        assert committed.error == Errors.NONE
        runner = FaultInjector(c, [], seed=1, record=c.dir.faults)
        try:
            _fire(runner, 0, "pause", "followers-of orders/0")
            assert c.produce("orders", 0, ["parked-0"], acks="1").error == Errors.NONE
            lost = [f"acks1-{i}" for i in range(5)]
            assert c.produce("orders", 0, lost, acks="1").error == Errors.NONE
            [old] = _fire(runner, 1, "kill", "leader-of orders/0")["resolved"]
            _fire(runner, 2, "resume", "paused")
            c.wait_until(lambda s: s.partition("orders", 0).leader not in (-1, int(old.split("-")[1])),
                         timeout=c.scaled(15), what="a follower elected")
            _fire(runner, 3, "restart", "stopped")
        finally:
            runner.close()
        finish_run(c)
    finally:
        c.close()
    [verdict] = analyze_runs([c.dir.root])
    _assert_acks1_losses(verdict, set(lost), "parked-0", old)


def _assert_acks1_losses(verdict: RunVerdict, lost: set[str], parked: str, old_leader: str) -> None:
    """Every value of the second batch is lost; the first is lost too when no follower had a
    fetch parked at the leader at the pause (it then reached no follower either)."""
    r = verdict.results
    assert verdict.ok is True and r["converged"] is True, r["problems"]
    checks = r["checks"]
    assert checks["lost_writes"]["count"] == 0
    found = {x["value"] for x in checks["lost_writes_acks1"]["examples"]}
    assert lost <= found <= lost | {parked}
    assert checks["lost_writes_acks1"]["count"] == len(found) and checks["lost_writes_acks1"]["unattributed"] == 0
    for x in checks["lost_writes_acks1"]["examples"]:
        assert " was elected at leader epoch " in x["cause"] and " truncated its log from " in x["cause"], x
        if x["value"] in lost:  # the parked value may reach one follower, which truncates it first
            assert f"{old_leader} truncated its log from " in x["cause"], x
    assert [f["do"] for f in r["figures"]["faults"]] == ["pause", "kill"]


def test_the_python_api_of_design_section_9_ends_and_judges_its_run(tmp_path: Path, spark: object) -> None:  # noqa: F811
    """DESIGN section 9's snippet as written: produce, pause the followers, wait for the ISR to
    shrink, then `finish()` (heal, converge, final read, pipeline) returns the verdict."""
    path = tmp_path / "x.yaml"
    path.write_text(yaml.safe_dump(topology_dict(partitions=1, topics=[{
        "name": "orders", "partitions": 1, "replication_factor": 3, "min_insync_replicas": 2,
        "placement": "explicit", "assignment": {0: [1, 2, 3]}}])))
    run_dir = tmp_path / "run"
    with ApiCluster.from_yaml(path, run_dir=run_dir, time_scale=TIME_SCALE) as c:
        assert c.produce("orders", 0, ["a", "b"], acks="all").error == Errors.NONE
        c.fault("pause", target="followers-of orders/0")
        c.wait_until(lambda s: s.partition("orders", 0).isr == [1], timeout=10 * TIME_SCALE)
        result = c.finish()
    assert isinstance(result, RunVerdict) and result.ok is True, result.results.get("problems")
    assert result.results["converged"] is True and result.results["checks"]["lost_writes"]["count"] == 0
    assert (run_dir / "results.json").is_file() and (run_dir / "report.html").is_file()
    read = [rec[1] for h in read_jsonl(run_dir / "history.jsonl")
            if h["process"] == "final-reader" and h["type"] == "ok" for rec in h["records"]]
    assert read == ["a", "b"], read


TWO_FINISHES = """
import sys
from pathlib import Path
from testbed import Cluster
tmp = Path(sys.argv[1])
for n in (1, 2):
    with Cluster.from_yaml(sys.argv[2], run_dir=tmp / f"run{n}", time_scale=float(sys.argv[3])) as c:
        c.produce("orders", 0, [f"v{n}"], acks="all")
        print(n, c.finish().ok, flush=True)
"""


@pytest.mark.slow(seconds=205)
@pytest.mark.timeout(900)  # two cold JVMs' starts and judgments: 300 s was passed by a CI run of 2,774 s
def test_a_script_judges_two_clusters_one_after_the_other(tmp_path: Path) -> None:
    """The Python API in a script of its own: each `finish()` stops the JVM it started, so the
    second starts another (it went on talking to the exited one: a refused connection)."""
    path = tmp_path / "x.yaml"
    path.write_text(yaml.safe_dump(topology_dict(partitions=1, duration="1s")))
    done = subprocess.run([sys.executable, "-c", TWO_FINISHES, str(tmp_path), str(path), str(TIME_SCALE)],
                          cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["1", "True", "2", "True"], done.stdout
