"""The records of the metadata log (R22): every controller decision is one of these.

Brokers apply them in log order and act on the materialised image (R3), see
`broker/protocol/metadata_image.py`. `PartitionRecord` carries a partition's whole state
after a change rather than a delta: a broker that skips ahead still lands on the truth.
"""
from __future__ import annotations

import json
import zlib
from dataclasses import asdict, dataclass, field, fields
from typing import Any

NO_LEADER = -1


@dataclass
class RegisterBrokerRecord:
    """R23: the broker epoch is the offset of this record in the metadata log."""
    broker_id: int
    broker_epoch: int
    incarnation_id: str
    rack: str | None
    clean: bool  # R28: registered with the epoch of its clean-shutdown file
    fenced: bool = True
    endpoint: str = ""  # where it takes requests (R38: a broker added at run time is found here)


@dataclass
class BrokerRegistrationChangeRecord:
    """Fencing (R24) and controlled shutdown (R37) of one broker epoch."""
    broker_id: int
    broker_epoch: int
    fenced: bool | None = None
    in_controlled_shutdown: bool | None = None


@dataclass
class UnregisterBrokerRecord:
    """R39: the broker's registration is removed (Kafka's UnregisterBrokerRecord). Its epoch is
    never reused: a later registration of the id gets the offset of its own record (R23)."""
    broker_id: int
    broker_epoch: int


@dataclass
class TopicRecord:
    name: str
    partitions: int
    replication_factor: int
    min_insync_replicas: int
    config: dict = field(default_factory=dict)


@dataclass
class RemoveTopicRecord:
    """R40: the topic and all its partitions leave the metadata (Kafka's RemoveTopicRecord);
    every broker then closes its replicas of it and deletes their logs."""
    name: str


@dataclass
class PartitionCountRecord:
    """R40: the topic grew to `partitions` partitions; the new ones' PartitionRecords follow.
    Kafka has no such record (its partitions live on their own); here the TopicRecord holds
    the count, so growing it is a record of its own."""
    name: str
    partitions: int


@dataclass
class PartitionRecord:
    """The whole state of one partition after a change (R1), and why it changed."""
    topic: str
    partition: int
    replicas: list[int]
    isr: list[int]
    leader: int = NO_LEADER
    leader_epoch: int = 0
    partition_epoch: int = 0
    elr: list[int] = field(default_factory=list)
    last_known_elr: list[int] = field(default_factory=list)
    adding: list[int] = field(default_factory=list)
    removing: list[int] = field(default_factory=list)
    reason: str = "create"


@dataclass
class LeaderChangeRecord:
    """The first record of every active controller's term (R22): it commits what earlier
    leaders left uncommitted, and it changes nothing else."""
    leader: int
    term: int


RECORD_TYPES: dict[str, type] = {
    "leader-change": LeaderChangeRecord,
    "register-broker": RegisterBrokerRecord,
    "broker-registration-change": BrokerRegistrationChangeRecord,
    "topic": TopicRecord,
    "partition": PartitionRecord,
    "remove-topic": RemoveTopicRecord,
    "partition-count": PartitionCountRecord,
    "unregister-broker": UnregisterBrokerRecord,
}
_TYPE_OF = {cls: name for name, cls in RECORD_TYPES.items()}

MetadataRecord = (RegisterBrokerRecord | BrokerRegistrationChangeRecord | TopicRecord | PartitionRecord
                  | LeaderChangeRecord | RemoveTopicRecord | PartitionCountRecord | UnregisterBrokerRecord)


#: each record type's fields, in their order (`asdict`'s)
_FIELD_NAMES = {cls: tuple(f.name for f in fields(cls)) for cls in RECORD_TYPES.values()}
#: the values `asdict` keeps as they are (its deep copy of an immutable value is the value)
_ATOMS = frozenset({int, str, bool, float, type(None)})


def to_dict(record: MetadataRecord) -> dict[str, Any]:
    """`asdict(record)` and its type. A record whose values are atoms and lists of ints (all but
    a TopicRecord with a config) is copied field by field, the lists as new lists, which is what
    `asdict`'s recursive deep copy gives at some ten times the cost: the controller turns every
    record it appends into a dict, and a snapshot every record of its image."""
    d: dict[str, Any] = {}
    for name in _FIELD_NAMES[type(record)]:
        value = getattr(record, name)
        if type(value) is list and all(type(x) is int for x in value):
            value = list(value)
        elif type(value) not in _ATOMS:
            d = asdict(record)
            break
        d[name] = value
    d["type"] = _TYPE_OF[type(record)]
    return d


class BadRecord(ValueError):
    pass


def from_dict(d: Any) -> MetadataRecord:
    """Rebuild a record; raises BadRecord for anything that is not one."""
    if not isinstance(d, dict):
        raise BadRecord(f"metadata record is {type(d).__name__}, expected a map")
    cls = RECORD_TYPES.get(d.get("type"))
    if cls is None:
        raise BadRecord(f"unknown metadata record type {d.get('type')!r}")
    names = _FIELD_NAMES[cls]
    try:
        return cls(**{k: v for k, v in d.items() if k in names})
    except TypeError as e:
        raise BadRecord(f"bad {d.get('type')} record: {e}") from None


#: every this many records, controllers (`metadata-committed`) and brokers (`metadata-applied`)
#: record the digest of the metadata log up to there, so that I8 can be checked from the run
DIGEST_INTERVAL = 8


#: canonical JSON: `json.dumps(record, sort_keys=True, separators=(",", ":"))` makes this encoder
#: anew for each call (it keeps nothing between calls), and every broker digests every record
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"))


def chain_digest(previous: int, record: Any) -> int:
    """The digest of a metadata log prefix extended by `record` (CRC-32 over canonical JSON)."""
    return zlib.crc32(_CANONICAL.encode(record).encode(), previous)
