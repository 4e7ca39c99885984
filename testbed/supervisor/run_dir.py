"""The layout of `runs/<run-id>/` (DESIGN section 7), in one place."""
from __future__ import annotations

import hashlib
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

#: Linux limits a unix socket path to 107 bytes; longer run paths get a short directory
#: under /tmp, linked from the run directory and removed with the run.
_MAX_SOCKET_PATH = 100


def new_run_id(name: str, seed: int) -> str:
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    micros = int(time.time() * 1e6) % 1_000_000
    return f"{stamp}.{micros:06d}Z-{name}-s{seed}"


@dataclass
class RunDir:
    root: Path

    @property
    def nodes(self) -> Path:
        return self.root / "nodes"

    @property
    def clients(self) -> Path:
        return self.root / "clients"

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def final(self) -> Path:
        return self.root / "final"

    @property
    def history(self) -> Path:
        return self.root / "history.jsonl"

    @property
    def events(self) -> Path:
        return self.root / "events.jsonl"

    @property
    def faults(self) -> Path:
        return self.root / "faults.jsonl"

    @property
    def metrics(self) -> Path:
        return self.root / "metrics.jsonl"

    @property
    def sock(self) -> Path:
        return self.root / "sock"

    def data_dir(self, node: str) -> Path:
        return self.data / node

    def create(self, sockets: bool = True) -> None:
        """The run's directories and record files; `sockets=False` for a run with no socket
        (the simulation's), which then leaves no short directory under /tmp either."""
        for d in (self.root, self.nodes, self.clients, self.data, self.final):
            d.mkdir(parents=True, exist_ok=True)
        for f in (self.history, self.events, self.faults, self.metrics):
            f.touch()
        if not sockets:
            return
        longest = str(self.sock / "controller-99.control.sock")
        if len(longest) <= _MAX_SOCKET_PATH:
            self.sock.mkdir(exist_ok=True)
        else:
            short = Path("/tmp") / ("isrlab-" + hashlib.sha1(str(self.root).encode()).hexdigest()[:12])
            short.mkdir(exist_ok=True)
            self.sock.symlink_to(short)

    def socket_dir(self) -> Path:
        return self.sock.resolve()

    def remove_sockets(self) -> None:
        """Socket files and the short /tmp directory, if one was used."""
        target = self.sock.resolve() if self.sock.exists() or self.sock.is_symlink() else None
        if target is not None and target.exists():
            shutil.rmtree(target, ignore_errors=True)
        if self.sock.is_symlink():
            self.sock.unlink()
