"""What ``python -m kafka_core.devbroker`` does once its broker is up: watch it until interrupted.

A node that ends by itself is reported (which one, its exit code, the end of its log) while the
other nodes keep serving, so a failover can be tried on a 3-node cluster; the command ends when
no node is left. Its stdout may be a pipe a script reads the JSON line from: when that reader
leaves (``| head -1``), the command ends quietly instead of dying on a broken pipe.
"""

from __future__ import annotations

import json
import os
import select
import stat
import threading
import time
from typing import TextIO

from kafka_core.devtools.brokers.common import EmbeddedBroker, NodeExit

__all__ = ["READER_GONE", "reader_gone", "supervise", "write_line"]

READER_GONE = 141  # 128 + SIGPIPE, what a shell reports for a writer whose reader left


def write_line(stream: TextIO, text: str) -> bool:
    """Write one line and flush; False if the reader of ``stream`` has left (a broken pipe)."""
    try:
        stream.write(text + "\n")
        stream.flush()
    except BrokenPipeError:
        _silence(stream)
        return False
    return True


def reader_gone(stream: TextIO) -> bool:
    """Whether ``stream`` is a pipe or socket whose reading end was closed (poll says POLLERR
    without a write); a terminal or file never is."""
    try:
        fd = stream.fileno()
        mode = os.fstat(fd).st_mode
    except (OSError, ValueError):
        return False
    if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)):
        return False
    poller = select.poll()
    poller.register(fd, select.POLLERR | select.POLLHUP)
    gone = any(event & (select.POLLERR | select.POLLHUP) for _, event in poller.poll(0))
    if gone:
        _silence(stream)
    return gone


def _silence(stream: TextIO) -> None:
    """Point the stream's descriptor at /dev/null, so that the flush at exit does not raise the
    broken pipe again (what Python's documentation advises for SIGPIPE)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


def _report(exit_: NodeExit, running: list[int], total: int) -> str:
    code = "unknown" if exit_.exit_code is None else str(exit_.exit_code)
    if exit_.exit_code is not None and exit_.exit_code < 0:
        code += f" (signal {-exit_.exit_code})"
    if total > 1:
        left = f"{len(running)} of {total} nodes keep running" + (
            f" ({', '.join(str(n) for n in running)})" if running else ""
        )
    else:
        left = "nothing is left running"
    tail = exit_.log_tail.strip()
    lines = [f"devbroker: node {exit_.node_id} stopped by itself, exit code {code}; {left}"]
    if tail:
        lines.append(f"--- the end of node {exit_.node_id}'s log ---\n{tail}\n---")
    return "\n".join(lines)


def supervise(
    broker: EmbeddedBroker,
    *,
    nodes: int,
    out: TextIO,
    err: TextIO,
    json_events: bool,
    interval: float = 0.5,
    until: threading.Event | None = None,
) -> int:
    """Watch ``broker`` until no node runs (1), ``out``'s reader leaves (READER_GONE) or
    ``until`` is set (0); a KeyboardInterrupt (Ctrl-C, SIGTERM) goes to the caller, which stops
    the broker. Stopping the broker is the caller's: nothing here stops a node."""
    reported: set[int] = set()
    while until is None or not until.is_set():
        for exit_ in broker.exits():
            if exit_.node_id in reported:
                continue
            reported.add(exit_.node_id)
            running = broker.running_nodes()
            write_line(err, _report(exit_, running, nodes))
            if json_events:
                event = {
                    "event": "node_exited",
                    "node": exit_.node_id,
                    "exit_code": exit_.exit_code,
                    "running": running,
                }
                if not write_line(out, json.dumps(event)):
                    return READER_GONE
        if not broker.running_nodes():
            if nodes > 1:
                write_line(err, "devbroker: every node has stopped; nothing is left running")
            return 1
        if reader_gone(out):
            return READER_GONE
        if until is not None:
            until.wait(interval)
        else:
            time.sleep(interval)
    return 0
