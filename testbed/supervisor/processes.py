"""Starting node and client processes so that none outlives its run.

Three layers: every child asks the kernel for SIGKILL when the supervisor dies
(`broker.node.die_with_parent`, the first thing both child entry points do; it then checks
its parent pid, which closes the race of a supervisor dying before the prctl); every node
also watches its parent pid in its loop; and every run registers its processes, socket
directory, mounts and (netns backend) network namespaces under `<runs>/.live/` so the next
run reaps whatever a SIGKILLed supervisor left behind. A link to each registry in the
machine's `INDEX` lets the next run or `status` reap it whatever runs directory either
uses (a tmpfs mount outlives the processes, and stayed mounted until a run used that same
directory again). No `preexec_fn`: it is unsafe in a process with threads, and the
supervisor samples metrics in one.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

import psutil

from testbed.common.cache import isrlab_cache
from testbed.common.owned_dirs import reap_supervisor_scratch
from testbed.common.pids import exited, start_time
from testbed.supervisor.netns import delete_namespaces


def bytecode_cache() -> Path:
    """Where node and client processes keep their compiled modules when the environment says
    not to write them beside the sources: `$XDG_CACHE_HOME/isrlab/pycache`, else
    `~/.cache/isrlab/pycache`."""
    return isrlab_cache() / "pycache"


def child_env() -> dict[str, str]:
    """The environment of a node, client or watchman process. Under PYTHONDONTWRITEBYTECODE (set on
    this machine, and common in containers) every process compiled every module it imports
    from source, every time: 0.36 s of CPU to import `broker.node` against 0.22 s with its
    bytecode, about a second of CPU for a cluster's nine nodes, and again at every restart.
    The children then write and read their bytecode in `bytecode_cache()` instead
    (PYTHONPYCACHEPREFIX), so the source tree stays as the user asked; an explicit
    PYTHONPYCACHEPREFIX is left as it is."""
    env = dict(os.environ)
    env.setdefault("PYTHONUNBUFFERED", "1")
    if env.get("PYTHONDONTWRITEBYTECODE") and not env.get("PYTHONPYCACHEPREFIX"):
        del env["PYTHONDONTWRITEBYTECODE"]
        env["PYTHONPYCACHEPREFIX"] = str(bytecode_cache())
    return env


def spawn(args: list[str], log_path: Path, cwd: Path | None = None) -> subprocess.Popen:
    """A child in its own session (a terminal's Ctrl-C goes to the supervisor only)."""
    log = open(log_path, "ab")
    env = child_env()
    try:
        return subprocess.Popen([sys.executable, *args], stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True, cwd=cwd, env=env, close_fds=True)
    finally:
        log.close()


#: the machine's links to the registries of runs in progress, whatever their runs directory
#: (`ISRLAB_LIVE_INDEX` moves it: each test process has its own)
INDEX = Path(os.environ.get("ISRLAB_LIVE_INDEX") or Path(tempfile.gettempdir()) / "isrlab-live")


class Registry:
    """`<runs>/.live/<run-id>.json`: what this run started, for reaping after a crash; linked
    from `INDEX`."""

    def __init__(self, runs_dir: Path, run_id: str, sock_dir: Path | None, run_dir: Path | None = None,
                 made: bool = False) -> None:
        """`sock_dir` may come later (`set_sock_dir`); `made`: the run makes `run_dir` (it did
        not exist), and a run reaped before its first process started left nothing in it to
        judge, so the reaper removes it."""
        self.path = runs_dir / ".live" / f"{run_id}.json"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.watchman: subprocess.Popen | None = None
        me = os.getpid()
        self.data = {"supervisor_pid": me, "supervisor_create_time": start_time(me),
                     "run_dir": str(run_dir) if run_dir else None, "made_run_dir": made,
                     "sock_dir": str(sock_dir) if sock_dir else None, "processes": [], "mounts": [], "netns": []}
        self._save()
        self.link = INDEX / f"{run_id}.json"
        try:
            INDEX.mkdir(parents=True, exist_ok=True)
            self.link.unlink(missing_ok=True)
            self.link.symlink_to(self.path.resolve())
        except OSError:  # no shared temporary directory: the runs directory's registry still serves
            pass

    def start_watchman(self) -> None:
        """Start the process that reaps this run at once if the supervisor dies (`watchman`)."""
        self.watchman = subprocess.Popen(
            [sys.executable, "-m", "testbed.supervisor.watchman", str(self.path.resolve()), str(os.getpid())],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True, close_fds=True, env=child_env())

    def set_sock_dir(self, path: Path) -> None:
        """The run's socket directory, once its run directory is made (it may be a short
        directory under /tmp that the run directory links to)."""
        self.data["sock_dir"] = str(path)
        self._save()

    def add_process(self, pid: int) -> None:
        self.data["processes"].append({"pid": pid, "create_time": start_time(pid)})
        self._save()

    def add_mount(self, path: Path) -> None:
        """Called before the mount is made (see `add_netns`)."""
        self.data["mounts"].append(str(path))
        self._save()

    def drop_mount(self, path: Path) -> None:
        """A mount that was not made after all."""
        self.data["mounts"].remove(str(path))
        self._save()

    def add_netns(self, names: list[str]) -> None:
        """Called before the namespaces are made: a crash between the two leaves a name to
        delete, never a namespace nobody knows of."""
        self.data["netns"].extend(names)
        self._save()

    def _save(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data))
        tmp.replace(self.path)

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)
        self.link.unlink(missing_ok=True)
        if self.watchman is not None:  # nothing is left to watch
            self.watchman.terminate()
            try:
                self.watchman.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.watchman.kill()
                self.watchman.wait()
            self.watchman = None


def kill_tree(pid: int, create_time: float | None) -> None:
    if exited(pid, create_time):
        return
    try:
        p = psutil.Process(pid)
        for child in p.children(recursive=True):
            child.kill()
        p.kill()
    except psutil.NoSuchProcess:
        pass


class Reaped(NamedTuple):
    """A run whose leftovers were reaped, and whether its run directory went with them (its
    supervisor died before the run's first process started: `reap_registry`)."""

    run_id: str
    run_dir_removed: bool


def reap_leftovers(runs_dir: Path) -> list[Reaped]:
    """Kill the processes, remove the sockets, mounts and network namespaces of runs whose
    supervisor died: those registered in `runs_dir`, and those of any runs directory that
    `INDEX` links to."""
    live = runs_dir / ".live"
    links = sorted(INDEX.glob("*.json")) if INDEX.is_dir() else []
    reaped = []
    for f in _registries(runs_dir):
        if (how := reap_registry(f)) is not None:
            reaped.append(Reaped(f.stem, how == "removed"))
            # what its watchman would have removed, had it not been killed too (trial33: a
            # rehearsal's and an early JVM log's directories outlived `status` and other runs)
            reap_supervisor_scratch(f.parent)
    for tmp in live.glob("*.tmp") if live.is_dir() else []:  # a registry's next version, cut off mid-write
        if not tmp.with_suffix(".json").exists() and _older_than(tmp, STALE_TMP_S):
            tmp.unlink(missing_ok=True)
    for link in links:  # its run ended and removed its registry, or was reaped just now
        if not link.exists():
            link.unlink(missing_ok=True)
    return reaped


def reap_registry(f: Path) -> str | None:
    """Reap one registry's run if its supervisor is gone: "reaped", or "removed" when its run
    directory went too; None when it was not reaped."""
    try:
        data = json.loads(f.read_text())
    except (OSError, json.JSONDecodeError):
        f.unlink(missing_ok=True)
        return None
    if not exited(data.get("supervisor_pid", -1), data.get("supervisor_create_time")):
        return None  # a run in progress in another process
    for proc in data.get("processes", []):
        kill_tree(proc["pid"], proc.get("create_time"))
    for mount in data.get("mounts", []):
        subprocess.run(["umount", "-l", mount], capture_output=True, check=False)
    delete_namespaces(data.get("netns", []))
    sock = data.get("sock_dir")
    if sock and Path(sock).exists():
        shutil.rmtree(sock, ignore_errors=True)
    run_dir = data.get("run_dir")
    removed = bool(data.get("made_run_dir") and not data.get("processes") and run_dir)
    if removed:
        # its supervisor died before the run's first process started: the directory it made
        # holds empty record files and no run to judge (README: "leaves no run directory")
        shutil.rmtree(run_dir, ignore_errors=True)
    f.unlink(missing_ok=True)
    f.with_suffix(".tmp").unlink(missing_ok=True)
    link = INDEX / f.name
    if link.is_symlink() and not link.exists():  # its link in the machine's index, dangling now
        link.unlink(missing_ok=True)
    return "removed" if removed else "reaped"


#: A registry's `.tmp` without its `.json` older than this (s) was left by a supervisor killed
#: as it wrote its first registry (a live one renames it at once)
STALE_TMP_S = 60.0


def _older_than(path: Path, seconds: float) -> bool:
    try:
        return time.time() - path.stat().st_mtime > seconds
    except FileNotFoundError:
        return False


def running_runs(runs_dir: Path) -> list[Path]:
    """Registry files of runs whose supervisor is alive (for `run.py status`): those of
    `runs_dir`, and those `INDEX` links to (a run of the Python API with a `run_dir`
    elsewhere, a matrix's cells)."""
    out = []
    for f in _registries(runs_dir):
        try:
            data = json.loads(f.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if not exited(data.get("supervisor_pid", -1), data.get("supervisor_create_time")):
            out.append(f)
    return out


def _registries(runs_dir: Path) -> list[Path]:
    """The registry files of `runs_dir` and those `INDEX` links to, each once, as they exist now."""
    live = runs_dir / ".live"
    found = set(live.glob("*.json")) if live.is_dir() else set()
    found.update(Path(os.path.realpath(link)) for link in (INDEX.glob("*.json") if INDEX.is_dir() else []))
    return sorted({f.resolve() for f in found if f.exists()})
