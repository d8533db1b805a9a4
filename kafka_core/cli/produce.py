"""``kafka-core produce``: one record per input line, from stdin or ``--file``.

Records go through the public ``kafka_core.KafkaProducer``; the count reported is of records the
broker acknowledged, so a script can trust it. On a terminal a progress display shows lines read
and acknowledged as they go (on stderr, never mixed into the output).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from kafka_core.cli.connect import bootstrap_servers, client_options, parse_pairs, topic_partitions
from kafka_core.cli.output import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    CliError,
    Output,
    one_line,
)

__all__ = ["add_parser", "run"]

CLOSE_TIMEOUT = 10.0  # seconds to deliver what is queued when interrupted


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    from kafka_core.producer.options import COMPRESSIONS

    p = sub.add_parser(
        "produce",
        parents=[common],
        help="send lines from stdin or a file as records",
        description="Send one record per input line (stdin, or --file). Prints how many were acknowledged.",
    )
    p.add_argument("-t", "--topic", required=True, help="topic to write to (must exist)")
    p.add_argument("-f", "--file", type=Path, help="read lines from this file instead of stdin")
    p.add_argument(
        "-K",
        "--key-separator",
        metavar="SEP",
        help="each line is KEY<SEP>VALUE, split at the first SEP (a line without it is an error)",
    )
    p.add_argument(
        "-H",
        "--header",
        action="append",
        metavar="KEY=VALUE",
        help="a header added to every record (repeatable)",
    )
    p.add_argument("-z", "--compression", choices=COMPRESSIONS, default="none")
    p.add_argument("-p", "--partition", type=int, help="write every record to this partition")
    p.add_argument("--acks", choices=("all", "1", "0"), default="all", help="acknowledgements (default all)")
    p.set_defaults(run=run)


def _lines(stream: Iterable[bytes]) -> Iterator[bytes]:
    for raw in stream:
        if raw.endswith(b"\n"):
            raw = raw[:-2] if raw.endswith(b"\r\n") else raw[:-1]
        yield raw


WAKE_S = 0.5  # how often a read of stdin that is waiting for input lets a signal's handler run


def _pipe_lines(fd: int, wake_s: float = WAKE_S) -> Iterator[bytes]:
    """The lines of stdin as iterating a file gives them (newline kept, for :func:`_lines`),
    read so that Ctrl-C always ends the wait.

    A signal's Python handler runs in the main thread, between bytecodes. When the kernel hands
    SIGINT to another thread (the producer's I/O thread, say), a main thread blocked in read()
    is not woken, and the KeyboardInterrupt waited for the next line: with stdin left open,
    forever (CI saw `kafka-core produce` outlive a SIGINT by 30 s). So the read waits in
    select() for at most ``wake_s`` at a time."""
    import os
    import select

    pending = b""
    while True:
        ready, _, _ = select.select([fd], [], [], wake_s)
        if not ready:
            continue
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            break
        *complete, pending = (pending + chunk).split(b"\n")
        for raw in complete:
            yield raw + b"\n"
    if pending:
        yield pending


def _input_lines(args: argparse.Namespace, stream: IO[bytes]) -> Iterator[bytes]:
    if args.file is None and sys.platform != "win32":  # select() takes pipes and ttys on POSIX only
        try:
            fd = stream.fileno()
        except (OSError, ValueError):  # stdin replaced by an object without a descriptor (tests)
            return _lines(stream)
        return _lines(_pipe_lines(fd))
    return _lines(stream)


class _Tally:
    """Acknowledged and failed counts, written only by the producer's I/O thread."""

    def __init__(self) -> None:
        self.acked = 0
        self.failed = 0
        self.first_error: BaseException | None = None

    def done(self, future: Any) -> None:
        error = future.exception()
        if error is None:
            self.acked += 1
        else:
            self.failed += 1
            if self.first_error is None:
                self.first_error = error


def run(args: argparse.Namespace, out: Output) -> int:
    from kafka_core import KafkaProducer

    headers = [(k, v.encode()) for k, v in parse_pairs(args.header, "--header")] or None
    separator = args.key_separator.encode() if args.key_separator is not None else None
    if separator == b"":
        raise CliError("--key-separator must not be empty", EXIT_USAGE)
    if args.file is not None and not args.file.is_file():
        raise CliError(f"--file {str(args.file)!r} is not a readable file", EXIT_USAGE)
    partitions = topic_partitions(args, args.topic)
    if args.partition is not None and args.partition not in partitions:
        raise CliError(
            f"--partition {args.partition}: topic {args.topic!r} has partitions 0-{len(partitions) - 1}",
            EXIT_USAGE,
        )
    block_ms = float(args.connect_timeout) * 1000
    producer = KafkaProducer(
        bootstrap_servers(args),
        compression=args.compression,
        acks=args.acks,
        max_block_ms=block_ms,
        **client_options(args),
    )
    tally = _Tally()
    sent = 0
    interrupted: KeyboardInterrupt | None = None
    error: CliError | None = None
    stream: IO[bytes] = args.file.open("rb") if args.file is not None else sys.stdin.buffer
    total = args.file.stat().st_size if args.file is not None else None
    show = out.interactive and (args.file is not None or not sys.stdin.isatty())
    progress = _Progress(out, tally, total, stream) if show else contextlib.nullcontext()
    try:
        with progress as bar:
            for number, line in enumerate(_input_lines(args, stream), 1):
                key = None
                value = line
                if separator is not None:
                    key, sep, value = line.partition(separator)
                    if not sep:
                        error = CliError(
                            f"line {number} has no key separator {args.key_separator!r}; "
                            f"stopped after {sent} records",
                            EXIT_FAILED,
                        )
                        break
                producer.send(
                    args.topic, value, key=key, partition=args.partition, headers=headers
                ).add_done_callback(tally.done)
                sent += 1
                if bar is not None:
                    bar.read = sent
            if bar is not None:
                bar.flushing = True
            producer.flush()
    except KeyboardInterrupt as exc:
        interrupted = exc
    finally:
        if args.file is not None:
            stream.close()
        # Interrupted: what is queued still gets a bounded chance to be delivered.
        with contextlib.suppress(Exception):
            producer.close(CLOSE_TIMEOUT if interrupted is not None else None)
    return _report(args, out, sent, tally, interrupted, error)


def _report(
    args: argparse.Namespace,
    out: Output,
    sent: int,
    tally: _Tally,
    interrupted: KeyboardInterrupt | None,
    error: CliError | None,
) -> int:
    unsettled = sent - tally.acked - tally.failed
    if out.as_json:
        out.json(
            {
                "topic": args.topic,
                "read": sent,
                "acknowledged": tally.acked,
                "failed": tally.failed + unsettled,
                "interrupted": interrupted is not None,
                "error": one_line(tally.first_error) if tally.first_error is not None else None,
            }
        )
    else:
        out.line(f"{tally.acked} records sent to {args.topic}")
    if error is not None:
        raise error
    if tally.failed or unsettled:
        cause = f": {one_line(tally.first_error)}" if tally.first_error is not None else ""
        raise CliError(f"{tally.failed + unsettled} of {sent} records were not delivered{cause}", EXIT_FAILED)
    if interrupted is not None:  # Ctrl-C or SIGTERM: main turns it into the exit code
        raise type(interrupted)(f"interrupted after {tally.acked} records were sent")
    return EXIT_OK


class _Progress:
    """A rich progress display on stderr, refreshed from a timer thread, not per record."""

    def __init__(self, out: Output, tally: _Tally, total: int | None, stream: IO[bytes]) -> None:
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        self.tally = tally
        self.total = total
        self.stream = stream
        self.read = 0
        self.flushing = False
        columns: list[Any] = [TextColumn("[bold]producing[/]")]
        if total:
            columns.append(BarColumn())
        columns += [
            TextColumn("{task.fields[read]:,} read, {task.fields[acked]:,} acknowledged"),
            TextColumn("{task.fields[rate]}"),
            TimeElapsedColumn(),
        ]
        self.progress = Progress(*columns, console=out.err, transient=False)
        self.task = self.progress.add_task("produce", total=total or None, read=0, acked=0, rate="")
        self.started = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._tick, name="kafka-core-progress", daemon=True)

    def _update(self) -> None:
        elapsed = max(time.monotonic() - self.started, 1e-6)
        rate = f"{self.tally.acked / elapsed:,.0f} records/s"
        done = None
        if self.total:
            with contextlib.suppress(OSError, ValueError):
                done = self.stream.tell()
        self.progress.update(self.task, completed=done, read=self.read, acked=self.tally.acked, rate=rate)

    def _tick(self) -> None:
        while not self._stop.wait(0.2):
            self._update()

    def __enter__(self) -> _Progress:
        self.progress.start()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._update()
        self.progress.stop()
