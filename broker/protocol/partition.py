"""One replica of one partition, leader or follower, as a pure state machine.

Kafka's `Partition` plus the follower half of its replica fetcher. Every input (a metadata
record, a produce, a fetch from a follower or consumer, a fetch result from the leader, an
AlterPartition answer, the passage of time) returns an `Outputs`; the runtime performs its
disk operations before anything else, so the in-memory LEO and epoch history here always
describe what the disk will hold. Time arrives as `now` (seconds); nothing here does I/O.

Which broker the follower fetches from, and when, is `broker/protocol/fetcher.py`'s job;
what the leader knows of each follower lives in `broker/protocol/replica_state.py`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

from broker.common.errors import Errors
from broker.common.record_batch import CorruptBatch, record_set_count, scan_batches
from broker.protocol.epochs import UNDEFINED_EPOCH, EpochHistory
from broker.protocol.messages import (
    ACKS,
    ACKS_ALL,
    AlterPartitionRequest,
    AlterPartitionResponse,
    DivergingEpoch,
    FetchPartition,
    FetchPartitionResult,
    IsrMember,
    ProduceRequest,
    ProduceResponse,
)
from broker.protocol.outputs import (
    AppendBatches,
    AppendRecords,
    AssignEpoch,
    CheckpointHighWatermark,
    Outputs,
    Reply,
    Send,
    Truncate,
)
from broker.protocol.records import NO_LEADER, PartitionRecord
from broker.protocol.replica_state import FollowerState, PendingProduce
from broker.protocol.settings import TRUNCATION_MODES, ProtocolSettings, Timeouts

LEADER = "leader"
FOLLOWER = "follower"
NO_ROLE = "none"


#: the errors of the fetch path, looked up once: an attribute of an Enum class goes through
#: its metaclass's `__getattr__` hook on every lookup (Python 3.11), several times a fetch
_NONE = Errors.NONE
_NOT_LEADER_OR_FOLLOWER = Errors.NOT_LEADER_OR_FOLLOWER
_OFFSET_OUT_OF_RANGE = Errors.OFFSET_OUT_OF_RANGE
#: AlterPartition answers saying the leader's view is stale: the controller moved on (R16)
_INCONSISTENT_TOPIC_ID = Errors.INCONSISTENT_TOPIC_ID
#: what a follower asks for at most in one fetch of a partition (FetchPartition's default)
_MAX_FETCH_BYTES = 1 << 20
_STALE_VIEW = frozenset({Errors.FENCED_LEADER_EPOCH, Errors.UNKNOWN_LEADER_EPOCH, Errors.INVALID_UPDATE_VERSION})
#: builds a `ReadSpec` from its values as the class's call does, without the call's Python frame
_tuple_new = tuple.__new__
#: hwm-advanced events are sampled: at most one per partition per this many seconds, plus
#: the first advance of every leader term.
HWM_EVENT_INTERVAL = 0.1


@dataclass
class PartitionConfig:
    """The protocol settings one partition replica runs with (parsed at the edge)."""

    min_insync_replicas: int
    replica_lag_max: float  # seconds (R17)
    truncation: str = "leader-epoch"  # or "high-watermark" (R13)
    elr: bool = True  # KIP-966 HWM rule (R15)
    produce_timeout_default: float = 5.0  # seconds, for a produce with timeout_ms <= 0
    alter_partition_timeout_ms: int = 5000  # the runtime's timeout for an AlterPartition Send
    #: after a rejected or timed-out AlterPartition, wait this long before proposing again,
    #: so a persistent rejection (INELIGIBLE_REPLICA) does not become a request per tick
    alter_partition_backoff: float = 0.1
    hwm_checkpoint_interval: float = 5.0  # seconds between HWM checkpoints (Kafka: 5 s)

    @classmethod
    def from_settings(cls, min_insync_replicas: int, timeouts: Timeouts,
                      protocol: ProtocolSettings) -> "PartitionConfig":
        return cls(min_insync_replicas=min_insync_replicas, replica_lag_max=timeouts.replica_lag_max,
                   truncation=protocol.truncation, elr=protocol.elr,
                   produce_timeout_default=timeouts.produce_timeout,
                   alter_partition_timeout_ms=max(1, int(timeouts.alter_partition_timeout * 1000)),
                   alter_partition_backoff=timeouts.alter_partition_backoff,
                   hwm_checkpoint_interval=timeouts.hw_checkpoint_interval)

    def __post_init__(self) -> None:
        if self.truncation not in TRUNCATION_MODES:
            raise ValueError(f"truncation must be one of {TRUNCATION_MODES}, "
                             f"got {self.truncation!r}")
        if self.min_insync_replicas < 1:
            raise ValueError(f"min_insync_replicas must be >= 1, got {self.min_insync_replicas}")
        if self.replica_lag_max <= 0:
            raise ValueError(f"replica_lag_max must be > 0, got {self.replica_lag_max}")


class ReadSpec(NamedTuple):
    """What the runtime must read from the log to fill `FetchPartitionResult.records` (a
    named tuple: immutable, and built at half a frozen dataclass's cost, once per fetch).

    Whole batches, starting with the batch that contains `offset`, then every following
    batch whose base offset is < `upper`, stopping once `max_bytes` is reached (at least
    one batch is always returned, as in Kafka). Follower fetch offsets are always batch
    boundaries, because replicas only ever copy, append and truncate whole batches of the
    leader of each epoch; a consumer's offset may fall inside the first batch.
    As a named tuple it equals (and sorts like) a plain tuple of the same values: nothing
    compares it with another type. The fetch path builds it by `tuple.__new__` itself, at a
    fifth of the class call's cost (whose generated `__new__` is a Python function).
    """

    offset: int
    upper: int
    max_bytes: int


class Partition:
    """One replica of `topic`/`partition` on broker `local_broker_id`.

    Built by the runtime from the recovered log: its LEO, the HWM checkpoint and the
    leader-epoch cache (R5). It has no role until the first `PartitionRecord` arrives.

    `role`, `leader_id`, `leader_epoch`, `log_end_offset`, `high_watermark`, `needs_backoff`
    and `next_tick_due` are plain attributes: the broker and the fetcher read them on every
    fetch and after every input, where a property or a method cost a call per read; only this
    class writes them. What others read rarely, or get as a copy, is a property.
    """

    def __init__(self, topic: str, partition: int, local_broker_id: int, config: PartitionConfig,
                 log_end_offset: int, high_watermark: int, epochs: EpochHistory,
                 log_start_offset: int = 0, topic_id: int = -1) -> None:
        self.topic = topic
        self.partition = partition
        #: the id of the topic this replica was made for (KIP-516; -1 unknown): a follower's
        #: fetches carry it, and a leader refuses a fetch made for another (`follower_fetch`)
        self.topic_id = topic_id
        self.local_broker_id = local_broker_id
        self.config = config
        self.log_end_offset = log_end_offset
        # A checkpoint above the recovered log (a lossy crash cut the log) cannot stand.
        self.high_watermark = max(log_start_offset, min(high_watermark, log_end_offset))
        self._epochs = epochs
        self._log_start_offset = log_start_offset

        self.role = NO_ROLE
        self.leader_id = NO_LEADER
        self.leader_epoch = -1
        self._partition_epoch = -1
        self._replicas: list[int] = []
        self._isr: list[int] = []
        #: every replica is in the ISR: the leader's next tick then waits on no follower outside it
        #: (`_isr_change_due`), and so does not move with time alone
        self._isr_full = False
        self._elr: list[int] = []
        self._last_known_elr: list[int] = []

        # leader only
        self._leso = -1
        self._followers: dict[int, FollowerState] = {}
        self._pending_produces: list[PendingProduce] = []
        self._proposed_isr: list[int] | None = None  # R16: widens the maximal ISR
        self._alter_in_flight = False  # R16: at most one AlterPartition in flight
        #: the number of the AlterPartition sent last: its answer is matched by it, so that of
        #: one a newer record ended, or one lost with a controller turned from, changes nothing
        self._alter_sent = 0
        self._alter_retry_at = 0.0
        #: R16: the controller's answer says its state moved past what we know (maybe by our
        #: own proposal, whose answer was lost): keep the maximal ISR, propose nothing, and
        #: wait for the metadata record that says what the controller decided
        self._awaiting_metadata = False
        self._last_hwm_event: float | None = None

        # from the metadata image, for R18 and R19
        self._broker_epochs: dict[int, int] = {}
        self._eligible: set[int] = set()
        self._local_broker_epoch = -1

        # follower only: set by the last `on_fetch_result` when the fetcher should wait
        # before refetching
        self.needs_backoff = False

        self._checkpointed_hwm = self.high_watermark
        self._last_checkpoint: float | None = None
        #: `next_tick_at`, kept until an input changes the replica (None: to be worked out); the
        #: broker reads it after every input, and calls `next_tick_at` only when it is None
        self.next_tick_due: float | None = None

    # ------------------------------------------------------------------ properties
    @property
    def partition_epoch(self) -> int:
        return self._partition_epoch

    @property
    def replicas(self) -> list[int]:
        return list(self._replicas)

    @property
    def isr(self) -> list[int]:
        return list(self._isr)

    @property
    def maximal_isr(self) -> list[int]:
        """R16: ISR ∪ the proposed ISR while a proposal is in flight."""
        if self._proposed_isr is None:
            return list(self._isr)
        return self._isr + [b for b in self._proposed_isr if b not in self._isr]

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def leader_epoch_start_offset(self) -> int:
        """R14: LESO of the current term, -1 when not leader."""
        return self._leso

    @property
    def last_fetched_epoch(self) -> int:
        """R7: the epoch of the last record (the latest epoch of the history), -1 if none."""
        return self._epochs.latest_epoch

    @property
    def epochs(self) -> EpochHistory:
        """A copy of the leader-epoch history (R5)."""
        return self._epochs.copy()

    def set_local_broker_epoch(self, epoch: int) -> None:
        """The broker epoch this broker registered with (R23); sent in AlterPartition (R19)."""
        self.next_tick_due = None
        self._local_broker_epoch = epoch

    def update_brokers(self, broker_epochs: dict[int, int], eligible: set[int]) -> None:
        """A newer metadata image of the brokers (R18): call on any broker registration change.

        Fencing or registration of a follower that is outside the ISR produces no
        PartitionRecord for this partition, yet it decides whether that follower may join.
        """
        self.next_tick_due = None
        self._broker_epochs = dict(broker_epochs)
        self._eligible = set(eligible)

    def describe(self) -> dict:
        """JSON-able status, for `run.py status` and debugging."""
        d = {
            "topic": self.topic, "partition": self.partition, "role": self.role,
            "leader": self.leader_id, "leader_epoch": self.leader_epoch,
            "partition_epoch": self._partition_epoch, "replicas": list(self._replicas),
            "isr": list(self._isr), "maximal_isr": self.maximal_isr, "elr": list(self._elr),
            "last_known_elr": list(self._last_known_elr), "leo": self.log_end_offset, "hwm": self.high_watermark,
            "log_start_offset": self._log_start_offset,
            "last_fetched_epoch": self.last_fetched_epoch,
            "epochs": [list(e) for e in self._epochs.entries],
        }
        if self.role == LEADER:
            d["leso"] = self._leso
            d["alter_partition_in_flight"] = self._alter_in_flight
            d["pending_produces"] = len(self._pending_produces)
            d["followers"] = {str(b): st.describe(self.leader_epoch)
                              for b, st in sorted(self._followers.items())}
        return d

    # ------------------------------------------------------------------ metadata (R3, R14, R16)
    def on_partition_record(self, rec: PartitionRecord, broker_epochs: dict[int, int],
                            eligible: set[int], now: float) -> Outputs:
        """Act on the materialised state of the partition (R3).

        A new leader epoch (or a role this replica does not hold yet) is a transition
        (R14 / seed 002 section 2.10); the same leader epoch with a higher partition epoch
        is an ISR or replica-set change, applied only if newer than what is known (R16).
        A record older in either epoch is ignored (R2).
        """
        self.next_tick_due = None
        out = Outputs()
        if rec.leader_epoch < self.leader_epoch or rec.partition_epoch < self._partition_epoch:
            return out
        self.update_brokers(broker_epochs, eligible)
        new_term = rec.leader_epoch > self.leader_epoch
        newer = rec.partition_epoch > self._partition_epoch
        if self.local_broker_id not in rec.replicas:
            self._apply_record(rec)
            if self.role != NO_ROLE:
                self._step_down(out)
                self.role = NO_ROLE
            return out
        if rec.leader == self.local_broker_id:
            if new_term or self.role != LEADER:
                self._apply_record(rec)
                self._become_leader(now, out)
            elif newer:
                self._apply_record(rec)
                self._drop_proposal()  # the controller's word replaces our proposal
                self._sync_follower_states(now)
                self._maybe_advance_hwm(now, out)
        elif new_term or self.role != FOLLOWER:
            self._apply_record(rec)
            self._become_follower(out)
        elif newer:
            self._apply_record(rec)  # ISR changes are immaterial to a follower (002 2.10.5)
        return out

    def _apply_record(self, rec: PartitionRecord) -> None:
        self.leader_id = rec.leader
        self.leader_epoch = rec.leader_epoch
        self._partition_epoch = rec.partition_epoch
        self._replicas = list(rec.replicas)
        self._isr = list(rec.isr)
        self._isr_full = self._holds_every_replica(self._isr)
        self._elr = list(rec.elr)
        self._last_known_elr = list(rec.last_known_elr)

    def _holds_every_replica(self, isr: list[int]) -> bool:
        """Whether no replica is outside `isr` (kept as `_isr_full` whenever the ISR changes)."""
        return all(b in isr for b in self._replicas)

    def _become_leader(self, now: float, out: Outputs) -> None:
        """R14: LESO := LEO, the epoch starts at LEO, fetch state of non-ISR followers is
        forgotten, any pending ISR change is dropped. The HWM starts at this replica's own
        HWM and only advances (R15)."""
        self.role = LEADER
        self.needs_backoff = False
        self._leso = self.log_end_offset
        if self._epochs.assign(self.leader_epoch, self.log_end_offset):
            out.disk.append(AssignEpoch(self.topic, self.partition, self.leader_epoch, self.log_end_offset))
        followers: dict[int, FollowerState] = {}
        for b in self._replicas:
            if b == self.local_broker_id:
                continue
            state = self._followers.get(b) or FollowerState(b)
            followers[b] = state.start_term(b in self._isr, self.log_end_offset, now)
        self._followers = followers
        self._drop_proposal()
        self._last_hwm_event = None
        out.event("became-leader", topic=self.topic, partition=self.partition,
                  leader_epoch=self.leader_epoch, partition_epoch=self._partition_epoch,
                  isr=list(self._isr), elr=list(self._elr),
                  last_known_elr=list(self._last_known_elr), leo=self.log_end_offset, hwm=self.high_watermark)
        self._maybe_advance_hwm(now, out)

    def _become_follower(self, out: Outputs) -> None:
        """Seed 002 sections 2.10.4/2.10.6; with `truncation: high-watermark` the historic
        pre-KIP-101 step of cutting the log back to the HWM at once (R13)."""
        self._step_down(out)
        self.role = FOLLOWER
        self.needs_backoff = False
        out.event("became-follower", topic=self.topic, partition=self.partition,
                  leader=self.leader_id, leader_epoch=self.leader_epoch, leo=self.log_end_offset,
                  hwm=self.high_watermark)
        if self.config.truncation == "high-watermark" and self.high_watermark < self.log_end_offset:
            self._truncate(self.high_watermark, "high-watermark", out)

    def close(self) -> Outputs:
        """The replica is deleted with its topic (R40): held produces fail as on a step-down (R20),
        with an unknown outcome, and the replica holds no role any more."""
        self.next_tick_due = None
        out = Outputs()
        self._step_down(out)
        self.role = NO_ROLE
        return out

    def _step_down(self, out: Outputs) -> None:
        """Leave the leader role: held produces fail with an unknown outcome (R20)."""
        for p in self._pending_produces:
            out.messages.append(Reply(p.ctx, self._produce_response(
                _NOT_LEADER_OR_FOLLOWER, appended=True)))
        self._pending_produces = []
        self._followers = {}
        self._drop_proposal()
        self._leso = -1

    def _drop_proposal(self) -> None:
        """R16: a metadata record newer than the proposal's base (or a new term) ends it.

        The controller applies an AlterPartition only against the partition epoch it was
        made on, so once a newer record is known the one in flight can no longer change
        anything: its answer, when it comes, is ignored (`on_alter_partition_response`
        matches it by its number), and the next proposal need not wait for it. Waiting
        held the ISR of a new term as its election left it (below MinISR, say) until the
        old term's request timed out, with a caught-up follower outside it."""
        self._proposed_isr = None
        self._alter_in_flight = False
        self._alter_retry_at = 0.0
        self._awaiting_metadata = False

    def _sync_follower_states(self, now: float) -> None:
        """Replica set changed within a term: drop removed replicas, add new ones."""
        followers: dict[int, FollowerState] = {}
        for b in self._replicas:
            if b == self.local_broker_id:
                continue
            state = self._followers.get(b)
            if state is None:
                state = FollowerState(b).start_term(b in self._isr, self.log_end_offset, now)
            followers[b] = state
        self._followers = followers

    # ------------------------------------------------------------------ produce (R20)
    def on_produce(self, req: ProduceRequest, ctx: object, now: float) -> Outputs:
        """R20: append on the leader; answer per acks (acks=all waits for the HWM)."""
        self.next_tick_due = None
        out = Outputs()
        if self.role != LEADER:
            return self._refuse(req, ctx, _NOT_LEADER_OR_FOLLOWER, out)
        if req.acks not in ACKS.values():
            return self._refuse(req, ctx, Errors.INVALID_REQUEST, out)
        try:
            count = record_set_count(req.records)
        except CorruptBatch:
            return self._refuse(req, ctx, Errors.CORRUPT_MESSAGE, out)
        if req.acks == ACKS_ALL and len(self._isr) < self._effective_min_isr():
            return self._refuse(req, ctx, Errors.NOT_ENOUGH_REPLICAS, out)
        base = self.log_end_offset
        out.disk.append(AppendRecords(self.topic, self.partition, base, self.leader_epoch,
                                      req.records, count))
        self.log_end_offset += count
        if req.acks == 1:
            out.messages.append(Reply(ctx, self._produce_response(_NONE, base_offset=base)))
        elif req.acks == ACKS_ALL:
            timeout = (req.timeout_ms / 1000.0 if req.timeout_ms > 0
                       else self.config.produce_timeout_default)
            self._pending_produces.append(PendingProduce(ctx, base, self.log_end_offset, now + timeout))
        # R15 names produce as a trigger when the leader is alone in the ISR; evaluating on
        # every produce is equivalent (followers' LEOs did not move) and simpler.
        self._maybe_advance_hwm(now, out)
        return out

    def _refuse(self, req: ProduceRequest, ctx: object, error: Errors, out: Outputs) -> Outputs:
        if req.expects_response:
            out.messages.append(Reply(ctx, self._produce_response(error)))
        return out

    def _produce_response(self, error: Errors, base_offset: int = -1,
                          appended: bool = False) -> ProduceResponse:
        return ProduceResponse(self.topic, self.partition, error, base_offset,
                               self.leader_epoch, appended)

    def _effective_min_isr(self) -> int:
        """MinISR capped by the replication factor, as Kafka's `effectiveMinIsr` (R20), at least 1
        (comparisons, not min() and max(), which parse keyword arguments on Python 3.11)."""
        n = len(self._replicas)
        if self.config.min_insync_replicas < n:
            n = self.config.min_insync_replicas
        return n if n > 1 else 1

    # ------------------------------------------------------------- leader: fetches (R8-R11, R21)
    def _check_epoch(self, current_leader_epoch: int) -> Errors:
        """R8: the epoch first (-1 skips it), then leadership."""
        if self.role != NO_ROLE and current_leader_epoch != -1:
            if current_leader_epoch < self.leader_epoch:
                return Errors.FENCED_LEADER_EPOCH
            if current_leader_epoch > self.leader_epoch:
                return Errors.UNKNOWN_LEADER_EPOCH
        if self.role != LEADER:
            return _NOT_LEADER_OR_FOLLOWER
        return _NONE

    def follower_fetch(self, replica_id: int, broker_epoch: int, fp: FetchPartition, now: float,
                       out: Outputs) -> tuple[FetchPartitionResult | None, ReadSpec | None]:
        """A follower's fetch of this partition (R8, R9, R11), then R15 and R18; its outputs go
        into `out` (a broker gathers a whole fetch's in one). The result is None for a fetch
        at the LEO without error or divergence: it has nothing to send, and its answer, if
        the fetch is answered now and not parked, is `fetch_result()`, which nothing here
        changes until the next input (a broker parks most such fetches: 1,200 a quickstart
        seed, whose answer then comes from a later look).

        A fetch at the LEO from a follower already known at it, with every replica in the
        ISR, keeps the next tick unless it moves the HWM: what changes (the follower's
        caught-up time) counts only for a follower behind the LEO or outside the ISR. Most
        fetches are such, half of them parked ones answered empty at their wait's end; an
        error or a divergence changes nothing either, and returns before.

        The steps every such fetch takes are written out here, each equal to the call it
        stands for: the epoch check of a fetch in the leader's own epoch (`_check_epoch`),
        the end of the latest epoch, which is the LEO (`EpochHistory.end_offset_for`), and no
        HWM to advance while it stands at the LEO (`_maybe_advance_hwm`, whose LEO a fetch
        does not move): a call each, on 5,700 fetches a quickstart seed."""
        leader_epoch = self.leader_epoch
        if self.role == LEADER and fp.current_leader_epoch == leader_epoch:
            error = _NONE
        else:
            error = self._check_epoch(fp.current_leader_epoch)
        state = self._followers.get(replica_id)
        if error is _NONE and state is None:
            error = _NOT_LEADER_OR_FOLLOWER  # not a replica of this partition
        if error is _NONE and fp.topic_id != self.topic_id and fp.topic_id >= 0 and self.topic_id >= 0:
            # made for a topic since deleted and made again under this name (R40): its offsets
            # and epochs are another log's, and must not count as this follower's (Kafka's
            # INCONSISTENT_TOPIC_ID)
            error = _INCONSISTENT_TOPIC_ID
        if error is _NONE and 0 <= broker_epoch < state.broker_epoch:
            # A fetch of an older incarnation of that broker must not overwrite the newer
            # one's state (Kafka rejects such a "stale fetch state update").
            error = _NOT_LEADER_OR_FOLLOWER
        if error is not _NONE:
            return FetchPartitionResult(self.topic, self.partition, error, leader_epoch=leader_epoch), None
        leo, fetch_offset, last_fetched_epoch = self.log_end_offset, fp.fetch_offset, fp.last_fetched_epoch
        if last_fetched_epoch >= 0:
            entries = self._epochs.entries
            if entries and entries[-1][0] == last_fetched_epoch:
                epoch, end_offset = last_fetched_epoch, leo
            else:
                epoch, end_offset = self._epochs.end_offset_for(last_fetched_epoch, leo)
            if epoch < last_fetched_epoch or end_offset < fetch_offset:
                # R9: no records, and the follower's state stays as it was.
                return FetchPartitionResult(self.topic, self.partition, _NONE, self.high_watermark, leo,
                                            leader_epoch, DivergingEpoch(epoch, end_offset)), None
        if fetch_offset > leo or fetch_offset < self._log_start_offset:
            return FetchPartitionResult(self.topic, self.partition, _OFFSET_OUT_OF_RANGE, self.high_watermark, leo,
                                        leader_epoch), None
        keeps = (self._isr_full and fetch_offset == leo
                 and state.fetch_leader_epoch == leader_epoch and state.log_end_offset == leo)
        hwm = self.high_watermark
        state.record_fetch(fetch_offset, broker_epoch, leo, leader_epoch, now)
        if hwm < leo:
            self._maybe_advance_hwm(now, out)
        if replica_id not in self._isr and self._may_join_isr(replica_id, now, fetched_now=True):
            self._propose_isr(self._isr + [replica_id], out)
        if not keeps or self.high_watermark != hwm:
            self.next_tick_due = None
        if fetch_offset < leo:
            return (FetchPartitionResult(self.topic, self.partition, _NONE, self.high_watermark, leo, leader_epoch),
                    _tuple_new(ReadSpec, (fetch_offset, leo, fp.max_bytes)))
        return None, None

    def fetch_result(self) -> FetchPartitionResult:
        """The answer to a fetch of this leader with no error, divergence or records to send:
        its HWM, LEO and leader epoch as they stand."""
        return FetchPartitionResult(self.topic, self.partition, _NONE, self.high_watermark, self.log_end_offset,
                                    self.leader_epoch)

    def on_consumer_fetch(self, fp: FetchPartition) -> tuple[FetchPartitionResult, ReadSpec | None]:
        """R21: only the leader serves consumers, and only below the HWM."""
        # (by position: error NONE, HWM and LEO -1 until known, as the defaults, and the epoch)
        result = FetchPartitionResult(self.topic, self.partition, _NONE, -1, -1, self.leader_epoch)
        error = self._check_epoch(fp.current_leader_epoch)
        if error != _NONE:
            result.error = error
            return result, None
        result.high_watermark = self.high_watermark
        result.log_end_offset = self.log_end_offset
        if fp.fetch_offset > self.log_end_offset or fp.fetch_offset < self._log_start_offset:
            result.error = _OFFSET_OUT_OF_RANGE
            return result, None
        if fp.fetch_offset >= self.high_watermark:
            return result, None  # nothing committed there yet: empty, not an error
        return result, _tuple_new(ReadSpec, (fp.fetch_offset, self.high_watermark, fp.max_bytes))

    # ------------------------------------------------------------------ leader: HWM (R15)
    def _maybe_advance_hwm(self, now: float, out: Outputs) -> None:
        """R15: HWM := min LEO over the leader and its maximal ISR, never decreasing.

        With `elr` it advances only while |ISR| >= MinISR (KIP-966); without it, also with
        the ISR shrunk to the leader alone. A follower that has not fetched in this term
        has an unknown LEO and holds the HWM. Held acks=all produces are released here.
        """
        if self.role != LEADER or self.high_watermark >= self.log_end_offset:
            return  # (the candidate is never above the LEO: most fetches, with nothing new, stop here)
        if self.config.elr and len(self._isr) < self._effective_min_isr():
            return
        candidate = self.log_end_offset
        epoch, followers = self.leader_epoch, self._followers
        for b in self._isr if self._proposed_isr is None else self.maximal_isr:
            if b == self.local_broker_id:
                continue
            state = followers.get(b)
            # (`known_log_end_offset(epoch)`, without its call: once an ISR member a look)
            known = state.log_end_offset if state and state.fetch_leader_epoch == epoch else -1
            if known < candidate:
                candidate = known
        if candidate <= self.high_watermark:
            return
        self.high_watermark = candidate
        self._release_produces(out)
        if self._last_hwm_event is None or now - self._last_hwm_event >= HWM_EVENT_INTERVAL:
            self._last_hwm_event = now
            out.event("hwm-advanced", topic=self.topic, partition=self.partition,
                      leo=self.log_end_offset, hwm=self.high_watermark, leader_epoch=self.leader_epoch)

    def _release_produces(self, out: Outputs) -> None:
        """R20: answer every held produce the HWM has passed."""
        enough = len(self.maximal_isr) >= self._effective_min_isr()
        still_held = []
        for p in self._pending_produces:
            if p.end_offset > self.high_watermark:
                still_held.append(p)
            elif enough:
                out.messages.append(Reply(p.ctx, self._produce_response(_NONE, p.base_offset)))
            else:
                out.messages.append(Reply(p.ctx, self._produce_response(
                    Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND, appended=True)))
        self._pending_produces = still_held

    # ------------------------------------------------------------- leader: ISR changes (R16-R19)
    def _may_join_isr(self, broker_id: int, now: float, fetched_now: bool) -> bool:
        """R18: all five conditions, and no AlterPartition in flight or unresolved (R16).

        On a fetch the conditions describe the follower as it is. Away from a fetch (a tick,
        for a follower that caught up while a proposal was in flight) its state may be old:
        one that stopped fetching still reports the LEO of its last fetch, which equals an HWM
        that stopped with it. So there it must also be caught up as R17 judges it, or it would
        rejoin on that stale word and be shrunk out again on the next tick, forever."""
        return self._may_propose(now) and self._meets_isr_conditions(broker_id, now, fetched_now)

    def _meets_isr_conditions(self, broker_id: int, now: float, fetched_now: bool) -> bool:
        """R18's five conditions, with the caught-up judgement `_may_join_isr` describes."""
        state = self._followers.get(broker_id)
        if state is None:
            return False
        return (state.fetch_leader_epoch == self.leader_epoch
                and (fetched_now or self._follower_caught_up(broker_id, now))
                and state.log_end_offset >= self.high_watermark
                and state.log_end_offset >= self._leso
                and broker_id in self._eligible
                and state.broker_epoch == self._broker_epochs.get(broker_id))

    def _propose_isr(self, new_isr: list[int], out: Outputs) -> None:
        """R16 + R19: maximal ISR := ISR ∪ proposed; one AlterPartition to the controller."""
        self._proposed_isr = list(new_isr)
        self._alter_in_flight = True
        self._alter_sent += 1
        members = [IsrMember(b, self._member_epoch(b)) for b in new_isr]
        request = AlterPartitionRequest(
            broker_id=self.local_broker_id, broker_epoch=self._local_broker_epoch,
            topic=self.topic, partition=self.partition, leader_epoch=self.leader_epoch,
            partition_epoch=self._partition_epoch, new_isr=members)
        out.messages.append(Send("controller", request,
                                 correlation=("alter-partition", self.topic, self.partition,
                                              self._alter_sent),
                                 timeout_ms=self.config.alter_partition_timeout_ms))

    def controller_lost(self, now: float) -> Outputs:
        """The broker turned from the controller its AlterPartition in flight went to (that
        one timed out or said it is not active): the request will not be answered, or only
        by a controller that can no longer apply it, so it counts as timed out now (R16: the
        maximal ISR stays, and the proposal goes again, to the controller now believed
        active), not when its own timeout ends. Kafka's broker-to-controller channel sends
        such a request again to the new controller at once."""
        if not self._alter_in_flight:
            return Outputs()
        return self.on_alter_partition_response(None, now, self._alter_sent)

    def _member_epoch(self, broker_id: int) -> int:
        """R19: the broker epoch of an ISR member: ours, else the one its fetches carried,
        else (a member that has not fetched from us yet) the metadata image's."""
        if broker_id == self.local_broker_id:
            return self._local_broker_epoch
        state = self._followers.get(broker_id)
        if state is not None and state.broker_epoch >= 0:
            return state.broker_epoch
        return self._broker_epochs.get(broker_id, -1)

    def _may_propose(self, now: float) -> bool:
        """R16: one proposal at a time, none while an earlier one's outcome is unknown."""
        return not self._alter_in_flight and now >= self._alter_retry_at and not self._awaiting_metadata

    def on_alter_partition_response(self, resp: AlterPartitionResponse | None,
                                    now: float, sent: int) -> Outputs:
        """R16: commit on success (only if its partition epoch is newer); roll the maximal ISR
        back only when the answer proves the controller did not apply the proposal. Then
        re-evaluate the HWM (R15). `sent` is the number of the answered request (its
        correlation's): the answer to one a newer record ended (`_drop_proposal`), or one
        abandoned with its controller (`controller_lost`), changes nothing.

        A timeout (`resp` None) proves nothing: the controller may have committed the change
        and lost only its answer, so the maximal ISR stays as proposed and the same proposal
        is sent again after a backoff (Kafka's AlterPartitionManager retries likewise). An
        answer that our epochs are stale (FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH,
        INVALID_UPDATE_VERSION) means the controller moved on, perhaps by that very proposal:
        the maximal ISR stays until the metadata record says what it decided. Rolling back
        in either case would let the HWM advance on a smaller ISR than the controller's and
        lose an acknowledged write when the controller elects from its own."""
        self.next_tick_due = None
        out = Outputs()
        if not self._alter_in_flight or sent != self._alter_sent:
            # (an ended proposal's answer says nothing the record that ended it did not;
            # Kafka ignores such an answer likewise)
            return out
        self._alter_in_flight = False
        if resp is None:
            self._alter_retry_at = now + self.config.alter_partition_backoff
            return out
        if resp.error in _STALE_VIEW:
            self._awaiting_metadata = True
            return out
        if resp.error != _NONE:
            self._alter_retry_at = now + self.config.alter_partition_backoff
        elif (self.role == LEADER and resp.leader_epoch == self.leader_epoch
              and resp.partition_epoch > self._partition_epoch):
            self._isr = list(resp.isr)
            self._isr_full = self._holds_every_replica(self._isr)
            self._partition_epoch = resp.partition_epoch
        self._proposed_isr = None
        self._maybe_advance_hwm(now, out)
        return out

    # ------------------------------------------------------------------ time
    def tick(self, now: float) -> Outputs:
        """Time passes: produce timeouts (R20), ISR shrink (R17) or expand (R18), and the
        periodic HWM checkpoint."""
        self.next_tick_due = None
        out = Outputs()
        self._expire_produces(now, out)
        if self.role == LEADER and self._may_propose(now):
            if self._proposed_isr is not None:  # the answer to it was lost (R16)
                self._propose_isr(self._proposed_isr, out)
            else:
                self._maybe_change_isr(now, out)
        if (self.high_watermark != self._checkpointed_hwm
                and (self._last_checkpoint is None
                     or now >= self._last_checkpoint + self.config.hwm_checkpoint_interval)):
            out.disk.append(CheckpointHighWatermark(self.topic, self.partition, self.high_watermark))
            self._checkpointed_hwm = self.high_watermark
            self._last_checkpoint = now
        return out

    def next_tick_at(self, now: float) -> float:
        """When `tick` next has something to do; a tick before then changes nothing, so a
        runtime need not tick earlier (-inf: at the next tick, inf: not until an input).

        Worked out from the state alone and kept until an input changes it. What it waits
        for: the first held produce's timeout (R20), the HWM checkpoint's interval, and on the
        leader the first ISR change (R16-R18) it may propose: a follower out of sync (R17) or
        one that caught up (R18), or a proposal whose answer was lost. Being caught up only
        ends with time and never begins with it, so a judgement made `now` stays true or
        errs early, which costs a tick that does nothing."""
        due = self.next_tick_due
        if due is None:
            due = math.inf
            for p in self._pending_produces:
                if p.deadline < due:
                    due = p.deadline
            # (comparisons, not min() and max(): on Python 3.11 each parses keyword arguments)
            if self.high_watermark != self._checkpointed_hwm:
                at = (-math.inf if self._last_checkpoint is None
                      else self._last_checkpoint + self.config.hwm_checkpoint_interval)
                if at < due:
                    due = at
            if self.role == LEADER and not self._alter_in_flight and not self._awaiting_metadata:
                at = self._isr_change_due(now)
                if self._alter_retry_at > at:
                    at = self._alter_retry_at
                if at < due:
                    due = at
            self.next_tick_due = due
        return due

    def _isr_change_due(self, now: float) -> float:
        """When `_maybe_change_isr` first finds something to propose, as of `now`."""
        if self._proposed_isr is not None:
            return -math.inf
        due = math.inf
        for b in self._isr:
            state = self._followers.get(b)
            if b == self.local_broker_id or state is None:
                continue
            if state.fetch_leader_epoch == self.leader_epoch and state.log_end_offset == self.log_end_offset:
                continue  # caught up for as long as the LEO stays (`known_log_end_offset`: a LEO is never -1)
            if state.last_caught_up_time is None:
                return -math.inf
            at = state.last_caught_up_time + self.config.replica_lag_max  # R17
            if at < due:
                due = at
        for b in self._replicas:
            if b not in self._isr and self._meets_isr_conditions(b, now, fetched_now=False):
                return -math.inf  # R18
        return due

    def _expire_produces(self, now: float, out: Outputs) -> None:
        still_held = []
        for p in self._pending_produces:
            if now >= p.deadline:
                out.messages.append(Reply(p.ctx, self._produce_response(
                    Errors.REQUEST_TIMED_OUT, appended=True)))
            else:
                still_held.append(p)
        self._pending_produces = still_held

    def _maybe_change_isr(self, now: float, out: Outputs) -> None:
        out_of_sync = [b for b in self._isr if b != self.local_broker_id
                       and not self._follower_caught_up(b, now)]
        if out_of_sync:  # R17
            self._propose_isr([b for b in self._isr if b not in out_of_sync], out)
            return
        joining = [b for b in self._replicas
                   if b not in self._isr and self._may_join_isr(b, now, fetched_now=False)]
        if joining:  # R18, for followers that caught up while a proposal was in flight
            self._propose_isr(self._isr + joining, out)

    def _follower_caught_up(self, broker_id: int, now: float) -> bool:
        state = self._followers.get(broker_id)
        if state is None:  # an ISR member that is not a replica: the controller will fix it
            return True
        return state.is_caught_up(self.log_end_offset, self.leader_epoch, now, self.config.replica_lag_max)

    # ------------------------------------------------------------- follower (R7, R10, R12, R13)
    @property
    def fetching(self) -> bool:
        """A follower that knows its leader: it has a part in the next fetch request (R7)."""
        return self.role == FOLLOWER and self.leader_id != NO_LEADER

    def fetch_partition(self) -> FetchPartition | None:
        """R7: this partition's part of the next fetch request, None if not fetching.

        With `truncation: high-watermark` the last fetched epoch is -1, so the leader skips
        the divergence check (R13): that is the historic protocol's flaw, kept on purpose.
        """
        if self.role != FOLLOWER or self.leader_id == NO_LEADER:  # (`fetching`, without its call)
            return None
        if self.config.truncation == "high-watermark":
            last_epoch = -1
        else:  # (`EpochHistory.latest_epoch`, without its call: once a partition a fetch request)
            entries = self._epochs.entries
            last_epoch = entries[-1][0] if entries else UNDEFINED_EPOCH
        # (positional: fetch offset, last fetched epoch, current leader epoch, max bytes, topic id)
        return FetchPartition(self.topic, self.partition, self.log_end_offset, last_epoch, self.leader_epoch,
                              _MAX_FETCH_BYTES, self.topic_id)

    def on_fetch_result(self, result: FetchPartitionResult, now: float, out: Outputs | None = None) -> Outputs:
        """The leader's answer for this partition: truncate (R10), or append and take the
        HWM (R12). Errors set `needs_backoff`; a result from another leader epoch is stale
        and ignored (a successful answer always carries the epoch the fetch was sent in).
        The outputs go into `out` when given (the fetcher gathers a whole answer's in one).

        A follower's next tick waits only on its HWM's checkpoint, so an answer that leaves
        the HWM as it was (every empty one of a steady term) keeps it."""
        if out is None:
            out = Outputs()
        self.needs_backoff = False
        if self.role != FOLLOWER:
            return out
        if result.error != _NONE:
            if (result.error == _OFFSET_OUT_OF_RANGE
                    and self.config.truncation == "high-watermark"
                    and result.leader_epoch == self.leader_epoch
                    and 0 <= result.log_end_offset < self.log_end_offset):
                # R13, pre-KIP-101: a follower ahead of its leader cuts back to the leader's
                # LEO, keeping whatever differs below it (the divergence R13 must allow).
                self._truncate(result.log_end_offset, "offset-out-of-range", out)
            else:
                self.needs_backoff = True
            return out
        if result.leader_epoch != self.leader_epoch:
            return out
        if result.diverging_epoch is not None:
            self._truncate_on_divergence(result.diverging_epoch, out)
            return out
        if result.records:  # (an empty answer, half of a steady term's, appends nothing: no call)
            self._append_fetched(result.records, out)
        if result.high_watermark >= 0:
            # R12: may go backwards (a new leader's HWM can lag), never above the LEO (nor below
            # the log start; comparisons, not min() and max(), which parse keywords on 3.11)
            hwm = result.high_watermark if result.high_watermark < self.log_end_offset else self.log_end_offset
            hwm = hwm if hwm > self._log_start_offset else self._log_start_offset
            if hwm != self.high_watermark:
                self.high_watermark = hwm
                self.next_tick_due = None
        return out

    def _truncate_on_divergence(self, diverging: DivergingEpoch, out: Outputs) -> None:
        """R10: truncate to min(leader's end offset, own end offset for that epoch, LEO)."""
        target = min(diverging.end_offset, self.log_end_offset)
        _epoch, own_end = self._epochs.end_offset_for(diverging.epoch, self.log_end_offset)
        if own_end >= 0:
            target = min(target, own_end)
        self._truncate(max(target, self._log_start_offset), "diverging-epoch", out)

    def _truncate(self, offset: int, reason: str, out: Outputs) -> None:
        """Cut the log and its epoch history back to `offset` (R5). Also drops epochs that
        start at the LEO without records (a former leader's empty term), which otherwise
        would make every following fetch diverge again."""
        empty_epochs = any(start >= offset for _e, start in self._epochs.entries)
        if offset >= self.log_end_offset and not empty_epochs:
            return
        before = self.log_end_offset
        self.next_tick_due = None  # the HWM may come down with the log
        self._epochs.truncate_from_end(offset)
        self.log_end_offset = min(offset, self.log_end_offset)
        self.high_watermark = min(self.high_watermark, self.log_end_offset)
        out.disk.append(Truncate(self.topic, self.partition, self.log_end_offset, reason))
        if self.log_end_offset < before:
            out.event("truncated", topic=self.topic, partition=self.partition,
                      reason=reason, leader_epoch=self.leader_epoch,
                      **{"from": before, "to": self.log_end_offset})

    def _append_fetched(self, records: bytes, out: Outputs) -> None:
        """R12: append the valid prefix of the fetched batches (`records`, not empty: the caller
        looks) and learn their epochs (R5)."""
        # (by position: from byte 0, CRCs checked, from the LEO; a keyword call is the slow path
        # of a call on Python 3.11, and a follower appends after most fetches with records)
        infos, reason = scan_batches(records, 0, True, self.log_end_offset)
        if reason is not None:
            self.needs_backoff = True
            out.event("fetch-corrupt", topic=self.topic, partition=self.partition,
                      offset=infos[-1].next_offset if infos else self.log_end_offset, reason=reason)
        if not infos:
            return
        last = infos[-1]
        end = last.position + last.size
        next_offset = last.base_offset + last.count  # (`BatchInfo.next_offset`, without the property's call)
        out.disk.append(AppendBatches(self.topic, self.partition,
                                      records if end == len(records) else bytes(records[:end]),
                                      next_offset, infos))
        for info in infos:
            if (info.leader_epoch > self._epochs.latest_epoch
                    and self._epochs.assign(info.leader_epoch, info.base_offset)):
                out.disk.append(AssignEpoch(self.topic, self.partition, info.leader_epoch,
                                            info.base_offset))
        self.log_end_offset = next_offset
