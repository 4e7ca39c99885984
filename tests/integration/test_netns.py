"""The netns backend (DESIGN section 5, issue 14): real namespaces, a bridge, nftables rules.

Skipped where the machine lacks root, `ip` or `nft` (the reason names which). Every fault
shape is checked by sending a datagram over every ordered pair of namespaces and comparing
what arrived with the link table; whole runs are judged against the userspace backend's.
"""
from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
import yaml

from broker.common import netns
from broker.common.jsonl import read_jsonl
from broker.wire.linkfilter import CLIENTS, LinkRule, LinkTable
from faults import kernel_rules, network
from testbed.analysis.pipeline import analyze_runs
from testbed.supervisor.netns import NetnsError, NetnsNetwork, existing_namespaces, requirements_missing
from testbed.supervisor.processes import Registry, reap_leftovers
from testbed.supervisor.cluster import Cluster
from testbed.topology import load_topology, parse_topology
from tests.integration.conftest import TIME_SCALE
from tests.integration.runs_at_once import run_clusters
from tests.unit.analysis_fixtures import spark  # noqa: F401  (the fixture)

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.integration, pytest.mark.netns,
              pytest.mark.skipif(bool(requirements_missing()),
                                 reason=f"the netns backend needs {requirements_missing()}")]

NODES = ["controller-1", "broker-1", "broker-2", "broker-3", "broker-4"]
NAMES = [*NODES, CLIENTS]
PROBE_PORT = 7000


@pytest.fixture
def bare_network(tmp_path: Path):
    """Namespaces for five nodes and the clients, no processes: the network alone."""
    reg = Registry(tmp_path / "runs", "bare", tmp_path / "sock")
    net = NetnsNetwork(tmp_path / "bare", reg.add_netns)
    try:
        net.create(NAMES)
        yield net
    finally:
        net.remove()
        reg.remove()
    assert not existing_namespaces(net.prefix)


def _socket_in(namespace: str) -> socket.socket:
    """A UDP socket of that namespace: made by a thread that joined it (and then ends)."""
    made: list[socket.socket] = []

    def make() -> None:
        netns.enter(namespace)
        made.append(socket.socket(socket.AF_INET, socket.SOCK_DGRAM))

    t = threading.Thread(target=make)
    t.start()
    t.join()
    return made[0]


def _reachability(net: NetnsNetwork, expected: set[tuple[str, str]]) -> set[tuple[str, str]]:
    """The ordered pairs (a, b) over which a datagram from a's namespace reached b's.

    Waits (with a deadline) for every pair `expected` to arrive, then sends one more round on
    those pairs and waits for it: a datagram of the first round that the rules let through
    has arrived by then, so a pair missing from the answer was cut."""
    receivers = {}
    for name in NAMES:
        s = _socket_in(net.namespace(name))
        s.bind((net.addresses[name], PROBE_PORT))
        s.setblocking(False)
        receivers[name] = s
    senders = {name: _socket_in(net.namespace(name)) for name in NAMES}
    got: set[tuple[str, str]] = set()

    def send(pairs: set[tuple[str, str]], tag: str) -> None:
        for a, b in sorted(pairs):
            try:
                senders[a].sendto(f"{tag}|{a}|{b}".encode(), (net.addresses[b], PROBE_PORT))
            except OSError:
                pass  # a cut link may refuse at once; it stays unreached

    def gather(until: set[tuple[str, str]], tag: str) -> None:
        seen: set[tuple[str, str]] = set()
        deadline = time.monotonic() + 5
        while not until <= seen and time.monotonic() < deadline:
            ready, _, _ = select.select(list(receivers.values()), [], [], 0.05)
            for s in ready:
                while True:
                    try:
                        t, a, b = s.recv(100).decode().split("|")
                    except BlockingIOError:
                        break
                    (seen if t == tag else got).add((a, b))
                    if t == "probe":
                        got.add((a, b))
        assert until <= seen, f"datagrams never arrived: {sorted(until - seen)}"

    try:
        send({(a, b) for a in NAMES for b in NAMES if a != b}, "probe")
        gather(expected, "probe")
        send(expected, "sentinel")
        gather(expected, "sentinel")
        return got
    finally:
        for s in [*receivers.values(), *senders.values()]:
            s.close()


def _shapes() -> dict[str, LinkTable]:
    import random
    rng = random.Random(14)
    return {
        "groups": network.partition_table([["broker-1", "broker-2"], ["broker-3", "broker-4", "controller-1"]],
                                          NODES, 1),
        "isolate": network.partition_table(network.shape_groups("isolate", NODES, ["broker-2"], rng), NODES, 1),
        "halves": network.partition_table(network.shape_groups("halves", NODES, [], rng), NODES, 1),
        "bridge": network.partition_table(network.shape_groups("bridge", NODES, [], rng), NODES, 1),
        "one-way": network.one_way_table(["broker-1"], ["controller-1", "broker-3"], NODES, 1),
        "clients": network.partition_table([[CLIENTS, "broker-1"], ["broker-2", "broker-3", "broker-4"]], NODES, 1),
        "partition-and-slow": network.compose(
            [network.partition_table([["broker-4"], ["broker-1", "broker-2", "broker-3"]], NODES, 0),
             network.slow_table(["*"], ["*"], 0.02, 0.0, 0.0, 0.0, 0)], NODES, 1),
        "heal": network.heal_table(1),
    }


@pytest.mark.parametrize("shape", list(_shapes()))
def test_every_fault_shape_cuts_exactly_its_links_between_the_namespaces(bare_network: NetnsNetwork,
                                                                        shape: str) -> None:
    """DESIGN 5/6: each shape's table, applied as nftables rules at the bridge, lets a packet
    through on exactly the ordered pairs the link table lets a message through."""
    table = _shapes()[shape]
    drops, rest = kernel_rules.split(table, NAMES)
    bare_network.apply(drops)
    assert len(bare_network.rules) == len(drops)
    expected = {(a, b) for a in NAMES for b in NAMES if a != b and network.reachable(table, a, b)}
    assert _reachability(bare_network, expected) == expected
    if shape == "heal":
        assert expected == {(a, b) for a in NAMES for b in NAMES if a != b}
    if shape == "partition-and-slow":  # the delays stay with the nodes' own filters
        assert rest.rules and all(r.delay == 0.02 and not r.drop for r in rest.rules.values())
    dropped = bare_network.counters()
    assert set(dropped) <= {kernel_rules.link_name(a, b) for a, b in drops}
    assert bool(dropped) == bool(drops), dropped
    bare_network.apply([])  # heal: counters survive the ruleset that counted them
    assert bare_network.counters() == dropped
    assert _reachability(bare_network, {(a, b) for a in NAMES for b in NAMES if a != b})


def test_nothing_of_a_run_is_in_the_host_namespace(bare_network: NetnsNetwork) -> None:
    """The run's interfaces and addresses exist only inside its namespaces."""
    host = subprocess.run(["ip", "-o", "addr"], capture_output=True, text=True, check=True).stdout
    assert "10.200." not in host
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=True).stdout
    assert "br0" not in links and not any(f" p{i}@" in links for i in range(len(NAMES)))
    inside = subprocess.run(["ip", "-n", bare_network.namespace("broker-1"), "route"], capture_output=True,
                            text=True, check=True).stdout
    assert "default" not in inside and inside.strip().startswith("10.200.0.0/16")


def _alike(tmp_path: Path, topology_file: Path) -> dict[str, dict]:
    """The same topology run on both backends at once and judged in one job: verdict per backend."""
    backends = ("netns", "userspace")
    topologies = []
    for backend in backends:
        data = yaml.safe_load(topology_file.read_text())
        data["network"] = {"backend": backend}
        path = tmp_path / f"{backend}.yaml"
        path.write_text(yaml.safe_dump(data))
        topologies.append(load_topology(path))
    outcomes = run_clusters(topologies, tmp_path / "runs", TIME_SCALE, [tmp_path / b for b in backends])
    dirs = {}
    for backend, outcome in zip(backends, outcomes):
        assert outcome.converged, f"{backend}: the run did not converge"
        dirs[backend] = outcome.run_dir
    verdicts = analyze_runs(list(dirs.values()))
    return {backend: {"verdict": v, "faults": read_jsonl(d / "faults.jsonl")}
            for (backend, d), v in zip(dirs.items(), verdicts)}


@pytest.mark.slow(seconds=110)
def test_an_isolated_leader_and_a_one_way_cut_to_the_controller_are_judged_alike_on_both_backends(
        tmp_path: Path, spark: object) -> None:  # noqa: F811 - judged in the worker's session
    """topologies/netns.yaml on both backends: the isolated leader of orders/0 loses acks=1
    writes and no acks=all write (R15, R24, R25, R10), the one-way cut fences the leader of
    orders/1, the clients' cut holds; the kernel rules are recorded only on netns."""
    runs = _alike(tmp_path, ROOT / "topologies" / "netns.yaml")
    for backend, r in runs.items():
        v = r["verdict"]
        counts = {name: c["count"] for name, c in v.results["checks"].items()}
        assert v.ok, f"{backend}: {v.results['expect']} {v.results['problems']}"
        assert counts["lost_writes"] == 0 and counts["lost_writes_acks1"] > 0, (backend, counts)
        ends = [f for f in r["faults"] if f["phase"] == "end" and f["do"] in ("partition", "heal")]
        assert len(ends) == 6
        assert all(("kernel_rules" in f["effect"]) == (backend == "netns") for f in ends), backend
    netns_ends = [f for f in runs["netns"]["faults"] if f["phase"] == "end" and f["do"] in ("partition", "heal")]
    one_way = netns_ends[2]["effect"]
    leader = one_way["groups"][0][0]
    assert [r.split("# ")[1] for r in one_way["kernel_rules"]] == [f"{leader}->controller-1"]
    assert any(r.split("# ")[1] == "clients->broker-3" for r in netns_ends[4]["effect"]["kernel_rules"])
    healed = netns_ends[3]["effect"]
    assert healed["kernel_rules"] == [] and healed["dropped_by_link"][f"{leader}->controller-1"]["dropped_packets"] > 0


def _start(topology: Path, runs: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "run.py", str(topology), "--runs-dir", str(runs),
                             "--time-scale", str(TIME_SCALE)], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def test_a_killed_supervisors_namespaces_are_removed_by_its_watchman(tmp_path: Path) -> None:
    data = yaml.safe_load((ROOT / "topologies" / "netns.yaml").read_text())
    data.update(duration="60s", faults=[{"at": "0s", "do": "partition", "shape": "isolate", "target": "broker:1"}],
                expect={})
    topo = tmp_path / "t.yaml"
    topo.write_text(yaml.safe_dump(data))
    runs = tmp_path / "runs"
    sup = _start(topo, runs)
    try:
        assert sup.stdout is not None
        for line in sup.stdout:
            if "fault partition" in line:
                break
        else:
            pytest.fail("the run never reached its partition")
        reg = next((runs / ".live").glob("*.json"))
        names = json.loads(reg.read_text())["netns"]
        assert len(names) == 6  # the bridge, a controller, three brokers, the clients
        os.kill(sup.pid, signal.SIGKILL)
        sup.wait()
    finally:
        if sup.poll() is None:
            sup.kill()
    deadline = time.monotonic() + 10.0
    # the run's watchman removes the namespaces, then the registry: both polled against a
    # deadline (under load the registry outlived the namespaces by a moment)
    while time.monotonic() < deadline and (set(names) & set(existing_namespaces()) or reg.exists()):
        time.sleep(0.05)
    assert not set(names) & set(existing_namespaces()), "the killed run's namespaces outlived it"
    assert not reg.exists(), "the killed run's registry outlived its namespaces"
    data.update(name="next", duration="1s", faults=[])
    with Cluster(parse_topology(data, "next"), runs_dir=runs, time_scale=TIME_SCALE) as following:
        assert following.network is not None
        prefix = following.network.prefix
        assert len(existing_namespaces(prefix)) == 6
    assert not existing_namespaces(prefix)


def test_a_supervisor_killed_in_the_middle_of_the_setup_leaves_nothing_after_the_next_invocation(
        tmp_path: Path) -> None:
    """The registry names each namespace before it is made: the supervisor below dies (SIGKILL)
    after registering the nodes' namespaces and before making them, with the bridge's made."""
    script = textwrap.dedent(f"""
        import os, signal
        from pathlib import Path
        from testbed.supervisor.netns import NetnsNetwork
        from testbed.supervisor.processes import Registry
        reg = Registry(Path({str(tmp_path / 'runs')!r}), "halfway", Path({str(tmp_path / 'sock')!r}))
        calls = []
        def register(names):
            reg.add_netns(names)
            calls.append(names)
            if len(calls) == 2:
                os.kill(os.getpid(), signal.SIGKILL)
        NetnsNetwork(Path({str(tmp_path / 'halfway')!r}), register).create(["broker-1", "broker-2", "clients"])
        """)
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == -signal.SIGKILL, done.stderr
    names = json.loads((tmp_path / "runs" / ".live" / "halfway.json").read_text())["netns"]
    assert len(names) == 4 and names[0].endswith("-bridge")
    made = set(names) & set(existing_namespaces())
    assert made == {names[0]}, made  # the bridge's namespace was made, the nodes' not yet
    assert reap_leftovers(tmp_path / "runs") == [("halfway", False)]
    assert not set(names) & set(existing_namespaces())


def test_r38_a_broker_added_online_gets_its_namespace_and_takes_writes(make_cluster) -> None:
    """A broker added while the run is up (R38) is wired to the bridge like the first ones:
    the others and the clients reach it by TCP, the supervisor by its ipc endpoint, and the
    next partition's rules name its address."""
    c = make_cluster(partitions=1, network={"backend": "netns"})
    assert c.network is not None and c.configs["broker-1"].endpoint.startswith("tcp://10.200.")
    assert c.add_broker(4, "d") == "broker-4"
    assert c.configs["broker-4"].endpoint == c.network.endpoint("broker-4")
    assert c.network.namespace("broker-4") in existing_namespaces(c.network.prefix)
    c.reassign("orders/0", [4, 1, 2])  # (it does not wait: broker 4 joins the ISR, then broker 3 leaves)
    c.wait_until(lambda s: s.partition("orders", 0).replicas == [4, 1, 2] and set(s.partition("orders", 0).isr) == {4, 1, 2},
                 timeout=c.scaled(20), what="the reassignment of orders/0 to [4, 1, 2] complete")
    assert c.elect_preferred("orders/0")["elected"] == ["orders/0"]  # asked sooner, broker 4 may not be in the ISR yet
    c.wait_until(lambda s: s.partition("orders", 0).leader == 4 and set(s.partition("orders", 0).isr) == {4, 1, 2},
                 timeout=c.scaled(20), what="broker 4 leading orders/0 with a full ISR")
    assert c.produce("orders", 0, ["on-broker-4"], acks="all").base_offset is not None
    end = c.fault("partition", "broker:4", shape="isolate")
    assert any(r.endswith("# broker-4->controller-1") for r in end["effect"]["kernel_rules"])
    c.wait_until(lambda s: s.partition("orders", 0).leader not in (-1, 4), timeout=c.scaled(15),
                 what="a leader other than the isolated broker 4")
    c.fault("heal")
    c.wait_until(lambda s: s.fully_replicated(), timeout=c.scaled(30), what="convergence after the heal")
    prefix = c.network.prefix
    c.close()
    assert not existing_namespaces(prefix)


def test_slow_links_are_netem_delays_where_the_kernel_has_netem(bare_network: NetnsNetwork) -> None:
    """DESIGN 5: degradation by tc netem, per ordered pair. Where the kernel lacks netem the
    network says so, refuses kernel slow rules, and `slow` stays with the nodes' filters
    (the process tests of `slow` cover that path)."""
    slow = {("broker-1", "broker-2"): LinkRule(delay=0.05)}
    if not bare_network.netem:
        with pytest.raises(NetnsError, match="no netem"):
            bare_network.apply([], slow)
        pytest.skip("this kernel has no netem qdisc (CONFIG_NET_SCH_NETEM): slow stays in userspace")
    bare_network.apply([], slow)
    assert bare_network.rules == kernel_rules.slow_rules_text(slow, bare_network.addresses)
    rx = {n: _socket_in(bare_network.namespace(n)) for n in ("broker-1", "broker-2")}
    tx = {n: _socket_in(bare_network.namespace(n)) for n in ("broker-1", "broker-2")}
    try:
        for n, s in rx.items():
            s.bind((bare_network.addresses[n], PROBE_PORT))
        took = {}
        for a, b in (("broker-1", "broker-2"), ("broker-2", "broker-1")):
            t0 = time.monotonic()
            tx[a].sendto(b"x", (bare_network.addresses[b], PROBE_PORT))
            rx[b].settimeout(5)
            rx[b].recv(10)
            took[(a, b)] = time.monotonic() - t0
        assert took[("broker-1", "broker-2")] >= 0.045 and took[("broker-2", "broker-1")] < 0.045, took
    finally:
        for s in [*rx.values(), *tx.values()]:
            s.close()
    bare_network.apply([], {})
