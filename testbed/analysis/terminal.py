"""The verdict in the terminal: a rich table of every check, its count and its expectation.

Run ids and paths are the user's names: printed escaped and with `emoji=False` (rich read
`[bold red]` in a run id as markup and `:fire:` as an emoji), in tables as `Text`."""
from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from testbed.analysis.job import ATTRIBUTED
from testbed.analysis.runinfo import faults_failed
from testbed.analysis.verdict import RunVerdict, broke_as_expected, broken_expectations, counted_checks
from testbed.common.words import counted
from testbed.config.specs import CHECK_NAMES

_MAX_CAUSES = 5
_MAX_RANGES = 6


def ranges_text(ranges: list[list[int]], limit: int = _MAX_RANGES) -> str:
    """[[3, 9], [12, 12]] -> "3-9, 12" (the first `limit` ranges, then how many more)."""
    shown = ", ".join(str(lo) if lo == hi else f"{lo}-{hi}" for lo, hi in ranges[:limit])
    return shown + (f" and {len(ranges) - limit} more ranges" if len(ranges) > limit else "")


def cause_line(name: str, group: dict) -> str:
    """One election, truncation or crash and everything of one check it explains on one partition."""
    what = "value" if name != "inconsistent_offsets" else "offset"
    n = group["count"]
    one = len(group["offsets"]) == 1 and group["offsets"][0][0] == group["offsets"][0][1]
    return (f"{n} {what}{'s' if n != 1 else ''} of {group['topic']}/{group['partition']} at offset{'' if one else 's'} "
            f"{ranges_text(group['offsets'])} {'lost' if what == 'value' else 'overwritten'} {group['cause']}")


def example_line(check: dict) -> str:
    """A check other than the attributed ones by its first example, as results.json gives it:
    a leader conflict was a bare count in the terminal, its partition, epoch and brokers only
    in results.json and the report (trial37)."""
    first = ", ".join(f"{k} {v}" for k, v in check["examples"][0].items())
    return first + (f" (the first of {check['count']}; the report shows more)" if check["count"] > 1 else "")


def verdict_word(ok: bool | None) -> str:
    return {True: "[green]OK[/]", False: "[red]FAILED[/]", None: "[yellow]UNJUDGED[/]"}[ok]


def print_verdict(console: Console, verdict: RunVerdict) -> None:
    """Every check with its count, expectation and verdict; the causes of the first losses;
    why a run was not judged; and the report's path."""
    r = verdict.results
    table = Table(title=Text(f"verdict: {verdict.run_id}"))
    for col in ("check", "count", "expected", "verdict"):
        table.add_column(col, justify="left" if col == "check" else "right")
    expect = r.get("expect", {})
    shown = counted_checks(verdict)
    for name in CHECK_NAMES + ("converged",):
        check = r.get("checks", {}).get(name)
        e = expect.get(name)
        count = "" if check is None else str(check["count"])
        if name == "converged":
            count = "" if r.get("converged") is None else "yes" if r["converged"] else "no"
        if check is None and e is None and name != "converged":
            continue
        if shown is not None and name not in shown:  # a 0 beside UNJUDGED read as "none lost" (trial32): it
            count = ""  # proves nothing, but for the counts its records alone stand by (`verdict.counted_checks`)
        held = "" if e is None else verdict_word(e["held"]) if e["held"] is not None else verdict_word(None)
        table.add_row(name, count, "" if e is None else e["expected"], held)
    console.print(table)
    for name in ATTRIBUTED if shown is None else ():  # an unjudged run's counts prove nothing
        groups = r.get("checks", {}).get(name, {}).get("causes", [])
        for group in groups[:_MAX_CAUSES]:
            console.print(f"[red]{name}:[/] {cause_line(name, group)}")
        if len(groups) > _MAX_CAUSES:
            console.print(f"[red]{name}:[/] and {counted(len(groups) - _MAX_CAUSES, 'more cause')} (see the report)")
    for name in CHECK_NAMES:
        check = r.get("checks", {}).get(name) or {}
        if name not in ATTRIBUTED and check.get("count") and check.get("examples") and (shown is None or name in shown):
            console.print(f"[red]{name}:[/] {escape(example_line(check))}", emoji=False, soft_wrap=True)
    partly = "not judged whole" if verdict.ok is False else "not judged"  # FAILED follows, from its records alone
    for problem in r.get("problems", []):
        console.print(f"[yellow]{partly}:[/] {escape(problem)}", emoji=False, soft_wrap=True)
    if shown:  # a killed run's prefix: DESIGN section 7's "analysable prefix"
        console.print(f"[yellow]counted all the same:[/] {', '.join(sorted(shown, key=CHECK_NAMES.index))}, which "
                      f"read the history and events alone: what these records hold, the whole run held too",
                      emoji=False, soft_wrap=True)
    failed = faults_failed(verdict.run_dir)
    for line in failed[:_MAX_CAUSES]:
        console.print(f"[yellow]fault failed:[/] {escape(line)}", emoji=False, soft_wrap=True)
    if len(failed) > _MAX_CAUSES:
        console.print(f"[yellow]fault failed:[/] and {len(failed) - _MAX_CAUSES} more (see faults.jsonl)")
    unavailable = r.get("figures", {}).get("unavailable_s")
    if unavailable and shown is None:  # an unjudged run's figures, like its counts, prove nothing
        console.print(f"partition-seconds without a leader: {unavailable['no-leader']}, "
                      f"without acks=all service: {unavailable['no-acks-all']}")
        elections = r["figures"].get("controller_elections") or []
        if elections:  # trial39: a controller's failover was told nowhere
            said = [f"{x['node']} (term {x['term']}) at {x['at_s']:.2f}s"
                    + (f", {x['after_s']:.2f}s after {x['after']}" if x["after"] else "") for x in elections]
            console.print(f"controller elections: {'; '.join(said[:_MAX_CAUSES])}"
                          + (f"; and {len(said) - _MAX_CAUSES} more (see the report)" if len(said) > _MAX_CAUSES
                             else ""), emoji=False, soft_wrap=True)
    # a path is never broken across lines (a log or a pipe is 80 columns): the terminal wraps it
    broken = f": {escape(broken_expectations(verdict))}" if verdict.ok is False else ""  # as the matrix says a cell's
    console.print(f"{verdict_word(verdict.ok)}{broken}{broke_as_expected(verdict)}  report: "
                  f"{escape(str(verdict.run_dir / 'report.html'))}", emoji=False, soft_wrap=True)


