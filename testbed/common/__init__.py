"""What several parts of the testbed need about this host's processes and scratch files,
below all of them: whether a process has exited, and directories that outlive no owner."""
