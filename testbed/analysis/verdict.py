"""Verdicts: each expectation of the topology (or the defaults) against the observed counts,
and the `results.json` document of DESIGN section 7."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from testbed.analysis.job import RunData
from testbed.analysis.runinfo import RunInfo, finished
from testbed.config.scalars import expectation
from testbed.config.specs import Expectation


@dataclass
class RunVerdict:
    """One run judged: `ok` is True when every expectation held, False when one did not,
    None when the run could not be judged (unreadable records, no convergence)."""

    run_dir: Path
    ok: bool | None
    results: dict
    #: its id in the judgment (`RunInfo.run_id`); the directory's name when not given
    id: str = ""

    @property
    def run_id(self) -> str:
        return self.id or self.run_dir.name

    @property
    def whole(self) -> bool:
        """Judged on all its records: no problem kept a check from it. A run cut short may
        still fail (`ok` False) on what its records alone show (`RECORD_CHECKS`); its other
        counts and its figures prove nothing."""
        return self.ok is not None and not self.results.get("problems")


def judge(info: RunInfo, data: RunData | None, problem: str | None) -> RunVerdict:
    """The verdict of one run. A run that did not converge is unjudged unless its topology
    states `converged:` itself (a lab that expects no convergence), since a missing value
    there may only be unavailable."""
    expect = info.expect
    explicit_convergence = info.topology is not None and "converged" in info.topology.expect
    faults_missing = _faults_missing(info)
    problems = [p for p in (problem, info.problem, info.summary_problem, _final_logs_missing(info.run_dir),
                            faults_missing) if p]
    damaged = any((problem, info.problem, info.summary_problem, faults_missing))
    if data is not None:
        problems += _changed_after_the_run(info, data)
    # the history and events are whole (a killed run's are a prefix of what it would have
    # recorded): the checks that read nothing else count at least what the whole run would
    records_whole = (data is not None and not damaged
                     and (info.operations is None or data.history_lines == info.operations))
    if data is not None and not data.converged and not explicit_convergence and info.problem is None:
        problems.append(_not_converged(info, data.unconverged))
    checks = data.checks if data is not None else {}
    observed = {name: c["count"] for name, c in checks.items()}
    # without its topology a run's convergence is not known (its partitions and replicas are
    # the topology's): unknown, not false (a tester's misspelt expect key read as unconverged)
    # and without its final state, which a run cut short never wrote (trial37: `false`, which
    # nobody knew); an empty one is a state, of a run whose every topic was deleted (R40)
    final_state = (info.run_dir / "final" / "replicas.jsonl").is_file()
    converged = data.converged if data is not None and info.topology is not None and final_state else None
    if converged is not None:
        observed["converged"] = int(converged)
    verdicts = {}
    for name, wanted in expect.items():
        count = observed.get(name)
        if count is None:
            held = None
        elif not problems:
            held = wanted.holds(count)
        else:  # an unjudged run's counts are not held to anything (no partial verdict), but for
            # a count of its records that no rest of the run could bring back within bounds
            held = False if records_whole and name in RECORD_CHECKS and _broken_for_good(wanted, count) \
                else None
        verdicts[name] = _expectation(name, wanted, count, held)
    if problems:
        ok = False if any(v["held"] is False for v in verdicts.values()) else None
    else:
        ok = all(v["held"] for v in verdicts.values())
    results = {
        "ok": ok,
        "checks": checks,
        "expect": verdicts,
        "figures": data.figures if data is not None else {},
        "converged": converged,
        "problems": problems,
        "expect_source": "topology" if info.topology is not None and info.topology.expect else "defaults",
    }
    if problems and records_whole:
        results["counted_from_records"] = list(RECORD_CHECKS)
    return RunVerdict(info.run_dir, ok, results, info.run_id)


def _expectation(name: str, wanted: Expectation, count: int | None, held: bool | None) -> dict:
    """One entry of results.json's `expect`. `converged` is a yes or no, and is said so: its
    count form read "expected 0" beside a "no" (trial39, lab 9's `converged: false`)."""
    if name == "converged":
        return {"expected": "true" if wanted.holds(1) else "false",
                "observed": None if count is None else bool(count), "held": held}
    return {"expected": str(wanted), "observed": count, "held": held}


#: the checks that read the history, the events and the faults alone (DESIGN section 8), not
#: the final state: a run cut short, or whose final state cannot be judged, holds at least the
#: anomalies its records show (DESIGN section 7: a killed supervisor leaves an analysable prefix)
RECORD_CHECKS = ("nonmonotonic_polls", "poll_skips", "internal_poll_skips", "nonmonotonic_sends",
                 "leader_conflicts", "unclean_exclusion", "placement_violations", "elr_violations",
                 "metadata_divergence")


def _broken_for_good(expectation: Expectation, count: int) -> bool:
    """Whether no count at or above `count` holds `expectation`: a prefix's anomalies stay in
    the whole run, so `leader_conflicts: 0` is broken by 2 found before the end, whatever the
    rest held, and `lost_writes: ">0"` is broken by nothing a prefix shows."""
    return expectation.op in ("==", "<=") and count > expectation.value or \
        expectation.op == "<" and count >= expectation.value


def counted_checks(verdict: RunVerdict) -> set[str] | None:
    """The checks whose counts a run's verdict stands by: all of a judged run's (None), the
    record checks of an unjudged one whose records are whole, none of another's."""
    if not verdict.results.get("problems"):
        return None
    return set(verdict.results.get("counted_from_records", ()))


def _changed_after_the_run(info: RunInfo, data: RunData) -> list[str]:
    """What the final logs and the history show of lines taken out after the run: a replica
    with records and no line, a replica's lines missing an offset, a file of `final/` of
    another size than the run wrote (a log cut at a line's end holds whole lines, and was
    judged as the replicas' divergence), a history shorter or longer than the count the run
    made of it as it ended (summary.json)."""
    logs = info.run_dir / "final" / "logs.jsonl"
    out = []
    if data.short_logs and logs.is_file():  # without the file, `_final_logs_missing` says why (trial36)
        out.append(f"{logs} holds no record of {data.short_logs} replica(s) whose LEO in final/replicas.jsonl is "
                   f"above 0: the final logs are incomplete, so what survived cannot be told")
    if data.holed_logs:
        out.append(f"{logs} misses or repeats offsets inside the records of {data.holed_logs} replica(s): a log "
                   f"read from its files holds every offset from its first to its last once, so lines were taken "
                   f"out of the file (or copied) after the run, and what survived cannot be told")
    for name, size in info.final_bytes.items():
        path = info.run_dir / "final" / name
        now = path.stat().st_size if path.is_file() else None
        if now is not None and now != size:
            out.append(f"{path} is {now} bytes where the run wrote {size} as it ended "
                       f"({info.run_dir / 'summary.json'}): the file was changed after the run, so what "
                       f"survived cannot be told")
    if info.operations is not None and data.history_lines != info.operations:
        out.append(f"{info.run_dir / 'history.jsonl'} holds {data.history_lines} records where the run counted "
                   f"{info.operations} as it ended ({info.run_dir / 'summary.json'}): the history was changed after "
                   f"the run, so what was acknowledged cannot be told")
    return out


def _not_converged(info: RunInfo, unconverged: list[str], most: int = 5) -> str:
    """Why a run that did not converge is not judged: its final state says so (`unconverged`:
    what kept each partition from it), or it has none (the run was interrupted before its
    end, or the file was removed after it)."""
    final = info.run_dir / "final" / "replicas.jsonl"
    if not final.is_file() or final.stat().st_size == 0:
        if finished(info.run_dir):
            return (f"{final} is missing or empty, though the run reached its end (its summary.json is written "
                    f"after it): the file was removed or emptied after the run, so there is no final state to "
                    f"judge against")
        return (f"{final} is missing or empty: the run did not reach its end (it was interrupted, its supervisor "
                f"was killed, or the cluster failed; a run of the Python API writes it in finish(), not when its "
                f"with block ends), so there is no final state to judge against")
    which = "; ".join(unconverged[:most]) + (f"; and {len(unconverged) - most} more" if len(unconverged) > most
                                            else "")
    return ("the cluster did not converge (final/replicas.jsonl: not every partition had one leader "
            "and its replicas (as the controller last set them) level at the leader's LEO = HWM"
            + (f": {which}" if which else "") + "), so a missing value may be unavailability, not loss")


def _final_logs_missing(run_dir: Path) -> str | None:
    """Why a run whose final replicas were recorded but not their logs cannot be judged: its
    end was cut short between the two (the logs are the evidence of what survived)."""
    final = run_dir / "final"
    if (final / "replicas.jsonl").is_file() and not (final / "logs.jsonl").is_file():
        if finished(run_dir):
            return (f"{final / 'logs.jsonl'} is missing, though the run reached its end (its summary.json is "
                    f"written after it): the file was removed after the run, so what survived cannot be told")
        return (f"{final / 'logs.jsonl'} is missing: the run stopped after recording its replicas and before "
                f"their logs, so what survived cannot be told")
    return None


def _faults_missing(info: RunInfo) -> str | None:
    """Why a run whose topology schedules faults, but whose `faults.jsonl` is gone, cannot be
    judged: the run writes that file from its cluster's start, and without it the windows
    without service would lack the faults' share and a loss its cause, under a verdict that
    looked whole (a tester's run without it was judged passed, its unavailability 0). So is
    one whose file holds no line though the run reached its end: every fault it fires writes
    its lines, so the file was emptied after the run (a tester's was judged passed)."""
    if info.topology is None or not info.topology.faults:
        return None
    path = info.run_dir / "faults.jsonl"
    scheduled = f"the topology schedules {len(info.topology.faults)} fault(s)"
    if not path.is_file():
        return f"{path} is missing, but {scheduled}: what they did cannot be told, so neither can what they caused"
    if finished(info.run_dir) and path.stat().st_size < 64 and not path.read_bytes().strip():
        return (f"{path} holds no line, but {scheduled} and the run reached its end (its summary.json), which "
                f"fires every one of them: the file was emptied after the run, so what they did cannot be told, "
                f"nor what they caused")
    return None


def broken_expectations(verdict: RunVerdict) -> str:
    """`lost_writes 0 (expected >0), ...`, or why the run was not judged."""
    broken = ", ".join(f"{name} {str(e['observed']).lower() if isinstance(e['observed'], bool) else e['observed']} "
                       f"(expected {e['expected']})"
                       for name, e in verdict.results.get("expect", {}).items() if e["held"] is False)
    return broken or "; ".join(verdict.results.get("problems", []))


#: a check whose count is no broken rule: acknowledged values out of the final read's reach (a
#: partition left without a leader, the price of a safe setting), not proven lost
_UNREACHED = ("unseen",)


def wanted_breaks(verdict: RunVerdict) -> tuple[list[str], list[str]]:
    """Of a run that met its expectations, those that want a failure and got it (`lost_writes
    400`), and apart the values the final read could not reach (`unseen 805`); none when the
    run did not pass."""
    broke: list[str] = []
    unreached: list[str] = []
    if not verdict.ok:
        return broke, unreached
    for name, e in verdict.results.get("expect", {}).items():
        try:
            wants_failure = not expectation(e["expected"]).holds(0)
        except (ValueError, KeyError, TypeError):
            continue
        if wants_failure and e.get("held"):
            (unreached if name in _UNREACHED else broke).append(f"{name} {e['observed']}")
    return broke, unreached


def broke_as_expected(verdict: RunVerdict) -> str:
    """What a run that met an `expect:` wanting a failure (a lab's part that breaks a rule,
    `lost_writes: ">0"`) showed: a bare green OK beside 350 lost writes read as a pass of
    the protocol (trial26); the report's headline says it too (trial36)."""
    broke, unreached = wanted_breaks(verdict)
    said = [f"it broke as its expect: wants: {', '.join(broke)}"] if broke else []
    if unreached:  # lab 9's fix: no write lost, the partition left without a leader (trial34)
        said.append(f"{'and ' if broke else 'as its expect: wants, '}{', '.join(unreached)}: acknowledged "
                    f"values the final read could not reach, none proven lost")
    return f" ({'; '.join(said)})" if said else ""
