"""``kafka-core``: the command line (produce, consume, topics, groups, share, transactions,
partitions, cluster, users, quotas; broker, bench and pipeline run the dev tools, :mod:`kafka_core.cli.dev`).

Every failure a user can cause (a bad address, a missing topic, a bad argument, a Kafka error) ends
as one line on stderr and an exit code from :mod:`kafka_core.cli.output`, never a traceback
(``KAFKA_CORE_DEBUG=1`` shows one for unexpected errors). Ctrl-C stops at once and cleanly: exit 130.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, NoReturn

from kafka_core.cli.argtypes import positive_seconds
from kafka_core.cli.output import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    CliError,
    Output,
    one_line,
)

__all__ = ["build_parser", "main"]

PROG = "kafka-core"
EXIT_TERMINATED = 143  # SIGTERM (128 + 15), after the same clean stop as Ctrl-C

EPILOG = (
    "exit codes: 0 ok, 1 operation failed, 2 bad arguments, 3 broker unreachable, "
    "4 topic or group not found, 5 consume ran out of time (--count not reached in --timeout, or the "
    "group assigned no partition), 130 interrupted"
)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, not the usage block
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _common(defaults: bool) -> argparse.ArgumentParser:
    """Connection and output options, accepted before and after the subcommand.

    The copy given to subcommands has no defaults of its own (SUPPRESS), so an option given
    before the subcommand is not overwritten by a subcommand default.
    """

    def d(value: Any) -> Any:
        return value if defaults else argparse.SUPPRESS

    p = _Parser(add_help=False)
    g = p.add_argument_group("connection and output")
    g.add_argument(
        "-b",
        "--bootstrap-servers",
        metavar="HOST:PORT[,...]",
        default=d(None),
        help="brokers (default $KAFKA_BOOTSTRAP_SERVERS, else localhost:9092)",
    )
    g.add_argument(
        "--connect-timeout",
        type=positive_seconds,
        metavar="SECONDS",
        default=d(10.0),
        help="how long to wait for a broker to answer (default 10)",
    )
    g.add_argument(
        "-X",
        "--option",
        action="append",
        metavar="KEY=VALUE",
        default=d(None),
        help="a client option, e.g. -X security_protocol=SSL -X ssl_cafile=ca.pem, or Java's name, "
        "e.g. -X sasl.oauthbearer.token.endpoint.url=URL (repeatable)",
    )
    g.add_argument("--json", action="store_true", default=d(False), help="machine-readable JSON on stdout")
    g.add_argument(
        "-v", "--verbose", action="count", default=d(0), help="log the client's warnings (-vv: debug)"
    )
    return p


def build_parser() -> argparse.ArgumentParser:
    from kafka_core.cli import cluster, consume, dev, groups, produce, share, topics, transactions, users

    parser = _Parser(
        prog=PROG,
        description="Kafka from the command line, with kafka_core.",
        epilog=EPILOG,
        parents=[_common(True)],
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    common = _common(False)
    produce.add_parser(sub, common)
    consume.add_parser(sub, common)
    topics.add_parser(sub, common)
    groups.add_parser(sub, common)
    share.add_parser(sub, common)
    transactions.add_parser(sub, common)
    cluster.add_parsers(sub, common)
    users.add_parsers(sub, common)
    dev.add_parsers(sub, common)
    return parser


class _StderrLog(logging.StreamHandler):
    """``-v``/``-vv`` log lines: plain text on stderr, so stdout carries only the data (``| jq``).

    The client logs from its I/O thread: a log line must never raise there. A closed or broken
    stderr drops the line (rich's handler wrote to stdout and raised SystemExit on a closed pipe
    inside the consumer's event loop, which hung ``kafka-core -vv consume ... | head``).
    """

    def __init__(self) -> None:
        super().__init__(sys.stderr)
        self.setFormatter(logging.Formatter("%(asctime)s %(levelname)-7s %(name)s: %(message)s"))

    def handleError(self, record: logging.LogRecord) -> None:
        pass  # no traceback about a log line on a stream that is gone


@contextlib.contextmanager
def _process_setup(verbose: int) -> Iterator[None]:
    """Logging and SIGTERM for one command, put back afterwards (main() may run inside a test).

    Quiet by default: the client logs outages it rides out, and errors reach the user as one line.
    """
    logger = logging.getLogger("kafka_core")
    saved = (logger.level, logger.propagate)
    handler: logging.Handler
    if verbose <= 0:
        handler = logging.NullHandler()
    else:
        handler = _StderrLog()
        logger.setLevel(logging.DEBUG if verbose > 1 else logging.WARNING)
    logger.addHandler(handler)
    logger.propagate = False
    on_main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _on_sigterm) if on_main else None
    try:
        yield
    finally:
        if on_main:
            signal.signal(signal.SIGTERM, previous)
        logger.removeHandler(handler)
        logger.setLevel(saved[0])
        logger.propagate = saved[1]


def _kafka_error_code(exc: BaseException) -> int:
    from kafka_core.errors import (
        KafkaConfigError,
        KafkaConnectionError,
        KafkaProtocolError,
        KafkaTimeoutError,
    )

    if isinstance(exc, KafkaConfigError):
        return EXIT_USAGE
    if isinstance(exc, KafkaProtocolError) and exc.name in (
        "UNKNOWN_TOPIC_OR_PARTITION",
        "UNKNOWN_TOPIC_ID",
        "GROUP_ID_NOT_FOUND",
    ):
        return EXIT_NOT_FOUND
    if isinstance(exc, KafkaConnectionError | KafkaTimeoutError):
        return EXIT_UNREACHABLE
    return EXIT_FAILED


class _Terminated(KeyboardInterrupt):
    """SIGTERM, handled as Ctrl-C is (a clean stop), with its own exit code."""


def _on_sigterm(signum: int, frame: Any) -> None:
    raise _Terminated


def _quiet_stdout() -> None:
    """The reader of stdout went away (``| head``): drop further output instead of failing at exit."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra and not getattr(args, "passthrough", False):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    args.extra = extra
    args.argv = list(sys.argv[1:] if argv is None else argv)  # what a child process is given (dev)
    return args


def main(
    argv: Sequence[str] | None = None,
    *,
    runners: Mapping[str, Callable[[argparse.Namespace, Output], int]] | None = None,
) -> int:
    """Entry point of the ``kafka-core`` console script; returns the exit code.

    ``runners`` runs the commands it names in this process instead (``python -m
    kafka_core.devtools``, where the dev commands of :mod:`kafka_core.cli.dev` run).
    """
    try:
        args = _parse(argv)
    except SystemExit as exc:  # --help, or a usage error already printed as one line
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    if runners and args.command in runners:
        args.run = runners[args.command]
    with _process_setup(args.verbose):
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    prog = " ".join([PROG, args.command, *([args.action] if getattr(args, "action", None) else [])])
    try:
        out = Output(as_json=args.json)
        return int(args.run(args, out))
    except KeyboardInterrupt as exc:  # Ctrl-C (or SIGTERM), after the command's clean stop
        print(f"{prog}: {exc.args[0] if exc.args else 'interrupted'}", file=sys.stderr)
        return EXIT_TERMINATED if isinstance(exc, _Terminated) else EXIT_INTERRUPTED
    except CliError as exc:
        print(f"{prog}: error: {one_line(exc)}", file=sys.stderr)
        return exc.code
    except BrokenPipeError:
        _quiet_stdout()
        return EXIT_OK
    except Exception as exc:
        from kafka_core.errors import KafkaError

        if isinstance(exc, KafkaError):
            print(f"{prog}: error: {one_line(exc)}", file=sys.stderr)
            return _kafka_error_code(exc)
        if os.environ.get("KAFKA_CORE_DEBUG"):
            raise
        if isinstance(exc, TypeError) and "unexpected keyword argument" in str(exc):
            print(f"{prog}: error: unknown client option (-X): {one_line(exc)}", file=sys.stderr)
            return EXIT_USAGE
        print(f"{prog}: error: {type(exc).__name__}: {one_line(exc)}", file=sys.stderr)
        return EXIT_FAILED
