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
import secrets
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import yaml
from tenacity import RetryError, Retrying, retry_if_result, stop_after_delay, wait_fixed

from broker.client import ClusterClient, ProduceResult
from broker.common.errors import Errors
from broker.common.names import broker_name
from broker.noderuntime.config import NodeConfig
from broker.protocol.messages import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    ElectLeadersRequest,
    ElectLeadersResponse,
    ErrorResponse,
    NewTopic,
    PartitionMetadata,
    TopicPartition,
    UnregisterBrokerRequest,
    UnregisterBrokerResponse,
)
from broker.protocol.rebalance import plan_rebalance
from broker.wire.linkfilter import LinkTable
from faults.injector import FaultInjector
from faults.process import sigcont, sigkill, sigstop
from faults.schedule import ScheduledFault
from faults.storage import TmpfsMounts
from faults.targets import ClusterView
from testbed.clients.history import History
from testbed.config import scalars
from testbed.supervisor.client_configs import build_client_configs
from testbed.supervisor.cluster_status import ClusterStatus
from testbed.supervisor.control_client import ControlClient
from testbed.supervisor.node_configs import build_node_configs
from testbed.supervisor.process_metrics import MetricsSampler
from testbed.supervisor.processes import Registry, kill_tree, reap_leftovers, spawn
from testbed.supervisor.run_dir import RunDir, new_run_id
from testbed.topology import NodeSpec, Topology, load_topology


class ClusterError(RuntimeError):
    pass


def _split_partition(text: str) -> tuple[str, int]:
    topic, _, index = text.rpartition("/")
    return topic, int(index)


@dataclass
class RebalanceInProgress:
    """A rebalance whose moves were started (`Cluster.begin_rebalance`), not yet waited for."""
    plan: dict  # Plan.to_dict(), as recorded before the first move
    moving: dict[tuple[str, int], list[int]]  # partition -> target replicas, the moves accepted
    refused: dict[str, str]  # "topic/P" -> the controller's reason
    leaders_changed: bool


class Cluster:
    def __init__(self, topology: Topology, run_dir: Path | None = None, runs_dir: Path = Path("runs"),
                 time_scale: float = 1.0, keep_data: bool = True) -> None:
        self.topology = topology
        self.time_scale = time_scale
        self.keep_data = keep_data
        self.runs_dir = Path(runs_dir)
        self.run_id = new_run_id(topology.name, topology.seed)
        self.dir = RunDir(Path(run_dir) if run_dir else self.runs_dir / self.run_id)
        self.token = secrets.token_hex(16)
        self.procs: dict[str, subprocess.Popen] = {}
        #: workload client processes, sampled into metrics.jsonl with the nodes
        self.client_procs: dict[str, subprocess.Popen] = {}
        self.configs: dict[str, NodeConfig] = {}
        self.stopped: set[str] = set()
        self.paused: set[str] = set()
        #: the network table every node should hold (the fault injector composes it), and the
        #: nodes that have not got it yet (paused or restarted since the last push)
        self.link_table: LinkTable = LinkTable(0, {})
        self._links_pending: set[str] = set()
        self.mounts = TmpfsMounts()
        self.warnings: list[str] = []
        self.registry: Registry | None = None
        self.control: ControlClient | None = None
        self.metrics: MetricsSampler | None = None
        self._client: ClusterClient | None = None
        self._api_history: History | None = None
        #: the run's one fault injector: it owns the network layers in force and records
        #: `faults.jsonl`, for the schedule of a run and for `fault()` alike
        self.injector: FaultInjector | None = None
        self._api_faults = 0
        #: the brokers of the run: the topology's, then those `add_broker` started (R38)
        self.brokers: list[NodeSpec] = list(topology.cluster.brokers)
        #: brokers `remove_broker` took out of the cluster: never restarted, no longer observed
        self.removed: set[str] = set()

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

    def scaled(self, seconds: float) -> float:
        return seconds * self.time_scale

    def controllers(self) -> list[NodeSpec]:
        """The voters of the controller quorum (R22)."""
        return list(self.topology.cluster.controllers)

    def nodes(self) -> list[NodeSpec]:
        return [*self.controllers(), *self.brokers]

    def node_names(self) -> list[str]:
        return [spec.name for spec in self.nodes()]

    def data_dir(self, name: str) -> Path:
        return self.dir.data_dir(name)

    def start(self) -> None:
        """Start every node, create the topics, and wait until every partition is led."""
        reap_leftovers(self.runs_dir)
        self.dir.create()
        (self.dir.root / "topology.yaml").write_text(yaml.safe_dump(self.topology.to_dict(), sort_keys=False))
        self.registry = Registry(self.runs_dir, self.dir.root.name, self.dir.socket_dir())
        self.registry.data["run_dir"] = str(self.dir.root.resolve())
        self.control = ControlClient(self.token)
        self.injector = FaultInjector(self, [], self.topology.seed, self.dir.faults)
        self._write_configs()
        if self.topology.storage.medium == "tmpfs":
            self._mount_tmpfs()
        for spec in self.nodes():
            self._spawn(spec.name)
        self.metrics = MetricsSampler(self.dir.metrics, self._pids)
        self.metrics.start()
        n = len(self.brokers)
        self.wait_until(lambda s: sum(1 for b in s.registered_brokers().values() if not b["fenced"]) == n,
                        timeout=self.scaled(15), what=f"all {n} brokers registered and unfenced")
        self._create_topics()
        self.wait_until(lambda s: s.all_led(), timeout=self.scaled(15), what="every partition led")

    def _write_configs(self) -> None:
        self.configs = build_node_configs(self.topology, self.nodes(), self.dir, self.token, self.time_scale)
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
        if self.mounts.mount(d):
            self.registry.add_mount(d)
            return True
        self.warnings.append(f"medium: tmpfs needs root and mount(8); {spec.name} uses a plain directory")
        return False

    def _spawn(self, name: str) -> None:
        proc = spawn(["-m", "broker.node", "--config", str(self.dir.nodes / f"{name}.json")],
                     self.dir.nodes / f"{name}.log")
        self.procs[name] = proc
        self.stopped.discard(name)
        assert self.registry is not None
        self.registry.add_process(proc.pid)

    def pid(self, name: str) -> int:
        return self.procs[name].pid

    def _pids(self) -> dict[str, int]:
        procs = {**self.procs, **self.client_procs}
        return {n: p.pid for n, p in procs.items() if p.poll() is None}

    def _create_topics(self) -> None:
        topics = [_new_topic(tp.name, tp.partitions, tp.replication_factor, tp.min_insync_replicas, tp.placement,
                             tp.assignment, tp.flush.to_dict()) for tp in self.topology.topics]
        resp = self._admin(CreateTopicsRequest(topics))
        if not isinstance(resp, CreateTopicsResponse):
            raise ClusterError(f"the controller did not answer CreateTopics: {resp!r}")
        bad = {k: v for k, v in resp.errors.items() if v != Errors.NONE.value}
        if bad:
            raise ClusterError(f"topic creation failed: {bad}")

    def _admin(self, request: object) -> object | None:
        """An admin request to the active controller; None if none answered in time. A
        controller that lost its leadership meanwhile says NOT_CONTROLLER: ask the next one."""
        assert self.control is not None
        deadline = time.monotonic() + self.scaled(10)
        while time.monotonic() < deadline:
            active = self.status().controller
            if active is None:
                time.sleep(0.05)  # no active controller yet: poll again, bounded by the deadline
                continue
            resp = self.control.request(self.configs[active["node"]].endpoint, request, timeout=self.scaled(5))
            if not (isinstance(resp, ErrorResponse) and resp.error == Errors.NOT_CONTROLLER):
                return resp
        return None

    # ------------------------------------------------------------------ admin (R32, R35, R36, R38)
    def add_broker(self, broker_id: int, rack: str | None = None) -> str:
        """R38: start a new broker process; it registers with its endpoint (so that brokers,
        controllers and clients that started before it can reach it) and is unfenced once
        caught up. Returns its name once unfenced; ClusterError for an id in use."""
        spec = NodeSpec("broker", broker_id, rack)
        if spec.name in {n.name for n in self.nodes()}:
            raise ClusterError(f"broker id {broker_id} is in use")
        [made] = build_node_configs(self.topology, [spec], self.dir, self.token, self.time_scale).values()
        peers = {name: cfg.endpoint for name, cfg in self.configs.items()} | {spec.name: made.endpoint}
        cfg = dataclasses.replace(made, peers=peers)
        self.configs[spec.name] = cfg
        (self.dir.nodes / f"{spec.name}.json").write_text(cfg.to_json())
        if self.topology.storage.medium == "tmpfs":
            self._mount_data_dir(spec)
        self.brokers.append(spec)
        self._spawn(spec.name)
        self._links_pending.add(spec.name)
        self.sync_links()
        self.wait_until(lambda s: broker_id in s.registered_brokers()
                        and not s.registered_brokers()[broker_id]["fenced"],
                        timeout=self.scaled(15), what=f"{spec.name} registered and unfenced")
        return spec.name

    def remove_broker(self, broker_id: int, on_plan: Callable[[dict], None] | None = None) -> dict:
        """R39: reassign every replica of the broker to the others (as R34 chooses, balanced),
        shut it down under control (R37), then unregister it (its broker epoch is never used
        again). Returns the rebalance's record with `shutdown` (True when the broker exited
        cleanly) and `unregistered` (the controller's answer); RebalanceError, with nothing
        moved, when the brokers that stay cannot hold some partition's replication factor."""
        name = broker_name(broker_id)
        if name not in {s.name for s in self.brokers} or name in self.removed:
            raise ClusterError(f"no broker {broker_id} in this run")
        plan = self.rebalance(leaving=frozenset({broker_id}), on_plan=on_plan)
        clean = self.shutdown_node(name)
        self.removed.add(name)
        refusal = self._unregister(broker_id)
        return plan | {"shutdown": clean, "unregistered": refusal is None} | (
            {"unregister_error": refusal} if refusal else {})

    def _unregister(self, broker_id: int) -> str | None:
        """R39's last step: the controller unregisters a broker that is gone. It refuses while
        the broker's session lives (a last heartbeat in flight), so that is asked again until
        the session has ended; None once done, else why not."""
        def ask() -> object | None:
            return self._admin(UnregisterBrokerRequest(broker_id))

        def session_lives(resp: object | None) -> bool:
            return isinstance(resp, UnregisterBrokerResponse) and resp.error == Errors.INVALID_REQUEST
        try:
            resp = Retrying(stop=stop_after_delay(self.scaled(10)), wait=wait_fixed(0.05),
                            retry=retry_if_result(session_lives))(ask)
        except RetryError as e:
            resp = e.last_attempt.result()
        if not isinstance(resp, UnregisterBrokerResponse):
            return "the controller did not answer"
        return None if resp.error == Errors.NONE else f"{resp.error.value}: {resp.message}"

    def rebalance(self, leaving: frozenset[int] = frozenset(), timeout: float | None = None,
                  on_plan: Callable[[dict], None] | None = None) -> dict:
        """R38/R39: plan the moves that balance the partitions over the brokers (`leaving`
        excluded), start them as reassignments (R35), wait until each has completed, then move
        leadership to the new preferred leaders (R36). Returns the plan as recorded (see
        `broker.protocol.rebalance.Plan.to_dict`) with what was refused; RebalanceError when
        the brokers that stay cannot hold some partition's replication factor. `on_plan` is
        given the plan before the first move (R38: the plan is recorded first)."""
        return self.complete_rebalance(self.begin_rebalance(leaving, on_plan), timeout)

    def begin_rebalance(self, leaving: frozenset[int] = frozenset(),
                        on_plan: Callable[[dict], None] | None = None) -> RebalanceInProgress:
        """The first half of `rebalance`: plan, hand the plan to `on_plan`, start every move;
        the cluster serves (and faults may strike) while the moves run."""
        status = self.status()
        current = {(p.topic, p.partition): list(p.replicas) for p in status.partitions()}
        members = {s.id: s.rack for s in self.brokers if s.name not in self.removed}
        plan = plan_rebalance(current, members, leaving)
        if on_plan is not None:
            on_plan(plan.to_dict())
        refused = {}
        changed = plan.changed(current)
        for (topic, index), replicas in changed.items():
            answer = self.reassign(f"{topic}/{index}", replicas)
            if not answer["accepted"]:
                refused[f"{topic}/{index}"] = f"{answer['error']}: {answer.get('message', '')}"
        moving = {p: r for p, r in changed.items() if f"{p[0]}/{p[1]}" not in refused}
        return RebalanceInProgress(plan.to_dict(), moving, refused, bool(plan.leaders_changed))

    def complete_rebalance(self, r: RebalanceInProgress, timeout: float | None = None) -> dict:
        """The second half: wait until every started move has completed, then elect the new
        preferred leaders."""
        self.wait_until(lambda s: all(s.partition(*p).replicas == t for p, t in r.moving.items()),
                        timeout=timeout if timeout is not None else self.scaled(60),
                        what=f"the rebalance's {len(r.moving)} reassignments completed")
        elected = self.elect_preferred() if r.leaders_changed or r.moving else {"elected": [], "refused": {}}
        return r.plan | {"refused": r.refused, "elected": elected["elected"]}

    def create_topic(self, topic: dict, timeout: float | None = None) -> dict:
        """R40: create a topic while the cluster runs, placed on the brokers up at this moment
        (`topic` is a topics entry as `yaml_dump.topic_to_yaml` writes it), and wait until
        every partition is led. Returns {"created", "partitions"}, or {"error"} when the
        controller refused it."""
        name = topic["name"]
        resp = self._admin(CreateTopicsRequest([_new_topic(
            name, topic["partitions"], topic["replication_factor"], topic["min_insync_replicas"],
            topic["placement"], topic.get("assignment"), scalars.flush(topic["flush"]).to_dict())]))
        if not isinstance(resp, CreateTopicsResponse):
            return {"error": "the controller did not answer CreateTopics"}
        error = resp.errors.get(name, Errors.NONE.value)
        if error != Errors.NONE.value:
            return {"error": f"create-topic {name}: {error}"}
        self._wait_led(name, topic["partitions"], timeout)
        return {"created": name, "partitions": topic["partitions"]}

    def delete_topic(self, name: str, timeout: float | None = None) -> dict:
        """R40: delete a topic; wait until no broker holds a replica of it any more (each one
        closed its replicas and deleted their logs). Returns {"deleted", "partitions"}, with
        "error" too when a broker still held a replica at the deadline; only {"error"} when the
        controller refused."""
        before = len(self._partitions_of(name))
        resp = self._admin(DeleteTopicsRequest([name]))
        if not isinstance(resp, DeleteTopicsResponse):
            return {"error": "the controller did not answer DeleteTopics"}
        error = resp.errors.get(name, Errors.NONE.value)
        if error != Errors.NONE.value:
            return {"error": f"delete-topic {name}: {error}"}
        done = {"deleted": name, "partitions": before}  # committed: its data is gone, whatever follows
        try:
            self.wait_until(lambda s: not any(p.topic == name for p in s.partitions())
                            and not any(r.topic == name for r in s.replicas()),
                            timeout=timeout if timeout is not None else self.scaled(15),
                            what=f"topic {name} gone from the controller and every broker")
        except ClusterError as e:
            return done | {"error": f"delete-topic {name}: {e}"}
        return done

    def add_partitions(self, name: str, count: int, timeout: float | None = None) -> dict:
        """R40: add `count` partitions to a topic (Kafka's CreatePartitions asks for the new
        total), placed on the brokers up now; wait until they are led. Returns
        {"topic", "partitions": [new indexes]} or {"error"}."""
        current = len(self._partitions_of(name))
        resp = self._admin(CreatePartitionsRequest(name, current + count))
        if not isinstance(resp, CreatePartitionsResponse):
            return {"error": "the controller did not answer CreatePartitions"}
        if resp.error != Errors.NONE:
            return {"error": f"add-partitions {name}: {resp.error.value}: {resp.message}".rstrip(": ")}
        self._wait_led(name, current + count, timeout)
        return {"topic": name, "partitions": list(range(current, current + count))}

    def _partitions_of(self, topic: str) -> list[PartitionMetadata]:
        return [p for p in self.status().partitions() if p.topic == topic]

    def _wait_led(self, topic: str, count: int, timeout: float | None) -> None:
        def led(s: ClusterStatus) -> bool:
            parts = [p for p in s.partitions() if p.topic == topic]
            return len(parts) == count and all(
                p.leader >= 0 and (r := s.replica(p.leader, topic, p.partition)) is not None and r.role == "leader"
                for p in parts)
        self.wait_until(led, timeout=timeout if timeout is not None else self.scaled(15),
                        what=f"every partition of {topic} led")

    def reassign(self, partition: str, replicas: list[int]) -> dict:
        """R35: start moving `partition` ("topic/P") to `replicas`; it completes once they are all
        in the ISR. Returns {"accepted": bool, "error", "message"}."""
        topic, index = _split_partition(partition)
        resp = self._admin(AlterPartitionReassignmentsRequest(topic, index, list(replicas)))
        if not isinstance(resp, AlterPartitionReassignmentsResponse):
            return {"accepted": False, "error": "the controller did not answer"}
        return {"accepted": resp.error == Errors.NONE, "error": resp.error.value, "message": resp.message}

    def elect_preferred(self, partition: str | None = None) -> dict:
        """R36: preferred leader election for one partition ("topic/P") or all of them."""
        parts = None if partition is None else [TopicPartition(*_split_partition(partition))]
        return self._elections(ElectLeadersRequest("preferred", parts))

    def elect(self, partition: str, broker: int) -> dict:
        """R32 `manual`: the operator makes `broker` the leader of leaderless `partition`."""
        return self._elections(ElectLeadersRequest("unclean", [TopicPartition(*_split_partition(partition))], broker))

    def _elections(self, request: ElectLeadersRequest) -> dict:
        resp = self._admin(request)
        if not isinstance(resp, ElectLeadersResponse):
            return {"elected": [], "refused": {"*": "the controller did not answer"}}
        return {"elected": sorted(k for k, e in resp.errors.items() if e == Errors.NONE.value),
                "refused": {k: f"{e}: {resp.reasons.get(k, '')}".rstrip(": ")
                            for k, e in sorted(resp.errors.items()) if e != Errors.NONE.value}}

    # ------------------------------------------------------------------ observation
    def status(self, timeout: float = 0.5) -> ClusterStatus:
        """Every running node's own view; the controller's is the active controller's."""
        assert self.control is not None
        quorum: dict[str, dict | None] = {}
        for spec in self.controllers():
            if spec.name in self.stopped or spec.name in self.paused:
                quorum[spec.name] = None
                continue
            quorum[spec.name] = self.control.call(self.configs[spec.name].control_endpoint, "status", timeout=timeout)
        brokers: dict[int, dict | None] = {}
        for spec in self.brokers:
            if spec.name in self.removed:
                continue
            if spec.name in self.stopped or spec.name in self.paused:
                brokers[spec.id] = None
                continue
            brokers[spec.id] = self.control.call(self.configs[spec.name].control_endpoint, "status", timeout=timeout)
        return ClusterStatus.of(quorum, brokers)

    def wait_until(self, predicate: Callable[[ClusterStatus], bool], timeout: float,
                   what: str = "the condition") -> ClusterStatus:
        """Poll the cluster status until `predicate` holds; ClusterError after `timeout`."""
        last: list[ClusterStatus] = []

        def check() -> bool:
            self._check_processes()
            s = self.status()
            last[:] = [s]
            return bool(predicate(s))

        try:
            Retrying(stop=stop_after_delay(timeout), wait=wait_fixed(0.05),
                     retry=retry_if_result(lambda ok: not ok))(check)
        except RetryError:
            raise ClusterError(f"timed out after {timeout:.1f}s waiting for {what} "
                               f"(run dir {self.dir.root})") from None
        return last[0]

    def view(self) -> ClusterView:
        """The snapshot fault targets resolve against (`faults/targets.py`)."""
        return self.status(timeout=self.scaled(0.3)).view(
            brokers={s.name: s.rack for s in self.brokers if s.name not in self.removed},
            controllers=[s.name for s in self.controllers()],
            stopped=self.stopped - self.removed, paused=self.paused)

    def _check_processes(self) -> None:
        for name, proc in self.procs.items():
            if name not in self.stopped and proc.poll() is not None:
                raise ClusterError(f"{name} exited with code {proc.returncode}; see {self.dir.nodes / (name + '.log')}")

    # ------------------------------------------------------------------ clients
    def client(self) -> ClusterClient:
        if self._client is None:
            self._client = ClusterClient(self.broker_endpoints(), "api", request_timeout=self.scaled(2))
        return self._client

    def broker_endpoints(self) -> dict[int, str]:
        return {s.id: self.configs[s.name].endpoint for s in self.brokers}

    def produce(self, topic: str, partition: int, values: list[str], acks: str = "all") -> ProduceResult:
        """One recorded send (process `api`), as a workload producer would make it."""
        if self._api_history is None:
            self._api_history = History(self.dir.history, "api")
        c = self.client()
        self._api_history.send_invoke(topic, partition, values, acks)
        r = c.produce(topic, partition, values, acks)
        self._api_history.send_complete(topic, partition, values, acks, r.error, r.base_offset, r.appended)
        return r

    def start_clients(self, stats_endpoint: str | None, value_bytes: int = 0) -> list[str]:
        """Start the workload's producer and consumer processes; returns their names."""
        assert self.registry is not None
        configs = build_client_configs(self.topology, self.broker_endpoints(), self.dir.history.resolve(),
                                       stats_endpoint, self.time_scale, value_bytes)
        for name, cfg in configs.items():
            path = self.dir.clients / f"{name}.json"
            path.write_text(cfg.to_json())
            proc = spawn(["-m", "testbed.clients.worker", "--config", str(path)], self.dir.clients / f"{name}.log")
            self.client_procs[name] = proc
            self.registry.add_process(proc.pid)
        return list(configs)

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
    def kill(self, name: str) -> int:
        """SIGKILL one node (paused or not); returns its pid."""
        proc = self.procs[name]
        sigkill(proc.pid)
        proc.wait()
        self.stopped.add(name)
        self.paused.discard(name)
        return proc.pid

    def restart(self, name: str) -> int:
        """Start a stopped node again: same id, same data directory, a new incarnation."""
        if name not in self.stopped:
            raise ClusterError(f"{name} is running")
        self._spawn(name)
        self._links_pending.add(name)
        self.sync_links()
        return self.procs[name].pid

    def pause(self, name: str) -> int:
        """SIGSTOP: the process keeps its sockets and state but does nothing."""
        proc = self.procs[name]
        sigstop(proc.pid)
        self.paused.add(name)
        return proc.pid

    def resume(self, name: str) -> int:
        proc = self.procs[name]
        sigcont(proc.pid)
        self.paused.discard(name)
        self._links_pending.add(name)
        self.sync_links()
        return proc.pid

    # ------------------------------------------------------------------ faults
    def fault(self, do: str, target: str | None = None, **params: Any) -> dict:
        """Inject one fault now, as a topology's `faults:` entry would (DESIGN section 9);
        returns its `faults.jsonl` end record (what the target resolved to, the effect)."""
        assert self.injector is not None, "start the cluster first"
        origin = f"api[{self._api_faults}]"
        self._api_faults += 1
        return self.injector.fire(ScheduledFault(0.0, do, target, dict(params), origin))

    # ------------------------------------------------------------------ network (userspace backend)
    def next_link_seq(self) -> int:
        """Link tables are applied only if newer (linkfilter.py): one sequence per run."""
        return self.link_table.seq + 1

    def push_links(self, table: LinkTable) -> dict[str, bool]:
        """Send the link table to every node; a node that cannot take it now gets it later."""
        self.link_table = table
        self._links_pending = {s.name for s in self.nodes()}
        return self.sync_links()

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

    def link_counters(self) -> dict[str, dict]:
        """Messages each running node's filter dropped, delayed or duplicated, per link."""
        out: dict[str, dict] = {}
        s = self.status()
        bodies = [s.controller, *s.brokers.values()]
        for body in bodies:
            for link, counts in (body or {}).get("links", {}).items():
                agg = out.setdefault(link, {})
                for k, v in counts.items():
                    agg[k] = agg.get(k, 0) + v
        return out

    def shutdown_node(self, name: str, timeout: float | None = None) -> bool:
        """Controlled shutdown (R37); True if the node exited by itself in time."""
        assert self.control is not None
        proc = self.procs[name]
        self.control.call(self.configs[name].control_endpoint, "shutdown", timeout=self.scaled(1))
        try:
            proc.wait(timeout=timeout if timeout is not None else self.scaled(10))
            clean = proc.returncode == 0
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            clean = False
        self.stopped.add(name)
        return clean

    def stop_all(self) -> dict[str, bool]:
        """Controlled shutdown of every broker, then the controllers."""
        clean: dict[str, bool] = {}
        for spec in [*self.brokers, *self.controllers()]:
            if spec.name not in self.stopped and self.procs[spec.name].poll() is None:
                clean[spec.name] = self.shutdown_node(spec.name)
        return clean

    def close(self) -> None:
        """Kill whatever still runs, unmount, remove sockets; idempotent, never raises."""
        for name, proc in [*self.procs.items(), *self.client_procs.items()]:
            if proc.poll() is None:
                kill_tree(proc.pid, None)
                proc.wait()
            self.stopped.add(name)
        self.paused.clear()
        try:
            self.mounts.unmount_all()
        except RuntimeError as e:  # a busy mount was lazily detached; say so, do not raise
            self.warnings.append(str(e))
        if self.metrics is not None:
            self.metrics.stop()
        if self.injector is not None:
            self.injector.close()
        for c in (self._client, self.control):
            if c is not None:
                c.close()
        self._client = self.control = None
        if self._api_history is not None:
            self._api_history.close()
            self._api_history = None
        self.dir.remove_sockets()
        if self.registry is not None:
            self.registry.remove()
            self.registry = None


def _new_topic(name: str, partitions: int, replication_factor: int, min_insync_replicas: int, placement: str,
               assignment: dict | None, flush: dict) -> NewTopic:
    return NewTopic(name=name, partitions=partitions, replication_factor=replication_factor,
                    min_insync_replicas=min_insync_replicas, placement=placement,
                    assignment={str(k): list(v) for k, v in (assignment or {}).items()} or None,
                    config={"flush": flush})
