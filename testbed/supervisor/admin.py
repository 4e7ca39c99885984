"""The administration a cluster offers its operator (R32, R35, R36, R38-R40), written once
for every executor: the supervisor's cluster of processes and the simulation's cluster on
virtual time both inherit it, and differ only in the primitives it rests on.

What a subclass provides: `status`, `wait_until` (a condition with a deadline), `retry_while`
(ask again while an answer says so), `_request_node` (one request to a node), `_running`,
`shutdown_node`, `sync_links`, `start_broker`, and the attributes `topology`, `time_scale`,
`dir`, `brokers`, `removed`, `stopped`, `paused`, `link_table` and `_links_pending`. The
network's link table is pushed and its counters read here too, for the fault injector.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from broker.common.errors import Errors
from broker.common.names import broker_name
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
from broker.wire.linkfilter import LinkFilter, LinkTable
from faults.injector import WorkloadEnded
from faults.targets import ClusterView
from testbed.config import scalars
from testbed.supervisor.cluster_status import ClusterStatus
from testbed.supervisor.run_dir import RunDir
from testbed.config.specs import NodeSpec
from testbed.config.topology_spec import Topology


class ClusterError(RuntimeError):
    pass


#: `_admin`'s answer while no controller is active
_NO_ACTIVE = object()
#: why an admin request cut off by the workload's end is not done by the run's end either
#: (trial34: "the end of the run heals and converges" read as if it completed the request)
NOT_ASKED = "no active controller took the request, so it was not made (the end of the run does not make it)"


def split_partition(text: str) -> tuple[str, int]:
    """`TOPIC/P` -> (topic, P); a ClusterError saying the form for anything else."""
    topic, _, index = str(text).rpartition("/")
    if not topic or not index.isdigit():
        raise ClusterError(f"partition {text!r}: expected TOPIC/P, e.g. orders/0")
    return topic, int(index)


@dataclass
class RebalanceInProgress:
    """A rebalance whose moves were started (`Cluster.begin_rebalance`), not yet waited for."""
    plan: dict  # Plan.to_dict(), as recorded before the first move
    moving: dict[tuple[str, int], list[int]]  # partition -> target replicas, the moves accepted
    refused: dict[str, str]  # "topic/P" -> the controller's reason
    leaders_changed: bool


#: how many more rounds a remove-broker makes for replicas placed on its broker while its
#: moves ran (a topic created or grown meanwhile); each covers what the one before waited on
LATER_ROUNDS = 3


def _rounds(first: dict, later: dict) -> dict:
    """Two rounds of a remove-broker's moves as one record: the moves, elections and refusals
    of both, the later round's balance and targets over the first's."""
    return first | later | {
        "moves": first.get("moves", []) + later.get("moves", []),
        "replicas_moved": first.get("replicas_moved", 0) + later.get("replicas_moved", 0),
        "lower_bound": first.get("lower_bound", 0) + later.get("lower_bound", 0),
        "leaders_changed": first.get("leaders_changed", []) + later.get("leaders_changed", []),
        "target": first.get("target", {}) | later.get("target", {}),
        "refused": first.get("refused", {}) | later.get("refused", {}),
        "elected": first.get("elected", []) + later.get("elected", [])}


class ClusterAdmin:
    """Admin requests and the waits that complete them, on top of a subclass's primitives."""

    topology: Topology
    time_scale: float
    dir: RunDir
    brokers: list[NodeSpec]
    removed: set[str]
    leaving: set[int]  # the brokers a remove-broker under way is taking out (R39)
    stopped: set[str]
    paused: set[str]
    #: the network table every node should hold, and the nodes that have not got it yet
    link_table: LinkTable
    _links_pending: set[str]

    def status(self, timeout: float = 0.5) -> ClusterStatus:
        raise NotImplementedError

    #: called at every look of `wait_until` (the fault injector's: faults that fall due while
    #: one waits fire meanwhile; `WorkloadEnded` once the workload's time is up)
    while_waiting: Callable[[], None] | None = None
    #: what a wait's predicate last could not find (its `KeyError`), for the wait's timeout
    missed: str | None = None

    def _looked(self, predicate: Callable[[ClusterStatus], bool], status: ClusterStatus) -> bool:
        """One look of a `wait_until`: whether `predicate` holds, and if not, `_meanwhile`. A
        predicate that asks for a partition the status does not hold (`KeyError`: no active
        controller answered, as in a failover) does not hold yet: the wait looks again, and
        says so if it times out (trial35: README's own `s.partition(...)` ended a wait at once
        after a kill of the active controller)."""
        try:
            held = predicate(status)
        except KeyError as exc:
            self.missed = str(exc).strip("'\"")
            held = False
        if held:
            return True
        self._meanwhile()
        return False

    def _meanwhile(self) -> None:
        """Between two looks of any wait: the faults that fall due meanwhile fire (`while_waiting`)."""
        if self.while_waiting is not None:
            self.while_waiting()

    def wait_until(self, predicate: Callable[[ClusterStatus], bool], timeout: float,
                   what: str = "the condition") -> ClusterStatus:
        raise NotImplementedError

    def retry_while(self, ask: Callable[[], Any], again: Callable[[Any], bool], timeout: float) -> Any:
        """`ask()` until `again(answer)` is false or `timeout` has passed; the last answer."""
        raise NotImplementedError

    def _request_node(self, node: str, request: object, timeout: float) -> object | None:
        """One request to a node's request endpoint; its answer, or None at the timeout."""
        raise NotImplementedError

    def _running(self, name: str) -> bool:
        """The node is up (not stopped, and its process or role alive)."""
        raise NotImplementedError

    def shutdown_node(self, name: str, timeout: float | None = None) -> bool:
        raise NotImplementedError

    def shutdown_ended(self, name: str) -> bool:
        """Whether the node's controlled shutdown has ended (its process gone), counting it
        stopped at once if so. A fault fired inside the shutdown's wait may itself wait for the
        node to come back (a remove-broker whose moves need it): the restart due meanwhile is
        held while the shutdown is under way, and the shutdown's own wait looks again only
        when that fault's wait ends, so both waited to the workload's end. Its wait, when it
        looks, finds the node restarted and leaves it running."""
        raise NotImplementedError

    def sync_links(self) -> dict[str, bool]:
        """Hand the current link table to the nodes that lack it and can take it now."""
        raise NotImplementedError

    def _admin(self, request: object) -> object | None:
        """An admin request to the active controller; None if none answered in time. A
        controller that lost its leadership meanwhile says NOT_CONTROLLER: ask the next one."""
        def ask() -> object:
            active = self.status().controller
            if active is None:
                return _NO_ACTIVE
            self._admin_cut = self._admin_cut_off()  # as it was sent: a heal may come before its timeout
            return self._request_node(active["node"], request, self.scaled(5))

        def again(answer: object) -> bool:
            return answer is _NO_ACTIVE or (isinstance(answer, ErrorResponse) and answer.error == Errors.NOT_CONTROLLER)
        try:
            answer = self.retry_while(ask, again, timeout=self.scaled(10))
        except WorkloadEnded:  # every ask so far found no active controller: nothing completes it later
            raise WorkloadEnded(NOT_ASKED) from None
        return None if again(answer) else answer

    #: the name the link table judges the supervisor's admin requests by: a client's
    #: (`linkfilter.is_client`), as a Kafka admin client is one
    ADMIN_SOURCE = "supervisor"
    #: whether the link table cut the last admin request off every controller when it was sent
    _admin_cut = False

    def _unanswered(self, request: str = "") -> str:
        """Why an admin request failed when no controller answered it. A network fault that
        cuts the clients off the controllers cuts the admin requests too, and the bare "did
        not answer" read as a controller down while `status()` showed it up (trial38)."""
        text = "the controller did not answer" + (f" {request}" if request else "")
        if self._admin_cut:
            text += (" (a network fault in force cuts the clients off the controllers, and admin "
                     "requests go from the clients' side, as a Kafka admin client's do)")
        return text

    def _admin_cut_off(self) -> bool:
        """Whether the link table in force drops the admin requests to every controller, or
        their answers."""
        links = LinkFilter(self.link_table)
        return all(any(rule is not None and rule.drop for rule in (links.rule_for(self.ADMIN_SOURCE, c.name),
                                                                    links.rule_for(c.name, self.ADMIN_SOURCE)))
                   for c in self.controllers())

    def stop_all(self) -> dict[str, bool]:
        """Controlled shutdown of every broker, then the controllers; whether each exited cleanly."""
        return {spec.name: self.shutdown_node(spec.name) for spec in [*self.brokers, *self.controllers()]
                if self._running(spec.name)}

    # ------------------------------------------------------------------ the link table (userspace network)
    def next_link_seq(self) -> int:
        """Link tables are applied only if newer (linkfilter.py): one sequence per run."""
        return self.link_table.seq + 1

    def push_links(self, table: LinkTable) -> dict[str, bool]:
        """Hand the link table to every node; a node that cannot take it now gets it later."""
        self.link_table = table
        self._links_pending = set(self.node_names())
        return self.sync_links()

    def network_rules(self) -> list[str] | None:
        """The kernel rules in force (netns backend); None where the network is userspace only."""
        return None

    def slow_in_kernel(self) -> bool | None:
        """Whether `slow` is carried out by the kernel (netem, netns backend); None where the
        network is userspace only."""
        return None

    def link_counters(self) -> dict[str, dict]:
        """Messages each running node's filter dropped, delayed or duplicated, per link."""
        out: dict[str, dict] = {}
        s = self.status()
        for body in [s.controller, *s.brokers.values()]:
            for link, counts in (body or {}).get("links", {}).items():
                agg = out.setdefault(link, {})
                for k, v in counts.items():
                    agg[k] = agg.get(k, 0) + v
        return out

    def scaled(self, seconds: float) -> float:
        return seconds * self.time_scale

    def _wait_joined(self, spec: NodeSpec) -> None:
        """R38: a broker `start_broker` started is in once registered and unfenced; a
        remove-broker that fired while it started (inside this wait) has ended it for good."""
        self.wait_until(lambda s: spec.name in self.removed or (spec.id in s.registered_brokers()
                        and not s.registered_brokers()[spec.id]["fenced"]),
                        timeout=self.scaled(15), what=f"{spec.name} registered and unfenced")

    def controllers(self) -> list[NodeSpec]:
        """The voters of the controller quorum (R22)."""
        return list(self.topology.cluster.controllers)

    def nodes(self) -> list[NodeSpec]:
        return [*self.controllers(), *self.brokers]

    def node_names(self) -> list[str]:
        return [spec.name for spec in self.nodes()]

    def create_topics(self, topics: list[NewTopic]) -> None:
        """The topology's topics at the start: ClusterError unless every one was created."""
        resp = self._admin(CreateTopicsRequest(topics))
        if not isinstance(resp, CreateTopicsResponse):
            raise ClusterError(f"the controller did not answer CreateTopics: {resp!r}")
        bad = {k: v for k, v in resp.errors.items() if v != Errors.NONE.value}
        if bad:
            raise ClusterError(f"topic creation failed: {bad}")

    def decommission_broker(self, broker_id: int, on_plan: Callable[[dict], None] | None = None) -> dict:
        """R39: reassign every replica of the broker to the others (as R34 chooses, balanced),
        shut it down under control (R37), then unregister it (its broker epoch is never used
        again). Returns the rebalance's record with `shutdown` (True when the broker exited
        cleanly) and `unregistered` (the controller's answer); RebalanceError, with nothing
        moved, when the brokers that stay cannot hold some partition's replication factor;
        ClusterError when it still holds a replica after its rounds (a move the controller
        refused): the broker stays in the cluster, running (or stopped, for a replica placed on
        it while it shut down), never unregistered."""
        name = broker_name(broker_id)
        if name not in {s.name for s in self.brokers} or name in self.removed:
            raise ClusterError(f"no broker {broker_id} in this run")
        self.leaving.add(broker_id)  # a rebalance that fires meanwhile (add-broker) plans without it
        try:
            plan = self._moved_off(broker_id, self.rebalance(leaving=frozenset({broker_id}), on_plan=on_plan), on_plan)
            clean = self.shutdown_node(name)
            # R40 placed a partition made while it shut down on it too, until the controller
            # heard its request (a heartbeat later): moved off the stopped broker as well
            plan = self._moved_off(broker_id, plan, on_plan)
            self.removed.add(name)
        finally:
            self.leaving.discard(broker_id)
        refusal = self._unregister(broker_id)
        return plan | {"shutdown": clean, "unregistered": refusal is None} | (
            {"unregister_error": refusal} if refusal else {})

    def _moved_off(self, broker_id: int, plan: dict, on_plan: Callable[[dict], None] | None) -> dict:
        """More rounds, for replicas placed on the leaving broker after a round planned (R40 places
        a topic created, or partitions added, meanwhile on the brokers unfenced then, this one
        included), each planned and recorded as the first was; `plan` with theirs. ClusterError
        when it still holds a replica after them (R39: its replicas go first)."""
        for _ in range(LATER_ROUNDS):
            if not self._held_by(broker_id):
                break
            # a reassignment under way of a partition it is a replica of (an add-broker's,
            # which this removal fired inside, moving onto it or keeping it) is one the round
            # may not replan (R35: one reassignment at a time): it completes first
            self.wait_until(lambda s: s.controller is not None and not any(
                                (p.adding or p.removing) and broker_id in p.replicas for p in s.partitions()),
                            timeout=self.scaled(60), what=f"the reassignments under way of broker {broker_id}'s "
                                                          f"partitions completed, to move it off them")
            plan = _rounds(plan, self.rebalance(leaving=frozenset({broker_id}), on_plan=on_plan))
        if held := self._held_by(broker_id):  # a move the controller refused keeps it
            raise ClusterError(f"broker {broker_id} still holds replicas of {', '.join(held)} after the rebalance "
                               f"(refused: {plan.get('refused') or 'none'}): it stays in the cluster")
        return plan

    def _held_by(self, broker_id: int) -> list[str]:
        """The partitions ("topic/P") the broker is a replica of that no move under way takes it off."""
        return [f"{p.topic}/{p.partition}" for p in self._controller_status("find the leaving broker's replicas")
                .partitions() if broker_id in p.target_replicas]

    def _unregister(self, broker_id: int) -> str | None:
        """R39's last step: the controller unregisters a broker that is gone. It refuses while
        the broker's session lives (a last heartbeat in flight), so that is asked again until
        the session has ended; None once done, else why not."""
        def ask() -> object | None:
            return self._admin(UnregisterBrokerRequest(broker_id))

        def session_lives(resp: object | None) -> bool:
            return isinstance(resp, UnregisterBrokerResponse) and resp.error == Errors.INVALID_REQUEST
        resp = self.retry_while(ask, session_lives, timeout=self.scaled(10))
        if not isinstance(resp, UnregisterBrokerResponse):
            return self._unanswered()
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
        status = self._controller_status("plan the rebalance")
        # each partition as it will be: a reassignment in progress (a remove-broker's, waiting
        # while this one fires) counts by its target, not by its old and new replicas together
        current = {(p.topic, p.partition): p.target_replicas for p in status.partitions()}
        in_progress = {(p.topic, p.partition) for p in status.partitions() if p.adding or p.removing}
        # the brokers the controller knows: one an add-broker started is no member until it has
        # registered (a plan onto it was refused move by move: "no broker [6]")
        registered = status.registered_brokers()
        members = {s.id: s.rack for s in self.brokers if s.name not in self.removed and s.id in registered}
        # R35: one reassignment of a partition at a time, so those in progress stay as they go
        plan = plan_rebalance(current, members, (leaving | self.leaving) & members.keys(), fixed=frozenset(in_progress))
        if on_plan is not None:
            on_plan(plan.to_dict())
        refused = {}
        changed = plan.changed(current)
        for (topic, index), replicas in changed.items():
            answer = self.alter_reassignment(f"{topic}/{index}", replicas)
            if not answer["accepted"]:
                refused[f"{topic}/{index}"] = f"{answer['error']}: {answer.get('message', '')}"
        moving = {p: r for p, r in changed.items() if f"{p[0]}/{p[1]}" not in refused}
        return RebalanceInProgress(plan.to_dict(), moving, refused, bool(plan.leaders_changed))

    def complete_rebalance(self, r: RebalanceInProgress, timeout: float | None = None) -> dict:
        """The second half: wait until every started move has completed, then elect the new
        preferred leaders. A move onto a broker removed meanwhile (a remove-broker fired inside
        this wait) is superseded: the removal moved its partition on, and says so."""
        def superseded() -> set[tuple[str, int]]:
            return {p for p, t in r.moving.items() if any(broker_name(b) in self.removed for b in t)}

        # each move counts once it has completed, at whatever look: a later change of its
        # partition (a reassign, another rebalance's move, fired meanwhile) does not undo it
        # (waited for at one moment, a move done at 4.5 s and a partition changed at 7 s kept
        # a remove-broker waiting to the workload's end, its broker never removed)
        done: set[tuple[str, int]] = set()

        def moved(s: ClusterStatus) -> bool:
            if s.controller is None:
                return False
            now = {(p.topic, p.partition): p.replicas for p in s.partitions()}
            over = superseded()
            done.update(p for p, t in r.moving.items()  # a partition deleted meanwhile has nothing left to move
                        if now.get(p, t) == t or p in over)
            return len(done) == len(r.moving)
        self.wait_until(moved, timeout=timeout if timeout is not None else self.scaled(60),
                        what=f"the rebalance's {len(r.moving)} reassignments completed")
        elected = self.elect_preferred_leaders() if r.leaders_changed or r.moving else {"elected": [], "refused": {}}
        over = sorted(f"{topic}/{index}" for topic, index in superseded())
        return r.plan | {"refused": r.refused, "elected": elected["elected"]} | ({"superseded": over} if over else {})

    def create_topic(self, topic: dict, timeout: float | None = None) -> dict:
        """R40: create a topic while the cluster runs, placed on the brokers up at this moment
        (`topic` is a topics entry as `yaml_dump.topic_to_yaml` writes it), and wait until
        every partition is led. Returns {"created", "partitions"}, or {"error"} when the
        controller refused it."""
        name = topic["name"]
        resp = self._admin(CreateTopicsRequest([new_topic(
            name, topic["partitions"], topic["replication_factor"], topic["min_insync_replicas"],
            topic["placement"], topic.get("assignment"), scalars.flush(topic["flush"]).to_dict(),
            topic.get("placement_seed"))]))
        if not isinstance(resp, CreateTopicsResponse):
            return {"error": self._unanswered("CreateTopics")}
        error = resp.errors.get(name, Errors.NONE.value)
        if error == Errors.INVALID_REPLICATION_FACTOR.value:  # the numbers behind it, as add-partitions says them
            unfenced = sum(1 for b in self.status().registered_brokers().values() if not b.get("fenced"))
            return {"error": f"create-topic {name}: {error}: replication factor {topic['replication_factor']} "
                             f"with {unfenced} unfenced broker(s) to place it on"}
        if error != Errors.NONE.value:
            return {"error": f"create-topic {name}: {error}"}
        self._wait_led(name, topic["partitions"], timeout)
        return {"created": name, "partitions": topic["partitions"]}

    def delete_topic(self, name: str, timeout: float | None = None) -> dict:
        """R40: delete a topic; wait until no broker holds a replica of it any more (each one
        closed its replicas and deleted their logs). Returns {"deleted", "partitions"}, with
        "error" too when a broker still held a replica at the deadline; only {"error"} when the
        controller refused."""
        status = self._controller_status(f"read topic {name}")
        before, deleted_id = sum(1 for p in status.partitions() if p.topic == name), status.topic_id(name)
        resp = self._admin(DeleteTopicsRequest([name]))
        if not isinstance(resp, DeleteTopicsResponse):
            return {"error": self._unanswered("DeleteTopics")}
        error = resp.errors.get(name, Errors.NONE.value)
        if error != Errors.NONE.value:
            return {"error": f"delete-topic {name}: {error}"}
        done = {"deleted": name, "partitions": before}  # committed: its data is gone, whatever follows
        try:
            # by the topic's id: a topic made again under the name meanwhile (a fault that fired
            # inside this wait) is another topic, whose replicas are not waited for
            self.wait_until(lambda s: s.controller is not None and s.topic_id(name) != deleted_id
                            and not any(r.topic == name and r.topic_id in (deleted_id, None) for r in s.replicas()),
                            timeout=timeout if timeout is not None else self.scaled(15),
                            what=f"topic {name} gone from the controller and every broker")
        except (ClusterError, WorkloadEnded) as e:
            return done | {"error": f"delete-topic {name}: {e}"}
        return done

    def add_partitions(self, name: str, count: int, timeout: float | None = None) -> dict:
        """R40: add `count` partitions to a topic (Kafka's CreatePartitions asks for the new
        total), placed on the brokers up now; wait until they are led. Returns
        {"topic", "partitions": [new indexes]} or {"error"}."""
        current = len(self._partitions_of(name))
        resp = self._admin(CreatePartitionsRequest(name, current + count))
        if not isinstance(resp, CreatePartitionsResponse):
            return {"error": self._unanswered("CreatePartitions")}
        if resp.error != Errors.NONE:
            return {"error": f"add-partitions {name}: {resp.error.value}: {resp.message}".rstrip(": ")}
        self._wait_led(name, current + count, timeout)
        return {"topic": name, "partitions": list(range(current, current + count))}

    def _partitions_of(self, topic: str) -> list[PartitionMetadata]:
        return [p for p in self._controller_status(f"read topic {topic}").partitions() if p.topic == topic]

    def _controller_status(self, why: str) -> ClusterStatus:
        """The status once a controller is active: with none (killed, paused, cut off, or
        electing), the status holds no partitions, and a plan or a count made from it would
        act on an empty cluster (a remove-broker moving nothing before its broker leaves)."""
        try:
            return self.wait_until(lambda s: s.controller is not None, timeout=self.scaled(10),
                                   what=f"an active controller to {why}")
        except WorkloadEnded:
            raise WorkloadEnded(NOT_ASKED) from None

    def _wait_led(self, topic: str, count: int, timeout: float | None) -> None:
        def led(s: ClusterStatus) -> bool:
            parts = [p for p in s.partitions() if p.topic == topic]
            return len(parts) == count and all(
                p.leader >= 0 and (r := s.replica(p.leader, topic, p.partition)) is not None and r.role == "leader"
                for p in parts)
        self.wait_until(led, timeout=timeout if timeout is not None else self.scaled(15),
                        what=f"every partition of {topic} led")

    def alter_reassignment(self, partition: str, replicas: list[int]) -> dict:
        """R35: start moving `partition` ("topic/P") to `replicas`; it completes once they are all
        in the ISR. Returns {"accepted": bool, "message"}, with the controller's "error" when
        it refused (an effect with an `error` is a fault that failed, DESIGN section 6)."""
        topic, index = split_partition(partition)
        resp = self._admin(AlterPartitionReassignmentsRequest(topic, index, list(replicas)))
        if not isinstance(resp, AlterPartitionReassignmentsResponse):
            return {"accepted": False, "error": self._unanswered()}
        if resp.error == Errors.NONE:
            return {"accepted": True, "message": resp.message}
        return {"accepted": False, "error": resp.error.value, "message": resp.message}

    def elect_preferred_leaders(self, partition: str | None = None) -> dict:
        """R36: preferred leader election for one partition ("topic/P") or all of them."""
        parts = None if partition is None else [TopicPartition(*split_partition(partition))]
        return self._elections(ElectLeadersRequest("preferred", parts))

    def elect_leader(self, partition: str, broker: int) -> dict:
        """R32 `manual`: the operator makes `broker` the leader of leaderless `partition`."""
        return self._elections(ElectLeadersRequest("unclean", [TopicPartition(*split_partition(partition))], broker))

    def _elections(self, request: ElectLeadersRequest) -> dict:
        resp = self._admin(request)
        if not isinstance(resp, ElectLeadersResponse):
            return {"elected": [], "refused": {"*": self._unanswered()}}
        return {"elected": sorted(k for k, e in resp.errors.items() if e == Errors.NONE.value),
                "refused": {k: f"{e}: {resp.reasons.get(k, '')}".rstrip(": ")
                            for k, e in sorted(resp.errors.items()) if e != Errors.NONE.value}}

    def view(self) -> ClusterView:
        """The snapshot fault targets resolve against (`faults/targets.py`)."""
        return self.status(timeout=self.scaled(0.3)).view(
            brokers={s.name: s.rack for s in self.brokers if s.name not in self.removed},
            controllers={s.name: s.rack for s in self.controllers()},
            stopped=self.stopped - self.removed, paused=self.paused)


def new_topic(name: str, partitions: int, replication_factor: int, min_insync_replicas: int, placement: str,
              assignment: dict | None, flush: dict, placement_seed: int | None = None) -> NewTopic:
    return NewTopic(name=name, partitions=partitions, replication_factor=replication_factor,
                    min_insync_replicas=min_insync_replicas, placement=placement,
                    assignment={str(k): list(v) for k, v in (assignment or {}).items()} or None,
                    config={"flush": flush}, placement_seed=placement_seed)


def topology_topics(topology: Topology) -> list[NewTopic]:
    """The topology's `topics:` as the CreateTopics request of a cluster's start."""
    return [new_topic(tp.name, tp.partitions, tp.replication_factor, tp.min_insync_replicas, tp.placement,
                      tp.assignment, tp.flush.to_dict(), tp.placement_seed) for tp in topology.topics]
