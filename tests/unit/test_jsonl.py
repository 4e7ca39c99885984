"""The one JSON Lines writer: a record with a mapping keyed by numbers is written (a
create-topic fault's `assignment: {0: [1, 2, 3]}` crashed the supervisor as it recorded the
fault)."""
from __future__ import annotations

from pathlib import Path

from broker.common.jsonl import JsonlAppender, read_jsonl


def test_numeric_keys_are_written_as_json_keys(tmp_path: Path) -> None:
    out = JsonlAppender(tmp_path / "faults.jsonl")
    out.write({"do": "create-topic", "params": {"topic": {"assignment": {0: [1, 2, 3]}}}})
    out.write_many([{"a": {1: "x"}}, {"b": 2}])
    out.close()
    assert read_jsonl(tmp_path / "faults.jsonl") == [
        {"do": "create-topic", "params": {"topic": {"assignment": {"0": [1, 2, 3]}}}}, {"a": {"1": "x"}}, {"b": 2}]
