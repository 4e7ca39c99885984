"""The one JSON Lines writer: a record with a mapping keyed by numbers is written (a
create-topic fault's `assignment: {0: [1, 2, 3]}` crashed the supervisor as it recorded the
fault)."""
from __future__ import annotations

from pathlib import Path

from broker.common.jsonl import JsonlAppender, JsonlBuffer, read_jsonl


def test_numeric_keys_are_written_as_json_keys(tmp_path: Path) -> None:
    out = JsonlAppender(tmp_path / "faults.jsonl")
    out.write({"do": "create-topic", "params": {"topic": {"assignment": {0: [1, 2, 3]}}}})
    out.write_many([{"a": {1: "x"}}, {"b": 2}])
    out.close()
    assert read_jsonl(tmp_path / "faults.jsonl") == [
        {"do": "create-topic", "params": {"topic": {"assignment": {"0": [1, 2, 3]}}}}, {"a": {"1": "x"}}, {"b": 2}]


def test_a_buffer_writes_the_appenders_bytes_in_order_at_its_limit_and_at_its_close(tmp_path: Path) -> None:
    """JsonlBuffer (the simulation's shared history and events): the very bytes JsonlAppender
    writes, in the order of the calls, none of them on disk before the limit or the close."""
    records = [{"n": i, "keys": {i: "x"}} for i in range(50)]
    plain = JsonlAppender(tmp_path / "plain.jsonl")
    buffered = JsonlBuffer(tmp_path / "buffered.jsonl")
    for out in (plain, buffered):
        out.write(records[0])
        out.write_many(records[1:30])
        out.write_lines(b'{"raw":1}\n')
        out.write_many(records[30:])
    assert (tmp_path / "buffered.jsonl").read_bytes() == b""
    plain.close()
    buffered.close()
    assert (tmp_path / "buffered.jsonl").read_bytes() == (tmp_path / "plain.jsonl").read_bytes()
    small = JsonlBuffer(tmp_path / "small.jsonl")
    small.LIMIT = 100
    small.write_many(records[:5])  # past the limit: written at once
    assert (tmp_path / "small.jsonl").read_bytes() == b"".join(
        (tmp_path / "plain.jsonl").read_bytes().splitlines(keepends=True)[:5])
    small.close()
