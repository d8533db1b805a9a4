"""Class-data-sharing archives (AppCDS) for the JVMs the dev brokers start, so a start maps the
classes it loads from one file instead of reading and verifying them from the jars.

A suite starts Kafka nodes by the dozen: measured on 2 cores, a node (start, 2,000 records,
stop) took 7.4 s of CPU without an archive and 4.8 with one, and was ready in 2.6 s, not 4.5.

The first JVM of a classpath that finds no archive makes one as it exits (Java 17's
``-XX:ArchiveClassesAtExit``; that start is slower by some seconds); one process at a time makes
it (a claim file), every later JVM of that classpath uses it. An archive is kept only from a JVM
that ended cleanly: one killed mid-dump leaves nothing behind. The JVM checks an archive against
its own build and classpath and runs without it when they differ, so a stale archive costs the
speed-up, never a start.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

from kafka_core.devtools.brokers.kafka_jars import cache_root

__all__ = ["ClassArchive"]

# A claim older than this was left by a process that died before its JVM exited: taken over.
_STALE_CLAIM_S = 600.0
# Return codes of a JVM that ended on its own or after SIGTERM (its shutdown hooks ran).
_CLEAN_EXITS = (0, 143, -15)


class ClassArchive:
    """The archive of one classpath and set of JVM options, shared by every JVM of them."""

    def __init__(self, classpath: str, options: tuple[str, ...] = ()) -> None:
        java = shutil.which("java") or "java"
        real = os.path.realpath(java)
        try:
            stamp = f"{os.stat(real).st_size}:{os.stat(real).st_mtime_ns}"
        except OSError:
            stamp = ""
        key = hashlib.sha256("\0".join((real, stamp, classpath, *options)).encode()).hexdigest()[:20]
        self.path = cache_root() / "jvm-cds" / f"{key}.jsa"
        self._claim = self.path.with_suffix(".claim")
        # guards _dumping: the JVM making the archive for this process, and where it writes it
        self._lock = threading.Lock()
        self._dumping: tuple[subprocess.Popen[bytes] | None, Path] | None = None

    def options(self) -> list[str]:
        """The options for a JVM about to start: use the archive, or make it, or neither (another
        process is making it). Call :meth:`started` with the process when making it."""
        self.settle()
        if self.path.exists():
            return [f"-XX:SharedArchiveFile={self.path}"]
        with self._lock:
            if self._dumping is not None or not self._take_claim():
                return []
            tmp = self.path.with_name(f"{self.path.stem}.{os.getpid()}.{time.monotonic_ns()}.tmp")
            self._dumping = (None, tmp)
        return [f"-XX:ArchiveClassesAtExit={tmp}"]

    def started(self, options: list[str], proc: subprocess.Popen[bytes]) -> None:
        """``proc`` runs with ``options`` (from :meth:`options`): if it makes the archive, it is
        kept once the process has ended cleanly."""
        with self._lock:
            if (
                self._dumping is not None
                and self._dumping[0] is None
                and any(o.startswith("-XX:ArchiveClassesAtExit=") for o in options)
            ):
                self._dumping = (proc, self._dumping[1])

    def abandoned(self, options: list[str]) -> None:
        """The JVM given ``options`` did not start: another may make the archive."""
        if any(o.startswith("-XX:ArchiveClassesAtExit=") for o in options):
            with self._lock:
                if self._dumping is not None and self._dumping[0] is None:
                    self._release(self._dumping[1], keep=False)

    def settle(self) -> None:
        """Once the JVM making the archive has ended: keep the archive (a clean exit) or drop it."""
        with self._lock:
            if self._dumping is None:
                return
            proc, tmp = self._dumping
            if proc is None or proc.poll() is None:
                return
            self._release(tmp, keep=proc.returncode in _CLEAN_EXITS)

    def _release(self, tmp: Path, *, keep: bool) -> None:
        self._dumping = None
        try:
            if keep and tmp.exists() and tmp.stat().st_size > 0:
                os.replace(tmp, self.path)
        finally:
            with contextlib.suppress(OSError):
                tmp.unlink()
            with contextlib.suppress(OSError):
                self._claim.unlink()

    def _take_claim(self) -> bool:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        for _ in range(2):
            try:
                fd = os.open(self._claim, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                try:
                    age = time.time() - self._claim.stat().st_mtime
                except OSError:
                    continue  # released meanwhile: try again
                if age < _STALE_CLAIM_S:
                    return False
                with contextlib.suppress(OSError):
                    self._claim.unlink()
                continue
            with os.fdopen(fd, "w") as claim:
                claim.write(str(os.getpid()))
            return True
        return False
