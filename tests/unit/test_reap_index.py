"""A SIGKILLed supervisor's leftovers are reaped by the next run or `status` whatever runs
directory either uses (`processes.INDEX`): a new user's tmpfs mounts stayed mounted through
runs, sims and `status` of other runs directories until one used that directory again."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import psutil

from testbed.supervisor import processes
from testbed.supervisor.processes import reap_leftovers

ROOT = Path(__file__).resolve().parents[2]


def test_a_dead_supervisors_run_is_reaped_from_another_runs_directory(tmp_path: Path) -> None:
    script = textwrap.dedent(f"""
        import os, signal, subprocess
        from pathlib import Path
        from testbed.supervisor.processes import Registry
        Path({str(tmp_path / 'sock')!r}).mkdir()
        reg = Registry(Path({str(tmp_path / 'runs-a')!r}), "killed", Path({str(tmp_path / 'sock')!r}))
        child = subprocess.Popen(["sleep", "600"], start_new_session=True, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
        reg.add_process(child.pid)
        from testbed.common import owned_dirs
        owned_dirs.make(owned_dirs.EARLY_LOG_PREFIX, reg.path.parent)  # a JVM's early log, in .live
        print(child.pid, owned_dirs.make(owned_dirs.REHEARSAL_PREFIX), flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
        """)
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == -signal.SIGKILL, done.stderr
    orphan = psutil.Process(int(done.stdout.split()[0]))
    registry = tmp_path / "runs-a" / ".live" / "killed.json"
    assert json.loads(registry.read_text())["processes"][0]["pid"] == orphan.pid
    assert (processes.INDEX / "killed.json").is_symlink()
    try:
        assert reap_leftovers(tmp_path / "runs-b") == [("killed", False)]
        orphan.wait(timeout=10)  # killed by the reap (wait reaps it only if it is our child: it is not)
        assert not registry.exists() and not (tmp_path / "sock").exists()
        # what its watchman would have removed, had it been killed too (trial33)
        assert not Path(done.stdout.split()[1]).exists() and list(registry.parent.iterdir()) == []
        assert not (processes.INDEX / "killed.json").exists()
        assert reap_leftovers(tmp_path / "runs-b") == []
    finally:
        if orphan.is_running():
            orphan.kill()


def test_a_registry_cut_off_mid_write_is_removed_once_stale(tmp_path: Path) -> None:
    """A supervisor killed while it wrote its registry's next version leaves `<run>.tmp`: gone
    with its run's `.json`, or alone once older than a live write could be."""
    import os
    import time
    live = tmp_path / "runs" / ".live"
    live.mkdir(parents=True)
    stale, fresh = live / "stale.tmp", live / "fresh.tmp"
    stale.write_text("")
    fresh.write_text("")
    old = time.time() - processes.STALE_TMP_S - 1
    os.utime(stale, (old, old))
    reap_leftovers(tmp_path / "runs")
    assert not stale.exists() and fresh.exists()


def test_a_run_directory_made_before_any_node_started_is_removed_with_its_leftovers(tmp_path: Path) -> None:
    """trial36: a supervisor killed 0.37 s into a run, after it made its run directory and
    before its registry, left a directory of empty record files that nothing removed, and
    `analyze runs/` of the tree then exited 2 for it. The registry comes first now, and a run
    reaped before its first process started loses the directory it made; one given to it
    that existed before, or one whose nodes had started (a prefix to judge), stays."""
    script = textwrap.dedent(f"""
        import os, signal
        from pathlib import Path
        from testbed.supervisor.processes import Registry
        from testbed.supervisor.run_dir import RunDir
        runs = Path({str(tmp_path / 'runs')!r})
        made, given, started = runs / "made", runs / "given", runs / "started"
        given.mkdir(parents=True)
        for root in (made, given, started):
            reg = Registry(runs, root.name, None, root, made=not root.exists())
            RunDir(root).create(sockets=False)
            if root is started:
                reg.add_process(os.getpid())  # a node (its pid: the supervisor's own, dead soon)
        os.kill(os.getpid(), signal.SIGKILL)
        """)
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == -signal.SIGKILL, done.stderr
    runs = tmp_path / "runs"
    assert sorted(reap_leftovers(runs)) == [("given", False), ("made", True), ("started", False)]
    assert not (runs / "made").exists()
    assert (runs / "given" / "history.jsonl").is_file() and (runs / "started" / "history.jsonl").is_file()
