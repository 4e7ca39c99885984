"""An experiment from start to verdict (Jepsen's test): the runner, what the terminal shows,
the run's final state and counts, and the dry run."""
