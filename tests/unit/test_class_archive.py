"""The analysis JVM's class archive (testbed/analysis/class_archive.py): one process records
it, the others start without one meanwhile, every later start maps it, and nothing a failed
or killed recorder leaves behind stops the next one."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from testbed.analysis import class_archive
from testbed.analysis.class_archive import ClassArchive

pytestmark = pytest.mark.skipif(class_archive._java() is None, reason="no java here")


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    return tmp_path / "isrlab" / "cds"


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_the_first_start_records_the_others_wait_and_then_every_start_maps_the_archive(cache: Path) -> None:
    first = ClassArchive()
    assert first.recording is not None and first.archive is None
    assert "-XX:+RecordDynamicDumpInfo" in first.java_options()
    assert first.recording.read_text() == str(os.getpid())  # the lock names its holder
    second = ClassArchive()  # the recorder is alive: no second recording, no archive yet
    assert second.recording is None and second.archive is None
    assert "RecordDynamicDumpInfo" not in second.java_options() and "SharedArchive" not in second.java_options()
    first.recording.with_suffix(".jsa").write_bytes(b"classes")  # what a dump leaves
    third = ClassArchive()
    assert third.archive == first.recording.with_suffix(".jsa") and third.recording is None
    assert f"-XX:SharedArchiveFile={third.archive}" in third.java_options()
    assert "-Xshare:auto" in third.java_options()  # a refused archive is a start without it


def test_every_start_takes_its_log_settings_from_a_property_and_its_conf_dir_is_empty(cache: Path) -> None:
    """CDS refuses a non-empty directory on the class path, where Spark puts its
    configuration directory."""
    options = ClassArchive().java_options()
    assert f"-Dlog4j2.configurationFile={class_archive.LOG4J2_PROPERTIES}" in options
    assert class_archive.LOG4J2_PROPERTIES.is_file()
    conf = class_archive.empty_conf_dir()
    assert conf.is_dir() and not any(conf.iterdir())


def test_a_killed_recorders_lock_and_partial_dump_are_taken_over(cache: Path) -> None:
    first = ClassArchive()
    assert first.recording is not None
    key = first.recording.stem
    first.recording.write_text(str(_dead_pid()))
    partial = cache / f"{key}.12345.partial"
    partial.write_bytes(b"half a dump")
    written = cache / f"{key}.12346.partial.temp"  # the JVM's own file while it dumps
    written.write_bytes(b"half a dump the JVM was writing")
    again = ClassArchive()
    assert again.recording == first.recording and again.recording.read_text() == str(os.getpid())
    assert not partial.exists() and not written.exists()


def test_a_recording_start_drops_every_keys_marks_that_no_longer_mean_anything(cache: Path) -> None:
    """Locks of other keys' killed recorders and their old marks of dumps out of time stayed
    for good (a CI clone's venv is a key of its own, never started again); a live recorder's
    lock and a recent mark still count."""
    cache.mkdir(parents=True)
    stale, live = cache / "0000000000000001.recording", cache / "0000000000000002.recording"
    stale.write_text(str(_dead_pid()))
    live.write_text(str(os.getpid()))
    old, recent = cache / "0000000000000003.timed-out", cache / "0000000000000004.timed-out"
    old.touch()
    recent.touch()
    long_ago = old.stat().st_mtime - class_archive.RETRY_AFTER_S - 60
    os.utime(old, (long_ago, long_ago))
    assert ClassArchive().recording is not None
    assert not stale.exists() and not old.exists()
    assert live.exists() and recent.exists()


def test_a_failed_dump_leaves_no_archive_and_frees_the_next_start_to_record(cache: Path) -> None:
    recorder = ClassArchive()
    assert recorder.recording is not None
    lock = recorder.recording
    recorder._jcmd = Path("/bin/false")  # a dump that fails
    recorder.save(os.getpid())
    assert not lock.exists() and not lock.with_suffix(".jsa").exists()
    assert not list(cache.glob("*.partial"))
    assert ClassArchive().recording == lock
    recorder.save(os.getpid())  # saving twice, or without recording, does nothing
    assert not lock.with_suffix(".jsa").exists()


def test_an_unwritable_cache_means_starts_without_an_archive(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    archive = ClassArchive()
    assert archive.archive is None and archive.recording is None
    assert archive.java_options() == f"-Dlog4j2.configurationFile={class_archive.LOG4J2_PROPERTIES}"


def test_saving_an_archive_keeps_only_the_most_recently_used_ones(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cache of archives for other venvs, JDKs or PySparks (160 MB each) keeps the `KEEP`
    most recently used: mapping one marks it used, and saving a new one removes the rest."""
    cache.mkdir(parents=True)
    others = [cache / f"{i:016x}.jsa" for i in range(class_archive.KEEP + 1)]
    for age, path in enumerate(others):
        path.write_bytes(b"classes")
        os.utime(path, (1_000_000 + age, 1_000_000 + age))  # others[0] the least recently used
    os.utime(others[0])  # a start of that software mapped it just now
    recorder = ClassArchive()
    assert recorder.recording is not None
    archive = recorder.recording.with_suffix(".jsa")
    run = subprocess.run

    def dump(command: list[str], **kwargs: object) -> subprocess.CompletedProcess:
        """jcmd <pid> VM.cds dynamic_dump <file>: writes the file."""
        assert command[2:4] == ["VM.cds", "dynamic_dump"]
        return run([sys.executable, "-c", f"open({command[4]!r}, 'wb').write(b'new classes')"], **kwargs)
    monkeypatch.setattr(class_archive.subprocess, "run", dump)
    recorder.save(os.getpid())
    assert archive.read_bytes() == b"new classes"
    # kept: the new one, the one used just now, then the newest of the rest
    assert set(cache.glob("*.jsa")) == {archive, others[0], *others[:0:-1][:class_archive.KEEP - 2]}
    os.utime(archive, (1_000_000, 1_000_000))
    assert ClassArchive().archive == archive  # a start that maps an archive marks it used
    assert archive.stat().st_mtime > 1_000_000


def test_jars_written_again_are_another_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The JVM checks an archive's jars by size and modification time and silently starts
    without an archive whose jars changed: a venv made again at the same path (same jars,
    same sizes, new files) must record its own archive, not keep a refused one."""
    import pyspark

    jars = tmp_path / "pyspark" / "jars"
    jars.mkdir(parents=True)
    jar = jars / "spark-core.jar"
    jar.write_bytes(b"classes")
    monkeypatch.setattr(pyspark, "__file__", str(tmp_path / "pyspark" / "__init__.py"))
    java = class_archive._java()
    assert java is not None
    before = class_archive._key(java)
    assert class_archive._key(java) == before  # nothing changed: the same archive
    os.utime(jar, ns=(jar.stat().st_atime_ns, jar.stat().st_mtime_ns + 1_000_000_000))
    assert class_archive._key(java) != before


def test_saving_leaves_no_attach_socket_of_the_jvm_it_dumped(cache: Path, tmp_path: Path) -> None:
    """jcmd's attach makes the JVM listen on /tmp/.java_pid<pid>, which only a clean exit
    removes; the analysis JVM is killed after its dump, so each first command on a machine
    (and each clean-clone CI run) left one in /tmp."""
    source = tmp_path / "Wait.java"
    source.write_text('public class Wait { public static void main(String[] a) throws Exception {'
                      ' System.out.println("ready"); System.out.flush(); Thread.sleep(120000); } }')
    java = class_archive._java()
    jvm = subprocess.Popen([str(java), "-XX:+RecordDynamicDumpInfo", "-XX:-UsePerfData", str(source)],
                           stdout=subprocess.PIPE, text=True)
    try:
        assert jvm.stdout is not None and jvm.stdout.readline().strip() == "ready"
        recorder = ClassArchive()
        assert recorder.recording is not None
        archive = recorder.recording.with_suffix(".jsa")
        recorder.save(jvm.pid)
        assert archive.is_file(), "the dump did not run against the JVM (nothing was attached)"
        assert not class_archive.attach_socket(jvm.pid).exists()
    finally:
        jvm.kill()
        jvm.wait()
        class_archive.attach_socket(jvm.pid).unlink(missing_ok=True)


def test_a_dump_out_of_time_stops_recording_for_a_while(cache: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Found in a CI run on a slow hour: every dump beside the loaded suite ran out of its
    120 s, and each next JVM recorded again and made its test wait 120 s more at its stop
    (no archive was ever saved). A dump out of time now stops recording for RETRY_AFTER_S."""
    slow = tmp_path / "jcmd"
    slow.write_text('#!/bin/sh\n: > "$4.temp"\nsleep 30\n')  # the JVM's dump file, as it writes it
    slow.chmod(0o755)
    monkeypatch.setattr(class_archive, "DUMP_TIMEOUT_S", 0.2)
    recorder = ClassArchive()
    lock = recorder.recording
    assert lock is not None
    recorder._jcmd = slow
    recorder.save(os.getpid())
    assert not lock.exists() and not lock.with_suffix(".jsa").exists()
    assert not list(cache.glob("*.temp"))  # the half dump of 150 MB went with it
    after = ClassArchive()
    assert after.recording is None and after.archive is None  # starts without, and records nothing
    assert "RecordDynamicDumpInfo" not in after.java_options()
    mark = lock.with_suffix(".timed-out")
    past = mark.stat().st_mtime - class_archive.RETRY_AFTER_S - 1
    os.utime(mark, (past, past))
    assert ClassArchive().recording == lock  # an hour on, a start records again
