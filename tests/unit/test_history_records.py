"""The history's send completions, as DESIGN section 7 writes them: `fail` only for an error
that proves the record was never appended, `info` (outcome unknown) otherwise, and a
request's timeout written as "TIMEOUT"."""
from __future__ import annotations

import json
from pathlib import Path

import orjson

from broker.common.errors import Errors
from testbed.clients.history import History
from testbed.experiment.counts import Counts


def _complete(tmp_path: Path, error: Errors, appended: bool) -> list[dict]:
    path = tmp_path / f"{error.value}.jsonl"
    history = History(path, "producer-0", clock_ns=lambda: 7)
    history.send_invoke("orders", 3, ["producer-0:1", "producer-0:2"], "all")
    history.send_complete("orders", 3, ["producer-0:1", "producer-0:2"], "all", error, 40, appended)
    history.close()
    return [json.loads(line) for line in path.read_text().splitlines()][2:]


def test_an_acknowledged_batch_is_one_ok_per_value_with_its_offset(tmp_path: Path) -> None:
    done = _complete(tmp_path, Errors.NONE, True)
    assert [(d["type"], d["offset"], d["value"]) for d in done] == [("ok", 40, "producer-0:1"), ("ok", 41, "producer-0:2")]
    assert all("error" not in d for d in done)


def test_a_timed_out_send_is_info_with_the_error_named_as_in_the_design(tmp_path: Path) -> None:
    done = _complete(tmp_path, Errors.REQUEST_TIMED_OUT, True)
    assert [(d["type"], d["error"]) for d in done] == [("info", "TIMEOUT")] * 2
    assert all("offset" not in d for d in done)


def test_a_refusal_before_the_append_is_fail_and_after_it_info(tmp_path: Path) -> None:
    assert {d["type"] for d in _complete(tmp_path, Errors.NOT_ENOUGH_REPLICAS, False)} == {"fail"}
    after = _complete(tmp_path, Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND, True)
    assert [(d["type"], d["error"]) for d in after] == [("info", "NOT_ENOUGH_REPLICAS_AFTER_APPEND")] * 2


def test_send_records_are_the_bytes_of_their_dicts_and_counted_as_written(tmp_path: Path) -> None:
    """History puts a send record's line together from its parts: the very bytes JsonlAppender
    writes for the record's dict (keys in DESIGN section 7's order), for every kind of
    completion, with values that JSON must escape; its observer counts what it writes."""
    path = tmp_path / "h.jsonl"
    counts = Counts()
    history = History(path, 'producer-"0"', clock_ns=lambda: 7, observe=counts.count)
    values = ['v"1\\', "v\u00e92", "v\n3"]
    history.send_invoke("orders", 3, values, "all")
    history.send_complete("orders", 3, values, "all", Errors.NONE, 40, True)
    history.send_complete("orders", 3, values, "0", Errors.NONE, -1, True)
    history.send_complete("orders", 3, values, "all", Errors.REQUEST_TIMED_OUT, -1, True)
    history.send_complete("orders", 3, values, "all", Errors.NOT_ENOUGH_REPLICAS, -1, False)
    history.close()
    expected = []
    for kind, acks, extra in [("invoke", "all", [{}] * 3), ("ok", "all", [{"offset": 40 + i} for i in range(3)]),
                              ("ok", "0", [{}] * 3), ("info", "all", [{"error": "TIMEOUT"}] * 3),
                              ("fail", "all", [{"error": "NOT_ENOUGH_REPLICAS"}] * 3)]:
        for v, more in zip(values, extra):
            expected.append({"process": 'producer-"0"', "type": kind, "f": "send", "topic": "orders",
                             "partition": 3, "value": v, "acks": acks, **more, "time_ns": 7})
    assert path.read_bytes() == b"".join(orjson.dumps(d, option=orjson.OPT_APPEND_NEWLINE) for d in expected)
    written = Counts()
    written.add(expected)
    assert counts == written


def test_a_poll_writes_its_records_as_the_arrays_of_lists_would(tmp_path: Path) -> None:
    records = [(5, "producer-0:1"), (6, 'a "quoted" \\ value'), (7, "ünïcödé")]
    path = tmp_path / "poll.jsonl"
    history = History(path, "consumer-0", clock_ns=lambda: 9)
    history.poll("orders", 2, 5, 3, records)
    history.close()
    lines = path.read_bytes().splitlines(keepends=True)
    assert lines[1] == orjson.dumps(
        {"process": "consumer-0", "type": "ok", "f": "poll", "topic": "orders", "partition": 2,
         "records": [[o, v] for o, v in records], "time_ns": 9},
        option=orjson.OPT_APPEND_NEWLINE | orjson.OPT_NON_STR_KEYS)
