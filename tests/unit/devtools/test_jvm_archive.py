"""ClassArchive: one JVM makes a classpath's archive, later ones use it, a killed one leaves none.

The JVMs here are stand-ins (``sh``) that write where ``-XX:ArchiveClassesAtExit`` points, then
exit as told: what is kept depends only on the file and the exit, not on Java.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from kafka_core.devtools.brokers.jvm_archive import ClassArchive


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKA_CORE_CACHE", str(tmp_path))


def _jvm(options: list[str], *, exit_code: int = 0, signal: str | None = None) -> subprocess.Popen[bytes]:
    """A stand-in JVM: writes the archive it was told to make, then exits or is killed."""
    (dump,) = [o.split("=", 1)[1] for o in options if o.startswith("-XX:ArchiveClassesAtExit=")]
    script = f"printf classes > '{dump}'; " + (f"kill -{signal} $$" if signal else f"exit {exit_code}")
    return subprocess.Popen(["sh", "-c", script])


def test_the_first_jvm_makes_the_archive_and_later_ones_use_it() -> None:
    first = ClassArchive("libs/*", ("-XX:+UseSerialGC",))
    making = first.options()
    assert [o.split("=")[0] for o in making] == ["-XX:ArchiveClassesAtExit"]
    # another process (its own ClassArchive) meanwhile: neither makes nor uses one
    assert ClassArchive("libs/*", ("-XX:+UseSerialGC",)).options() == []
    assert first.options() == []  # nor another JVM of this one
    proc = _jvm(making)
    first.started(making, proc)
    proc.wait()
    first.settle()
    assert first.path.read_bytes() == b"classes"
    assert ClassArchive("libs/*", ("-XX:+UseSerialGC",)).options() == [f"-XX:SharedArchiveFile={first.path}"]
    assert list(first.path.parent.iterdir()) == [first.path]  # no claim, no temporary file left


def test_another_classpath_or_options_get_an_archive_of_their_own() -> None:
    one = ClassArchive("libs/*", ("-XX:+UseSerialGC",))
    assert one.path != ClassArchive("libs/*:plugin.jar", ("-XX:+UseSerialGC",)).path
    assert one.path != ClassArchive("libs/*", ("-XX:+UseG1GC",)).path


@pytest.mark.parametrize(("exit_code", "signal"), [(0, "KILL"), (1, None)], ids=["killed", "failed"])
def test_a_jvm_that_did_not_end_cleanly_leaves_no_archive_and_the_next_one_makes_it(
    exit_code: int, signal: str | None
) -> None:
    archive = ClassArchive("libs/*")
    making = archive.options()
    proc = _jvm(making, exit_code=exit_code, signal=signal)
    archive.started(making, proc)
    proc.wait()
    archive.settle()
    assert not archive.path.exists()
    assert list(archive.path.parent.iterdir()) == []
    again = ClassArchive("libs/*").options()
    assert [o.split("=")[0] for o in again] == ["-XX:ArchiveClassesAtExit"]


def test_a_jvm_that_never_started_gives_the_claim_back() -> None:
    archive = ClassArchive("libs/*")
    making = archive.options()
    archive.abandoned(making)
    assert [o.split("=")[0] for o in ClassArchive("libs/*").options()] == ["-XX:ArchiveClassesAtExit"]


def test_a_claim_left_by_a_dead_process_is_taken_over_once_stale(monkeypatch: pytest.MonkeyPatch) -> None:
    import kafka_core.devtools.brokers.jvm_archive as jvm_archive

    ClassArchive("libs/*").options()  # claimed, and its maker never runs
    assert ClassArchive("libs/*").options() == []
    monkeypatch.setattr(jvm_archive, "_STALE_CLAIM_S", 0.0)
    assert [o.split("=")[0] for o in ClassArchive("libs/*").options()] == ["-XX:ArchiveClassesAtExit"]
