"""Every message isrlab nodes and clients exchange, as plain dataclasses.

This module only declares the types; `broker/wire/codec.py` turns them into ZeroMQ frames
(a msgpack header, plus raw frames for record bytes, which are never decoded on the fetch
path) and back. Field names follow Kafka's request schemas.

A field typed `bytes` named `records` travels as a raw frame. Nested message types
(`FetchPartition`, ...) are declared in `NESTED` so the codec can rebuild them.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from broker.common.errors import Errors
from broker.protocol.records import NO_LEADER


# ---------------------------------------------------------------- broker <-> broker: replication
@dataclass(slots=True)
class FetchPartition:
    """R7: what a follower (or consumer, replica_id -1) asks of one partition."""
    topic: str
    partition: int
    fetch_offset: int
    last_fetched_epoch: int = -1
    current_leader_epoch: int = -1  # -1: the fetcher does not check epochs (consumers)
    max_bytes: int = 1 << 20
    #: the id of the topic the follower's replica was made for (KIP-516): a fetch sent for a
    #: topic since deleted and made again under its name is refused (-1: not checked)
    topic_id: int = -1


@dataclass(slots=True)
class FetchRequest:
    replica_id: int  # -1 for a consumer
    broker_epoch: int = -1
    max_wait_ms: int = 0
    min_bytes: int = 1
    partitions: list[FetchPartition] = field(default_factory=list)


@dataclass(slots=True)
class DivergingEpoch:
    epoch: int
    end_offset: int


@dataclass(slots=True)
class FetchPartitionResult:
    topic: str
    partition: int
    error: Errors = Errors.NONE
    high_watermark: int = -1
    log_end_offset: int = -1
    leader_epoch: int = -1
    diverging_epoch: DivergingEpoch | None = None
    records: bytes = b""  # whole batches, raw


@dataclass(slots=True)
class FetchResponse:
    error: Errors = Errors.NONE
    partitions: list[FetchPartitionResult] = field(default_factory=list)


# ---------------------------------------------------------------- client -> broker
#: R20: the values of `ProduceRequest.acks`, by the names producers use for them
ACKS = {"0": 0, "1": 1, "all": -1, "-1": -1}
ACKS_ALL = ACKS["all"]


@dataclass(slots=True)
class ProduceRequest:
    topic: str
    partition: int
    acks: int  # 0, 1 or -1 (all)
    timeout_ms: int
    records: bytes  # a record set: broker.common.record_batch.encode_record_set

    @property
    def expects_response(self) -> bool:
        """R20: acks=0 gets no answer, not even an error."""
        return self.acks != ACKS["0"]


@dataclass(slots=True)
class ProduceResponse:
    topic: str
    partition: int
    error: Errors = Errors.NONE
    base_offset: int = -1
    leader_epoch: int = -1
    #: True when the error came after the records were appended (R20): outcome unknown.
    appended: bool = False


@dataclass(slots=True)
class MetadataRequest:
    topics: list[str] | None = None  # None: every topic


@dataclass(slots=True)
class PartitionMetadata:
    """A partition as the world outside the metadata log sees it (R1): clients, the
    supervisor's status and the live views all read this one shape."""
    topic: str
    partition: int
    leader: int
    leader_epoch: int
    partition_epoch: int
    replicas: list[int]
    isr: list[int]
    elr: list[int] = field(default_factory=list)
    last_known_elr: list[int] = field(default_factory=list)
    #: a reassignment in progress (R35): `replicas` is the old set and the new together
    adding: list[int] = field(default_factory=list)
    removing: list[int] = field(default_factory=list)

    @property
    def target_replicas(self) -> list[int]:
        """The replica set once the reassignment in progress (if any) completes."""
        return [r for r in self.replicas if r not in self.removing]


@dataclass(slots=True)
class MetadataResponse:
    error: Errors = Errors.NONE
    controller_id: int = -1
    brokers: list[int] = field(default_factory=list)  # unfenced brokers
    partitions: list[PartitionMetadata] = field(default_factory=list)
    metadata_offset: int = -1
    endpoints: dict[int, str] = field(default_factory=dict)  # broker id -> endpoint, registered brokers


# ---------------------------------------------------------------- broker <-> controller
@dataclass(slots=True)
class BrokerRegistrationRequest:
    broker_id: int
    incarnation_id: str
    rack: str | None
    #: R28: the broker epoch read from the clean-shutdown file, -1 when there is none.
    previous_broker_epoch: int = -1
    #: where the broker takes requests: kept in its registration, so that brokers, controllers
    #: and clients reach a broker that joined after they started (R38)
    endpoint: str = ""


@dataclass(slots=True)
class BrokerRegistrationResponse:
    error: Errors = Errors.NONE
    broker_epoch: int = -1


@dataclass(slots=True)
class BrokerHeartbeatRequest:
    broker_id: int
    broker_epoch: int
    current_metadata_offset: int
    want_fence: bool = False
    want_shutdown: bool = False


@dataclass(slots=True)
class BrokerHeartbeatResponse:
    error: Errors = Errors.NONE
    is_fenced: bool = True
    is_caught_up: bool = False
    should_shut_down: bool = False


@dataclass(slots=True)
class IsrMember:
    broker_id: int
    broker_epoch: int


@dataclass(slots=True)
class AlterPartitionRequest:
    """R19: one partition's ISR proposal from its leader."""
    broker_id: int
    broker_epoch: int
    topic: str
    partition: int
    leader_epoch: int
    partition_epoch: int
    new_isr: list[IsrMember] = field(default_factory=list)


@dataclass(slots=True)
class AlterPartitionResponse:
    topic: str
    partition: int
    error: Errors = Errors.NONE
    leader_id: int = NO_LEADER
    leader_epoch: int = -1
    partition_epoch: int = -1
    isr: list[int] = field(default_factory=list)


@dataclass(slots=True)
class MetadataFetchRequest:
    """A broker (or the supervisor) reading the metadata log from `fetch_offset` (R3, R22)."""
    replica_id: int
    fetch_offset: int
    max_wait_ms: int = 0
    max_records: int = 1000


@dataclass(slots=True)
class MetadataFetchResponse:
    error: Errors = Errors.NONE
    #: committed records, each a dict as produced by broker.protocol.records.to_dict
    records: list[dict] = field(default_factory=list)
    base_offset: int = 0
    high_watermark: int = 0  # committed end of the metadata log
    leader_id: int = -1
    #: when `fetch_offset` is below the log's start: the snapshot the records follow,
    #: {"end", "image" (MetadataImage.to_state), "digest"}; base_offset is then its end
    snapshot: dict | None = None


@dataclass(slots=True)
class NewTopic:
    """One topic to create, with the fields of a topology topic (R34, R40)."""
    name: str
    partitions: int
    replication_factor: int
    min_insync_replicas: int = 1
    placement: str = "rack-aware"  # rack-aware | round-robin | explicit
    #: placement explicit: partition (as a string: msgpack map keys) -> replica list
    assignment: dict[str, list[int]] | None = None
    #: per-topic settings the brokers read (flush policy), carried in the TopicRecord
    config: dict = field(default_factory=dict)
    #: R34's seed for this topic (round-robin's start and shift); None: the controller's
    placement_seed: int | None = None


@dataclass(slots=True)
class CreateTopicsRequest:
    topics: list[NewTopic]


@dataclass(slots=True)
class CreateTopicsResponse:
    errors: dict[str, str] = field(default_factory=dict)  # topic -> Errors value


@dataclass(slots=True)
class DeleteTopicsRequest:
    """R40: delete these topics (Kafka's DeleteTopics)."""
    topics: list[str]


@dataclass(slots=True)
class DeleteTopicsResponse:
    errors: dict[str, str] = field(default_factory=dict)  # topic -> Errors value


@dataclass(slots=True)
class CreatePartitionsRequest:
    """R40: grow `topic` to `count` partitions in all (Kafka's CreatePartitions: the new total, not
    the number added); the new partitions are placed as R34 places a new topic's."""
    topic: str
    count: int


@dataclass(slots=True)
class CreatePartitionsResponse:
    error: Errors = Errors.NONE
    message: str = ""


@dataclass(slots=True)
class GetReplicaLogInfoRequest:
    """R32: the controller asks a replica for its log's end, to choose an unclean-recovery leader."""
    topic: str
    partition: int


@dataclass(slots=True)
class GetReplicaLogInfoResponse:
    topic: str
    partition: int
    error: Errors = Errors.NONE
    broker_id: int = -1
    broker_epoch: int = -1  # the registration the answer belongs to: a later restart voids it
    last_written_epoch: int = -1  # the leader epoch of the replica's last batch, -1 if empty
    log_end_offset: int = 0


@dataclass(slots=True)
class TopicPartition:
    topic: str
    partition: int


@dataclass(slots=True)
class ElectLeadersRequest:
    """R36 `preferred` (every partition when `partitions` is None), or the operator's unclean
    choice of `broker_id` for leaderless partitions (R32 `manual`, the fault action `elect`)."""
    election_type: str  # preferred | unclean
    partitions: list[TopicPartition] | None = None
    broker_id: int = -1


@dataclass(slots=True)
class ElectLeadersResponse:
    #: "topic/partition" -> Errors value; `reasons` says why, for the ones refused
    errors: dict[str, str] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class AlterPartitionReassignmentsRequest:
    """R35: move one partition to `replicas` (the first becomes the preferred replica)."""
    topic: str
    partition: int
    replicas: list[int]


@dataclass(slots=True)
class AlterPartitionReassignmentsResponse:
    error: Errors = Errors.NONE
    message: str = ""


@dataclass(slots=True)
class UnregisterBrokerRequest:
    """R39's last step (Kafka's UnregisterBroker, KIP-631): forget a removed broker's registration.
    Only a broker that is gone (fenced, no live session) and holds no replica is unregistered."""
    broker_id: int


@dataclass(slots=True)
class UnregisterBrokerResponse:
    error: Errors = Errors.NONE
    message: str = ""


# ---------------------------------------------------------------- controller <-> controller: the quorum (R22)
@dataclass(slots=True)
class RaftEntry:
    term: int
    record: dict  # a metadata record (broker.protocol.records.to_dict), or the leader-change marker


@dataclass(slots=True)
class VoteRequest:
    term: int  # with pre_vote: the term the candidate would take, its own stays as it is
    candidate_id: int
    last_log_index: int
    last_log_term: int
    pre_vote: bool = False


@dataclass(slots=True)
class VoteResponse:
    term: int
    voter_id: int
    granted: bool
    pre_vote: bool = False
    #: a granted vote: the voter's commit end, so that the new leader knows from where on the
    #: entries it inherits may be committed without their events recorded (`elected_commit_end`)
    commit_end: int = 0


@dataclass(slots=True)
class AppendEntriesRequest:
    term: int
    leader_id: int
    prev_log_index: int  # -1: the entries start the log
    prev_log_term: int
    entries: list[RaftEntry] = field(default_factory=list)
    leader_commit: int = 0  # the leader's commit end (exclusive)


@dataclass(slots=True)
class AppendEntriesResponse:
    term: int
    follower_id: int
    success: bool
    #: success: the end of the prefix that now matches the leader's; failure: where to retry from
    match_end: int = 0


@dataclass(slots=True)
class InstallSnapshotRequest:
    """Raft section 7: the leader's snapshot, for a voter that needs entries it no longer
    holds. Answered with an AppendEntriesResponse whose `match_end` is `end`."""
    term: int
    leader_id: int
    end: int  # the snapshot replaces the entries below this index
    last_term: int  # the term of entry end-1
    state: dict = field(default_factory=dict)


# ---------------------------------------------------------------- supervisor -> node (control socket)
@dataclass(slots=True)
class ControlRequest:
    """Only the supervisor's per-run token is accepted on a node's control socket."""
    token: str
    op: str  # status | shutdown | links | ...
    args: dict = field(default_factory=dict)


@dataclass(slots=True)
class ControlResponse:
    error: Errors = Errors.NONE
    body: dict = field(default_factory=dict)


@dataclass(slots=True)
class ErrorResponse:
    """The answer to a request that could not be decoded or is not served here; a controller
    that is not the active one answers NOT_CONTROLLER with the leader it knows (-1: none)."""
    error: Errors = Errors.INVALID_REQUEST
    message: str = ""
    leader_id: int = -1


NESTED = (FetchPartition, FetchPartitionResult, DivergingEpoch, PartitionMetadata, IsrMember, NewTopic,
          TopicPartition, RaftEntry)

#: Top-level message types in wire order: the index is the type id on the wire.
MESSAGE_TYPES = (
    FetchRequest, FetchResponse, ProduceRequest, ProduceResponse, MetadataRequest,
    MetadataResponse, BrokerRegistrationRequest, BrokerRegistrationResponse,
    BrokerHeartbeatRequest, BrokerHeartbeatResponse, AlterPartitionRequest,
    AlterPartitionResponse, MetadataFetchRequest, MetadataFetchResponse, CreateTopicsRequest,
    CreateTopicsResponse, ControlRequest, ControlResponse, ErrorResponse, GetReplicaLogInfoRequest,
    GetReplicaLogInfoResponse, ElectLeadersRequest, ElectLeadersResponse, AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse, VoteRequest, VoteResponse, AppendEntriesRequest, AppendEntriesResponse,
    InstallSnapshotRequest, DeleteTopicsRequest, DeleteTopicsResponse, CreatePartitionsRequest,
    CreatePartitionsResponse, UnregisterBrokerRequest, UnregisterBrokerResponse,
)
