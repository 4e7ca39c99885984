"""`report.html`: one self-contained page per run (inline SVG and CSS, no script, no network):
the verdict table, the loss attribution table, availability and recovery figures, a
timeline per partition, throughput and latency, and the topology."""
from __future__ import annotations

import html
import os
import pickle
import subprocess
import sys
from pathlib import Path

import yaml
from markdown_it import MarkdownIt

from testbed.analysis.job import ATTRIBUTED, RunData
from testbed.analysis.membership import admin_rows
from testbed.analysis.plots import fault_bands, fault_subject, overview, partition_timelines, series_plot
from testbed.analysis.runinfo import RunInfo, faults_not_acted
from testbed.analysis.terminal import ranges_text
from testbed.analysis.verdict import RunVerdict, broke_as_expected
from testbed.analysis.whole_files import write_whole
from testbed.config.specs import CHECK_NAMES

_CSS = """body{font-family:system-ui,sans-serif;margin:2em;max-width:1100px;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{border:1px solid #ccc;padding:3px 8px;font-size:13px;
text-align:left;vertical-align:top}.ok{color:#1a7f37;font-weight:bold}.failed{color:#c0392b;font-weight:bold}
.unjudged{color:#b7791f;font-weight:bold}pre{background:#f6f8fa;padding:1em;font-size:12px;overflow:auto}
h2{border-bottom:1px solid #ddd;padding-bottom:.2em}.note{color:#555;font-size:13px}
.lab{border:1px solid #d0d7de;border-radius:6px;padding:0 1.2em;background:#fbfcfd}"""

#: a lab's guide, written into each of its runs by `run.py lab` (testbed/labs/guide.py)
LAB_GUIDE = "lab.md"
_MARKDOWN = MarkdownIt("commonmark", {"html": False})  # a guide's raw HTML is shown as text

_WORD = {True: ("ok", "OK"), False: ("failed", "FAILED"), None: ("unjudged", "UNJUDGED")}


def _e(value: object) -> str:
    """A value as a table cell shows it: nothing measured (a fault never undone, a recovery
    that never came) is a dash, not Python's None."""
    return "—" if value is None else html.escape(str(value))


def _table(header: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _verdicts(r: dict) -> str:
    rows = []
    shown = _counted(r)
    for name in CHECK_NAMES + ("converged",):
        e = r["expect"].get(name)
        count = r["checks"].get(name, {}).get("count", "") if name != "converged" else r.get("converged")
        if isinstance(count, bool):  # converged: yes or no, as the terminal says it (and expect: true or false)
            count = "yes" if count else "no"
        if shown is not None and name not in shown:  # an unjudged run's counts prove nothing (a 0 read as
            count = ""  # "none lost"), but for those its records alone stand by (`verdict.counted_checks`)
        cls, word = _WORD[e["held"]] if e else ("", "")
        rows.append([_e(name), _e(count), _e(e["expected"] if e else ""),
                     f'<span class="{cls}">{word}</span>'])
    return _table(["check", "count", "expected", "verdict"], rows)


_UNJUDGED_NOTE = ("<p class='unjudged'>Not judged (the reasons at the top): what follows comes from records that "
                  "could not be trusted or did not end, and proves nothing either way.</p>")


def _attribution(r: dict, judged: bool = True) -> str:
    """One row per cause (an election, a truncation, a crash) and partition, with its count and
    offsets; then the first values of each check with their full sentences. An unjudged run's
    empty list is no "no loss": it says so."""
    groups = [[_e(name), _e(f"{g['topic']}/{g['partition']}"), _e(g["count"]), _e(ranges_text(g["offsets"], 50)),
               _e(g["cause"])] for name in ATTRIBUTED for g in r["checks"].get(name, {}).get("causes", [])]
    rows = [[_e(name), _e(x.get("value", ", ".join(x.get("values", [])))), _e(x["cause"])]
            for name in ATTRIBUTED for x in r["checks"].get(name, {}).get("examples", [])]
    if not rows:
        return "<p>No lost or inconsistent write.</p>" if judged else _UNJUDGED_NOTE
    counts = ", ".join(f"{n}: {r['checks'][n]['count']} ({r['checks'][n]['unattributed']} unattributed)"
                       for n in ATTRIBUTED)
    return (f"<p class='note'>{_e(counts)}.</p>"
            + _table(["check", "partition", "count", "offsets", "cause"], groups)
            + "<h3>The first values of each check, with their causes</h3>" + _table(["check", "value(s)", "cause"], rows))


#: the examples of a check the report shows (results.json holds more)
_EXAMPLES_SHOWN = 10


def _cell(value: object) -> str:
    """An example's field as a cell: a list of places (a duplicate's `at`) as `t/p at o`."""
    if isinstance(value, list):
        return ", ".join(f"{v['topic']}/{v['partition']} at {v['offset']}"
                         if isinstance(v, dict) and {"topic", "partition", "offset"} <= v.keys() else str(v)
                         for v in value)
    return str(value)


def _counted(r: dict) -> set[str] | None:
    """The checks whose counts the verdict stands by (`verdict.counted_checks`): None for all."""
    return set(r.get("counted_from_records", ())) if r.get("problems") else None


def _other_checks(r: dict) -> str:
    """The first examples of every other check that found something (regressions, duplicates,
    reorderings, placement, the protocol's invariants), with the fields results.json gives
    them: the report had only their counts, and lab 11's three rack-blind replica sets, its
    point, were named nowhere in it (trial30)."""
    out = []
    counted = _counted(r)
    for name in CHECK_NAMES:
        check = r["checks"].get(name) or {}
        examples = check.get("examples") or []
        if name in ATTRIBUTED or not check.get("count") or not examples or counted is not None and name not in counted:
            continue
        shown = examples[:_EXAMPLES_SHOWN]
        keys = list(dict.fromkeys(k for x in shown for k in x))
        more = f" (the first {len(shown)})" if check["count"] > len(shown) else ""
        out.append(f"<h3>{_e(name)}: {_e(check['count'])}{_e(more)}</h3>"
                   + _table(keys, [[_e(_cell(x[k])) if k in x else "—" for k in keys] for x in shown]))
    return "".join(out)


def _lasted(start_s: float, end_s: float) -> float | str:
    """A window's seconds; one under the millisecond its ends are rounded to is `<0.001`
    (trial34 read `11.243 11.243 0.0` as a window that did not happen)."""
    seconds = round(end_s - start_s, 3)
    return seconds if seconds > 0 else "<0.001"


def _figures(r: dict) -> str:
    f = r["figures"]
    windows = [[_e(f"{w['topic']}/{w['partition']}"), _e(w["kind"]), _e(w["start_s"]), _e(w["end_s"]),
                _e(_lasted(w["start_s"], w["end_s"]))] for w in f.get("availability", [])]
    faults = [[_e(x["at_s"]), _e(x["until_s"]), _e(x["do"]), _e(fault_subject(x) or None),
               _e(", ".join(x["resolved"] or [])), _e(x["to_first_ack_s"]), _e(x["to_full_isr_s"])]
              for x in f.get("faults", [])]
    return ("<h3>Unavailability</h3>" + (_table(["partition", "window", "from s", "to s", "seconds"], windows)
                                         if windows else "<p>Every partition was led and took acks=all writes "
                                                         "throughout.</p>")
            + "<h3>Recovery after each fault</h3>"
            + (_table(["at s", "undone at s", "fault", "target", "resolved", "to first acks=all write on every partition s",
                       "to full ISR s"], faults)
               + "<p class='note'>Both counted from the fault, up to the next fault (or the end), over the "
                 "partitions that existed when it began and were not deleted before then: to full ISR "
                 "is 0 when no ISR shrank before then, and a dash when one was not full again by then. A fault "
                 "applied while an earlier one was still in force (not yet undone) counts that one's recovery "
                 "too: a partition isolated while a killed broker is down is not whole again before the "
                 "restart.</p>"
               if faults else "<p>No fault was applied.</p>")
            + _controller_elections(f.get("controller_elections") or []))


def _controller_elections(elections: list[dict]) -> str:
    """Each election of the controller quorum after the first (R22), and the fault before it."""
    if not elections:
        return ""
    rows = [[_e(x["at_s"]), _e(x["node"]), _e(x["term"]), _e(x["after"] or "no fault"), _e(x["after_s"])]
            for x in elections]
    return ("<h3>Controller elections</h3>"
            + _table(["at s", "active controller", "term", "after", "seconds after it"], rows)
            + "<p class='note'>Each time another controller took over after the first (R22): what the metadata "
              "waited for meanwhile (elections, ISR changes, admin requests), from the last fault before it that "
              "acted on a controller, or else the last fault since the election before.</p>")


def _not_acted(info: RunInfo) -> str:
    """The faults that did not act, which the recovery table (of the faults applied) leaves out."""
    rows = faults_not_acted(info.run_dir, info.workload_start_ns)
    if not rows:
        return ""
    return ("<h3>Faults that did not act</h3>"
            + _table(["at s", "fault", "origin", "why"], [[_e(at), _e(do), _e(origin), _e(why)]
                                                        for at, do, origin, why in rows]))


def _late_clients(info: RunInfo) -> str:
    """The clients that were not running at the workload's time 0: the workload judged is not
    all the topology's (trial31: a producer that never ran was named nowhere)."""
    if not info.clients_late:
        return ""
    said = [f"{_e(name)} {'never ran' if at is None else f'joined {at:g} s into it'}"
            for name, at in sorted(info.clients_late.items())]
    return ("<p class='unjudged'>Not every client was running when the workload began: "
            + "; ".join(said) + ". The checks judge the operations that were made.</p>")


def render(info: RunInfo, verdict: RunVerdict, data: RunData | None) -> str:
    r = verdict.results
    cls, word = _WORD[verdict.ok]
    head = (f"<!doctype html><html><head><meta charset='utf-8'><title>isrlab {_e(info.run_id)}</title>"
            f"<style>{_CSS}</style></head><body><h1>{_e(info.run_id)} <span class='{cls}'>{word}</span>"
            f"{_e(broke_as_expected(verdict))}</h1>")
    parts = [head]
    if info.virtual_clock:  # its seconds read as wall time, which they are not
        parts.append("<p class='note'>A run of the deterministic simulation (<code>run.py sim</code>): every "
                     "time here is its virtual clock's, not wall time, and the seed replays it exactly.</p>")
    parts += [f"<p class='unjudged'>Not judged: {_e(p)}</p>" for p in r.get("problems", [])]
    guide = info.run_dir / LAB_GUIDE
    if guide.is_file():  # the run is a part of a lab: its guide comes first
        parts.append("<div class='lab'>" + _MARKDOWN.render(guide.read_text(encoding="utf-8")) + "</div>")
    parts.append("<h2>Verdict</h2>" + _verdicts(r) + "<p class='note'>A value acknowledged but missing from the "
                 "final committed log counts as lost only when the final read reached the end of that partition's "
                 "committed log; otherwise it is <b>unseen</b>, not proven lost. Expectations come from the "
                 f"{_e(r.get('expect_source'))}.</p>" + _late_clients(info))
    parts.append("<h2>Loss attribution</h2>" + _attribution(r, not r.get("problems")))
    others = _other_checks(r)  # an unjudged run's examples prove nothing, but for its records' own
    if others:
        parts.append("<h2>The other checks' findings</h2>" + others)
    if data is not None:
        bands = fault_bands(data.timeline["faults"])
        end = max([e["t"] for e in data.timeline["events"]] + [b[1] for b in bands] + [0.0])
        parts.append("<h2>Overview</h2><p class='note'>Each partition's state from the controller's changes, "
                     "with the Availability table's windows over it: no leader (red) from the fault that took "
                     "the leader, not from its fencing, and no acks=all service (purple).</p>"
                     + overview(data.timeline["events"], bands, end, r["figures"].get("availability"),
                                info.workload_seconds))
        admin = data.timeline.get("admin") or []
        if admin:
            rows = admin_rows(admin, list(info.topology.broker_ids) if info.topology is not None else [])
            parts.append("<h2>Administration</h2><p class='note'>Membership and topic changes in the order "
                         "they ended, at their end (R38-R40); a rebalance lists its moves as planned before "
                         "the first one.</p>"
                         + _table(["at s", "action", "subject", "what it did", "brokers after"],
                                  [[_e(c) for c in row] for row in rows]))
        parts.append("<h2>Availability</h2>" + ("" if verdict.whole else _UNJUDGED_NOTE) + _figures(r)
                     + _not_acted(info))
        parts.append("<h2>Throughput and latency</h2>" + (series_plot(r["figures"]["series"], bands,
                                                                      info.workload_seconds)
                                                          if r["figures"]["series"] else "<p>No operation.</p>"))
        parts.append("<h2>Partitions</h2><p class='note'>Lanes: leader (dark), ISR (blue), ELR (orange), "
                     "from the controller's changes; below, the HWM as each leader reported it (a follower "
                     "reports none: its line stays where it last led, or at 0); faults in red, from each "
                     "fault to its undo.</p>")
        keys = sorted({(e["topic"], e["partition"]) for e in data.timeline["events"] if e["topic"] is not None})
        if keys:
            parts.append(partition_timelines([(f"{topic}/{p}", [e for e in data.timeline["events"]
                                                                if e["topic"] == topic and e["partition"] == p])
                                              for topic, p in keys], bands, end))
    topology = (yaml.safe_dump(info.topology.to_dict(), sort_keys=False, width=100) if info.topology is not None
                else "(no topology.yaml)")
    parts.append("<h2>Topology</h2><pre>" + _e(topology) + "</pre></body></html>")
    return "\n".join(parts)


def write_report(info: RunInfo, verdict: RunVerdict, data: RunData | None) -> None:
    write_whole(info.run_dir / "report.html", render(info, verdict, data).encode("utf-8"))


#: below this many reports, starting worker processes costs more than it saves
POOL_FROM = 16
_ROOT = Path(__file__).resolve().parents[2]


def write_reports(reports: list[tuple[RunInfo, RunVerdict, RunData | None]]) -> None:
    """Write each report; many at once in a process per core. A report's plots cost 0.2-0.4 s
    of matplotlib, one core's work, and by now the Spark job is over: a thousand runs'
    reports took four minutes one at a time. The workers are new interpreters running this
    module (`python -m`: a multiprocessing pool would import the caller's main module again
    in every worker), each given its share on stdin, so nothing is left on disk; a worker
    stops when its caller is gone."""
    if len(reports) < POOL_FROM:
        for args in reports:
            write_report(*args)
        return
    workers = min(os.cpu_count() or 1, len(reports) // (POOL_FROM // 2))
    procs = [subprocess.Popen([sys.executable, "-m", "testbed.analysis.report", str(os.getpid())], cwd=_ROOT,
                              stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
             for _ in range(workers)]
    for k, proc in enumerate(procs):  # all started first: each imports matplotlib before it reads
        proc.stdin.write(pickle.dumps(reports[k::workers]))
        proc.stdin.close()
    errors = []
    for proc in procs:
        err = proc.stderr.read().decode(errors="replace").strip().splitlines()
        if proc.wait():
            errors.append(err[-1] if err else f"exit {proc.returncode}")
    if errors:
        raise RuntimeError(f"writing the reports failed: {'; '.join(errors)}")


if __name__ == "__main__":  # a worker of `write_reports`: its share of the reports, on stdin
    caller = int(sys.argv[1])
    for job in pickle.load(sys.stdin.buffer):  # written by write_reports: trusted
        if os.getppid() != caller:
            sys.exit(3)  # the caller is gone (killed): no report outlives it by more than one
        write_report(*job)
