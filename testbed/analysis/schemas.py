"""Explicit schemas of the run directory's record files (DESIGN section 7).

Spark never infers a schema here: inference reads every file twice and gives a different
type to a field that happens to hold only small numbers in one run. Fields the writers
emit as heterogeneous JSON (a poll's `[offset, value]` pairs, a fault's `params` and
`effect` objects) are read as strings: Spark's JSON reader keeps the raw JSON text of any
token read into a string field, and the pipeline converts it where it needs it.
"""
from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DataType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from testbed.analysis.line_rules import AllOf, AnyOf, OneOf, Other, Prefix, Present, Rule, present
from testbed.analysis.run_dirs import RECORD_PATHS

CORRUPT = "_corrupt"


def _struct(*fields: tuple[str, DataType]) -> StructType:
    return StructType([StructField(name, kind, True) for name, kind in fields])


_INTS = ArrayType(IntegerType())

HISTORY = _struct(
    ("process", StringType()), ("type", StringType()), ("f", StringType()), ("topic", StringType()),
    ("partition", IntegerType()), ("value", StringType()), ("acks", StringType()), ("offset", LongType()),
    ("error", StringType()), ("records", ArrayType(ArrayType(StringType()))), ("time_ns", LongType()),
    ("node", StringType()),  # the broker that acknowledged or answered (runs recorded before: none)
)

EVENTS = _struct(
    ("node", StringType()), ("time_ns", LongType()), ("kind", StringType()), ("topic", StringType()),
    ("partition", IntegerType()), ("broker_id", IntegerType()), ("broker_epoch", LongType()),
    ("clean", BooleanType()), ("incarnation_id", StringType()), ("leader", IntegerType()),
    ("leader_epoch", IntegerType()), ("partition_epoch", IntegerType()), ("isr", _INTS), ("elr", _INTS),
    ("last_known_elr", _INTS), ("replicas", _INTS), ("adding", _INTS), ("removing", _INTS),
    ("reason", StringType()), ("leo", LongType()), ("hwm", LongType()), ("from", LongType()), ("to", LongType()),
    ("valid_to", LongType()), ("dropped_bytes", LongType()), ("controller_id", IntegerType()), ("term", LongType()),
    ("mode", StringType()), ("offset", LongType()), ("digest", LongType()), ("rack", StringType()),
    ("metadata_offset", LongType()),
    ("log_infos", ArrayType(_struct(("broker", IntegerType()), ("broker_epoch", LongType()),
                                    ("last_written_epoch", IntegerType()), ("leo", LongType())))),
)

FAULTS = _struct(
    ("time_ns", LongType()), ("do", StringType()), ("target", StringType()), ("resolved", ArrayType(StringType())),
    ("params", StringType()), ("origin", StringType()), ("phase", StringType()), ("effect", StringType()),
)

FINAL_LOGS = _struct(
    ("node", StringType()), ("topic", StringType()), ("partition", IntegerType()), ("offset", LongType()),
    ("leader_epoch", IntegerType()), ("value", StringType()),
)

FINAL_REPLICAS = _struct(
    ("node", StringType()), ("topic", StringType()), ("partition", IntegerType()), ("leo", LongType()),
    ("hwm", LongType()), ("leader_epoch", IntegerType()), ("is_leader", BooleanType()),
)


@dataclass(frozen=True)
class RecordFile:
    """One record file of a run: where it lives, its schema, and what a valid line must hold.

    `rule` is what a valid line holds beyond its types (`line_rules`); a line for which it
    is not true does not match the format (a missing field reads as null, which JSON parsing
    alone accepts). `loose` names the fields the writers emit as heterogeneous JSON.
    """

    table: str
    path: str  # relative to the run directory
    schema: StructType
    rule: Rule
    #: appended to while the run runs, so a writer killed mid-line may leave its last line
    #: torn (tolerated); the final files are written whole at the end, and renamed into place
    appended: bool = True
    loose: tuple[str, ...] = ()

    @property
    def required(self) -> str:
        """The rule as the Spark SQL predicate the ingest evaluates and a mismatch quotes."""
        return self.rule.sql()


_SEND = AllOf((OneOf("f", ("send",)), *present("topic", "partition", "value"), OneOf("acks", ("all", "1", "0")),
               AnyOf((Other("type", "ok"), OneOf("acks", ("0",)), Present("offset")))))
_POLL = AllOf((OneOf("f", ("poll",)), *present("topic", "partition"),
               AnyOf((Other("type", "ok"), Present("records")))))

#: who a registration or a controller's election is of: its `broker_id` / `controller_id`, or
#: the node that recorded it (`"node": "broker-3"` recording its own registration, as a
#: hand-written run may). Without either, unclean_exclusion and metadata_divergence counted
#: nothing and said nothing (a tester's `"broker": 3`).
_WHO = (AnyOf((Other("kind", "registered"), Present("broker_id"), Prefix("node", "broker-"))),
        AnyOf((Other("kind", "controller-elected"), Present("controller_id"), Prefix("node", "controller-"))),
        AnyOf((Other("kind", "controller-elected"), Present("term"))))

RECORD_FILES: tuple[RecordFile, ...] = (
    RecordFile("history", RECORD_PATHS["history"], HISTORY,
               AllOf((*present("process", "time_ns"), OneOf("type", ("invoke", "ok", "fail", "info")),
                      AnyOf((_SEND, _POLL)))), loose=("records",)),
    RecordFile("events", RECORD_PATHS["events"], EVENTS, AllOf((*present("node", "time_ns", "kind"), *_WHO))),
    RecordFile("faults", RECORD_PATHS["faults"], FAULTS,
               AllOf((*present("time_ns", "do"), OneOf("phase", ("start", "end")))), loose=("params", "effect")),
    RecordFile("final_logs", RECORD_PATHS["final_logs"], FINAL_LOGS,
               AllOf(present("node", "topic", "partition", "offset", "value")), appended=False),
    RecordFile("final_replicas", RECORD_PATHS["final_replicas"], FINAL_REPLICAS,
               AllOf(present("node", "topic", "partition", "leo", "hwm", "is_leader")), appended=False),
)
