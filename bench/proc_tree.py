"""CPU and RSS of a process and all its descendants, from /proc (Spark's work is spread over the
driver, its JVM and the Python workers, so one process's figures would say little)."""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path


def _proc_table() -> dict[int, tuple[int, float, int]]:
    """pid -> (ppid, CPU seconds incl. reaped children, RSS bytes) for every visible process."""
    tick = os.sysconf("SC_CLK_TCK")
    page = os.sysconf("SC_PAGE_SIZE")
    table = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            raw = (entry / "stat").read_text()
            fields = raw[raw.rindex(")") + 2 :].split()
            ppid = int(fields[1])
            cpu = sum(int(x) for x in fields[11:15]) / tick  # utime stime cutime cstime
            table[int(entry.name)] = (ppid, cpu, int(fields[21]) * page)
    return table


def tree_usage(root: int) -> tuple[float, float]:
    """(CPU seconds, RSS MB) of ``root`` and all its descendants right now."""
    table = _proc_table()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _cpu, _rss) in table.items():
        children.setdefault(ppid, []).append(pid)
    cpu = rss = 0.0
    stack = [root]
    while stack:
        pid = stack.pop()
        if pid in table:
            cpu += table[pid][1]
            rss += table[pid][2]
        stack.extend(children.get(pid, ()))
    return cpu, rss / 2**20


class TreeSampler:
    """Samples the tree's RSS while a job runs (Spark's memory lives in the JVM and workers)."""

    def __init__(self, interval: float = 0.5) -> None:
        self.interval = interval
        self.peak_mb = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.peak_mb = max(self.peak_mb, tree_usage(os.getpid())[1])

    def __enter__(self) -> TreeSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak_mb = max(self.peak_mb, tree_usage(os.getpid())[1])


def listener_cpu(bootstrap: str | None) -> float | None:
    """CPU seconds so far of the local broker process listening at ``bootstrap`` (an embedded Tansu,
    found by its ``--listener-url``), or None when there is none on this machine to measure."""
    if not bootstrap:  # a method with no broker (the ceilings)
        return None
    url = f"tcp://{bootstrap.split(',')[0].strip()}".encode()
    tick = os.sysconf("SC_CLK_TCK")
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            if url in argv and b"--listener-url" in argv:
                raw = (entry / "stat").read_text()
                fields = raw[raw.rindex(")") + 2 :].split()
                return sum(int(x) for x in fields[11:13]) / tick  # utime stime
    return None
