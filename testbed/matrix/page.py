"""The matrix's own summary files: `summary/cells.parquet` (a row per cell: its values, status
and every check's count) and `summary/cells.html` (cells x checks, each cell linking its
report, each failed expectation marked), beside the per-setting summary of `analyze`."""
from __future__ import annotations

import html
import os
from pathlib import Path

from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

from testbed.analysis.session import get_spark
from testbed.matrix.results import CellResult, check_count, met_line
from testbed.config.specs import CHECK_NAMES

_COLUMNS = StructType([StructField(name, StringType()) for name in ("cell", "setting", "faults", "status", "report")]
                      + [StructField("seed", LongType()), StructField("attempts", IntegerType())]
                      + [StructField(name, LongType()) for name in CHECK_NAMES])
_COLOURS = {"passed": "#dfd", "flaky": "#ffd", "failed": "#fdd", "unjudged": "#eee"}


def write_cells(results: list[CellResult], summary_dir: Path, spark_master: str | None = None) -> None:
    """Both files, under `summary_dir` (made if need be)."""
    summary_dir.mkdir(parents=True, exist_ok=True)
    rows = [(r.cell.id, r.cell.setting, r.cell.schedule or "", r.status, str(r.last.run_dir / "report.html"),
             r.cell.seed, len(r.verdicts), *(check_count(r.last, name) for name in CHECK_NAMES)) for r in results]
    # a JVM started here (no cell ran, so none judged) prints to the summary's log, not the terminal (trial37)
    (get_spark(spark_master, log=summary_dir / "spark.log").createDataFrame(rows, _COLUMNS)
     .write.mode("overwrite").parquet(str(summary_dir / "cells.parquet")))
    (summary_dir / "cells.html").write_text(_page(results, summary_dir), encoding="utf-8")



def _page(results: list[CellResult], summary_dir: Path) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in ("cell", "status", "attempts", *CHECK_NAMES))
    body = []
    for r in results:
        expect = r.last.results.get("expect", {})
        link = os.path.relpath(r.last.run_dir / "report.html", summary_dir)
        cells = [f"<td><a href='{html.escape(link)}'>{html.escape(r.cell.id)}</a></td>",
                 f"<td style='background:{_COLOURS[r.status]}'>{r.status}</td>", f"<td>{len(r.verdicts)}</td>"]
        for name in CHECK_NAMES:
            count = check_count(r.last, name)
            held = expect.get(name, {}).get("held")
            style = " style='background:#fdd'" if held is False else ""
            title = f" title='expected {html.escape(expect[name]['expected'])}'" if name in expect else ""
            cells.append(f"<td{style}{title}>{'' if count is None else count}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return ("<!doctype html><html><head><meta charset='utf-8'><title>isrlab matrix</title><style>"
            "td,th{border:1px solid #ccc;padding:3px 6px;font:13px sans-serif}table{border-collapse:collapse}"
            "th{writing-mode:vertical-rl}</style></head><body>"
            f"<h1>isrlab matrix: {met_line(results)}</h1>"
            "<p>A red count broke the cell's expectation (hover for it); the cell's name opens its report.</p>"
            f"<table><tr>{head}</tr>{''.join(body)}</table></body></html>")
