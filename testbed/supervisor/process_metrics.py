"""Per-process CPU and RSS, sampled by psutil once a second into `metrics.jsonl`."""
from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Callable

import psutil

from broker.common.jsonl import JsonlAppender


class MetricsSampler:
    def __init__(self, path: Path, pids: Callable[[], dict[str, int]], interval: float = 1.0) -> None:
        self.out = JsonlAppender(path)
        self.pids = pids
        self.interval = interval
        self._stop = threading.Event()
        self._procs: dict[int, psutil.Process] = {}
        self._thread = threading.Thread(target=self._run, name="metrics", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def sample(self) -> None:
        lines = []
        now = time.monotonic_ns()
        for name, pid in dict(self.pids()).items():
            proc = self._procs.get(pid)
            try:
                if proc is None:
                    proc = self._procs[pid] = psutil.Process(pid)
                    proc.cpu_percent(None)  # the first call only primes the counter
                    continue
                with proc.oneshot():
                    lines.append({"time_ns": now, "process": name, "pid": pid,
                                  "cpu_percent": proc.cpu_percent(None), "rss": proc.memory_info().rss})
            except psutil.NoSuchProcess:
                self._procs.pop(pid, None)
        self.out.write_many(lines)

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=2)
        self.out.close()
