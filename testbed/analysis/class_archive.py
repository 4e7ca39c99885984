"""A class-data-sharing archive of the analysis JVM's classes (JDK 17 dynamic AppCDS).

A cold judgment of a small run spent more time loading classes than judging: 27,000
classes, 13 s of class loading (parse, verify, link) in a 19 s `analyze`. An archive holds
them parsed and verified, and the JVM maps it at start: on the quickstart's run the JVM's
start went from 3.8 to 2.2 s and the ingest's first Parquet writes from 5.3 to 3.3 s.

The archive is recorded once per machine and software (`_key`: the JVM, PySpark's jars, the
class path): the first JVM started without one runs with `-XX:+RecordDynamicDumpInfo` and,
when its session stops (`save`), dumps the classes it loaded with `jcmd VM.cds
dynamic_dump` while the caller waits (10-60 s, once). It is dumped on demand rather than
at the JVM's exit (`-XX:ArchiveClassesAtExit`) so that a JVM never outlives the process
that started it to write one. One process records at a time (a lock file naming its pid);
the others start without an archive meanwhile; after a dump that ran out of time (a loaded
machine) none records for an hour. Each venv, JDK or PySpark has its own key,
so a machine that makes many (a CI clone per run) would gather archives of 160 MB each:
saving one keeps the `KEEP` most recently used (a start that maps one marks it used).

The class path must hold no non-empty directory for CDS, so Spark's configuration
directory is an empty one and the log settings are a system property (`java_options`).
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import psutil

from testbed.analysis.spark_settings import LOG4J2_PROPERTIES
from testbed.common.cache import isrlab_cache, keep_newest

#: How long a dump may take before the archive is given up for this time (it takes 10-15 s
#: on an idle machine, 40 s on a slow hour, and more than this beside a loaded CI run's)
DUMP_TIMEOUT_S = 120
#: The suffix of the file a JVM writes a dynamic dump to until it is complete (`<file>.temp`,
#: renamed to `<file>` at its end): a dump cut short leaves it, 150 MB of a half archive
JVM_TEMP = ".temp"
#: After a dump that ran out of time, how long starts go without recording again: each try
#: costs a recording JVM's start and a caller's wait of up to `DUMP_TIMEOUT_S` at its end,
#: which a loaded machine (a test suite of dozens of JVMs) would otherwise pay at every stop
RETRY_AFTER_S = 3600
#: How many archives a cache keeps: those most recently used
KEEP = 3


def cache_dir() -> Path:
    """Where archives live: `$XDG_CACHE_HOME/isrlab/cds`, else `~/.cache/isrlab/cds`."""
    return isrlab_cache() / "cds"


def empty_conf_dir() -> Path:
    """The empty directory given to Spark as its configuration directory (it goes on the
    class path, where CDS refuses a directory with files in it)."""
    path = cache_dir() / "spark-conf"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _java() -> Path | None:
    """The `java` PySpark starts: `$JAVA_HOME/bin/java`, else the one on the PATH."""
    home = os.environ.get("JAVA_HOME")
    found = Path(home) / "bin" / "java" if home else (Path(p) if (p := shutil.which("java")) else None)
    return found.resolve() if found is not None and found.exists() else None


def _key(java: Path) -> str:
    """What an archive is valid for: the JVM (its binary and `release`), Spark's jars (names,
    sizes and modification times: the JVM refuses an archive whose jars changed either) and
    the configuration directory on the class path. Another key is another archive: a JDK or
    PySpark upgrade, or a venv made again where one was (a CI clone per run), records a new
    one instead of being refused, silently, forever (measured: a cold `analyze` 20-22 s
    with a refused archive, 16 s after recording it again)."""
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    h = hashlib.sha256()
    for part in (str(java), str(java.stat().st_size), str(jars), str(empty_conf_dir())):
        h.update(part.encode() + b"\0")
    release = java.parent.parent / "release"
    if release.exists():
        h.update(release.read_bytes())
    for jar in sorted(jars.glob("*.jar")) if jars.is_dir() else ():
        stat = jar.stat()
        h.update(f"{jar.name}:{stat.st_size}:{stat.st_mtime_ns}\0".encode())
    return h.hexdigest()[:16]


def _archive_path(java: Path) -> Path:
    """This software's archive (it may not exist yet); its recording lock and partial dumps
    are named after it."""
    return cache_dir() / f"{_key(java)}.jsa"


def recorded() -> bool:
    """Whether this machine's JVM starts with an archive already."""
    java = _java()
    try:
        return java is not None and _archive_path(java).exists()
    except OSError:
        return False


def recording_lock() -> Path | None:
    """The lock a process holds while its JVM records this machine's archive (its content is
    the holder's pid), or None where no JVM is found."""
    java = _java()
    try:
        return _archive_path(java).with_suffix(".recording") if java is not None else None
    except OSError:
        return None


class ClassArchive:
    """The archive decision of one JVM start: use an archive, record one, or neither."""

    def __init__(self) -> None:
        self.archive: Path | None = None  # the archive the JVM maps
        self.recording: Path | None = None  # the lock held while this JVM records
        self._jcmd: Path | None = None
        java = _java()
        if java is None:
            return
        try:
            cache_dir().mkdir(parents=True, exist_ok=True)
            final = _archive_path(java)
        except OSError:
            return  # no cache to keep an archive in: start as before
        if final.exists():
            self.archive = final
            _mark_used(final)
            return
        jcmd = java.parent / "jcmd"
        if jcmd.exists() and not _timed_out_lately(final) and _lock(final.with_suffix(".recording")):
            self.recording, self._jcmd = final.with_suffix(".recording"), jcmd
            # a recorder killed while it dumped left its dump, and the JVM's file of it (`JVM_TEMP`)
            for left in final.parent.glob(f"{final.stem}.*.partial*"):
                left.unlink(missing_ok=True)
            _drop_stale_marks(final.parent)

    def java_options(self) -> str:
        """The JVM options for this start (the log settings come along in every case)."""
        options = [f"-Dlog4j2.configurationFile={LOG4J2_PROPERTIES}"]
        if self.archive is not None:
            # -Xshare:auto: an archive the JVM refuses (a mismatch nobody foresaw) means a
            # start without it, and the refusal is not printed on the user's terminal
            options += [f"-XX:SharedArchiveFile={self.archive}", "-Xshare:auto", "-Xlog:cds=off,cds+dynamic=off"]
        elif self.recording is not None:
            options.append("-XX:+RecordDynamicDumpInfo")
        return " ".join(options)

    def save(self, pid: int) -> None:
        """Dump the classes JVM `pid` loaded into this key's archive, if this start records
        one; waits for the dump. Any failure leaves no archive, and the next start records, but
        for a dump that ran out of time: then none records for `RETRY_AFTER_S`."""
        if self.recording is None or self._jcmd is None:
            return
        lock, self.recording = self.recording, None
        final = lock.with_suffix(".jsa")
        partial = lock.with_suffix(f".{os.getpid()}.partial")
        print("isrlab: saving the analysis JVM's classes for faster starts (once, 10-60 s)",
              file=sys.stderr, flush=True)
        try:
            done = subprocess.run([str(self._jcmd), str(pid), "VM.cds", "dynamic_dump", str(partial)],
                                  stdin=subprocess.DEVNULL, capture_output=True, timeout=DUMP_TIMEOUT_S)
            if done.returncode == 0 and partial.exists() and partial.stat().st_size > 0:
                os.replace(partial, final)
                _timed_out(final).unlink(missing_ok=True)
                keep_newest(final.parent, "*.jsa", KEEP)  # a JVM that maps a removed one keeps its mapping
        except subprocess.TimeoutExpired:
            _timed_out(final).touch()
            print(f"isrlab: the JVM's classes were not saved within {DUMP_TIMEOUT_S} s (a loaded machine); "
                  f"starts go without them for {RETRY_AFTER_S // 60} min, then try again", file=sys.stderr, flush=True)
        except (OSError, subprocess.SubprocessError):
            pass  # no archive this time
        finally:
            partial.unlink(missing_ok=True)
            # a dump out of time, whose JVM is killed next, leaves its file as the JVM writes it
            partial.with_name(partial.name + JVM_TEMP).unlink(missing_ok=True)
            lock.unlink(missing_ok=True)
            # jcmd's attach made the JVM listen on a socket file it removes only at a clean
            # exit, and `session.stop_spark` kills it next: the file would stay in /tmp
            attach_socket(pid).unlink(missing_ok=True)


def _timed_out(archive: Path) -> Path:
    """The mark of a dump of `archive` that ran out of time (its modification time is when)."""
    return archive.with_suffix(".timed-out")


def _timed_out_lately(archive: Path) -> bool:
    try:
        return time.time() - _timed_out(archive).stat().st_mtime < RETRY_AFTER_S
    except OSError:
        return False  # none: no dump of it ran out of time


def attach_socket(pid: int) -> Path:
    """Where HotSpot's attach listener of JVM `pid` listens on Linux (its temporary directory
    is /tmp whatever `java.io.tmpdir` says)."""
    return Path("/tmp") / f".java_pid{pid}"


def _mark_used(archive: Path) -> None:
    """Make the archive the most recently used (its modification time)."""
    try:
        os.utime(archive)
    except OSError:
        pass  # a cache of another user's: used all the same, just not marked


def _drop_stale_marks(cache: Path) -> None:
    """Every key's marks that no longer mean anything: recording locks of holders that are
    gone and marks of dumps out of time longer ago than `RETRY_AFTER_S`. A key whose recorder
    was killed is often never started again (a CI clone's venv is a key of its own)."""
    for lock in cache.glob("*.recording"):
        if not _held(lock):
            lock.unlink(missing_ok=True)
    for mark in cache.glob("*.timed-out"):
        if not _timed_out_lately(mark):
            mark.unlink(missing_ok=True)


def _held(lock: Path) -> bool:
    """Whether the process a recording lock names is alive."""
    try:
        holder = int(lock.read_text() or "0")
    except (OSError, ValueError):
        return False
    return holder > 0 and psutil.pid_exists(holder)


def _lock(path: Path) -> bool:
    """Take the recording lock: a file naming its holder's pid. A holder that is gone (a
    killed process) leaves a lock the next caller takes over."""
    for _ in range(2):
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            if _held(path):
                return False
            path.unlink(missing_ok=True)
            continue
        except OSError:
            return False
        with os.fdopen(fd, "w") as f:
            f.write(str(os.getpid()))
        return True
    return False
