"""The live table of a run (`testbed.experiment.progress.render`) on an 80-column terminal:
a new user's quickstart showed three brokers' leaders on two rows ("b3:2" wrapped under
"b1:2 b2:2"), the width taken by the table's rules and the header "under-replicated"."""
from __future__ import annotations

import io
from collections import Counter
from types import SimpleNamespace

import pytest
from rich.console import Console

from testbed.experiment.progress import render


def _rows(leaders: list[int]) -> list[str]:
    parts = [SimpleNamespace(leader=b, isr=[1, 2, 3], replicas=[1, 2, 3]) for b in leaders]
    status = SimpleNamespace(controller="controller-1", partitions=lambda: parts)
    console = Console(width=80, force_terminal=False)
    with console.capture() as out:
        console.print(render(12.3, 30, Counter(sent=1234567, acked=1234000, failed=12, info=3, polled=2345670),
                             status))
    return [line for line in out.get().splitlines() if line.strip()]


def test_three_brokers_leaders_and_seven_digit_counts_fit_one_row_of_80_columns() -> None:
    rows = _rows([1, 1, 2, 2, 3, 3])
    assert all(len(line) <= 80 for line in rows)
    [values] = [line for line in rows if "1234567" in line]
    assert values.split() == ["1234567", "1234000", "12", "3", "2345670", "b1:2", "b2:2", "b3:2", "3x6", "0"]
    assert rows[-1] == values  # nothing wrapped below it


def test_more_leaders_than_fit_wrap_and_the_counts_stay_whole() -> None:
    rows = _rows([1, 2, 3, 4, -1, 4])
    values = rows[rows.index(next(line for line in rows if "1234567" in line)):]
    assert len(values) > 1 and "…" not in "".join(values)
    assert " ".join(values).split() == ["1234567", "1234000", "12", "3", "2345670", "none:1", "b1:1", "b2:1", "3x6",
                                        "0", "b3:1", "b4:2"]


def test_the_counts_say_that_acks_0_sends_are_not_acknowledged() -> None:
    """trial28: `values acknowledged: acks=0: 1535` for writes nothing acknowledges; trial38
    still read them under "values acknowledged"."""
    from testbed.experiment.counts import Counts
    from testbed.experiment.progress import print_counts
    console = Console(width=200, record=True)
    print_counts(console, Counts(Counter({("send", "ok"): 1600}), {"0": 1535, "all": 65}), True)
    print_counts(console, Counts(Counter({("send", "ok"): 1600}), {"0": 1535}), False)
    assert [line for line in console.export_text().splitlines() if line.startswith("values")] == [
        "values acknowledged: acks=all: 65; sent with acks=0 (never acknowledged): 1535; converged: yes",
        "values acknowledged: none; sent with acks=0 (never acknowledged): 1535; converged: no"]


def test_the_progress_clock_counts_a_lab_steps_pause_as_the_fault_lines_do(monkeypatch: pytest.MonkeyPatch) -> None:
    """trial31: under `--step` the progress read 7.8 s / 10 s beside a fault line at 3.01 s.
    trial34: the lines on the schedule's clock (pauses left out) disagreed with the answers
    and the report, which count them; the lines count them now, and so does the progress:
    its workload lasts the pause longer."""
    from testbed.experiment import progress
    now = [100.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: now[0])
    mon = progress.Monitor(Console(file=io.StringIO()), 10.0)
    now[0] += 3.0
    with mon.suspended():
        now[0] += 4.8  # the student reads the prompt
    now[0] += 0.5
    assert now[0] - mon.start == pytest.approx(8.3) and mon.duration == pytest.approx(14.8)
