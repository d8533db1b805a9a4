"""``kafka-core consume``: print records as text lines or JSON lines.

With ``--group`` the offsets committed are exactly those of records already written to stdout
(committed about every second and once more on the way out, also on Ctrl-C): a record is never
marked consumed before it was printed, and a restart goes on after the last one printed. A record
counts as printed once its whole line was written to stdout: when the reader goes away (``| head``)
the command stops at once and commits those, no more.

``--timeout`` is idle time once the consumer has its partitions: in a group it counts from the
first assignment, so a slow group join does not eat it; the join itself is bounded by
``--join-timeout``. A consume that ends without ever being assigned a partition says so (exit 5).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import select
import signal
import stat
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from kafka_core.cli.argtypes import positive_int, positive_seconds
from kafka_core.cli.connect import bootstrap_servers, client_options, topic_partitions
from kafka_core.cli.output import (
    EXIT_OK,
    EXIT_TIMEOUT,
    EXIT_USAGE,
    CliError,
    Output,
    one_line,
    plural,
    text_or_base64,
)
from kafka_core.errors import KafkaConnectionError, KafkaError

__all__ = ["add_parser", "format_record", "run"]

COMMIT_INTERVAL = 1.0  # seconds between commits of what was printed
CLOSE_TIMEOUT = 5.0  # seconds for the final commit and leaving the group
JOIN_TIMEOUT = 60.0  # default --join-timeout: Kafka's join of a busy group can take a rebalance timeout


def _offset(text: str) -> int | str:
    if text in ("earliest", "latest"):
        return text
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected an offset >= 0, earliest or latest, not {text!r}"
        ) from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"offset must be >= 0, not {value}")
    return value


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "consume",
        parents=[common],
        help="print records of a topic",
        description="Print records of a topic: the value per line (text) or one JSON object per line.",
    )
    p.add_argument("-t", "--topic", required=True, help="topic to read (must exist)")
    p.add_argument("-g", "--group", help="consumer group: join it and commit what was printed")
    p.add_argument(
        "--from-beginning",
        action="store_true",
        help="start at the earliest offset (with --group: where the group has no committed offset)",
    )
    p.add_argument("-p", "--partition", type=int, help="read only this partition")
    p.add_argument("-o", "--offset", type=_offset, help="start offset in --partition: N, earliest or latest")
    p.add_argument("-c", "--count", type=positive_int, help="stop after this many records")
    p.add_argument(
        "--timeout",
        type=positive_seconds,
        metavar="SECONDS",
        help="stop when no record arrived for this long, counted once partitions are assigned "
        "(with --group: from the first assignment, so the group join does not count)",
    )
    p.add_argument(
        "--join-timeout",
        type=positive_seconds,
        metavar="SECONDS",
        default=JOIN_TIMEOUT,
        help=f"with --group and --timeout: give up when the group assigned no partition within this "
        f"long (default {JOIN_TIMEOUT:g}; exit 5)",
    )
    p.add_argument("--format", choices=("text", "json"), default="text", help="text (default) or json lines")
    p.add_argument("--print-key", action="store_true", help="text: print KEY<SEP>VALUE")
    p.add_argument("--print-headers", action="store_true", help="text: print k=v,k2=v2<SEP> first")
    p.add_argument(
        "-K", "--key-separator", default="\t", metavar="SEP", help="text: separator after key/headers (tab)"
    )
    p.add_argument(
        "--session-timeout",
        type=positive_seconds,
        metavar="SECONDS",
        help="group session timeout (default 10; classic protocol only: the broker sets it for 'consumer')",
    )
    p.add_argument(
        "--group-protocol",
        choices=("classic", "consumer"),
        default="classic",
        help="group protocol: classic (default) or consumer (KIP-848, server-side assignment)",
    )
    p.add_argument(
        "--isolation-level",
        choices=("read_uncommitted", "read_committed"),
        default="read_uncommitted",
        help="read_committed: only committed transactions (default read_uncommitted)",
    )
    p.set_defaults(run=run)


def format_record(msg: Any, args: argparse.Namespace) -> bytes:
    """One output line (without its newline) for a consumed record."""
    if args.format == "json":
        data = {
            "topic": msg.topic,
            "partition": msg.partition,
            "offset": msg.offset,
            "timestamp": msg.timestamp,
            "key": text_or_base64(msg.key),
            "value": text_or_base64(msg.value),
            "headers": [[k, text_or_base64(v)] for k, v in msg.headers],
        }
        return json.dumps(data, ensure_ascii=False).encode()
    sep = args.key_separator.encode()
    parts: list[bytes] = []
    if args.print_headers:
        parts.append(b",".join(k.encode() + b"=" + (v if v is not None else b"null") for k, v in msg.headers))
    if args.print_key:
        parts.append(msg.key if msg.key is not None else b"null")
    parts.append(msg.value if msg.value is not None else b"null")
    return sep.join(parts)


class _Printer:
    """Writes records and remembers, per partition, the offset after the last one printed.

    A record counts as printed once its whole line was written to stdout (the lines of a poll go
    out in one write, not through a buffer that could hold printed-looking records when the
    reader leaves). A write and its bookkeeping are one step: Ctrl-C or SIGTERM arriving in
    between waits until the offsets are recorded (see :meth:`deferring_signals`), else a line
    would be printed and never committed, and the next run would print it again."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        try:
            self.fd: int | None = sys.stdout.fileno()
            sys.stdout.flush()
        except (AttributeError, OSError, ValueError):  # not a real file (main() inside a test)
            self.fd = None
        self._watch = self._pipe_watch()
        self.printed = 0
        self.next_offsets: dict[Any, int] = {}
        self.committed: dict[Any, int] = {}
        self._buf = bytearray()
        self._ends: list[tuple[Any, int, int]] = []  # (partition, next offset, end of its line in _buf)
        self._writing = False
        self._pending: list[tuple[Callable[[int, Any], Any], int, Any]] = []

    def _pipe_watch(self) -> Any:
        """A poll object on stdout when it is a pipe: it reports the reader leaving (POLLERR)."""
        if self.fd is None or not hasattr(select, "poll"):
            return None
        try:
            if not stat.S_ISFIFO(os.fstat(self.fd).st_mode):
                return None
        except OSError:
            return None
        watch = select.poll()
        watch.register(self.fd, 0)  # no events asked: POLLERR and POLLHUP come anyway
        return watch

    def reader_gone(self) -> bool:
        """Whether the reader of the stdout pipe went away (``| head`` had its lines), checked
        between polls so an idle consume ends too, not only at its next write."""
        if self._watch is None:
            return False
        return any(events & (select.POLLERR | select.POLLNVAL) for _, events in self._watch.poll(0))

    @property
    def queued(self) -> int:
        """Records added and not yet written (counted toward --count already)."""
        return len(self._ends)

    def add(self, msg: Any) -> None:
        self._buf += format_record(msg, self.args)
        self._buf += b"\n"
        self._ends.append((msg.topic_partition, msg.offset + 1, len(self._buf)))

    def _write(self, data: memoryview) -> int:
        if self.fd is not None:
            return os.write(self.fd, data)
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
        return len(data)

    def flush(self) -> None:
        """Write the added lines; raises BrokenPipeError (after the bookkeeping) when the reader left."""
        if not self._buf:
            return
        self._writing = True
        done = 0
        try:
            data = bytes(self._buf)
            with memoryview(data) as view:
                while done < len(data):
                    done += self._write(view[done:])
        finally:
            self._settle(done)
            self._writing = False
        if self._pending:
            handler, signum, frame = self._pending.pop()
            self._pending.clear()
            handler(signum, frame)

    def _settle(self, done: int) -> None:
        """Records whose whole line went out are printed; a partly written one is not."""
        count = 0
        for tp, next_offset, end in self._ends:
            if end > done:
                break
            self.next_offsets[tp] = next_offset
            count += 1
        self.printed += count
        self._ends = [(tp, o, end - done) for tp, o, end in self._ends[count:]]
        self._buf = self._buf[done:]

    def drop(self) -> None:
        """Forget what was added and not written (the reader is gone)."""
        self._buf = bytearray()
        self._ends = []

    @contextlib.contextmanager
    def deferring_signals(self) -> Iterator[None]:
        """SIGINT and SIGTERM run their handlers at once, except during a write: then after it."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        saved = {}
        for signum in (signal.SIGINT, signal.SIGTERM):
            previous = signal.getsignal(signum)
            if callable(previous):
                saved[signum] = previous
                signal.signal(signum, self._deferring(previous))
        try:
            yield
        finally:
            for signum, previous in saved.items():
                signal.signal(signum, previous)

    def _deferring(self, previous: Callable[[int, Any], Any]) -> Callable[[int, Any], Any]:
        def handler(signum: int, frame: Any) -> Any:
            if self._writing:
                self._pending.append((previous, signum, frame))
                return None
            return previous(signum, frame)

        return handler

    def uncommitted(self) -> dict[Any, int]:
        return {tp: o for tp, o in self.next_offsets.items() if self.committed.get(tp) != o}


def _check_args(args: argparse.Namespace) -> None:
    if args.offset is not None and args.partition is None:
        raise CliError("--offset needs --partition", EXIT_USAGE)
    if args.offset is not None and args.from_beginning:
        raise CliError("give --offset or --from-beginning, not both", EXIT_USAGE)
    if not args.key_separator.encode():
        raise CliError("--key-separator must not be empty", EXIT_USAGE)


def _build_consumer(
    args: argparse.Namespace, partitions: list[int], on_assign: Callable[[set[Any]], None]
) -> Any:
    from kafka_core import KafkaConsumer
    from kafka_core.client.metadata import TopicPartition

    options: dict[str, Any] = {
        "group_id": args.group,
        "auto_offset_reset": "earliest" if args.from_beginning else "latest",
        "enable_auto_commit": False,  # we commit what was printed, no more
        "isolation_level": args.isolation_level,
        "coordinator_ready_timeout_ms": max(float(args.connect_timeout) * 1000, 1.0),
        **client_options(args),
    }
    if args.group_protocol == "consumer":
        if args.session_timeout is not None:
            raise CliError(
                "--session-timeout is set by the broker with --group-protocol consumer (KIP-848)", EXIT_USAGE
            )
        if args.group is None:
            raise CliError("--group-protocol consumer needs --group", EXIT_USAGE)
        options["group_protocol"] = "consumer"
    else:
        session_ms = int((args.session_timeout or 10.0) * 1000)
        options["session_timeout_ms"] = session_ms
        options["heartbeat_interval_ms"] = max(1, min(3_000, session_ms // 3))
    options.setdefault("api_timeout_ms", 15_000)  # bounds the final commit when the broker is gone
    if args.partition is not None:
        if args.partition not in partitions:
            raise CliError(
                f"--partition {args.partition}: topic {args.topic!r} has partitions 0-{len(partitions) - 1}",
                EXIT_USAGE,
            )
        consumer = KafkaConsumer(
            bootstrap_servers=bootstrap_servers(args), partitions={args.topic: [args.partition]}, **options
        )
        tp = TopicPartition(args.topic, args.partition)
        if args.offset == "earliest":
            consumer.seek_to_beginning([tp])
        elif args.offset == "latest":
            consumer.seek_to_end([tp])
        elif args.offset is not None:
            consumer.seek(tp, args.offset)
        return consumer
    return KafkaConsumer(
        bootstrap_servers=bootstrap_servers(args), topics=[args.topic], on_assign=on_assign, **options
    )


class _Assignment:
    """When the consumer got its partitions: the start of --timeout's clock.

    Without a group (or with --partition) they are there from the start; in a group they come
    with the first assignment, which on_assign reports from inside poll()."""

    def __init__(self, subscribed: bool) -> None:
        self.started = time.monotonic()
        self.joined: float | None = None if subscribed else self.started
        self.partitions: set[Any] = set()

    def on_assign(self, partitions: set[Any]) -> None:
        if self.joined is None:
            self.joined = time.monotonic()
        self.partitions.update(partitions)

    def got(self, batch: list[Any]) -> None:
        """Records came, so partitions were assigned (whether or not on_assign said so)."""
        if batch:
            self.on_assign({msg.topic_partition for msg in batch})

    def wait_ms(self, args: argparse.Namespace, last_record: float) -> float | None:
        """How long the next poll may wait; None: --timeout (or --join-timeout) has run out."""
        if args.timeout is None:
            return 1_000.0
        now = time.monotonic()
        if self.joined is None:
            left = args.join_timeout - (now - self.started)
        else:
            left = args.timeout - (now - max(last_record, self.joined))
        return min(1_000.0, left * 1000) if left > 0 else None

    def never_assigned(self, args: argparse.Namespace) -> CliError | None:
        """The error for a group consume that ended without a partition (None if it had one)."""
        if self.partitions or args.group is None or args.partition is not None:
            return None
        where = f"topic {args.topic!r} in group {args.group!r}"
        if self.joined is None:
            return CliError(
                f"no partition of {where} was assigned within --join-timeout {args.join_timeout:g}s: "
                f"the group join did not finish (see: kafka-core groups describe {args.group})",
                EXIT_TIMEOUT,
            )
        return CliError(
            f"joined the group but no partition of {where} was assigned to this consumer "
            f"(more members than partitions?); nothing arrived within --timeout {args.timeout:g}s",
            EXIT_TIMEOUT,
        )


def run(args: argparse.Namespace, out: Output) -> int:
    if out.as_json:
        args.format = "json"
    _check_args(args)
    partitions = topic_partitions(args, args.topic)
    grouped = args.group is not None
    assignment = _Assignment(subscribed=grouped and args.partition is None)
    consumer = _build_consumer(args, partitions, assignment.on_assign)
    printer = _Printer(args)
    interrupted: KeyboardInterrupt | None = None
    reader_gone = False
    last_error = ""
    with printer.deferring_signals():
        try:
            last_record = assignment.started
            next_commit = last_record + COMMIT_INTERVAL
            while args.count is None or printer.printed < args.count:
                if printer.reader_gone():
                    raise BrokenPipeError("stdout: the reader went away")
                wait_ms = assignment.wait_ms(args, last_record)
                if wait_ms is None:
                    break
                try:
                    batch = consumer.poll(timeout_ms=wait_ms)
                except KafkaConnectionError as exc:  # retriable: the consumer resumes by itself
                    if one_line(exc) != last_error:
                        last_error = one_line(exc)
                        out.note(f"kafka-core: warning: {last_error}", style="yellow")
                    continue
                if batch:
                    last_record = time.monotonic()
                    assignment.got(batch)
                for msg in batch:
                    printer.add(msg)
                    if args.count is not None and printer.printed + printer.queued >= args.count:
                        break
                printer.flush()
                if grouped and time.monotonic() >= next_commit:
                    _commit(consumer, printer)
                    next_commit = time.monotonic() + COMMIT_INTERVAL
        except KeyboardInterrupt as exc:
            interrupted = exc
        except BrokenPipeError:
            _quiet_stdout()  # the reader went away (| head): stop quietly, as other tools do
            printer.drop()
            reader_gone = True
        finally:
            _finish(consumer, printer, grouped)
    if reader_gone:
        return EXIT_OK
    if interrupted is not None:  # Ctrl-C or SIGTERM: main turns it into the exit code
        raise type(interrupted)(f"interrupted after {plural(printer.printed, 'record')}")
    unassigned = assignment.never_assigned(args)
    if unassigned is not None:
        raise unassigned
    if args.count is not None and printer.printed < args.count:
        raise CliError(
            f"only {printer.printed} of {args.count} records arrived within --timeout {args.timeout:g}s",
            EXIT_TIMEOUT,
        )
    return EXIT_OK


def _commit(consumer: Any, printer: _Printer) -> None:
    todo = printer.uncommitted()
    if todo:
        consumer.commit(todo)
        printer.committed.update(todo)


def _quiet_stdout() -> None:
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def _finish(consumer: Any, printer: _Printer, grouped: bool) -> None:
    """Flush what was printed, commit exactly that (a group), leave, close: bounded, Ctrl-C safe."""
    try:
        printer.flush()
    except (OSError, ValueError):  # BrokenPipeError: the reader is gone; what went out is counted
        printer.drop()
        _quiet_stdout()
    try:
        if grouped:
            _commit(consumer, printer)
    except KafkaError as exc:
        print(f"kafka-core: warning: committing the printed offsets failed: {one_line(exc)}", file=sys.stderr)
    finally:
        try:
            consumer.close(CLOSE_TIMEOUT, commit=False)
        except KafkaError as exc:
            print(f"kafka-core: warning: {one_line(exc)}", file=sys.stderr)
