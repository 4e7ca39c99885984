"""A running cluster of one run: its processes, its run directory, and the Python API that
tests and labs use step by step (DESIGN section 9).

    with Cluster.from_yaml("topologies/quickstart.yaml", run_dir=tmp) as c:
        c.produce("orders", 0, ["a", "b"], acks="all")
        c.kill("broker-2")
        c.wait_until(lambda s: len(s.partition("orders", 0).isr) == 2, timeout=10)

Every wait is on a condition with a deadline scaled by the run's time scale.
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import secrets
import subprocess
import time
from pathlib import Path
from typing import Any, Callable

import yaml
from tenacity import RetryError, Retrying, retry_if_result, stop_after_delay, wait_fixed

from broker.client import ClusterClient, ProduceResult
from broker.common.errors import Errors
from broker.common.names import broker_name, node_id
from broker.noderuntime.config import NodeConfig
from broker.wire.linkfilter import CLIENTS, LinkTable
from faults import kernel_rules
from faults.injector import FaultInjector, why_unchanged
from faults.fault_spec import DURATION_PARAMS, FAULT_ACTIONS, FaultSpec
from faults.process import sigcont, sigkill, sigstop
from faults.schedule import ScheduledFault
from faults.storage import TmpfsMounts
from testbed.clients.client_config import START
from testbed.clients.history import History
from testbed.clients.stats import StatsInbox
from testbed.config import scalars
from testbed.config.faults_section import action_keys, membership_problems, parse_fault_entry, topic_problems
from testbed.config.references import Known
from testbed.supervisor.admin import (
    ClusterAdmin,
    ClusterError,
    RebalanceInProgress,
    split_partition,
    topology_topics,
)
from testbed.supervisor.client_configs import CLIENT_START_WAIT, build_client_configs
from testbed.supervisor.cluster_status import ClusterStatus
from testbed.supervisor.control_client import ControlClient
from testbed.supervisor.netns import NetnsError, NetnsNetwork, refusal
from testbed.supervisor.node_configs import build_node_configs
from testbed.supervisor.process_metrics import MetricsSampler
from testbed.supervisor.processes import Registry, kill_tree, reap_leftovers, spawn
from testbed.supervisor.run_dir import RunDir, new_run_id
from testbed.config.loader import load_topology
from testbed.config.specs import NodeSpec
from testbed.config.topology_spec import TOPIC_ACTIONS, Topology

__all__ = ["Cluster", "ClusterError", "RebalanceInProgress"]


#: how long after its start a node that has not answered yet counts as starting (s, scaled)
STARTING_S = 3.0


class Cluster(ClusterAdmin):
    def __init__(self, topology: Topology, run_dir: Path | None = None, runs_dir: Path | None = None,
                 time_scale: float = 1.0, keep_data: bool = True) -> None:
        self.topology = topology
        self.time_scale = time_scale
        self.keep_data = keep_data
        # where the run's registry goes (`status --runs-dir`): beside a run_dir given, else runs/
        self.runs_dir = Path(runs_dir) if runs_dir is not None else Path(run_dir).parent if run_dir else Path("runs")
        self.run_id = new_run_id(topology.name, topology.seed)
        self.dir = RunDir(Path(run_dir) if run_dir else self.runs_dir / self.run_id)
        self.token = secrets.token_hex(16)
        self.procs: dict[str, subprocess.Popen] = {}
        self.closed = False  # `close` ran: the run directory is complete, and nothing more goes to it
        #: workload client processes, sampled into metrics.jsonl with the nodes
        self.client_procs: dict[str, subprocess.Popen] = {}
        #: where the workload's clients push their counters (`start(workload=True)`)
        self.inbox: StatsInbox | None = None
        #: clients not running at time 0: the seconds after it each got its go (None: never)
        self.late_clients: dict[str, float | None] = {}
        self._time_0 = 0
        self.configs: dict[str, NodeConfig] = {}
        self.stopped: set[str] = set()
        self.paused: set[str] = set()
        self._in_shutdown: set[str] = set()  # nodes a controlled shutdown waits for (R37)
        #: the network table every node should hold (the fault injector composes it), and the
        #: nodes that have not got it yet (paused or restarted since the last push)
        self.link_table: LinkTable = LinkTable(0, {})
        self._links_pending: set[str] = set()
        #: nodes whose process has not answered a status since it was started, and when (`status`)
        self._starting: dict[str, float] = {}
        self.mounts = TmpfsMounts()
        #: `backend: netns`: the run's namespaces, addresses and kernel rules
        self.network: NetnsNetwork | None = None
        self.warnings: list[str] = []
        self.registry: Registry | None = None
        self.control: ControlClient | None = None
        self.metrics: MetricsSampler | None = None
        self._client: ClusterClient | None = None
        self._api_history: History | None = None
        self._api_values: set[str] = set()  # every value the API had acknowledged: unique in a run (DESIGN 7)
        #: the run's one fault injector: it owns the network layers in force and records
        #: `faults.jsonl`, for the schedule of a run and for `fault()` alike
        self.injector: FaultInjector | None = None
        self._api_faults = 0
        #: the brokers of the run: the topology's, then those `add_broker` started (R38)
        self.brokers: list[NodeSpec] = list(topology.cluster.brokers)
        #: brokers `remove_broker` took out of the cluster: never restarted, no longer observed
        self.removed: set[str] = set()
        self.leaving: set[int] = set()

    @classmethod
    def from_yaml(cls, path: str | Path, run_dir: Path | None = None, seed: int | None = None,
                  **kw) -> "Cluster":
        return cls(load_topology(path, seed=seed), run_dir=run_dir, **kw)

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self) -> "Cluster":
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def data_dir(self, name: str) -> Path:
        return self.dir.data_dir(name)

    def start(self, workload: bool = False) -> None:
        """Start every node, create the topics, and wait until every partition is led; with
        `workload`, the workload's client processes too, spawned with the nodes so that their
        own start (0.2 s, seconds on a loaded machine) passes while the cluster's does: each
        then waits for `start_workload`'s go."""
        reap_leftovers(self.runs_dir)
        if (self.dir.root / "topology.yaml").exists():  # its data and metadata would be taken up again
            raise ClusterError(f"{self.dir.root} already holds a run (its topology.yaml): a run directory holds one "
                               f"run; give a new run_dir, or remove that one")
        # The registry and its watchman come first: a supervisor killed before its first node
        # started left a run directory of empty files that nothing removed (trial36); the
        # reaper removes such a directory, if the run made it (`reap_registry`).
        self.registry = Registry(self.runs_dir, self.dir.root.name, None, self.dir.root.resolve(),
                                 made=not self.dir.root.exists())
        self.registry.start_watchman()
        self.dir.create()
        self.registry.set_sock_dir(self.dir.socket_dir())
        scaled = (f"# run with --time-scale {self.time_scale:g}: every time below (the duration, each fault's "
                  f"`at`, every timeout) took {self.time_scale:g} times as long\n" if self.time_scale != 1 else "")
        (self.dir.root / "topology.yaml").write_text(scaled + yaml.safe_dump(self.topology.to_dict(), sort_keys=False))
        self.control = ControlClient(self.token)
        self.injector = FaultInjector(self, [], self.topology.seed, self.dir.faults,
                                      writeback=self.topology.storage.writeback * self.time_scale)
        if self.topology.network.backend == "netns":
            self._make_namespaces()
        self._write_configs()
        if self.topology.storage.medium == "tmpfs":
            self._mount_tmpfs()
        for spec in self.nodes():
            self._spawn(spec.name)
        self.metrics = MetricsSampler(self.dir.metrics, self._pids)
        self.metrics.start()
        if workload:
            self.inbox = StatsInbox(self._stats_endpoint())
            self.start_clients(self.inbox.endpoint)
        n = len(self.brokers)
        self.wait_until(lambda s: sum(1 for b in s.registered_brokers().values() if not b["fenced"]) == n,
                        timeout=self.scaled(15), what=f"all {n} brokers registered and unfenced")
        self._create_topics()
        self.wait_until(lambda s: s.all_led(), timeout=self.scaled(15), what="every partition led")

    def _make_namespaces(self) -> None:
        """DESIGN section 5: a namespace per node and one for the clients, on one bridge."""
        assert self.registry is not None
        refused = refusal(self.topology)
        if refused is not None:
            raise ClusterError(refused)
        self.network = NetnsNetwork(self.dir.root, self.registry.add_netns)
        try:
            self.network.create([*self.node_names(), CLIENTS])
        except NetnsError as e:
            raise ClusterError(f"setting up the network namespaces: {e}") from None

    def _write_configs(self) -> None:
        self.configs = build_node_configs(self.topology, self.nodes(), self.dir, self.token, self.time_scale,
                                          self.network)
        for name, cfg in self.configs.items():
            (self.dir.nodes / f"{name}.json").write_text(cfg.to_json())

    def _mount_tmpfs(self) -> None:
        """DESIGN section 4: data directories on tmpfs (root only), else plain directories."""
        assert self.registry is not None
        for spec in self.brokers:
            if not self._mount_data_dir(spec):
                break

    def _mount_data_dir(self, spec: NodeSpec) -> bool:
        assert self.registry is not None
        d = self.dir.data_dir(spec.name)
        d.mkdir(parents=True, exist_ok=True)
        # registered first: a supervisor killed between the two leaves a path the reaper
        # finds unmounted, never a mount nobody knows of
        self.registry.add_mount(d)
        if self.mounts.mount(d):
            return True
        self.registry.drop_mount(d)
        self.warnings.append(f"medium: tmpfs needs root and mount(8); {spec.name} uses a plain directory")
        return False

    def _spawn(self, name: str) -> None:
        """Start a node's process. While a link rule is in force, the process starts with the
        link table (`--links`), as a simulated node does: pushing it once the process answers
        held every later fault of the schedule back by the process's start (about 0.8 s a
        restart), and let the new process talk across a partition until then."""
        args = ["-m", "broker.node", "--config", str(self.dir.nodes / f"{name}.json")]
        if self.link_table.rules:
            links = self.dir.nodes / f"{name}.links.json"
            links.write_text(json.dumps(self.link_table.to_dict()))
            args += ["--links", str(links)]
        proc = spawn(args, self.dir.nodes / f"{name}.log")
        self._starting[name] = time.monotonic()
        self.procs[name] = proc
        self.stopped.discard(name)
        self.paused.discard(name)  # a new process was never paused, whatever its predecessor was
        assert self.registry is not None
        self.registry.add_process(proc.pid)

    def pid(self, name: str) -> int:
        return self.procs[name].pid

    def _pids(self) -> dict[str, int]:
        procs = {**self.procs, **self.client_procs}
        return {n: p.pid for n, p in procs.items() if p.poll() is None}

    def _create_topics(self) -> None:
        self.create_topics(topology_topics(self.topology))

    def _request_node(self, node: str, request: object, timeout: float) -> object | None:
        assert self.control is not None
        return self.control.request(self._supervisor_endpoint(node), request, timeout=timeout)

    def _supervisor_endpoint(self, node: str) -> str:
        """Where the supervisor reaches a node's requests: over ipc on the netns backend, where
        it stays outside the namespaces; else where everyone does."""
        cfg = self.configs[node]
        return cfg.local_endpoint or cfg.endpoint

    # ------------------------------------------------------------------ admin (R32, R35, R36, R38)
    def start_broker(self, broker_id: int, rack: str | None = None) -> str:
        """R38: start a new broker process; it registers with its endpoint (so that brokers,
        controllers and clients that started before it can reach it) and is unfenced once
        caught up. Returns its name once unfenced; ClusterError for an id in use."""
        self.ensure_open()  # (after the end it started a process that wrote into the judged run)
        spec = NodeSpec("broker", broker_id, rack)
        if spec.name in {n.name for n in self.nodes()}:
            raise ClusterError(f"broker id {broker_id} is in use")
        if self.network is not None:
            try:
                self.network.add([spec.name])
            except NetnsError as e:
                raise ClusterError(f"a namespace for {spec.name}: {e}") from None
        [made] = build_node_configs(self.topology, [spec], self.dir, self.token, self.time_scale,
                                    self.network).values()
        peers = {name: cfg.endpoint for name, cfg in self.configs.items()} | {spec.name: made.endpoint}
        cfg = dataclasses.replace(made, peers=peers)
        self.configs[spec.name] = cfg
        (self.dir.nodes / f"{spec.name}.json").write_text(cfg.to_json())
        if self.topology.storage.medium == "tmpfs":
            self._mount_data_dir(spec)
        self.brokers.append(spec)
        if self._client is not None:  # not the address it would learn from metadata (netns)
            self._client.brokers[broker_id] = self._supervisor_endpoint(spec.name)
        self._spawn(spec.name)
        self._wait_joined(spec)
        return spec.name

    # ------------------------------------------------------------------ observation
    def status(self, timeout: float = 0.5) -> ClusterStatus:
        """Every running node's own view, asked of all at once (a node that does not answer
        costs `timeout` once, not once per node, and the others' answers are of one moment); the
        controller's is the active controller's. A process started less than `STARTING_S` ago
        that has not answered yet is waited for only `control_client.STARTING_PATIENCE`: a
        restart's second of start-up held back every fault due meanwhile (each resolves its
        targets on a status), and so did the live progress; one that has not answered by then
        is waited for in full again. A process that has exited is not asked, nor waited for once
        it exits: a node whose controlled shutdown had ended cost every status inside that
        shutdown's wait the whole timeout, and the faults due meanwhile fired up to 0.8 s late."""
        self.ensure_open()
        assert self.control is not None
        down = self.stopped | self.paused | {name for name, proc in self.procs.items() if proc.poll() is not None}
        asked = {spec.name: self.configs[spec.name].control_endpoint for spec in self.controllers()
                 if spec.name not in down}
        asked |= {spec.name: self.configs[spec.name].control_endpoint for spec in self.brokers
                  if spec.name not in self.removed and spec.name not in down}
        now = time.monotonic()
        self._starting = {name: at for name, at in self._starting.items() if now - at < self.scaled(STARTING_S)}
        answers = (self.control.call_all(asked, "status", timeout=timeout, starting=self._starting,
                                         gone=lambda name: self.procs[name].poll() is not None) if asked else {})
        for name in [name for name, body in answers.items() if body is not None and name in self._starting]:
            del self._starting[name]
        quorum = {spec.name: answers.get(spec.name) for spec in self.controllers()}
        brokers = {spec.id: answers.get(spec.name) for spec in self.brokers if spec.name not in self.removed}
        return ClusterStatus.of(quorum, brokers)

    def wait_until(self, predicate: Callable[[ClusterStatus], bool], timeout: float,
                   what: str = "the condition") -> ClusterStatus:
        """Poll the cluster status until `predicate` holds; ClusterError after `timeout`."""
        last: list[ClusterStatus] = []

        def check() -> bool:
            self._check_processes()
            s = self.status()
            last[:] = [s]
            return self._looked(predicate, s)

        self.missed = None
        try:
            Retrying(stop=stop_after_delay(timeout), wait=wait_fixed(0.05),
                     retry=retry_if_result(lambda ok: not ok))(check)
        except RetryError:
            missed = f"; it last found no {self.missed}" if self.missed else ""
            raise ClusterError(f"timed out after {timeout:.1f}s waiting for {what}{missed} "
                               f"(run dir {self.dir.root})") from None
        return last[0]

    def retry_while(self, ask: Callable[[], Any], again: Callable[[Any], bool], timeout: float) -> Any:
        def retry(answer: Any) -> bool:
            if not again(answer):
                return False
            self._meanwhile()
            return True
        try:
            return Retrying(stop=stop_after_delay(timeout), wait=wait_fixed(0.05), retry=retry_if_result(retry))(ask)
        except RetryError as e:
            return e.last_attempt.result()

    def _check_processes(self) -> None:
        """A node that exited on its own is a crash, unless a controlled shutdown asked it to:
        a create-topic fired inside a remove-broker's shutdown wait found the leaving broker
        gone and ended in "broker-5 exited with code 0"."""
        for name, proc in self.procs.items():
            if name in self._in_shutdown and self.shutdown_ended(name):
                continue
            if name not in self.stopped and proc.poll() is not None:
                raise ClusterError(f"{name} exited with code {proc.returncode}; see {self.dir.nodes / (name + '.log')}")

    # ------------------------------------------------------------------ clients
    def client(self) -> ClusterClient:
        """The supervisor's own client (the `api` process; the final read): over ipc on the
        netns backend, where the supervisor stays outside the namespaces."""
        if self._client is None:
            endpoints = {s.id: self._supervisor_endpoint(s.name) for s in self.brokers}
            self._client = ClusterClient(endpoints, "api", request_timeout=self.scaled(2))
        return self._client

    def broker_endpoints(self) -> dict[int, str]:
        """Where the workload's clients reach each broker."""
        return {s.id: self.configs[s.name].endpoint for s in self.brokers}

    def produce(self, topic: str, partition: int, values: list[str], acks: str | int = "all") -> ProduceResult:
        """One recorded send (process `api`), as a workload producer would make it. Its
        arguments are checked before anything is recorded: a bad one recorded an operation
        the history's format refuses, which left the whole run unjudged. `acks` as a
        topology's: all, -1, 1 or 0, a string or an integer (trial33: `acks=1` was refused)."""
        self.ensure_open()
        problem = _produce_problem(topic, partition, values, acks) or _partition_problem(
            topic, partition, self._known_now().topics or {}) or _reused(values, self._api_values)
        if problem is not None:
            raise ValueError(f"Cluster.produce: {problem}")
        acks = scalars.acks(acks)
        if self._api_history is None:
            self._api_history = History(self.dir.history, "api")
        c = self.client()
        cached = c.leaders.get((topic, partition))
        if cached is not None and broker_name(cached.leader) in self.stopped | self.removed:
            # a leader the supervisor stopped: its metadata is asked again, as a producer does on a
            # broken connection (trial35: after kill and a wait for the new leader, the send went
            # to the dead one and came back an outcome-unknown timeout)
            c.leaders.pop((topic, partition), None)
        self._api_history.send_invoke(topic, partition, values, acks)
        r = c.produce(topic, partition, values, acks)
        self._api_history.send_complete(topic, partition, values, acks, r.error, r.base_offset, r.appended,
                                          r.leader)
        if r.error == Errors.NONE:  # a send that failed may be sent again: a retry, as a producer's
            self._api_values.update(values)
        return r

    def start_clients(self, stats_endpoint: str | None, value_bytes: int = 0) -> list[str]:
        """Start the workload's producer and consumer processes; returns their names."""
        assert self.registry is not None
        configs = build_client_configs(self.topology, self.broker_endpoints(), self.dir.history.resolve(),
                                       stats_endpoint, self.time_scale, value_bytes,
                                       self.network.namespace(CLIENTS) if self.network is not None else None)
        for name, cfg in configs.items():
            path = self.dir.clients / f"{name}.json"
            path.write_text(cfg.to_json())
            proc = spawn(["-m", "testbed.clients.worker", "--config", str(path)], self.dir.clients / f"{name}.log")
            self.client_procs[name] = proc
            self.registry.add_process(proc.pid)
        return list(configs)

    def _stats_endpoint(self) -> str:
        """ipc reaches the clients inside their namespace on the netns backend; loopback would not."""
        t = self.topology.network
        return (f"ipc://{self.dir.socket_dir()}/stats.sock" if t.transport != "tcp" or t.backend == "netns"
                else "tcp://127.0.0.1:0")

    def start_workload(self, inbox: StatsInbox | None = None) -> int:
        """Wait until every client started with `inbox`'s endpoint (by default the cluster's
        own) runs (has pushed once), then give each its go (`START`, which it waits for): time
        0 of the schedule is when all run, not when they were spawned. Returns time 0
        (`time.monotonic_ns`), taken before the first go so that no record precedes it; the
        clients not running by the deadline are `late_clients`' keys (each gets its go from
        `release_late` once it runs)."""
        inbox = inbox or self.inbox
        assert inbox is not None, "start(workload=True) first, or give the inbox the clients push to"
        clients = list(self.client_procs)
        late = inbox.wait_for(clients, self.scaled(CLIENT_START_WAIT), self.exited_clients)
        self._time_0 = time_0 = time.monotonic_ns()
        for name in clients:
            if name not in late:
                self._go(name)
        self.late_clients = dict.fromkeys(late)
        return time_0

    def release_late(self, inbox: StatsInbox | None = None) -> list[str]:
        """The go to each late client that runs now (its first push came); returns them. Its
        seconds after time 0 go to `late_clients` (and summary.json): the workload it joins
        has run without it so far."""
        inbox = inbox or self.inbox
        assert inbox is not None
        now = [n for n, at in self.late_clients.items() if at is None and n in inbox.latest]
        for name in now:
            # taken before the go, and cut to the millisecond: never after its first record
            self.late_clients[name] = (time.monotonic_ns() - self._time_0) // 1_000_000 / 1000
            self._go(name)
        return now

    def _go(self, name: str) -> None:
        proc = self.client_procs[name]
        if proc.poll() is None:
            os.kill(proc.pid, START)

    def exited_clients(self) -> set[str]:
        """The client processes that have ended (a client that could not join its namespace)."""
        return {name for name, p in self.client_procs.items() if p.poll() is not None}

    def stop_clients(self, timeout: float) -> None:
        """SIGTERM: each client finishes its operation in flight and records its completion."""
        for p in self.client_procs.values():
            if p.poll() is None:
                p.terminate()
        deadline = time.monotonic() + timeout
        for p in self.client_procs.values():
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    # ------------------------------------------------------------------ process control
    # The API's `kill`, `restart`, `pause` and `resume` are the faults of those names, fired
    # through the injector like `fault()`: recorded in faults.jsonl, so the judgment sees them
    # (a kill of a leader the analysis did not see left a window of 1 ms without a leader
    # where the same kill as a fault left 611 ms). The `_node` primitives are what the
    # injector itself calls (`faults.injector.ClusterControl`).
    def kill(self, name: str) -> int:
        """SIGKILL one node (paused or not), as the fault `kill`; returns its pid."""
        return self._node_fault("kill", name, "killed")

    def restart(self, name: str) -> int:
        """Start a stopped node again, as the fault `restart`: same id, same data directory, a
        new incarnation; returns its pid."""
        return self._node_fault("restart", name, "restarted")

    def pause(self, name: str) -> int:
        """SIGSTOP, as the fault `pause`: the process keeps its sockets and state but does
        nothing; returns its pid."""
        return self._node_fault("pause", name, "paused")

    def resume(self, name: str) -> int:
        """SIGCONT, as the fault `resume`; returns its pid."""
        return self._node_fault("resume", name, "resumed")

    def _node_fault(self, do: str, name: str, acted: str) -> int:
        """Fire `do` at node `name` through the injector; the pid it acted on. A node it
        would leave as it is (a kill of a stopped node, a pause of a paused one) is a
        ClusterError before anything is recorded, as a restart of a running one always was:
        three of the four returned a pid as if they had acted (trial38)."""
        if (why := why_unchanged(do, self._node(name), self.stopped, self.paused, self.removed)) is not None:
            raise ClusterError(f"{do} {name}: {name} is {why}")
        kind, _, number = name.partition("-")
        effect = self.fault(do, target=f"{kind}:{number}")["effect"]
        if "error" in effect:
            raise ClusterError(f"{do} {name}: {effect['error']}")
        if name not in effect.get(acted, {}):  # (a state the supervisor's sets did not foresee)
            raise ClusterError(f"{do} {name}: {effect.get('unchanged', {}).get(name, 'nothing was done')}")
        return int(effect[acted][name])

    def kill_node(self, name: str) -> int:
        """SIGKILL one node (paused or not); returns its pid."""
        proc = self.procs[self._node(name)]
        sigkill(proc.pid)
        proc.wait()
        self.stopped.add(name)
        self.paused.discard(name)
        return proc.pid

    def restart_node(self, name: str) -> int:
        """Start a stopped node again: same id, same data directory, a new incarnation."""
        if self._node(name) not in self.stopped:
            raise ClusterError(f"{name} is running")
        self._spawn(name)
        return self.procs[name].pid

    def _node(self, name: object) -> str:
        """`name` when it is a node of the cluster; else a ClusterError naming the nodes."""
        self.ensure_open()
        if name not in self.procs:
            raise ClusterError(f"no node {name!r} (nodes: {', '.join(sorted(self.procs))})")
        return str(name)

    def pause_node(self, name: str) -> int:
        """SIGSTOP: the process keeps its sockets and state but does nothing."""
        proc = self.procs[self._node(name)]
        sigstop(proc.pid)
        self.paused.add(name)
        return proc.pid

    def resume_node(self, name: str) -> int:
        proc = self.procs[self._node(name)]
        sigcont(proc.pid)
        self.paused.discard(name)
        self._links_pending.add(name)
        self.sync_links()
        return proc.pid

    # ------------------------------------------------------------------ admin, as faults
    # The API's admin calls are the fault actions of those names, fired as `fault()` fires
    # them: faults.jsonl records them as it records a topology's (the report's account of the
    # administration reads it). Each returns what its action did; a refusal before it acts
    # is a ClusterError, as a bad `fault()` is.
    def reassign(self, partition: str, replicas: list[int]) -> dict:
        """R35: start moving `partition` ("topic/P") to `replicas`, as the fault `reassign`;
        it completes once they are all in the ISR. Returns {"accepted": bool, "message"},
        with "error" when the controller refused."""
        split_partition(partition)  # its own error for a malformed one: `expected TOPIC/P`
        return self._admin_fault("reassign", None, partition=partition, replicas=list(replicas))

    def elect_preferred(self, partition: str | None = None) -> dict:
        """R36: preferred leader election for one partition ("topic/P") or all of them, as the
        fault `elect-preferred`. Returns {"elected": [...], "refused": {...}}."""
        return self._admin_fault("elect-preferred", None, **({} if partition is None else {"partition": partition}))

    def elect(self, partition: str, broker: int) -> dict:
        """R32 `manual`: the operator makes `broker` the leader of leaderless `partition`, as
        the fault `elect`. Returns {"elected": [...], "refused": {...}}."""
        return self._admin_fault("elect", f"broker:{broker}", partition=partition)

    def add_broker(self, broker_id: int, rack: str | None = None) -> str:
        """R38: a new broker joins, as the fault `add-broker` with `rebalance: false` (call
        `rebalance()` for its share); its name once it is unfenced."""
        effect = self._admin_fault("add-broker", None, broker={"id": broker_id, "rack": rack}, rebalance=False)
        if "error" in effect:
            raise ClusterError(effect["error"])
        return str(effect["added"])

    def remove_broker(self, broker_id: int) -> dict:
        """R39: the broker hands its replicas over, shuts down and is unregistered, as the
        fault `remove-broker`; the rebalance's record (see `decommission_broker`)."""
        name = broker_name(broker_id)
        if self._node(name) in self.removed:  # (no node: ClusterError, before anything is recorded)
            raise ClusterError(f"broker {broker_id} was removed already")
        effect = self._admin_fault("remove-broker", f"broker:{broker_id}")
        if "error" in effect:
            raise ClusterError(effect["error"])
        return dict(effect["rebalance"])

    def _admin_fault(self, do: str, target: str | None, **params: Any) -> dict:
        return dict(self.fault(do, target, **params)["effect"])

    # ------------------------------------------------------------------ faults
    def fault(self, do: str, target: str | None = None, **params: Any) -> dict:
        """Inject one fault now, as a topology's `faults:` entry would (DESIGN section 9);
        returns its `faults.jsonl` end record (what the target resolved to, the effect)."""
        self.ensure_open()
        assert self.injector is not None, "start the cluster first"
        if "at" in params:  # a tester's at="2s" fired at once, and the record did not say so
            raise ClusterError(f"Cluster.fault: at={params['at']!r}: a fault of the API acts now (a schedule is a "
                               f"topology's faults:)")
        if do in FAULT_ACTIONS and (unknown := [k for k in params if k not in action_keys(do)]):
            # the parser's own message offered `at` and `do`, which the API refuses or takes apart (trial38)
            raise ClusterError(f"Cluster.fault: {', '.join(unknown)}: not a parameter of {do} (it takes: "
                               f"{', '.join(action_keys(do)) or 'none'})")
        # a number for a duration is seconds, as the injector takes it (YAML spells the unit: 20ms)
        given = {k: f"{v}s" if k in DURATION_PARAMS and isinstance(v, int | float) and not isinstance(v, bool)
                 and math.isfinite(v) else v for k, v in params.items()}  # nan was shown as 'nans'
        entry = {"at": "0s", "do": do, **({} if target is None else {"target": target}), **given}
        spec, errors = parse_fault_entry("Cluster.fault", entry, self._known_now())
        if spec is None:  # checked before anything acts: a bad loss mode used to kill its broker first
            raise ClusterError("; ".join(errors))
        if spec.do in ("add-broker", "remove-broker") and (problems := self._membership_problems(spec)):
            raise ClusterError("; ".join(problems))
        if spec.do in TOPIC_ACTIONS and (problems := self._topic_problems(spec)):
            raise ClusterError("; ".join(problems))
        origin = f"api[{self._api_faults}]"
        self._api_faults += 1
        return self.injector.fire(ScheduledFault(0.0, spec.do, spec.target, dict(spec.params), origin))

    def _membership_problems(self, spec: FaultSpec) -> list[str]:
        """R38/R39 against the cluster now: the brokers in it (the API's added ones too, not
        those removed) and each topic's replication factor as the controller has it."""
        removed = {node_id(name) for name in self.removed}
        replication, _ = _topics_now(self.status())
        return membership_problems("Cluster.fault", spec, {b.id for b in self.brokers} - removed, replication,
                                   removed)

    def _topic_problems(self, spec: FaultSpec) -> list[str]:
        """R40 against the topics the active controller has now and the brokers in the cluster
        (the API's added ones too, not those removed); nothing is refused while no controller
        answers as active (the fault then waits for one, and its answer says what it did)."""
        status = self.status()
        if not status.controller:
            return []
        replication, partitions = _topics_now(status)
        removed = {node_id(name) for name in self.removed}
        return topic_problems("Cluster.fault", spec, replication, {b.id for b in self.brokers} - removed, partitions)

    def _known_now(self) -> Known:
        """The cluster as a fault's entry is checked against: its brokers and racks now (the
        API's added ones too), and the topics the controller has now; the topology's topics
        when no controller answers (a fault may be what brings one back)."""
        parts = self.status().partitions()
        topics: dict[str, int | None] = {tp.name: tp.partitions for tp in self.topology.topics}
        replicas: dict[str, tuple[int, ...]] | None = None
        if parts:
            topics = {}
            for p in parts:
                topics[p.topic] = max(topics.get(p.topic) or 0, p.partition + 1)
            replicas = {f"{p.topic}/{p.partition}": tuple(p.replicas) for p in parts}
        return Known(broker_ids=tuple(b.id for b in self.brokers), controller_ids=tuple(c.id for c in self.controllers()),
                     broker_racks={b.id: b.rack for b in self.brokers}, topics=topics,
                     replicas=replicas,
                     controller_racks=frozenset(c.rack for c in self.controllers() if c.rack is not None))

    # ------------------------------------------------------------------ network
    def push_links(self, table: LinkTable) -> dict[str, bool]:
        """On the netns backend the cuts go to the kernel (nftables in the bridge's namespace),
        and the rest (delay, jitter, loss, duplication) to netem where the kernel has it, else
        to the nodes' userspace filters."""
        if self.network is None:
            return super().push_links(table)
        drops, rest = kernel_rules.split(table, [*self.node_names(), CLIENTS])
        slow = rest.rules if self.network.netem else {}
        try:
            self.network.apply(drops, slow)
        except NetnsError as e:
            raise ClusterError(f"applying the network's kernel rules: {e}") from None
        return super().push_links(LinkTable(rest.seq) if slow else rest)

    def link_counters(self) -> dict[str, dict]:
        counters = super().link_counters()
        if self.network is not None:
            for link, counts in self.network.counters().items():
                counters.setdefault(link, {}).update(counts)
        return counters

    def network_rules(self) -> list[str] | None:
        return None if self.network is None else list(self.network.rules)

    def slow_in_kernel(self) -> bool | None:
        return None if self.network is None else self.network.netem

    def sync_links(self) -> dict[str, bool]:
        """Push the current table to the nodes that lack it and can answer now."""
        assert self.control is not None
        acked: dict[str, bool] = {}
        for name in sorted(self._links_pending):
            if name in self.stopped or name in self.paused:
                continue
            body = self.control.call(self.configs[name].control_endpoint, "links",
                                     {"table": self.link_table.to_dict()}, timeout=self.scaled(1))
            acked[name] = body is not None
            if body is not None:
                self._links_pending.discard(name)
        return acked

    def stop_all(self) -> dict[str, bool]:
        self.ensure_open()  # before start() it raised a bare KeyError of the first broker's name (trial38)
        return super().stop_all()

    def shutdown_node(self, name: str, timeout: float | None = None) -> bool:
        """Controlled shutdown (R37); True if the node exited by itself in time. A node still
        running at the timeout, or when the workload's end cuts the wait (`WorkloadEnded`,
        raised on), is killed: stopped either way, for the end of the run's heal to restart."""
        assert self.control is not None
        proc = self.procs[name]
        self._in_shutdown.add(name)
        def exited() -> bool:
            return proc.poll() is not None
        try:  # the answer is not waited for: a paused node gives none, and the faults due meanwhile fire
            self.control.send(self.configs[name].control_endpoint, "shutdown", timeout=self.scaled(1))
            deadline = time.monotonic() + (timeout if timeout is not None else self.scaled(10))
            while not exited() and time.monotonic() < deadline:
                self._meanwhile()  # a shutdown that waits (no quorum to move its leaderships) holds no fault back
                self.control.pump(0.05, until=exited)
        finally:
            self._in_shutdown.discard(name)
            clean = self._stopped_after_shutdown(name, proc)
        return clean

    def _stopped_after_shutdown(self, name: str, proc: subprocess.Popen) -> bool:
        """The node killed if it still runs, and counted stopped and no longer paused, as `kill`
        counts it (a paused node's shutdown times out and kills it: left in `paused`, a later
        `resume` resolved to it and "resumed" the process its restart had started, never
        paused); whether it exited cleanly. A node restarted after its exit (`shutdown_ended`)
        runs a new process: that one stays as it is."""
        if proc.poll() is None:
            proc.kill()
            proc.wait()
            clean = False
        else:
            clean = proc.returncode == 0
        if self.procs[name] is proc:
            self.stopped.add(name)
            self.paused.discard(name)
        return clean

    def shutdown_ended(self, name: str) -> bool:
        if name not in self.stopped and self.procs[name].poll() is not None:
            self.stopped.add(name)
            self.paused.discard(name)
        return name in self.stopped

    def _running(self, name: str) -> bool:
        return name not in self.stopped and self.procs[name].poll() is None

    def close(self) -> None:
        """Kill whatever still runs, unmount, remove sockets; idempotent, never raises."""
        for name, proc in [*self.procs.items(), *self.client_procs.items()]:
            if proc.poll() is None:
                kill_tree(proc.pid, None)
                proc.wait()
            self.stopped.add(name)
        self.paused.clear()
        try:
            self.mounts.unmount_all(keep=self.keep_data)
        except RuntimeError as e:  # a busy mount was lazily detached; say so, do not raise
            self.warnings.append(str(e))
        if self.metrics is not None:
            self.metrics.stop()
        if self.injector is not None:
            self.injector.close()
        if self.inbox is not None:
            self.inbox.close()
            self.inbox = None
        for c in (self._client, self.control):
            if c is not None:
                c.close()
        self._client = self.control = None
        if self._api_history is not None:
            self._api_history.close()
            self._api_history = None
        self.dir.remove_sockets()
        if self.network is not None:
            self.network.remove()
            self.network = None
        if self.registry is not None:
            self.registry.remove()
            self.registry = None
        self.closed = True

    def ensure_open(self) -> None:
        """A ClusterError once the cluster has stopped (`finish`, or the end of its `with`):
        calls after that wrote to a run already judged, or failed on a bare assertion."""
        if self.closed:
            raise ClusterError(f"the cluster of {self.dir.root} has stopped (finish() or the end of its with-block); "
                               f"start a new Cluster for more")
        if self.control is None:  # a bare AssertionError before (AttributeError under python -O)
            raise ClusterError("the cluster has not started: use it in a with-block, or call start() first")


def _topics_now(status: ClusterStatus) -> tuple[dict[str, int], dict[str, int]]:
    """Each topic the active controller has, with its replication factor and its partitions."""
    replication: dict[str, int] = {}
    partitions: dict[str, int] = {}
    for p in status.partitions():
        replication[p.topic] = max(replication.get(p.topic, 0), len(p.replicas))
        partitions[p.topic] = max(partitions.get(p.topic, 0), p.partition + 1)
    return replication, partitions


def _partition_problem(topic: str, partition: int, topics: dict[str, int | None]) -> str | None:
    """Why `topic`/`partition` is none of `topics` (name -> partition count); None if it is."""
    if topic not in topics:
        return f"no topic {topic!r} (topics: {', '.join(sorted(topics)) or 'none'})"
    count = topics[topic]
    if count is not None and partition >= count:
        return f"topic {topic!r} has no partition {partition} (partitions 0..{count - 1})"
    return None


def _reused(values: list[str], acknowledged: set[str]) -> str | None:
    """A value acknowledged before, or twice in one call: the checks read each value as one
    write (a reused one was judged a duplicate and a send gone backwards, trial35). A value
    whose send failed may be sent again: that is a retry, which the checks judge as such."""
    again = sorted({v for v in values if v in acknowledged or values.count(v) > 1})
    if again:
        return (f"values must be unique in a run (DESIGN 7: the checks tell writes apart by value); "
                f"{', '.join(map(repr, again[:5]))} {'was' if len(again) == 1 else 'were'} acknowledged before "
                f"or given twice")
    return None


def _produce_problem(topic: object, partition: object, values: object, acks: object) -> str | None:
    """Why `Cluster.produce` cannot send these; None when it can."""
    if not isinstance(topic, str) or not topic:
        return f"topic must be a topic's name, got {topic!r}"
    if not isinstance(partition, int) or isinstance(partition, bool) or partition < 0:
        return f"partition must be an integer >= 0, got {partition!r}"
    if not isinstance(values, list | tuple) or not values or not all(isinstance(v, str) for v in values):
        return f"values must be a non-empty list of strings, got {values!r}"
    try:
        scalars.acks(acks)
    except ValueError:
        return f"acks must be one of all, -1, 1, 0 (as in a topology), got {acks!r}"
    return None
