"""Fault injection for isrlab: Jepsen's nemesis, as plain data plus small effectful pieces.

A Jepsen nemesis is `inject(action, targets) -> effect` and its `undo`; here the pieces are
kept apart so that all the deciding is pure and testable without a cluster:

- `faults.fault_spec`: the vocabulary (actions, loss modes, shapes) and a fault or nemesis
  block as the topology states it;
- `faults.schedule`: what happens when (explicit `faults:` plus seeded `nemesis:` blocks
  expanded, each nemesis fault paired with its undo); printable by `--dry-run`;
- `faults.targets`: what a target (`leader-of orders/0`, `rack:a`, ...) means at the moment
  a fault fires, from a `ClusterView` snapshot;
- `faults.network`: partitions, one-way cuts and slow links as `LinkTable`s for the nodes'
  userspace filters, and `reachable` to check them; `faults.network_layers`: the ones in
  force, composed into the table the nodes hold;
- `faults.storage`: power loss and disk loss applied to a dead broker's files, and tmpfs
  data directories;
- `faults.process`: the signals behind kill, pause and resume;
- `faults.injector`: the nemesis itself, which fires a schedule (or one fault) on a running
  cluster through the `ClusterControl` protocol, records `faults.jsonl`, and undoes what it
  did. Nothing here imports the testbed: the supervisor's `Cluster` is one ClusterControl.
"""
