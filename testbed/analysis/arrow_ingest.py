"""The ingest's fast reader: a record file parsed by Arrow's JSON reader, its rows written as
Parquet from this process.

Spark's JSON reader was the ingest's cost: in a cold JVM, 3.2 s of a 13 s judgment for the
quickstart's 1.4 MB of record files; warm, 15.5-19.5 s for the 1M synthetic run's 312 MB
(its C1 code parses JSON at about a third of C2's speed). Arrow's reader is compiled code
that releases the GIL: that run's ingest takes 2.7-3.2 s with it, its job the same as before.
A cold judgment gains about a second only: its JVM's first queries pay the JVM's warm-up
wherever they come (BENCHMARKS.md, the thirteenth session).

It takes a file only where its rows are exactly what Spark's PERMISSIVE reader makes of it:
every line starts with `{`, ends with a newline (no carriage return) and holds one JSON
object whose fields have the schema's types, its strings are UTF-8, and every line meets its
file's rule (`line_rules`). Anything else (a torn, blank or indented line, a number where a
string is expected, a line lacking a field) returns None, and the ingest gives that file to
Spark's reader, which names the line that does not match. So a run is judged from the same
rows whichever reader took its files (`tests/unit/test_arrow_ingest.py` compares the two).

The fields the writers emit as heterogeneous JSON (`RecordFile.loose`: a poll's `[offset,
value]` pairs, a fault's `params`) have no Arrow type. A poll's records as the clients write
them are cut apart by Arrow's string kernels; any other value is parsed by orjson and
converted as Spark converts a token read into a string: the token's text, which for an
object is the line's own text of it (taken only where it is the compact JSON the writers
write: Spark keeps any spacing, a re-encoding would not).
"""
from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj
import pyarrow.parquet as pq
from pyspark.sql.types import (ArrayType, BooleanType, DataType, IntegerType, LongType, StringType, StructField,
                               StructType)

from testbed.analysis.schemas import RecordFile

_NEWLINE, _BRACE = ord("\n"), ord("{")
#: a line longer than Arrow's block stops the parse; a poll of thousands of records is ~100 kB
_BLOCK = 16 << 20
#: rows of a Parquet file (`TableWriter`)
_FILE_ROWS = 1 << 18


class _Inexact(ValueError):
    """The value has no conversion known to equal Spark's."""


def arrow_type(kind: DataType) -> pa.DataType:
    """The Arrow type Spark's Parquet reader reads back as `kind`."""
    if isinstance(kind, StringType):
        return pa.string()
    if isinstance(kind, IntegerType):
        return pa.int32()
    if isinstance(kind, LongType):
        return pa.int64()
    if isinstance(kind, BooleanType):
        return pa.bool_()
    if isinstance(kind, ArrayType):
        return pa.list_(arrow_type(kind.elementType))
    if isinstance(kind, StructType):
        return pa.struct([arrow_field(f) for f in kind.fields])
    raise TypeError(f"no Arrow type for {kind}")


def arrow_field(field: StructField) -> pa.Field:
    return pa.field(field.name, arrow_type(field.dataType))


def parse(spec: RecordFile, path: Path) -> pa.Table | None:
    """The rows of `path` (a `spec` file), in its order, with the schema's fields; None when
    Arrow's parse is not certain to be Spark's (see the module's docstring)."""
    data = path.read_bytes()
    if not data:
        return pa.Table.from_batches([], pa.schema([arrow_field(f) for f in spec.schema.fields]))
    if b"\r" in data:
        return None  # Spark's reader ends a line at a carriage return too, Arrow's reads it as a space
    octets = np.frombuffer(data, dtype=np.uint8)
    newlines = np.flatnonzero(octets == _NEWLINE)
    if newlines.size == 0 or newlines[-1] != len(data) - 1:
        return None  # a torn last line
    # Every line starts its object: no blank line (Spark skips it), none indented, so a line
    # count equal to Arrow's rows means one object a line (Spark reads the first of two only)
    if data[0] != _BRACE or np.any(octets[newlines[:-1] + 1] != _BRACE):
        return None
    typed = pa.schema([arrow_field(f) for f in spec.schema.fields if f.name not in spec.loose])
    try:
        table = pj.read_json(pa.BufferReader(data), read_options=pj.ReadOptions(block_size=_BLOCK),
                             parse_options=pj.ParseOptions(explicit_schema=typed, unexpected_field_behavior="ignore"))
        table.validate(full=True)  # the parse copies a string's bytes unchecked: Spark decodes them
    except (pa.ArrowException, ValueError):  # a wrong type, not JSON, not UTF-8, a duplicate field
        return None
    if table.num_rows != newlines.size:
        return None  # two objects on a line
    columns = {}
    for field in spec.schema.fields:
        if field.name in spec.loose:
            try:
                columns[field.name] = _loose_column(data, field, newlines)
            except (_Inexact, orjson.JSONDecodeError, pa.ArrowException):
                return None
        else:
            columns[field.name] = table.column(field.name)
    table = pa.table(columns)
    if table.filter(spec.rule.arrow()).num_rows != table.num_rows:
        return None  # Spark's reader names the line and what it lacks
    return table


def _loose_column(data: bytes, field: StructField, newlines: np.ndarray) -> pa.Array:
    """`field` of every line that names it, converted as Spark converts it; null elsewhere.

    A poll's records as the clients write them (`[[offset,"value"],...]`, no escapes) are cut
    apart by Arrow's string kernels, not parsed into Python objects: 10M records took 36 s as
    Python lists. Any other line's value is parsed by orjson and converted one by one."""
    key = b'"' + field.name.encode() + b'"'
    kind = arrow_type(field.dataType)
    convert = _converter(field.dataType, key + b":")
    pairs = field.dataType == _PAIRS
    fast_rows: list[int] = []
    fast: list[bytes] = []
    slow_rows: list[int] = []
    slow: list[object] = []
    at = data.find(key)
    while at != -1:
        row = int(np.searchsorted(newlines, at))
        start, end = (int(newlines[row - 1]) + 1 if row else 0), int(newlines[row])
        text = data[start:end]
        content = _pairs_content(text, at - start, key) if pairs else None
        if content is not None:
            fast_rows.append(row)
            fast.append(content)
        else:
            if _NEGATIVE_ZERO.search(text):
                raise _Inexact("-0")  # Spark keeps the token's text, Python's int has no sign
            line = orjson.loads(text)
            if type(line) is not dict:
                raise _Inexact(field.name)
            slow_rows.append(row)
            slow.append(convert(line.get(field.name), text))
        at = data.find(key, end)
    values = pa.concat_arrays([_pairs_array(fast), pa.array(slow, type=kind), pa.nulls(1, kind)]) if pairs else \
        pa.concat_arrays([pa.array(slow, type=kind), pa.nulls(1, kind)])
    index = np.full(newlines.size, len(values) - 1, dtype=np.int64)
    index[np.array(fast_rows, dtype=np.int64)] = np.arange(len(fast), dtype=np.int64)
    index[np.array(slow_rows, dtype=np.int64)] = np.arange(len(fast), len(fast) + len(slow), dtype=np.int64)
    return values.take(pa.array(index))


_PAIRS = ArrayType(ArrayType(StringType()))
#: a poll's record as the clients write it: an integer offset (no -0) and a value with no
#: escape, control character or `]` (so that `],[` only ever separates two records)
_PAIR = rb'\[(?:0|-?[1-9][0-9]*),"[^"\\\x00-\x1f\]]*"\]'
_PAIRS_AT = re.compile(rb':\[((?:' + _PAIR + rb'(?:,' + _PAIR + rb')*)?)\]')


def _pairs_content(line: bytes, at: int, key: bytes) -> bytes | None:
    """The text between a poll's outer brackets when the line is as the clients write it:
    its records in `_PAIR`'s form, and no other array or object in the line (so that the key
    is the line's own, and named once)."""
    m = _PAIRS_AT.match(line, at + len(key))
    if m is None:
        return None
    before, after = line[:at], line[m.end():]
    if before.count(b"{") != 1 or b"[" in before or b"{" in after or b"[" in after or key in after:
        return None
    return m.group(1)


def _pairs_array(contents: list[bytes]) -> pa.Array:
    """`[[offset, value], ...]` per content, as strings, cut by Arrow's kernels."""
    text = pa.array(contents, pa.binary()).cast(pa.string())  # fails on bytes that are not UTF-8
    lengths = pc.binary_length(text).to_numpy(zero_copy_only=False)
    split = pc.split_pattern(pc.utf8_slice_codeunits(text.filter(pa.array(lengths > 0)), 1, -1), "],[")
    counts = np.zeros(len(contents), dtype=np.int32)  # `[]` holds no record
    counts[lengths > 0] = pc.list_value_length(split).to_numpy(zero_copy_only=False)
    halves = pc.split_pattern(pc.list_flatten(split), ",", max_splits=1)  # `0,"v"` -> `0`, `"v"`
    offsets, values = pc.list_element(halves, 0), pc.utf8_slice_codeunits(pc.list_element(halves, 1), 1, -1)
    n = len(offsets)
    order = np.empty(2 * n, dtype=np.int64)
    order[0::2], order[1::2] = np.arange(n), np.arange(n, 2 * n)
    pairs = pa.ListArray.from_arrays(pa.array(np.arange(0, 2 * n + 1, 2, dtype=np.int32)),
                                     pa.concat_arrays([offsets, values]).take(pa.array(order)))
    ends = np.zeros(len(contents) + 1, dtype=np.int32)
    np.cumsum(counts, out=ends[1:])
    return pa.ListArray.from_arrays(pa.array(ends), pairs)


#: a JSON number token -0, the one integer whose text is not Python's `str` of it (a string
#: that merely looks so sends the file to Spark's reader: slower, never wrong)
_NEGATIVE_ZERO = re.compile(rb"[\[,:]\s*-0\s*[,\]}]")


def _converter(kind: DataType, prefix: bytes | None) -> Callable[[object, bytes], object]:
    """How a value read into a field of `kind` becomes Spark's: a string field keeps a
    string, the text of a number or boolean, or the JSON text of an object or array as it
    stands in the line (`prefix`, the field's key, tells where: only a field of the line's
    own object is found so; an object inside an array is refused)."""
    if isinstance(kind, StringType):
        def text(value: object, line: bytes) -> str | None:
            if type(value) is dict or type(value) is list:
                raw = orjson.dumps(value)
                if prefix is None or prefix + raw not in line:
                    raise _Inexact("spaced JSON")
                return raw.decode()
            return _scalar_text(value)
        return text
    if isinstance(kind, ArrayType):
        element = _converter(kind.elementType, None)

        def array(value: object, line: bytes) -> list[object] | None:
            if value is None:
                return None
            if type(value) is not list:
                raise _Inexact(kind)
            return [element(v, line) for v in value]
        return array
    raise _Inexact(kind)


def _scalar_text(value: object) -> str | None:
    """A JSON scalar read into a string field, as Spark's reader keeps it: a string as it is,
    null as null, a number or boolean as its text. A float is refused: Spark keeps its token's
    text, which Python's parse does not."""
    kind = type(value)
    if kind is str or value is None:
        return value  # type: ignore[return-value]
    if kind is bool:
        return "true" if value else "false"
    if kind is int:
        return str(value)
    raise _Inexact(kind.__name__)


class TableWriter:
    """A table's Parquet files in `directory`, filled run by run, each of at most `_FILE_ROWS`
    rows: a sweep's thousand small runs make a few files, and a large run's table as many as
    Spark's reader made of it (a file of 2.6M rows in 10 row groups was scanned by two tasks
    and made a sweep's job 6 s slower than the 13 files Spark had written)."""

    def __init__(self, directory: Path, schema: pa.Schema, no_dictionary: tuple[str, ...]) -> None:
        self._directory, self._schema = directory, schema
        self._dictionary = [f.name for f in schema if f.name not in no_dictionary]
        self._pending: list[pa.Table] = []
        self._rows = 0
        self._files = 0

    def add(self, table: pa.Table) -> None:
        self._pending.append(table)
        self._rows += table.num_rows
        if self._rows >= _FILE_ROWS:
            self._flush()

    def close(self) -> None:
        if self._pending:
            self._flush()

    def _flush(self) -> None:
        rows = pa.concat_tables(self._pending)
        for start in range(0, max(rows.num_rows, 1), _FILE_ROWS):
            pq.write_table(rows.slice(start, _FILE_ROWS), self._directory / f"part-arrow-{self._files:05d}.parquet",
                           use_dictionary=self._dictionary, compression="snappy")
            self._files += 1
        self._pending, self._rows = [], 0
