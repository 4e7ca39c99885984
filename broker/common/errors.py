"""Error codes, named as Kafka names them so a Kafka engineer recognises every answer.

They travel on the wire as their string value; `Errors("...")` of an unknown string is
a decode error, never a crash.
"""
from __future__ import annotations

from enum import Enum


class Errors(str, Enum):
    NONE = "NONE"
    NOT_LEADER_OR_FOLLOWER = "NOT_LEADER_OR_FOLLOWER"
    FENCED_LEADER_EPOCH = "FENCED_LEADER_EPOCH"
    UNKNOWN_LEADER_EPOCH = "UNKNOWN_LEADER_EPOCH"
    NOT_ENOUGH_REPLICAS = "NOT_ENOUGH_REPLICAS"
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = "NOT_ENOUGH_REPLICAS_AFTER_APPEND"
    INVALID_UPDATE_VERSION = "INVALID_UPDATE_VERSION"
    INELIGIBLE_REPLICA = "INELIGIBLE_REPLICA"
    STALE_BROKER_EPOCH = "STALE_BROKER_EPOCH"
    BROKER_ID_NOT_REGISTERED = "BROKER_ID_NOT_REGISTERED"
    DUPLICATE_BROKER_REGISTRATION = "DUPLICATE_BROKER_REGISTRATION"
    UNKNOWN_TOPIC_OR_PARTITION = "UNKNOWN_TOPIC_OR_PARTITION"
    TOPIC_ALREADY_EXISTS = "TOPIC_ALREADY_EXISTS"
    INVALID_REPLICATION_FACTOR = "INVALID_REPLICATION_FACTOR"
    INVALID_REPLICA_ASSIGNMENT = "INVALID_REPLICA_ASSIGNMENT"
    INVALID_REQUEST = "INVALID_REQUEST"
    OFFSET_OUT_OF_RANGE = "OFFSET_OUT_OF_RANGE"
    CORRUPT_MESSAGE = "CORRUPT_MESSAGE"
    REQUEST_TIMED_OUT = "REQUEST_TIMED_OUT"
    NOT_CONTROLLER = "NOT_CONTROLLER"
    BROKER_NOT_AVAILABLE = "BROKER_NOT_AVAILABLE"
    OPERATION_NOT_ATTEMPTED = "OPERATION_NOT_ATTEMPTED"
    UNAUTHORIZED = "UNAUTHORIZED"


#: Errors after which a producer may retry: the request provably did not append
#: (NOT_ENOUGH_REPLICAS) or the client's metadata is stale.
RETRIABLE = frozenset({
    Errors.NOT_LEADER_OR_FOLLOWER,
    Errors.FENCED_LEADER_EPOCH,
    Errors.UNKNOWN_LEADER_EPOCH,
    Errors.NOT_ENOUGH_REPLICAS,
    Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    Errors.REQUEST_TIMED_OUT,
    Errors.BROKER_NOT_AVAILABLE,
    Errors.UNKNOWN_TOPIC_OR_PARTITION,
})

#: Produce errors that prove the record was never appended: the history records them
#: as `fail`; every other error on a send is `info` (outcome unknown). DESIGN section 7.
DEFINITE_PRODUCE_FAILURES = frozenset({
    Errors.NOT_ENOUGH_REPLICAS,
    Errors.NOT_LEADER_OR_FOLLOWER,  # refused before the append: the leader check comes first
    Errors.FENCED_LEADER_EPOCH,
    Errors.UNKNOWN_LEADER_EPOCH,
    Errors.UNKNOWN_TOPIC_OR_PARTITION,
    Errors.INVALID_REQUEST,
    Errors.CORRUPT_MESSAGE,
})
