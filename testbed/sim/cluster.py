"""A cluster of simulated nodes: what the fault injector and the admin operations act on.

It is the simulation's `testbed.supervisor.cluster.Cluster`: the same `ClusterControl` for
`faults/injector.py` (kill, pause, restart, shutdown, the data directories, the link
tables) and the same `ClusterAdmin` (reassignment, elections, brokers and topics added and
removed), with every wait run on the loop's virtual time instead of slept through. Its
status is each role's own `status()`, the body a node's control socket answers.
"""
from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from broker.client import StepClient
from broker.common.jsonl import JsonlBuffer
from broker.noderuntime.config import NodeConfig
from broker.noderuntime.eventlog import EventLog
from broker.wire.linkfilter import LinkFilter, LinkTable
from faults.injector import FaultInjector, WorkloadEnded
from testbed.clients.history import History
from testbed.clients.loops import Clock, Stop, client_loop
from testbed.clients.stats import Tally
from testbed.experiment.counts import Counts
from testbed.sim.clients import ClientTask
from testbed.sim.loop import Loop
from testbed.sim.network import ReplyHandle, SimNetwork
from testbed.sim.node import BOOT, SimNode
from testbed.supervisor.admin import ClusterAdmin, ClusterError, topology_topics
from testbed.supervisor.client_configs import build_client_configs
from testbed.supervisor.cluster_status import ClusterStatus
from testbed.supervisor.node_configs import build_node_configs
from testbed.supervisor.run_dir import RunDir
from testbed.config.loader import FAST_SAFE_DUMPER
from testbed.config.specs import NodeSpec
from testbed.config.topology_spec import Topology

#: how often a wait asks its condition again, as the supervisor polls its nodes
POLL = 0.05
#: the name the operator's admin requests come from (a client, as the supervisor's are)
SUPERVISOR = "supervisor"


class _Operator:
    """The supervisor's end of admin requests: an endpoint that serves nothing."""

    name = SUPERVISOR
    up = True
    paused = False

    def deliver(self, fn: Callable[..., None], *args: Any) -> None:
        fn(*args)

    def on_request(self, handle: ReplyHandle, msg: Any) -> None:
        """Serves nothing."""


class SimCluster(ClusterAdmin):
    def __init__(self, topology: Topology, run_dir: RunDir) -> None:
        self.topology = topology
        self.dir = run_dir
        self.time_scale = 1.0
        self.loop = Loop()
        self.net = SimNetwork(self.loop, random.Random(f"isrlab-sim-net:{topology.seed}"))
        self.net.attach(_Operator())
        self.nodes_by_name: dict[str, SimNode] = {}
        self.configs: dict[str, NodeConfig] = {}
        self.stopped: set[str] = set()
        self._exits: dict[str, int | None] = {}  # a node's exit code, when `shutdown_ended` saw it go
        self.paused: set[str] = set()
        self.brokers: list[NodeSpec] = list(topology.cluster.brokers)
        self.removed: set[str] = set()
        self.leaving: set[int] = set()
        self.link_table = LinkTable(0, {})
        self._links_pending: set[str] = set()
        self._events: list[EventLog] = []
        self.injector: FaultInjector | None = None
        #: the loop's time the schedule's clock counts from while the workload runs (`run_seed`)
        self.workload_start: float | None = None
        self.clients: dict[str, ClientTask] = {}
        self._client_stop = Stop()
        self.clock = Clock(self.loop.clock, self.loop.clock_ns)
        self._histories: list[History] = []
        #: history.jsonl and events.jsonl, each one buffer that every client or node writes
        #: (`start` opens them, `close` writes what they hold)
        self._history_out: JsonlBuffer | None = None
        self._events_out: JsonlBuffer | None = None
        #: what the clients' history records count, as they are written (every client of a
        #: seed writes from this process, in one order)
        self.counts = Counts()

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        """Every node started, the topics created, every partition led (virtual time)."""
        self.dir.create(sockets=False)
        self._history_out, self._events_out = JsonlBuffer(self.dir.history), JsonlBuffer(self.dir.events)
        (self.dir.root / "topology.yaml").write_text(yaml.dump(self.topology.to_dict(), Dumper=FAST_SAFE_DUMPER,
                                                                sort_keys=False))
        self.injector = FaultInjector(self, [], self.topology.seed, self.dir.faults, clock_ns=self.loop.clock_ns,
                                      writeback=self.topology.storage.writeback)
        for spec in self.nodes():
            self._add_node(spec)
        n = len(self.brokers)
        self.wait_until(lambda s: sum(1 for b in s.registered_brokers().values() if not b["fenced"]) == n,
                        timeout=15, what=f"all {n} brokers registered and unfenced")
        self.create_topics(topology_topics(self.topology))
        self.wait_until(lambda s: s.all_led(), timeout=15, what="every partition led")

    def _config(self, spec: NodeSpec) -> NodeConfig:
        [made] = build_node_configs(self.topology, [spec], self.dir, "", 1.0).values()
        names = [s.name for s in self.nodes()] + [spec.name]
        return dataclasses.replace(made, endpoint=spec.name, control_endpoint="", supervisor_pid=0,
                                   peers={name: name for name in names},
                                   storage=dataclasses.replace(made.storage, fsync="simulated"))  # scope.ignored

    def _add_node(self, spec: NodeSpec, boot: bool = False) -> SimNode:
        """A node of the cluster, started: up at once, or with `boot` as a process starts."""
        cfg = self._config(spec)
        self.configs[spec.name] = cfg
        events = EventLog(self.dir.events, spec.name, clock_ns=self.loop.clock_ns, out=self._events_out)
        self._events.append(events)
        seed = self.topology.seed
        node = SimNode(cfg, self.loop, self.net, events, random.Random(f"isrlab-sim:{seed}:{spec.name}"),
                       random.Random(f"isrlab-sim-boot:{seed}:{spec.name}"))
        self.nodes_by_name[spec.name] = node
        self.net.filters[spec.name] = LinkFilter(self.link_table)
        node.start(boot)
        return node

    def close(self) -> None:
        for task in self.clients.values():
            task.kill()
        for node in self.nodes_by_name.values():
            node.kill()
        for h in self._histories:
            h.close()
        if self.injector is not None:
            self.injector.close()
        for events in self._events:
            events.close()
        for out in (self._history_out, self._events_out):
            if out is not None:
                out.close()

    # ------------------------------------------------------------------ what ClusterAdmin rests on
    def status(self, timeout: float = 0.5) -> ClusterStatus:
        quorum = {spec.name: self.nodes_by_name[spec.name].status() for spec in self.controllers()}
        brokers = {spec.id: self.nodes_by_name[spec.name].status() for spec in self.brokers
                   if spec.name not in self.removed}
        return ClusterStatus.of(quorum, brokers)

    def wait_until(self, predicate: Callable[[ClusterStatus], bool], timeout: float,
                   what: str = "the condition") -> ClusterStatus:
        last: list[ClusterStatus] = []

        def check() -> bool:
            last[:] = [self.status()]
            return self._looked(predicate, last[0])
        if not self.loop.run_until(self.loop.now + timeout, check, poll=POLL):
            raise ClusterError(f"timed out after {timeout:.1f}s of virtual time waiting for {what} "
                               f"(run dir {self.dir.root})")
        return last[0]

    def retry_while(self, ask: Callable[[], Any], again: Callable[[Any], bool], timeout: float) -> Any:
        deadline = self.loop.now + timeout
        while True:
            answer = ask()
            if not again(answer) or self.loop.now >= deadline:
                return answer
            self._meanwhile()  # the faults due while it waits fire, as on processes
            self.loop.run_until(min(deadline, self.loop.now + POLL))

    def _request_node(self, node: str, request: object, timeout: float) -> object | None:
        """One request from the operator; the answer, or None at the timeout."""
        got: list[Any] = []
        self.net.request(SUPERVISOR, node, request, timeout, got.append)
        self.loop.run_until(self.loop.now + timeout + POLL, lambda: bool(got), poll=0.0)
        return got[0] if got else None

    # ------------------------------------------------------------------ ClusterControl: processes
    def _pid(self, name: str) -> int:
        """What a fault records as the process it acted on: here, the node's incarnation."""
        return self.nodes_by_name[name].incarnation

    def kill_node(self, name: str) -> int:
        self.nodes_by_name[name].kill()
        self.stopped.add(name)
        self.paused.discard(name)
        return self._pid(name)

    def restart_node(self, name: str) -> int:
        if name not in self.stopped:
            raise ClusterError(f"{name} is running")
        self.net.filters[name] = LinkFilter(self.link_table)  # the supervisor pushes the table it holds
        self.nodes_by_name[name].start(boot=True)
        self.stopped.discard(name)
        self._links_pending.discard(name)
        return self._pid(name)

    def pause_node(self, name: str) -> int:
        self.nodes_by_name[name].pause()
        self.paused.add(name)
        return self._pid(name)

    def resume_node(self, name: str) -> int:
        self.paused.discard(name)
        self.nodes_by_name[name].resume()
        self.sync_links()
        return self._pid(name)

    def shutdown_node(self, name: str, timeout: float | None = None) -> bool:
        """Controlled shutdown (R37); True if the node exited by itself in time. Still up at
        the timeout, or when the workload's time is up (`WorkloadEnded`, raised as the
        process cluster's wait raises it), it is killed. While it waits, the faults that fall
        due fire at their own times (`_meanwhile`), as from the process cluster's wait: the
        wait ran to its end without them, and a kill due at 3 s while a paused broker's
        shutdown waited from 1.5 s fired at the workload's end, 8 s (3.017 s on processes)."""
        node = self.nodes_by_name[name]
        if node.booting:  # the request waits for the starting process's socket, as ZeroMQ holds it
            self.loop.run_until(self.loop.now + BOOT[1], lambda: not node.booting, poll=0.0)
        node.begin_shutdown()
        incarnation = node.incarnation
        over = self.injector.workload_over if self.injector is not None else lambda: False
        deadline = self.loop.now + (timeout if timeout is not None else 10)

        def done() -> bool:
            return not node.started or node.incarnation != incarnation or over()
        try:
            while not done() and self.loop.now < deadline:
                self._meanwhile()
                self.loop.run_until(self._next_look(deadline), done, poll=0.0)
        finally:  # also when a look raised WorkloadEnded: the node is stopped either way
            restarted = node.incarnation != incarnation
            if not restarted:
                clean = not node.up and node.exit_code == 0
                cut = node.up and over()
                if node.started:
                    node.kill()
                self.stopped.add(name)
                self.paused.discard(name)
        if restarted:  # after its exit (`shutdown_ended`): it runs again, as the restart left it
            return self._exits.pop(name, None) == 0
        if cut:
            raise WorkloadEnded()
        return clean

    def shutdown_ended(self, name: str) -> bool:
        node = self.nodes_by_name[name]
        if name not in self.stopped and not node.started:
            self._exits[name] = node.exit_code
            self.stopped.add(name)
            self.paused.discard(name)
        return name in self.stopped

    def _next_look(self, deadline: float) -> float:
        """When a shutdown's wait looks again: at the virtual instant the next fault falls due,
        or a poll from now if it is due already and held back (a restart of a node whose
        shutdown is under way), as the process cluster looks; at the workload's end, where
        the wait gives up; never past `deadline`. Outside the workload, only at the deadline."""
        injector = self.injector
        if injector is None or injector.elapsed is None or self.workload_start is None:
            return deadline
        looks = [deadline]
        due = injector.next_at()
        if due is not None:
            at = self._on_schedule(due)
            looks.append(at if at > self.loop.now else self.loop.now + POLL)
        if injector.duration is not None and self._on_schedule(injector.duration) > self.loop.now:
            looks.append(self._on_schedule(injector.duration))
        return min(looks)

    def _on_schedule(self, at: float) -> float:
        """The first virtual instant at which the schedule's clock (`now - workload_start`)
        reads `at` or later: `workload_start + at` may read just below it."""
        assert self.workload_start is not None
        start = self.workload_start
        t = start + at
        while t - start < at:
            t = math.nextafter(t, math.inf)
        return t

    def _running(self, name: str) -> bool:
        return name not in self.stopped and self.nodes_by_name[name].started

    def data_dir(self, name: str) -> Path:
        return self.dir.data_dir(name)

    def start_broker(self, broker_id: int, rack: str | None = None) -> str:
        spec = NodeSpec("broker", broker_id, rack)
        if spec.name in set(self.node_names()):
            raise ClusterError(f"broker id {broker_id} is in use")
        self.brokers.append(spec)
        for cfg in self.configs.values():
            cfg.peers[spec.name] = spec.name
        self._add_node(spec, boot=True)
        self._wait_joined(spec)
        return spec.name

    # ------------------------------------------------------------------ ClusterControl: the network
    def sync_links(self) -> dict[str, bool]:
        """The table reaches every node that can take it now (running and not paused)."""
        acked = {}
        for name in sorted(self._links_pending):
            if name in self.stopped or name in self.paused:
                continue
            self.net.filters[name].update(self.link_table)
            acked[name] = True
            self._links_pending.discard(name)
        return acked

    # ------------------------------------------------------------------ the workload
    def broker_endpoints(self) -> dict[int, str]:
        return {s.id: s.name for s in self.brokers}

    def history(self, process: str) -> History:
        h = History(self.dir.history, process, clock_ns=self.loop.clock_ns, observe=self.counts.count,
                    out=self._history_out)
        self._histories.append(h)
        return h

    def start_clients(self) -> list[str]:
        configs = build_client_configs(self.topology, self.broker_endpoints(), self.dir.history, None, 1.0)
        for name, cfg in configs.items():
            task = ClientTask(name, self.loop, self.net)
            task.run(client_loop(cfg, StepClient(cfg.brokers, name, cfg.request_timeout), self.history(name),
                                 Tally(), self.clock, self._client_stop))
            self.clients[name] = task
        return list(configs)

    def stop_clients(self, timeout: float) -> None:
        """SIGTERM to every client: each completes its operation in flight, then ends."""
        self._client_stop.requested = True
        self.loop.run_until(self.loop.now + timeout, lambda: all(t.done for t in self.clients.values()), poll=0.0)
        for task in self.clients.values():
            task.kill()
