"""The analysis pipeline (DESIGN section 8): one PySpark job that ingests run directories,
runs every check, attributes every loss and judges each run against its expectations."""
from testbed.analysis.pipeline import analyze_runs
from testbed.analysis.terminal import print_verdict
from testbed.analysis.verdict import RunVerdict

__all__ = ["RunVerdict", "analyze_runs", "print_verdict"]
