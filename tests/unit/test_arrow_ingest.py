"""The ingest's two readers make the same rows (`arrow_ingest`): Arrow's reader takes a file
only when its rows are Spark's, and the rule a line must meet is judged alike by both
(`line_rules`)."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from testbed.analysis.arrow_ingest import parse
from testbed.analysis.ingest import SEQ, Tables, _to_parquet, ingest
from testbed.analysis.schemas import RECORD_FILES, RecordFile
from testbed.config.loader import load_topology
from testbed.sim.run import run_seed
from tests.unit.analysis_fixtures import spark  # noqa: F401 - the session fixture

SPECS = {spec.table: spec for spec in RECORD_FILES}
ROOT = Path(__file__).resolve().parents[2]

#: valid lines the writers do not all emit, each read the same by both readers
HAND_MADE = {
    "history": [
        {"process": "consumer-0", "type": "ok", "f": "poll", "topic": "t", "partition": 2,
         "records": [[0, "a"], [1, None], [2, "é \"quoted\" \\ 😀"], [-0, "x"], [12345678901234, "big"]],
         "time_ns": 5},
        {"process": "producer-0", "type": "invoke", "f": "send", "topic": "t", "partition": 0, "value": "v",
         "acks": "all", "time_ns": 6, "unknown_field": {"ignored": [1, 2.5]}},
        {"process": "producer-0", "type": "ok", "f": "send", "topic": "t", "partition": 0, "value": "v",
         "acks": "all", "offset": 3, "time_ns": 7, "records": None},
        {"process": "consumer-0", "type": "fail", "f": "poll", "topic": "t", "partition": 2, "error": "timeout",
         "time_ns": 8, "records": [[True, False], []]},
    ],
    "faults": [
        {"time_ns": 1, "do": "lossy-crash", "target": "broker-1", "resolved": ["broker-1"], "origin": "faults[0]",
         "phase": "start", "params": {"loss": "torn", "n": 3, "ok": True, "nested": {"list": [1, "two", None]}}},
        {"time_ns": 2, "do": "lossy-crash", "target": "broker-1", "resolved": [], "origin": "faults[0]",
         "phase": "end", "params": {}, "effect": {"killed": {"broker-1": 1}, "word": "ünïcode"}},
        {"time_ns": 3, "do": "pause", "phase": "end", "params": "as text", "effect": 7},
        {"time_ns": 4, "do": "pause", "phase": "start", "params": None, "effect": [True, None]},
    ],
}


def _spark_rows(session: object, spec: RecordFile, path: Path, target: Path) -> list[dict]:
    _to_parquet(session, spec, {path: "r"}, target, linked=False)
    rows = pq.read_table(target).to_pylist()
    assert all(not row["_bad"] for row in rows), f"{spec.table}: Spark's reader found a bad line"
    return [{f.name: row[f.name] for f in spec.schema.fields} for row in sorted(rows, key=lambda r: r[SEQ])]


def _same_rows(session: object, spec: RecordFile, path: Path, scratch: Path) -> None:
    table = parse(spec, path)
    assert table is not None, f"{path}: Arrow's reader did not take a file Spark's reader finds no fault in"
    assert table.to_pylist() == _spark_rows(session, spec, path, scratch / spec.table), path


def test_arrow_reads_every_record_file_of_a_simulated_nemesis_run_as_sparks_reader_does(
        tmp_path: Path, spark: object) -> None:  # noqa: F811
    topology = dataclasses.replace(load_topology(ROOT / "topologies" / "nemesis.yaml"), seed=3)
    run = tmp_path / "run"
    assert run_seed(topology, run).error is None
    faults = [json.loads(line) for line in (run / "faults.jsonl").read_text().splitlines()]
    assert any(isinstance(f.get("params"), dict) and f["params"] for f in faults), "no fault with params to read"
    assert '"records":[[' in (run / "history.jsonl").read_text(), "no poll with records to read"
    for spec in RECORD_FILES:
        _same_rows(spark, spec, run / spec.path, tmp_path / "spark")


def test_arrow_reads_heterogeneous_and_escaped_values_as_sparks_reader_does(
        tmp_path: Path, spark: object) -> None:  # noqa: F811
    for table, lines in HAND_MADE.items():
        path = tmp_path / f"{table}.jsonl"
        path.write_bytes(b"".join(json.dumps(line, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
                                  for line in lines))
        _same_rows(spark, SPECS[table], path, tmp_path / "spark")


def test_an_empty_file_is_read_as_no_rows(tmp_path: Path) -> None:
    path = tmp_path / "faults.jsonl"
    path.write_bytes(b"")
    table = parse(SPECS["faults"], path)
    assert table is not None and table.num_rows == 0
    assert table.schema.names == SPECS["faults"].schema.fieldNames()


SEND = '{"process":"p","type":"invoke","f":"send","topic":"t","partition":0,"value":"v","acks":"all","time_ns":1}'


@pytest.mark.parametrize("text", [
    pytest.param(SEND + "\n" + SEND[:30], id="a torn last line"),
    pytest.param(SEND + "\n\n" + SEND + "\n", id="a blank line"),
    pytest.param(SEND + SEND + "\n", id="two objects on a line"),
    pytest.param(SEND.replace(',"value"', ',\r"value"') + "\n", id="a carriage return, where Spark ends a line"),
    pytest.param(" " + SEND + "\n", id="an indented line"),
    pytest.param(SEND.replace('"partition":0', '"partition":"0"') + "\n", id="a string for a number"),
    pytest.param(SEND.replace('"value":"v"', '"value":5') + "\n", id="a number for a string"),
    pytest.param(SEND.replace('"partition":0', '"partition":0.0') + "\n", id="a float for an integer"),
    pytest.param(SEND.replace('"partition":0', '"partition":3000000000') + "\n", id="an int above 32 bits"),
    pytest.param(SEND.replace('"acks":"all"', '"acks":"2"') + "\n", id="a line that breaks its rule"),
    pytest.param(SEND.replace('"time_ns":1', '"time_ns":null') + "\n", id="a required field null"),
    pytest.param(SEND.replace('"value":"v"', '"value":"v","value":"w"') + "\n", id="a field twice"),
    pytest.param(SEND[:-1] + ',"records":[[0.5,"v"]]}\n', id="a float in a poll's records"),
    pytest.param(SEND[:-1] + ',"records":{"0":"v"}}\n', id="an object for the records"),
    pytest.param("[" + SEND + "]\n", id="an array of lines"),
])
def test_a_file_arrow_cannot_read_as_spark_does_is_left_to_spark(tmp_path: Path, text: str) -> None:
    path = tmp_path / "history.jsonl"
    path.write_text(text)
    assert parse(SPECS["history"], path) is None


def test_bytes_that_are_not_utf8_are_left_to_spark(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    path.write_bytes(SEND.replace('"v"', '"\xff"').encode("latin-1") + b"\n")
    assert parse(SPECS["history"], path) is None


@pytest.mark.parametrize("params", [
    pytest.param("1e20", id="a float, whose text Spark keeps as it stands"),
    pytest.param('{"loss": "torn"}', id="an object with spaces, which Spark keeps"),
    pytest.param('{"loss":"t\\u00fcrn"}', id="an escape Spark keeps and a re-encoding would not"),
    pytest.param('[1,-0]', id="-0, which Python reads as 0"),
])
def test_a_faults_params_whose_text_python_cannot_rebuild_is_left_to_spark(tmp_path: Path, params: str) -> None:
    path = tmp_path / "faults.jsonl"
    path.write_text('{"time_ns":1,"do":"pause","phase":"start","params":' + params + '}\n')
    assert parse(SPECS["faults"], path) is None
    path.write_text('{"time_ns":1,"do":"pause","phase":"start","params":{"loss":"torn"}}\n')
    assert parse(SPECS["faults"], path) is not None


RULE_ROWS = {  # rows of every rule's fields, nulls among them, each judged by both readers
    "history": [
        {"process": p, "type": ty, "f": f, "topic": "t", "partition": part, "value": v, "acks": a,
         "offset": off, "records": rec, "time_ns": 1}
        for p in ("p", None) for ty in ("ok", "invoke", None) for f in ("send", "poll", None)
        for part in (0, None) for v in ("v", None) for a in ("all", "0", "7", None) for off in (3, None)
        for rec in ([["0", "v"]], None)],
    "faults": [{"time_ns": t, "do": d, "phase": ph} for t in (1, None) for d in ("kill", None)
               for ph in ("start", "end", "middle", None)],
}


@pytest.mark.parametrize("table", sorted(RULE_ROWS))
def test_a_line_rule_is_judged_alike_by_spark_sql_and_arrow(table: str, spark: object) -> None:  # noqa: F811
    """The record formats of DESIGN section 7: the SQL a mismatch quotes and the Arrow expression
    the fast reader filters with accept the same lines, nulls included."""
    spec = SPECS[table]
    rows = RULE_ROWS[table]
    fields = [f for f in spec.schema.fields if f.name in rows[0]]
    from pyspark.sql.types import StructType
    frame = spark.createDataFrame([tuple(r[f.name] for f in fields) for r in rows], StructType(fields))
    by_spark = [r[0] for r in frame.selectExpr(f"coalesce({spec.required}, false)").collect()]
    arrow_table = pa.Table.from_pylist(rows)
    arrow_table = arrow_table.append_column("_i", pa.array(range(len(rows))))
    kept = set(arrow_table.filter(spec.rule.arrow()).column("_i").to_pylist())
    by_arrow = [i in kept for i in range(len(rows))]
    assert by_spark == by_arrow
    assert any(by_spark) and not all(by_spark)


@pytest.mark.parametrize("when", ["now", "ahead"])
def test_a_file_arrows_reader_fails_on_is_read_by_spark(tmp_path: Path, spark: object,  # noqa: F811
                                                        monkeypatch: pytest.MonkeyPatch, when: str) -> None:
    """An error no test foresaw in the fast reader, parsing as the table is written or ahead
    of it (`parse_ahead`), costs its speed, never the judgment."""
    import testbed.analysis.ingest as ingest

    def broken(spec: RecordFile, path: Path) -> None:
        raise RuntimeError("an input no test foresaw")
    path = tmp_path / "history.jsonl"
    path.write_text(SEND + "\n")
    monkeypatch.setattr(ingest, "parse", broken)
    ahead = ingest.parse_ahead([tmp_path]) if when == "ahead" else None
    assert ingest._write_table(spark, SPECS["history"], {path: "r"}, tmp_path / "table", linked=False,
                               keep=True, ahead=ahead) == (True, None)
    rows = pq.read_table(tmp_path / "table").to_pylist()
    assert [(r["process"], r["run_id"], r["_bad"]) for r in rows] == [("p", "r", False)]


def _rows(tables: Tables) -> dict[str, list[dict]]:
    return {f.name: sorted((row.asDict(recursive=True) for row in getattr(tables, f.name).collect()),
                           key=lambda r: r[SEQ]) for f in dataclasses.fields(Tables)}


def test_a_small_inputs_tables_handed_to_spark_as_rows_hold_what_their_parquet_holds(
        tmp_path: Path, spark: object) -> None:  # noqa: F811
    """A table Arrow's reader read whole reaches Spark as its rows (no Parquet file behind the
    frame); one with a file Spark's reader took is read from its Parquet files; either way the
    rows are those of the tables written for a large input."""
    topology = dataclasses.replace(load_topology(ROOT / "topologies" / "nemesis.yaml"), seed=3)
    run = tmp_path / "run"
    assert run_seed(topology, run).error is None
    with open(run / "history.jsonl", "ab") as history:
        history.write(b"\n")  # a blank line: Spark's reader skips it, Arrow's leaves the file to it
    handed, rejected = ingest(spark, {run: "r"}, tmp_path / "handed", handed_over=True)
    stored, rejected_stored = ingest(spark, {run: "r"}, tmp_path / "stored", handed_over=False)
    assert rejected == rejected_stored == {}
    assert _rows(handed) == _rows(stored)
    assert all(_rows(handed).values()), "a table without rows compares nothing"
    for f in dataclasses.fields(Tables):
        files = getattr(handed, f.name).inputFiles()
        assert bool(files) == (f.name == "history"), f"{f.name}: {files}"
        assert getattr(stored, f.name).inputFiles(), f.name


@pytest.mark.parametrize("name", ["run", "a:b[1]"])  # the second is read through a link (`readable_paths`)
def test_files_parsed_ahead_are_ingested_without_being_parsed_again(tmp_path: Path, spark: object,  # noqa: F811
                                                                    monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """A small input's files are parsed while the JVM starts (`parse_ahead`); the ingest takes
    those parses, and its tables are those of an ingest that parses the files itself."""
    import testbed.analysis.ingest as ingest_module

    run = tmp_path / name
    assert run_seed(dataclasses.replace(load_topology(ROOT / "topologies" / "nemesis.yaml"), seed=5), run).error is None
    ahead = ingest_module.parse_ahead([run])
    assert {table for table, _ in ahead} == {spec.table for spec in RECORD_FILES if (run / spec.path).is_file()}
    for parsed in ahead.values():
        parsed.result()
    calls: list[Path] = []
    monkeypatch.setattr(ingest_module, "parse", lambda spec, path: calls.append(path) or parse(spec, path))
    early, rejected_early = ingest(spark, {run: "r"}, tmp_path / "early", handed_over=True, ahead=ahead)
    assert calls == []
    now, rejected_now = ingest(spark, {run: "r"}, tmp_path / "now", handed_over=True)
    assert len(calls) == len(ahead)
    assert rejected_early == rejected_now == {}
    assert _rows(early) == _rows(now)
    assert all(_rows(early).values()), "a table without rows compares nothing"
