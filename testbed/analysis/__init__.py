"""The analysis pipeline (DESIGN section 8): one PySpark job that ingests run directories,
runs every check, attributes every loss and judges each run against its expectations
(`pipeline.analyze_runs`, its verdicts `verdict.RunVerdict`, printed by
`terminal.print_verdict`).

The package's own module stays empty: the pipeline's imports (PySpark's Connect client,
pandas, the report's plotting) take a second or more, and a command starts its JVM from
`session` before it needs them (`analysis.cli`, `experiment.warm_up`); a facade here
importing its modules would also be a package module pointing into its own subpackage."""
