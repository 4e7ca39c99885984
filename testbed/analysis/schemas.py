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

CORRUPT = "_corrupt"


def _struct(*fields: tuple[str, DataType]) -> StructType:
    return StructType([StructField(name, kind, True) for name, kind in fields])


_INTS = ArrayType(IntegerType())

HISTORY = _struct(
    ("process", StringType()), ("type", StringType()), ("f", StringType()), ("topic", StringType()),
    ("partition", IntegerType()), ("value", StringType()), ("acks", StringType()), ("offset", LongType()),
    ("error", StringType()), ("records", ArrayType(ArrayType(StringType()))), ("time_ns", LongType()),
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

    `required` is a Spark SQL predicate over a parsed line; a line for which it is not true
    does not match the format (a missing field reads as null, which JSON parsing alone accepts).
    """

    table: str
    path: str  # relative to the run directory
    schema: StructType
    required: str
    #: appended to while the run runs, so a writer killed mid-line may leave its last line
    #: torn (tolerated); the final files are written whole at the end, and renamed into place
    appended: bool = True


_SEND = ("f = 'send' AND topic IS NOT NULL AND partition IS NOT NULL AND value IS NOT NULL "
         "AND acks IN ('all', '1', '0') AND (type <> 'ok' OR acks = '0' OR offset IS NOT NULL)")
_POLL = "f = 'poll' AND topic IS NOT NULL AND partition IS NOT NULL AND (type <> 'ok' OR records IS NOT NULL)"

RECORD_FILES: tuple[RecordFile, ...] = (
    RecordFile("history", "history.jsonl", HISTORY,
               f"process IS NOT NULL AND time_ns IS NOT NULL AND type IN ('invoke', 'ok', 'fail', 'info') "
               f"AND (({_SEND}) OR ({_POLL}))"),
    RecordFile("events", "events.jsonl", EVENTS, "node IS NOT NULL AND time_ns IS NOT NULL AND kind IS NOT NULL"),
    RecordFile("faults", "faults.jsonl", FAULTS,
               "time_ns IS NOT NULL AND do IS NOT NULL AND phase IN ('start', 'end')"),
    RecordFile("final_logs", "final/logs.jsonl", FINAL_LOGS,
               "node IS NOT NULL AND topic IS NOT NULL AND partition IS NOT NULL AND offset IS NOT NULL "
               "AND value IS NOT NULL", appended=False),
    RecordFile("final_replicas", "final/replicas.jsonl", FINAL_REPLICAS,
               "node IS NOT NULL AND topic IS NOT NULL AND partition IS NOT NULL AND leo IS NOT NULL "
               "AND hwm IS NOT NULL AND is_leader IS NOT NULL", appended=False),
)
