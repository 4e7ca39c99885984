"""The supervisor (Jepsen's db): the processes of a run, their configurations and run
directory, the `Cluster` API, and what the cluster says of itself (status)."""
