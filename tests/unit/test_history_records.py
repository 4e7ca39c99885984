"""The history's send completions, as DESIGN section 7 writes them: `fail` only for an error
that proves the record was never appended, `info` (outcome unknown) otherwise, and a
request's timeout written as "TIMEOUT"."""
from __future__ import annotations

import json
from pathlib import Path

from broker.common.errors import Errors
from testbed.clients.history import History


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
