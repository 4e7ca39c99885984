"""Carries out a run's fault schedule on a live cluster and records it in `faults.jsonl`.

Jepsen's nemesis `invoke!`: at each fault's time it resolves the target against the cluster
as it is at that moment (`faults/targets.py`), acts on processes, files or the network
layers, and records a `start` and an `end` line with what the target resolved to and what
the fault did. After the workload it undoes everything still in force (heal, resume,
restart) so that a loss is never mistaken for unavailability.

The injector acts through `ClusterControl`, the few things it needs of a running cluster
(the supervisor's `Cluster` is one), and owns the network layers it adds and heals.
"""
from __future__ import annotations

import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from broker.common.errors import Errors
from broker.common.jsonl import JsonlAppender
from broker.common.names import node_id
from broker.wire.linkfilter import LinkTable
from faults import network
from faults.network_layers import NetworkLayers, merge_counters
from faults.schedule import ScheduledFault, fault_rng, from_nemesis
from faults.storage import disk_loss, lossy_crash_files
from faults.targets import ClusterView, TargetError, broker_id, resolve

#: actions that take nodes down, counted against a nemesis's max_down
#: the faults that create, delete or grow a topic (R40)
_TOPIC_ADMIN = frozenset({"create-topic", "delete-topic", "add-partitions"})
#: faults on the links alone: they fire at their time even past a fault held back for
#: another's end (a heal may be what that one waits for)
_LINKS = frozenset({"partition", "slow", "heal"})
_DOWN_ACTIONS = frozenset({"kill", "pause", "shutdown", "lossy-crash", "disk-loss", "partition"})
#: the actions that stop a node's process (or its running, for a pause)
_HALTING = frozenset({"kill", "pause", "shutdown", "lossy-crash", "disk-loss"})
#: the origin of the faults of the end of the run's heal (`undo_all`), in faults.jsonl
FINAL_HEAL = "final-heal"
#: DESIGN section 6: `restart` without a target means `stopped`, `resume` means `paused`
DEFAULT_TARGET = {"restart": "stopped", "resume": "paused"}


class _NoLinkToCut(TargetError):
    """A partition whose targets, resolved as it fires, leave no link to cut: an `error`
    effect (it did nothing), not a cut of nothing recorded as applied."""


class WorkloadEnded(RuntimeError):
    """Raised at a look of a wait inside a fault once the workload's time is up: the wait
    gives up, so that the end of the run's heal (which may be what it waits for: a resume of
    the broker its moves need) comes now, not after the wait's timeout."""

    def __init__(self, what: str = "the end of the run heals and converges") -> None:
        super().__init__(f"the workload ended while it waited; {what}")


class ClusterControl(Protocol):
    """What faults need of a running cluster: its processes, their files, their network."""

    stopped: set[str]
    paused: set[str]
    removed: set[str]  # brokers a remove-broker took out (R39)
    #: called at every look of the cluster's waits (`FaultInjector.while_waiting`)
    while_waiting: Callable[[], None] | None

    def node_names(self) -> list[str]: ...
    def view(self) -> ClusterView: ...
    def kill_node(self, name: str) -> int: ...
    def restart_node(self, name: str) -> int: ...
    def pause_node(self, name: str) -> int: ...
    def resume_node(self, name: str) -> int: ...
    def shutdown_node(self, name: str) -> bool: ...
    def shutdown_ended(self, name: str) -> bool: ...
    def data_dir(self, name: str) -> Path: ...
    def next_link_seq(self) -> int: ...
    def push_links(self, table: LinkTable) -> dict[str, bool]: ...
    def link_counters(self) -> dict[str, dict]: ...
    def network_rules(self) -> list[str] | None: ...
    def slow_in_kernel(self) -> bool | None: ...
    def alter_reassignment(self, partition: str, replicas: list[int]) -> dict: ...
    def elect_preferred_leaders(self, partition: str | None = None) -> dict: ...
    def elect_leader(self, partition: str, broker: int) -> dict: ...
    def start_broker(self, broker_id: int, rack: str | None = None) -> str: ...
    def rebalance(self, leaving: frozenset[int] = frozenset(), timeout: float | None = None,
                  on_plan: Callable[[dict], None] | None = None) -> dict: ...
    def decommission_broker(self, broker_id: int, on_plan: Callable[[dict], None] | None = None) -> dict: ...
    def create_topic(self, topic: dict, timeout: float | None = None) -> dict: ...
    def delete_topic(self, name: str, timeout: float | None = None) -> dict: ...
    def add_partitions(self, name: str, count: int, timeout: float | None = None) -> dict: ...


class FaultInjector:
    def __init__(self, cluster: ClusterControl, schedule: list[ScheduledFault], seed: int, record: Path,
                 clock_ns: Callable[[], int] = time.monotonic_ns, writeback: float | None = None) -> None:
        self.cluster = cluster
        self.clock_ns = clock_ns  # the host's one clock; the simulation's virtual one
        #: the OS writeback of the brokers' disks (`storage.writeback`, in seconds of `clock_ns`):
        #: a broker halted at least this long before a power loss had every byte written back
        self.writeback = writeback
        #: when each node halted by a fault (killed, paused, shut down) stopped running, in
        #: `clock_ns`; gone once a fault restarts or resumes it
        self._halted_ns: dict[str, int] = {}
        self.seed = seed
        self.out = JsonlAppender(record)
        self.layers = NetworkLayers()
        #: each fault draws from its own rng (targets, halves, loss points), so its choices
        #: do not depend on how many draws the faults before it made
        self.rng = random.Random()
        self.pending = sorted(schedule, key=lambda f: f.at)
        self.done: dict[str, list[str]] = {}  # origin -> nodes it acted on
        #: the schedule's clock (seconds since the workload began), set by the runner while the
        #: workload runs: faults that fall due while another one waits fire from inside its wait
        self.elapsed: Callable[[], float] | None = None
        #: the workload's length on that clock, set with `elapsed`: no fault's wait outlives it
        self.duration: float | None = None
        self._firing = 0  # faults being fired now (an outer one, and one it let fire while it waited)
        self._outer_at: float | None = None  # when the outermost of them began, on the schedule's clock
        self._meanwhile: list[dict] = []  # end records of the faults fired while another waited
        self._shutting_down: set[str] = set()  # nodes whose controlled shutdown is under way
        self._topics_in_admin: set[str] = set()  # topics a create, delete or add-partitions is under way on
        cluster.while_waiting = self.while_waiting

    # ------------------------------------------------------------------ schedule
    def load(self, schedule: list[ScheduledFault]) -> None:
        """The faults to fire from now on, by `fire_due`."""
        self.pending = sorted(schedule, key=lambda f: f.at)

    def next_at(self) -> float | None:
        return self.pending[0].at if self.pending else None

    def fire_due(self, elapsed: float) -> list[dict]:
        """Fire every fault whose time has come; returns their end records (with those of
        the faults that fired while one of them waited, in the order they ended)."""
        return self._fire_while(lambda f: f.at <= elapsed)

    def fire_overdue(self, duration: float) -> list[dict]:
        """At the workload's end: fire the faults due by `duration` that one waiting past it
        held back (late, not never: the workload's end does not wait for a fault), and those
        due at the end itself (`at` equal to the duration is in the run)."""
        return self._fire_while(lambda f: f.at <= duration)

    def _fire_while(self, due: Callable[[ScheduledFault], bool]) -> list[dict]:
        ends = []
        while self.pending and due(self.pending[0]):
            end = self.fire(self.pending.pop(0))
            if self._firing == 0:
                ends.extend(self._meanwhile)
                self._meanwhile.clear()
            ends.append(end)
        return ends

    def while_waiting(self) -> None:
        """Called at every look of the cluster's `wait_until`. While a fault waits (a
        remove-broker for its reassignments, a create-topic for its leaders), the faults
        that fall due meanwhile fire as the schedule says: a restart at 3s is what lets a
        remove-broker begun at 2s finish, and it must not wait for it. So do those due while
        one of these waits in turn (an add-broker inside a remove-broker's wait, whose own
        moves wait for a resume due later: one level deep, the resume waited 60 s). Once the
        workload's time is up the wait gives up (`WorkloadEnded`): an add-broker whose moves
        needed a paused broker held the end of the run's heal, which resumes it, back for its
        60 s timeout; the faults still due fire after it, late (`fire_overdue`)."""
        if self._firing < 1 or self.elapsed is None:
            return
        if self.workload_over():
            raise WorkloadEnded()
        rng = self.rng
        now = self.elapsed()
        try:
            while (f := self._next_free(now)) is not None:
                self.pending.remove(f)
                self._meanwhile.append(self.fire(f))
        finally:
            self.rng = rng

    def _next_free(self, now: float) -> ScheduledFault | None:
        """The first fault due by `now` that may fire inside another's wait: not one held back
        for another's end (`_restarts_shutting_down`, `_same_topic_under_way`), nor one after
        it, which keeps its place in the schedule, but for faults on the links alone. A delete
        waiting for a broker cut off from the controller held a create of its topic, and the
        create held the heal after it, the one fault that could end the delete's wait: the cut
        lasted until the workload's end, 4 s longer than the schedule said."""
        held = False
        for f in self.pending:
            if f.at > now:
                return None
            if self._restarts_shutting_down(f) or self._same_topic_under_way(f) or (held and f.do not in _LINKS):
                held = True
                continue
            return f
        return None

    def workload_over(self) -> bool:
        """A fault that began inside the workload is firing, and the workload's time is up: its
        wait should give up. One that begins at the end (due then, or held back until then by
        another's wait) keeps its own timeout: a `shutdown` due at the end would be cut at its
        first look and killed, never clean."""
        return (self._firing > 0 and self.elapsed is not None and self.duration is not None
                and self._outer_at is not None and self._outer_at < self.duration
                and self.elapsed() >= self.duration)

    def _restarts_shutting_down(self, f: ScheduledFault) -> bool:
        """`f` is a restart that may name a node whose controlled shutdown is under way: it
        waits (with the faults after it) for that node to exit, then restarts it, late. Fired
        inside the wait it found the node still running and restarted nothing, and the node
        stayed down (a tester's `restart` 100 ms after a `shutdown`). A node that has exited
        is counted stopped then (`shutdown_ended`), though the shutdown's wait has not looked
        again: a fault fired inside that wait may be waiting for the node to come back."""
        if f.do != "restart" or not self._shutting_down:
            return False
        named = self._shutting_down
        if f.target not in (None, "stopped"):
            # a throwaway rng: the waiting fault's own draws stay its own
            named = named.intersection(resolve(f.target, self.cluster.view(), random.Random(0)))
        return not all([self.cluster.shutdown_ended(n) for n in sorted(named)])

    def _same_topic_under_way(self, f: ScheduledFault) -> bool:
        """`f` is a topic fault on a topic another one is still under way on (a delete waiting
        for an active controller, or for its replicas to go): it waits (with the faults after
        it) for that one to end. Fired inside the wait, a `create-topic` after a `delete-topic`
        of its name found the name still taken (TOPIC_ALREADY_EXISTS), and the delete then took
        the topic for the rest of the run: the schedule's order reversed. Faults on the links
        after it fire at their time (`_next_free`)."""
        return f.do in _TOPIC_ADMIN and _topic_name(f) in self._topics_in_admin

    # ------------------------------------------------------------------ one fault
    def _resolve(self, target: str | None, view: ClusterView) -> list[str]:
        if target is None:
            return []
        return resolve(target, view, self.rng)

    def fire(self, f: ScheduledFault) -> dict:
        if self._firing == 0:
            self._outer_at = self.elapsed() if self.elapsed is not None else None
        self._firing += 1
        try:
            return self._fire(f)
        finally:
            self._firing -= 1

    def _shutdown(self, node: str) -> bool:
        self._shutting_down.add(node)
        try:
            return self.cluster.shutdown_node(node)
        finally:
            self._shutting_down.discard(node)

    def _shutdowns(self, nodes: list[str]) -> dict[str, Any]:
        """R37, one node after another. A shutdown whose wait the workload's end cut was killed,
        as at its timeout, and the nodes after it are left running: what it gave up is said as
        `gave_up`, not as an `error`, which would tell the analysis that nothing happened."""
        clean: dict[str, bool] = {}
        for n in nodes:
            try:
                clean[n] = self._shutdown(n)
            except WorkloadEnded as e:
                return {"clean": clean | {n: False}, "gave_up": f"shutdown: {e}"}
        return {"clean": clean}

    def _fire(self, f: ScheduledFault) -> dict:
        self.rng = fault_rng(self.seed, f.origin)
        view = self.cluster.view()
        undo_of = f.params.get("undo_of")
        try:
            if undo_of is not None:
                resolved = list(self.done.pop(undo_of, []))
            else:
                resolved = self._resolve(f.target or DEFAULT_TARGET.get(f.do), view)
        except TargetError as e:
            resolved, error = [], str(e)
        else:
            error = None
        if f.do == "partition" and f.params.get("shape") == "isolate" and not resolved and error is None:
            error = f"isolate: target {f.target!r} resolved to no node"
        params = {k: v for k, v in f.params.items()}
        base = {"do": f.do, "target": f.target, "resolved": resolved, "params": params, "origin": f.origin}
        self._record({**base, "phase": "start"})
        if error is not None:
            effect: dict[str, Any] = {"error": error}
        elif f.do != "partition" and self._exceeds_max_down(f, resolved):
            effect = {"skipped": "max_down"}
        else:
            undone = from_nemesis(f.origin) and undo_of is None and bool(resolved)
            if undone and f.do != "partition":
                # before it acts: its undo may fall due inside its wait (a shutdown's), and
                # once its node has exited (`_restarts_shutting_down`) it restarts that node
                self.done[f.origin] = list(resolved)
            try:
                # the nodes' states it acts on, for what it leaves unchanged; not an undo's: it
                # names the nodes its fault took, and one it finds as it would leave them is
                # said of no one (a removed broker's restart, R39)
                c, asked = self.cluster, f.do in _ACTED and undo_of is None
                before = (set(c.stopped), set(c.paused), set(c.removed)) if asked else None
                effect = self._apply(f, resolved, view)
                if before is not None and (unchanged := _unchanged(f.do, resolved, effect, *before)):
                    effect["unchanged"] = unchanged
            except WorkloadEnded as e:  # an admin request asked again while no controller was active
                effect = {"error": f"{f.do}: {e}"}
            except TargetError as e:  # a partition's or slow link's ends, resolved as it fires
                effect = {"error": str(e)}
            if undone and f.do == "partition":
                self.done[f.origin] = effect.get("isolated", resolved)
        return self._record({**base, "phase": "end", "effect": effect})

    def _exceeds_max_down(self, f: ScheduledFault, resolved: list[str]) -> bool:
        limit = f.params.get("max_down")  # set on every nemesis fault
        if f.do not in _DOWN_ACTIONS or "undo_of" in f.params or limit is None:
            return False
        c = self.cluster
        # a removed broker is gone from the cluster (R39), not down: it stays stopped for good
        down = (set(c.stopped) | set(c.paused) | self.layers.isolated() | set(resolved)) - c.removed
        return len(down) > limit

    def _record(self, line: dict) -> dict:
        """Write `line` to faults.jsonl with the time; the line as written. A `start` line has
        DESIGN section 7's `effect` too, empty: what a fault did is known at its `end`."""
        written = {"time_ns": self.clock_ns(), **line}
        written.setdefault("effect", {})
        self.out.write(written)
        return written

    # ------------------------------------------------------------------ actions
    def _apply(self, f: ScheduledFault, nodes: list[str], view: ClusterView) -> dict[str, Any]:
        c = self.cluster
        do = f.do
        # R39: a removed broker never runs again, whichever fault names it (the undo of a kill
        # that struck it before its removal restarted it, and it registered anew)
        nodes = [n for n in nodes if n not in c.removed]
        up = [n for n in nodes if n not in c.stopped]
        # when each node stopped running (None: it runs now), before this fault halts it
        halted = {n: self._halted_ns.get(n) if n in c.stopped or n in c.paused else None for n in nodes}
        if do in _HALTING:
            now = self.clock_ns()
            for n in up:
                self._halted_ns[n] = now if halted[n] is None else halted[n]  # a paused node: at its pause
        elif do in ("restart", "resume"):
            for n in nodes:
                self._halted_ns.pop(n, None)
        if do == "kill":
            return {"killed": {n: c.kill_node(n) for n in up}}
        if do == "pause":
            return {"paused": {n: c.pause_node(n) for n in up if n not in c.paused}}
        if do == "resume":
            return {"resumed": {n: c.resume_node(n) for n in nodes if n in c.paused}}
        if do == "restart":
            return {"restarted": {n: c.restart_node(n) for n in nodes if n in c.stopped}}
        if do == "shutdown":
            return self._shutdowns(up)
        # A power loss or a lost disk happens to the machine (DESIGN section 4): a node already
        # down loses what its page cache or its disk held all the same, with no process to kill.
        if do == "lossy-crash":
            effect: dict[str, Any] = {"killed": {}, "files": {}}
            for n in nodes:
                if n in up:
                    effect["killed"][n] = c.kill_node(n)
                if n.startswith("broker-"):
                    written_back = self._written_back(halted[n])
                    if written_back:  # said, or its empty `files` would read as nothing unflushed
                        effect.setdefault("written_back", []).append(n)
                    effect["files"][n] = lossy_crash_files(c.data_dir(n), f.params["loss"], self.rng, written_back)
            return effect
        if do == "disk-loss":
            effect = {"killed": {}, "removed": {}}
            voters = [n for n in c.node_names() if n.startswith("controller-")]
            for n in nodes:
                if n in up:
                    effect["killed"][n] = c.kill_node(n)
                if n.startswith("broker-") or len(voters) > 1:
                    # a voter of a quorum loses its Raft log and vote too, and rejoins empty
                    effect["removed"][n] = disk_loss(c.data_dir(n))
                    if n.startswith("controller-"):
                        effect.setdefault("caveats", []).append(
                            f"{n} forgot its Raft vote: it can vote again in the term it voted in, so two "
                            f"leaders of one term become possible (Raft assumes a durable vote; Kafka guards "
                            f"this with KIP-853's directory ids, not modelled); metadata_divergence counts it")
                else:
                    effect.setdefault("kept", {})[n] = "the only controller's log is all the metadata there is"
            return effect
        if do in ("partition", "slow", "heal"):
            return self._network(f, nodes, view)
        if do == "reassign":
            return _refusal_as_error(c.alter_reassignment(f.params["partition"], list(f.params["replicas"])))
        if do == "elect-preferred":
            return _refusal_as_error(c.elect_preferred_leaders(f.params.get("partition")), preferred=True)
        if do in ("add-broker", "remove-broker"):
            return self._membership(f)
        if do in _TOPIC_ADMIN:
            return self._topic_admin(f)
        if do == "elect":
            brokers = [n for n in nodes if n.startswith("broker-")]
            if len(brokers) != 1:
                return {"error": f"elect: target {f.target!r} resolved to {nodes}, expected one broker"}
            return _refusal_as_error(c.elect_leader(f.params["partition"], node_id(brokers[0])))
        raise ValueError(f"unknown fault action {do!r}")

    def _written_back(self, halted_ns: int | None) -> bool:
        """Whether a node halted at `halted_ns` (None: running until now) has had every byte
        it wrote made durable by the kernel's writeback, which goes on while the process is
        stopped or dead: its last write is at least `writeback` old."""
        if halted_ns is None or self.writeback is None:
            return False
        return self.clock_ns() - halted_ns >= self.writeback * 1e9

    def _membership(self, f: ScheduledFault) -> dict[str, Any]:
        """R38/R39: a broker joins (and, unless `rebalance: false`, takes its share by a
        rebalance), or leaves after handing its replicas over. The rebalance is a line pair of
        its own in faults.jsonl (`do: rebalance`, the fault's origin): its `start` holds the
        plan, written before the first move, its `end` the outcome, which the fault's effect
        repeats. A refusal or a rebalance that does not complete is the fault's error, not
        the run's end."""
        c = self.cluster
        rebalance = {"do": "rebalance", "target": f.target, "resolved": [], "origin": f.origin}
        planned: list[dict] = []

        def record_plan(plan: dict) -> None:  # R38: the plan is on record before the first move
            planned.append(plan)
            self._record({**rebalance, "params": {"plan": plan}, "phase": "start"})
        effect: dict[str, Any] = {}
        try:
            if f.do == "add-broker":
                broker = f.params["broker"]
                effect["added"] = c.start_broker(broker["id"], broker["rack"])
                if f.params.get("rebalance", True):
                    effect["rebalance"] = c.rebalance(on_plan=record_plan)
            else:
                effect = {"removed": f.target, "rebalance": c.decommission_broker(broker_id(str(f.target)), record_plan)}
                if effect["rebalance"].get("unregister_error"):  # shut down, never unregistered: the fault failed
                    effect["error"] = f"{f.do}: not unregistered: {effect['rebalance']['unregister_error']}"
        except (RuntimeError, ValueError) as e:  # ClusterError, RebalanceError
            # a broker that started stays added when its rebalance fails: the analysis reads
            # its rack from `added` (an API add-broker's, which the topology does not name)
            effect = {k: v for k, v in effect.items() if k == "added"} | {"error": f"{f.do}: {e}"}
        if planned:
            self._record({**rebalance, "params": {}, "phase": "end",
                          "effect": effect.get("rebalance", {"error": effect.get("error")})})
        return effect

    def _topic_admin(self, f: ScheduledFault) -> dict[str, Any]:
        """R40: a topic created, deleted or grown while the workload runs; a refusal, or a
        change the brokers do not carry out in time, is the fault's error."""
        c, p = self.cluster, f.params
        name = _topic_name(f)
        self._topics_in_admin.add(name)
        try:
            if f.do == "create-topic":
                return c.create_topic(p["topic"])
            if f.do == "delete-topic":
                return c.delete_topic(p["topic"])
            return c.add_partitions(p["topic"], p["count"])
        except RuntimeError as e:  # a wait that timed out (ClusterError)
            return {"error": f"{f.do}: {e}"}
        finally:
            self._topics_in_admin.discard(name)

    def _network(self, f: ScheduledFault, nodes: list[str], view: ClusterView) -> dict[str, Any]:
        """Partition and slow add a layer; heal removes the layer it undoes, or all of them.
        On the netns backend the effect also lists the kernel rules in force after it."""
        effect = self._network_layers(f, nodes, view)
        rules = self.cluster.network_rules()
        if rules is not None and "skipped" not in effect:
            effect["kernel_rules"] = rules
            if f.do == "slow" and self.cluster.slow_in_kernel() is False:
                effect["slowed_by"] = "the nodes' link filters: this kernel has no netem"
        return effect

    def _network_layers(self, f: ScheduledFault, nodes: list[str], view: ClusterView) -> dict[str, Any]:
        c = self.cluster
        all_nodes = c.node_names()
        p = f.params
        if f.do == "heal":
            undo_of = p.get("undo_of")
            healed = [undo_of] if undo_of is not None else self.layers.origins()
            dropped = self.layers.remove(healed, c.link_counters())
            self._push(all_nodes)
            return {"healed": sorted(dropped), "dropped_by_link": merge_counters(list(dropped.values()))}
        if f.do == "slow":
            src = self._targets(p.get("from"), view) or all_nodes
            dst = self._targets(p.get("to"), view) or all_nodes
            table = network.slow_table(src, dst, p.get("delay", 0.0), p.get("jitter", 0.0),
                                       p.get("loss", 0.0), p.get("duplicate", 0.0), 0)
            self.layers.add(f.origin, table, [], c.link_counters())
            self._push(all_nodes)
            return {"from": sorted(src), "to": sorted(dst), "table": table.to_dict()}  # the ends as resolved
        plan = self._plan_partition(f, nodes, view, all_nodes)
        if plan is None:
            return {"skipped": "max_down"}
        groups, isolated, table = plan
        self.layers.add(f.origin, table, isolated, c.link_counters())
        acked = self._push(all_nodes)
        effect = {"groups": groups, "isolated": isolated, "table": table.to_dict(), "pushed": acked}
        bridged = sorted({n for g in groups for n in g if sum(n in h for h in groups) > 1})
        if bridged:  # a node in two groups talks to both: said, in case a broad name put it there
            effect["bridged"] = bridged
        return effect

    def _push(self, all_nodes: list[str]) -> dict[str, bool]:
        c = self.cluster
        return c.push_links(self.layers.compose(all_nodes, c.next_link_seq()))

    def _plan_partition(self, f: ScheduledFault, nodes: list[str], view: ClusterView, all_nodes: list[str]
                        ) -> tuple[list[list[str]], list[str], LinkTable] | None:
        """The groups, the nodes cut off from the controller, and the table; None past max_down."""
        p = f.params
        if p.get("shape") == "one-way":
            src, dst = self._targets(p["from"], view), self._targets(p["to"], view)
            if not any(a != b for a in src for b in dst):  # as `validate` refuses `from: X, to: X`
                raise _NoLinkToCut(f"one-way: from {p['from']} ({', '.join(src) or 'no node'}) and to {p['to']} "
                                   f"({', '.join(dst) or 'no node'}) resolved to no link between two nodes")
            return [src, dst], [], network.one_way_table(src, dst, all_nodes, 0)
        if "groups" in p:
            named = [sorted({n for member in g for n in self._targets(member, view)}) for g in p["groups"]]
            groups = network.effective_groups(named, all_nodes)  # recorded as applied: the unnamed in the last
        else:
            groups = network.shape_groups(p["shape"], all_nodes, nodes, self.rng)
        reach = {n for g in _quorum_side(groups, view) for n in g}
        isolated = sorted({n for g in groups for n in g} - reach - {"clients"})
        if self._exceeds_max_down(f, isolated):
            return None
        return groups, isolated, network.partition_table(groups, all_nodes, 0)

    def _targets(self, spec: Any, view: ClusterView) -> list[str]:
        if spec is None:
            return []
        specs = spec if isinstance(spec, list) else [spec]
        out: list[str] = []
        for s in specs:
            out.extend(self._resolve(str(s), view))
        return out

    # ------------------------------------------------------------------ the end of the workload
    def undo_all(self) -> dict:
        """Heal the network, resume paused nodes, restart stopped ones (DESIGN section 6)."""
        c = self.cluster
        self.pending.clear()
        healed = self.fire(ScheduledFault(0.0, "heal", None, {}, FINAL_HEAL)) if self.layers else None
        resumed = self.fire(ScheduledFault(0.0, "resume", "paused", {}, FINAL_HEAL)) if c.paused else None
        restarted = self.fire(ScheduledFault(0.0, "restart", "stopped", {}, FINAL_HEAL)) if c.stopped else None
        return {"heal": healed, "resume": resumed, "restart": restarted}

    def close(self) -> None:
        self.out.close()


#: the key of a process action's effect naming the nodes it acted on
_ACTED = {"kill": "killed", "pause": "paused", "resume": "resumed", "restart": "restarted", "shutdown": "clean"}


def _unchanged(do: str, nodes: list[str], effect: dict, stopped: set[str], paused: set[str],
               removed: set[str]) -> dict[str, str]:
    """The nodes a process action left as they were, with why, from their states before it
    (`stopped`, `paused`, `removed`): a kill of a node down already recorded `killed {}`,
    which read as done (trial35), and a restart of a running one nothing at all. A lossy
    crash or a disk loss of a node down still loses its data: it is not listed."""
    acted = effect.get(_ACTED.get(do, ""))
    if not isinstance(acted, dict) or "error" in effect or "gave_up" in effect:
        return {}
    out = {}
    for n in (n for n in nodes if n not in acted):
        if (why := why_unchanged(do, n, stopped, paused, removed)) is not None:
            out[n] = why
    return out


def why_unchanged(do: str, node: str, stopped: set[str], paused: set[str], removed: set[str]) -> str | None:
    """Why process action `do` (kill, pause, resume, restart, shutdown) leaves `node` as it is,
    given the nodes stopped, paused and removed before it; None when it acts on it. The
    injector records it as `unchanged`; the Python API's shortcuts refuse with it (trial38)."""
    if node in removed:
        return "removed from the cluster (R39)"
    if do == "restart":
        return None if node in stopped else "running already"
    if node in stopped:
        return "not running"
    if do == "pause" and node in paused:
        return "paused already"
    if do == "resume" and node not in paused:
        return "not paused"
    return None


def _quorum_side(groups: list[list[str]], view: ClusterView) -> list[list[str]]:
    """The groups of a partition that keep the cluster's controller, whose nodes are not cut
    off: those holding a majority of the voters, which keep or elect the active controller
    (R22); where no group holds one, those with the active controller (a bridge shares a
    group with both sides); without one either, the largest. Counted from the active
    controller alone, isolating it cut off every other node, and a nemesis
    `partition-isolate` of `active-controller` under any `max_down` below their number was
    always skipped (trial29), though the others elected a new controller at once."""
    voters = set(view.controllers)
    majority = [g for g in groups if 2 * len(voters.intersection(g)) > len(voters)]
    if majority:
        return majority
    return [g for g in groups if view.active_controller in g] or [max(groups, key=len, default=[])]


def _refusal_as_error(effect: dict, preferred: bool = False) -> dict:
    """An admin action the controller refused is recorded with the reason as its `error`; the
    run goes on (DESIGN section 6). A preferred election where every preferred replica leads
    already did what was asked (R36; Kafka's tool reports such partitions as "valid replica
    already elected"), and every elect-preferred on a healthy cluster read as a failure."""
    if effect.get("accepted") is False:
        return {**effect, "error": f"{effect.get('error')}: {effect.get('message', '')}".rstrip(": ")}
    refused = effect.get("refused") or {}
    if preferred:  # nor does its error list those partitions: one on every partition ran to a screen's width
        refused = {k: v for k, v in refused.items() if not str(v).startswith(Errors.ELECTION_NOT_NEEDED.value)}
    if not effect.get("elected", True) and refused:
        return {**effect, "error": "; ".join(f"{k}: {v}" for k, v in refused.items())}
    return effect


def _topic_name(f: ScheduledFault) -> str:
    """The topic a topic fault names (a `create-topic` gives the whole topic)."""
    topic = f.params["topic"]
    return topic["name"] if isinstance(topic, dict) else topic

