"""The dev tools' subcommands: ``kafka-core broker`` (the embedded test broker in the
foreground), ``kafka-core bench`` (a produce-then-consume throughput run) and ``kafka-core
pipeline`` (the main Spark job, its arguments passed on).

Their arguments are parsed here, so ``--help`` and usage errors are the CLI's own; each then runs
in a child process, ``python -m kafka_core.devtools`` (:mod:`kafka_core.devtools.commands`) for
broker and bench, ``python -m kafka_core.devtools.pipeline`` for the job: the library never
imports its dev tools.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from typing import Any

from kafka_core.cli.argtypes import positive_int, positive_seconds
from kafka_core.cli.output import EXIT_INTERRUPTED, Output

__all__ = ["add_parsers", "run_in_devtools", "run_pipeline"]


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= value < 65536:
        raise argparse.ArgumentTypeError(f"port must be 0-65535, not {value}")
    return value


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    b = sub.add_parser(
        "broker",
        parents=[common],
        help="run the embedded test broker (Tansu) in the foreground",
        description="Run the embedded Kafka-compatible test broker (Tansu) until Ctrl-C. "
        "Memory storage: everything is gone when it stops, unless --persistent.",
    )
    b.add_argument("--port", type=_port, default=9092, help="port on 127.0.0.1 (default 9092; 0: a free one)")
    b.add_argument(
        "--persistent",
        action="store_true",
        help="keep the data across broker restarts (S3 storage on a local moto_server, for this run; "
        "needs the [broker-s3] extra)",
    )
    b.set_defaults(run=run_in_devtools)
    # add_help=False: --help goes on to the pipeline, which lists its own arguments.
    p = sub.add_parser(
        "pipeline",
        parents=[common],
        add_help=False,
        help="run the main job (python -m kafka_core.devtools.pipeline); other arguments go to it",
        description="Run the main Spark job; every argument not listed here is passed on to it.",
    )
    p.set_defaults(run=run_pipeline, passthrough=True)
    _add_bench(sub, common)


def _add_bench(sub: Any, common: argparse.ArgumentParser) -> None:
    from kafka_core.producer.options import COMPRESSIONS

    p = sub.add_parser(
        "bench",
        parents=[common],
        help="produce then consume N records in a fresh topic, print records/s and MB/s",
        description="Produce --records records of --size bytes into a fresh topic, consume them back, "
        "and print the throughput of each phase. The topic is deleted afterwards.",
    )
    p.add_argument("-n", "--records", type=positive_int, default=100_000, help="records (default 100,000)")
    p.add_argument(
        "-s", "--size", type=positive_int, default=100, help="value bytes per record (default 100)"
    )
    p.add_argument("--partitions", type=positive_int, default=3, help="partitions of the topic (default 3)")
    p.add_argument("-z", "--compression", choices=COMPRESSIONS, default="none")
    p.add_argument("--acks", choices=("all", "1", "0"), default="all")
    p.add_argument(
        "--timeout",
        type=positive_seconds,
        default=120.0,
        metavar="SECONDS",
        help="give up on a phase after this long (default 120)",
    )
    p.set_defaults(run=run_in_devtools)


def _child(command: list[str], env: dict[str, str] | None = None, *, forward: bool = True) -> int:
    """Run ``command`` to its end and return its exit code.

    A terminal's Ctrl-C reaches the child too (same process group): it stops by itself. A signal
    sent to this process alone (``kill -INT``, SIGTERM) is passed on when ``forward`` and the child
    has not stopped within 2 s, so broker and bench stop as they did when they ran in this process.
    """
    proc = subprocess.Popen(command, env=env)
    try:
        return proc.wait()
    except KeyboardInterrupt as exc:  # SIGTERM comes as a KeyboardInterrupt too (kafka_core.cli)
        try:
            if not forward:
                proc.wait(30)
                return EXIT_INTERRUPTED
            try:
                return proc.wait(2)
            except subprocess.TimeoutExpired:
                proc.send_signal(signal.SIGINT if type(exc) is KeyboardInterrupt else signal.SIGTERM)
            return proc.wait(30)  # the child's own code: 0 for a broker stopped by Ctrl-C
        except (subprocess.TimeoutExpired, KeyboardInterrupt):
            proc.kill()
            proc.wait()
        return EXIT_INTERRUPTED


def run_in_devtools(args: argparse.Namespace, out: Output) -> int:
    """``kafka-core broker|bench ...``: the same arguments, run by ``python -m kafka_core.devtools``."""
    return _child([sys.executable, "-m", "kafka_core.devtools", *args.argv])


def run_pipeline(args: argparse.Namespace, out: Output) -> int:
    env = dict(os.environ)
    if getattr(args, "bootstrap_servers", None):
        env["KAFKA_BOOTSTRAP_SERVERS"] = args.bootstrap_servers
    # The job stops by itself on a terminal's Ctrl-C; as before, nothing is passed on to it.
    return _child([sys.executable, "-m", "kafka_core.devtools.pipeline", *args.extra], env, forward=False)
