"""Fault injection for isrlab: Jepsen's nemesis, as plain data plus small effectful pieces.

A Jepsen nemesis is `inject(action, targets) -> effect` and its `undo`; here the pieces are
kept apart so that all the deciding is pure and testable without a cluster:

- `faults.schedule`: what happens when (explicit `faults:` plus seeded `nemesis:` blocks
  expanded, each nemesis fault paired with its undo); printable by `--dry-run`;
- `faults.targets`: what a target (`leader-of orders/0`, `rack:a`, ...) means at the moment
  a fault fires, from a `ClusterView` snapshot;
- `faults.network`: partitions, one-way cuts and slow links as `LinkTable`s for the nodes'
  userspace filters, and `reachable` to check them;
- `faults.storage`: power loss and disk loss applied to a dead broker's files, and tmpfs
  data directories;
- `faults.process`: the signals behind kill, pause and resume.

The supervisor (`testbed/`) drives them: it resolves targets, injects, records each effect
in `faults.jsonl`, and undoes what it injected.
"""
