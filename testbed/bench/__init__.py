"""`python run.py bench` (`cli.py`): DESIGN section 10's figures, measured and written down in
BENCHMARKS.md. The package's own module stays empty, so that importing any of its parts does
not import the command and, with it, the analysis and the supervisor it measures."""
