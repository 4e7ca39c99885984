"""JSONL record files of one run or a tree of runs -> Parquet tables partitioned by run id.

Every line is parsed against an explicit schema (`schemas.py`): by Arrow's reader in this
process where the file is as the writers write it (`arrow_ingest`), by Spark's otherwise. A
line that does not match stops the ingest with an error naming the file and the line, except
the last line of a file appended to during the run when it is not even JSON: a writer killed
mid-line leaves exactly that (DESIGN section 7: "a run whose supervisor was killed still
leaves an analysable prefix"), unless the run finished (`summary.json`, written last). The
final files are written whole and renamed into place, so a torn line there is damage, and a
run missing part of its final logs is not judged on the rest.

A small input's tables whose every file Arrow's reader took reach Spark as those rows
themselves (a local relation, which the job's first holds read once) besides being written:
a cold JVM then loads and compiles no Parquet reader for them, about 0.6 s of a cold
`analyze` of the quickstart's run. The Parquet tables are written all the same.
"""
from __future__ import annotations

import json
import re
import shutil
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from functools import reduce
from pathlib import Path

import numpy as np
import pyarrow as pa
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.connect.session import SparkSession
from pyspark.sql.types import BooleanType, DataType, DoubleType, IntegerType, LongType, StringType, StructField, StructType

from testbed.analysis import line_rules
from testbed.analysis.arrow_ingest import TableWriter, arrow_field, parse
from testbed.analysis.readable_paths import link_to, needs_link, readable
from testbed.analysis.runinfo import finished
from testbed.analysis.schemas import CORRUPT, RECORD_FILES, RecordFile
from testbed.common.pools import thread_pool

RUN_ID = "run_id"
SEQ = "seq"  # position of a line in its file (increasing with the line number, not dense)
_BAD = "_bad"  # the line is corrupt or lacks a required field, decided while the JSON is parsed
REQUIRED_FILES = ("history.jsonl", "events.jsonl")


@dataclass(frozen=True)
class Tables:
    """The run tables of one Spark job, each with a `run_id` column and a `seq` column."""

    history: DataFrame
    events: DataFrame
    faults: DataFrame
    final_logs: DataFrame
    final_replicas: DataFrame


def run_ids(runs: list[Path]) -> dict[Path, str]:
    """Each run's id in one judgment: its directory's name, unless two runs share a name (two
    sim sweeps or matrix rounds of one topology under one `runs/`): then every run's id is
    the last few components of its path, as many as tell them all apart (`<sweep>/<seed>`).
    The same number for every run lets the ingest cut each id out of a file's path alike."""
    for depth in range(1, max((len(run.parts) for run in runs), default=1) + 1):
        ids = {run: "/".join(run.parts[-depth:]) for run in runs}
        if len(set(ids.values())) == len(ids):
            return ids
    return {run: str(run) for run in runs}  # unreachable: distinct absolute paths differ somewhere


#: Arrow's parse of a record file, started ahead of the ingest (`parse_ahead`), by table and path
Ahead = dict[tuple[str, Path], "Future[pa.Table | None]"]


def parse_ahead(runs: list[Path]) -> Ahead:
    """Arrow's parse of every record file of `runs`, started now in threads for `ingest` to
    take: a small input is parsed while its JVM starts (0.2 s of a cold `analyze` of the
    quickstart's run, most of it Arrow's first use in the process). Nothing is written."""
    pool = ThreadPoolExecutor(max_workers=len(RECORD_FILES), thread_name_prefix="isrlab-parse")
    try:
        return {(spec.table, run / spec.path): pool.submit(parse, spec, run / spec.path)
                for run in runs for spec in RECORD_FILES if (run / spec.path).is_file()}
    finally:
        pool.shutdown(wait=False)  # its threads end with the last parse


def ingest(spark: SparkSession, runs: dict[Path, str], warehouse: Path,
           handed_over: bool = False, ahead: Ahead | None = None) -> tuple[Tables, dict[str, str]]:
    """Parse every record file of `runs` (each run's directory and id, `run_ids`) into
    `warehouse/<table>/` (a `run_id` column says whose each row is: a directory per run cost
    a thousand runs a minute of small files); return the rows of the runs whose files all
    match, and for each other run why it was rejected (the file and line of its first
    mismatch): those runs cannot be judged. `handed_over`: a table Arrow's reader read whole
    is handed to Spark as its rows (the module's docstring), for an input of a few megabytes.
    `ahead`: the files' parses `parse_ahead` started."""
    frames = {}
    ids = list(runs.values())
    rejected: dict[str, str] = {rid: f"{run / name}: missing, so the run cannot be judged"
                                for run, rid in runs.items() for name in reversed(REQUIRED_FILES)
                                if not (run / name).is_file()}
    for run, rid in runs.items():  # every run records operations (the final read's at least) and events (the
        for name, what in zip(REQUIRED_FILES, ("operation", "event")):  # controller's election): none is cut short
            if rid not in rejected and (run / name).stat().st_size == 0:
                rejected[rid] = f"{run / name}: empty (no {what} was recorded), so the run cannot be judged"
    read_as = _read_dirs(runs)
    taken = {(spec.table, read_as[run] / spec.path): parsed for run in runs for spec in RECORD_FILES
             if (parsed := (ahead or {}).get((spec.table, run / spec.path))) is not None}  # as the files are read
    warehouse.mkdir(parents=True, exist_ok=True)
    tables = readable(warehouse)
    with thread_pool(len(RECORD_FILES), "isrlab-ingest") as pool:
        writes = {}
        for spec in RECORD_FILES:
            files = {read_as[run] / spec.path: rid for run, rid in runs.items() if (run / spec.path).is_file()}
            if files:  # the five writes are small jobs: together, their fixed costs overlap
                writes[spec] = pool.submit(_write_table, spark, spec, files, warehouse / spec.table,
                                           read_as != {run: run for run in runs}, handed_over, taken)
            else:  # and no earlier judgment's table of it stays beside this one's
                shutil.rmtree(warehouse / spec.table, ignore_errors=True)
                frames[spec.table] = spark.createDataFrame([], _stored_schema(spec))
        by_spark = []
        for spec, write in writes.items():
            spark_read, rows = write.result()
            by_spark.append(spark_read)
            stored = (spark.createDataFrame(rows, _stored_schema(spec)) if rows is not None
                      else spark.read.schema(_stored_schema(spec)).parquet(hadoop_path(tables / spec.table)))
            frames[spec.table] = stored.where(F.col(RUN_ID).isin(ids))
    if any(by_spark):  # a file Arrow's reader took has no line that does not match
        for run_id, message in _mismatches(frames, {rid: run for run, rid in runs.items()}).items():
            rejected.setdefault(run_id, message)
    good = [i for i in ids if i not in rejected]
    tables = {name: f.where(~F.col(_BAD) & F.col(RUN_ID).isin(good)).drop(CORRUPT, _BAD) for name, f in frames.items()}
    return Tables(**tables | {"events": of_whom(once_per_record(tables["events"]))}), rejected


def once_per_record(events: DataFrame) -> DataFrame:
    """The events, each controller record's once: an active controller that saw a record
    committed and died before its followers heard of the commit recorded its event, and the
    next leader, committing the record again, records it again (it cannot know). Both carry
    the record's `metadata_offset`; the first recorded is kept. Events without one (a broker's,
    or a run recorded before the field) are all kept."""
    first = Window.partitionBy(RUN_ID, "metadata_offset").orderBy("time_ns", SEQ)
    copies = events.where(F.col("metadata_offset").isNotNull())
    return (events.where(F.col("metadata_offset").isNull())
            .unionByName(copies.withColumn("_copy", F.row_number().over(first)).where(F.col("_copy") == 1)
                         .drop("_copy")))


def of_whom(events: DataFrame) -> DataFrame:
    """The events, a registration's `broker_id` and an election's `controller_id` filled in
    from the node that recorded it where the line names only that (`"node": "broker-3"`,
    `"kind": "registered"`): the format's rule (`schemas._WHO`) lets no other such line in."""
    def own(kind: str, prefix: str, field: str) -> Column:
        mine = F.regexp_extract("node", f"^{prefix}-([0-9]+)$", 1)
        return F.when(F.col(field).isNull() & (F.col("kind") == kind) & (mine != ""),
                      mine.cast("int")).otherwise(F.col(field))
    return (events.withColumn("broker_id", own("registered", "broker", "broker_id"))
            .withColumn("controller_id", own("controller-elected", "controller", "controller_id")))


def _read_dirs(runs: dict[Path, str]) -> dict[Path, Path]:
    """Each run's directory as the readers take it: itself, or when one of them cannot be
    listed (`readable_paths`), a link to each, so that the run of every line is found alike."""
    if not any(needs_link(run) for run in runs):
        return {run: run for run in runs}
    return {run: link_to(run) for run in runs}


#: what a Hadoop path pattern reads as a wildcard (a reader's paths are patterns)
_GLOB = re.compile(r"([\\\[\]{}*?])")


def hadoop_path(path: Path) -> str:
    """`path` as a Spark reader takes it: literally. Readers expand a path as a pattern, so a
    run directory named `cell-description=a[1]` matched nothing (and its siblings were listed,
    where a name with a colon broke the listing)."""
    return _GLOB.sub(r"\\\1", str(path))


def _stored_schema(spec: RecordFile) -> StructType:
    return StructType(spec.schema.fields + [StructField(CORRUPT, StringType()), StructField(SEQ, LongType()),
                                            StructField(_BAD, BooleanType()), StructField(RUN_ID, StringType())])


def _unquote(segment: Column) -> Column:
    """A file URI's path segment as the file system names it (`input_file_name` escapes a
    space as %20 and % as %25; a + stays a +, which URL decoding would read as a space)."""
    return F.url_decode(F.replace(segment, F.lit("+"), F.lit("%2B")))


#: columns whose values rarely repeat: a Parquet dictionary for them is built, overflows and is
#: dropped for every page (a tenth of the ingest's CPU on ten million records)
_UNIQUE_COLUMNS = ("value", "records", CORRUPT)


def _run_of_line(spec: RecordFile, files: dict[Path, str], linked: bool) -> Column:
    """The run of a line: the id of the run its file is in (the last components of the run
    directory's path, `run_ids`; `spec.path` is relative to it), cut out of the file's name
    without a regular expression (which cost a third of the parse), or simply that id when
    there is one file. Files read through links (`_read_dirs`) have the link's name there,
    which names their run."""
    if len(files) == 1:
        return F.lit(next(iter(files.values())))
    parts = 1 if linked else next(iter(files.values())).count("/") + 1
    depth = len(Path(spec.path).parts) + parts
    run = F.substring_index(F.substring_index(F.input_file_name(), "/", -depth), "/", parts)
    if linked:
        links = {path.parts[-depth]: rid for path, rid in files.items()}
        return F.element_at(F.create_map(*[F.lit(x) for pair in links.items() for x in pair]), run)
    return F.when(run.contains("%"), _unquote(run)).otherwise(run)


def _write_table(spark: SparkSession, spec: RecordFile, files: dict[Path, str], target: Path, linked: bool,
                 keep: bool, ahead: Ahead | None = None) -> tuple[bool, pa.Table | None]:
    """`target`, the table of `spec`'s files (each with its run's id): the files Arrow's reader
    takes (`arrow_ingest`; parsed ahead, or now) in Parquet files written here, the others by
    Spark's reader beside it. Returns whether Spark's reader took any, and when it took none
    and `keep` says so, the rows written."""
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    schema = pa.schema([arrow_field(f) for f in _stored_schema(spec).fields])
    writer = TableWriter(target, schema, _UNIQUE_COLUMNS)
    rest = {}
    parts = []
    try:
        for path, rid in files.items():
            try:
                parsed = (ahead or {}).get((spec.table, path))
                table = parse(spec, path) if parsed is None else parsed.result()
            except Exception:  # noqa: BLE001 - an unreadable file, an input no test foresaw: Spark's
                table = None  # reader, which judged every file before, judges it or says why not
            if table is None:
                rest[path] = rid
                continue
            rows = table.num_rows
            part = (table.append_column(CORRUPT, pa.nulls(rows, pa.string()))
                    .append_column(SEQ, pa.array(np.arange(rows, dtype=np.int64)))
                    .append_column(_BAD, pa.repeat(pa.scalar(False), rows))
                    .append_column(RUN_ID, pa.repeat(pa.scalar(rid, pa.string()), rows)))
            writer.add(part)
            parts.append(part)
    finally:
        writer.close()
    if rest:
        _to_parquet(spark, spec, rest, target, linked)
        return True, None
    return False, pa.concat_tables(parts) if keep and parts else None


def _to_parquet(spark: SparkSession, spec: RecordFile, files: dict[Path, str], target: Path, linked: bool) -> None:
    """One pass over the JSON: parse, number the lines, judge each line, write Parquet. Every
    later read is of the Parquet, and the format check reads only the `_bad` column. A run
    has one file of each table, so its id names the file a line came from."""
    schema = StructType(spec.schema.fields + [StructField(CORRUPT, StringType())])
    raw = (spark.read.schema(schema).option("mode", "PERMISSIVE").option("columnNameOfCorruptRecord", CORRUPT)
           .json([hadoop_path(f) for f in files]))
    writer = (raw.withColumn(SEQ, F.monotonically_increasing_id())
              .withColumn(_BAD, F.col(CORRUPT).isNotNull() | ~F.coalesce(F.expr(spec.required), F.lit(False)))
              .withColumn(RUN_ID, _run_of_line(spec, files, linked))
              .write.mode("append"))
    for column in _UNIQUE_COLUMNS:
        writer = writer.option(f"parquet.enable.dictionary#{column}", "false")
    writer.parquet(str(target))


def _mismatches(frames: dict[str, DataFrame], runs: dict[str, Path]) -> dict[str, str]:
    """Per run, the first line of its files that is corrupt or misses a required field, other
    than a truncated (non-JSON, unterminated) last line. Bad lines are rare, so they are collected first,
    from every table in one action, and only their files (a table's rows of one run) are
    scanned again for their last line and line numbers."""
    specs = {spec.table: spec for spec in RECORD_FILES}
    # the text as bytes: a line that is not UTF-8 comes back as it is, where a string column
    # failed to decode on the client (an internal error instead of the line named)
    bad = [{**row.asDict(), CORRUPT: _text(row[CORRUPT]), "fields": _text(row["fields"])}
           for row in reduce(DataFrame.unionByName, [
               frame.where(F.col(_BAD)).select(
                   F.lit(table).alias("table"), SEQ, F.col(CORRUPT).cast("binary").alias(CORRUPT), RUN_ID,
                   F.to_json(F.struct(*specs[table].schema.fieldNames())).cast("binary").alias("fields"))
               for table, frame in frames.items()]).collect()]
    first: dict[tuple[str, str], dict] = {}
    for table in sorted({row["table"] for row in bad}):
        rows = [row for row in bad if row["table"] == table]
        frame = frames[table]
        ids = sorted({row[RUN_ID] for row in rows})
        last = {r[RUN_ID]: r["_last"] for r in frame.where(F.col(RUN_ID).isin(ids)).groupBy(RUN_ID)
                .agg(F.max(SEQ).alias("_last")).collect()}
        for row in sorted(rows, key=lambda r: r[SEQ]):
            torn = (specs[table].appended and row[SEQ] == last[row[RUN_ID]] and row[CORRUPT] is not None
                    and not _is_json(row[CORRUPT]) and not _ends_a_line(runs[row[RUN_ID]] / specs[table].path))
            if torn and finished(runs[row[RUN_ID]]):  # damage, not a killed writer's torn line
                first.setdefault((table, row[RUN_ID]), {**row, _CUT: True})
            elif not torn:
                first.setdefault((table, row[RUN_ID]), row)
    out = {}
    order = list(specs)
    for (table, run_id), row in sorted(first.items(), key=lambda item: (order.index(item[0][0]), item[0][1])):
        spec = specs[table]
        line = frames[table].where((F.col(RUN_ID) == run_id) & (F.col(SEQ) <= row[SEQ])).count()
        fields = json.loads(row["fields"])
        text = row[CORRUPT] or ", ".join(f"{k}={v!r}" for k, v in fields.items())
        why = (_CUT_AFTER_THE_RUN if row.get(_CUT) else _mistyped(spec.schema, row[CORRUPT]) if row[CORRUPT]
               else _unmet(spec, fields))
        out.setdefault(run_id, f"{runs[run_id] / spec.path}: line {line}: {why}, so the file does not match the "
                               f"{spec.table} format of DESIGN section 7: {printable(text[:300])}")
    return out


def _mistyped(schema: StructType, text: str) -> str:
    """Why a line did not read, naming the fields of the wrong type where it is JSON: the
    reason named none, and a tester searched a line of nine fields for `"offset": "one"`."""
    try:
        record = json.loads(text)
    except ValueError:
        record = None
    if not isinstance(record, dict):
        return "is not valid JSON of the expected types"
    wrong = [f"{field.name} is {_json_kind(record[field.name])}, expected {_KINDS[type(field.dataType)]}"
             for field in schema.fields if type(field.dataType) in _KINDS and record.get(field.name) is not None
             and not _fits(record[field.name], field.dataType)]
    return "is not valid JSON of the expected types" + (f" ({'; '.join(wrong)})" if wrong else "")


_KINDS = {LongType: "an integer", IntegerType: "an integer", StringType: "a string", BooleanType: "true or false",
          DoubleType: "a number"}


def _fits(value: object, kind: DataType) -> bool:
    if isinstance(kind, LongType | IntegerType):
        bits = 63 if isinstance(kind, LongType) else 31
        return isinstance(value, int) and not isinstance(value, bool) and -2**bits <= value < 2**bits
    if isinstance(kind, DoubleType):
        return isinstance(value, int | float) and not isinstance(value, bool)
    if isinstance(kind, BooleanType):
        return isinstance(value, bool)
    return isinstance(value, str)


def _json_kind(value: object) -> str:
    if isinstance(value, bool):
        return "true or false"
    if isinstance(value, int):
        return f"the integer {value}" if abs(value) < 10**30 else "an integer beyond 64 bits"
    if isinstance(value, float):
        return f"the number {value:g}"
    if isinstance(value, str):
        return f"the string {printable(json.dumps(value)[:40])}"
    return "a list" if isinstance(value, list) else "a mapping"


def _unmet(spec: RecordFile, fields: dict) -> str:
    """Why a line of well-typed fields does not match, in words (what of its rule it misses)."""
    unmet = line_rules.unmet(spec.rule, fields)
    if not unmet:  # (the readers' cast of a value disagreed with the words': the rule itself)
        return f"lacks a field it needs ({spec.required})"
    return f"does not hold what a line of {spec.path} needs: {'; '.join(unmet)}"


def printable(text: str) -> str:
    """`text` with its control characters (a NUL, an escape sequence) written as `\\xNN`, so that a
    damaged line quoted in a reason reaches a terminal and results.json as text."""
    return "".join(c if c.isprintable() or c == " " else c.encode("unicode_escape").decode("ascii") for c in text)


_CUT = "_cut"  # a bad row's mark: a torn last line in a run that finished
_CUT_AFTER_THE_RUN = ("is cut off mid-line, though the run finished (its summary.json is written after the last "
                      "line of every record file): the file was cut after the run, and what it held past the cut "
                      "is unknown")


def _text(data: bytes | bytearray | None) -> str | None:
    return None if data is None else bytes(data).decode("utf-8", "replace")


def _ends_a_line(path: Path) -> bool:
    """A writer killed mid-line leaves a last line without its newline; a whole line of
    garbage at the end is damage, not a torn tail."""
    with open(path, "rb") as f:
        f.seek(-1, 2)
        return f.read(1) == b"\n"


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True
