"""The clients (Jepsen's client): workload processes, their configuration and counters, the
final read, and the history they record, the only truth the analysis sees of them."""
