"""The refresh loop of the ``--watch`` views (``groups lag --watch``, ``topics watch``), for people.

A view (:class:`Watched`) reads what it shows through the admin client and turns each reading
into a frame; this loop calls it every ``--interval`` seconds and shows the frame: redrawn in
place on a terminal (rich's Live), one plain block per refresh when piped (no escape codes), one
JSON line with ``--json``. The first reading's errors are the command's (a group or topic that
does not exist: exit 4); a later refresh that fails shows its error in place of the figures and
the watch goes on, as a coordinator moving or a broker restarting should not end it. Ctrl-C is
the normal way to stop: exit 0 (SIGTERM keeps its own code).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol

from kafka_core.cli.connect import open_admin
from kafka_core.cli.output import EXIT_OK, CliError, Output, plural
from kafka_core.errors import KafkaError

__all__ = ["DEFAULT_INTERVAL", "DEFAULT_TOP", "TREND_WINDOW", "Watched", "run_watch"]

DEFAULT_INTERVAL = 2.0  # seconds between refreshes
DEFAULT_TOP = 20  # partitions shown, the busiest first
TREND_WINDOW = 5  # refreshes the rates are taken over


class Watched(Protocol):
    """One view: how to read, what a reading shows, and how a frame is drawn three ways."""

    refreshes: int

    def read(self, admin: Any, timeout_ms: float) -> Any: ...

    def frame(self, reading: Any, at: float) -> Any: ...

    def failed(self, error: BaseException) -> Any: ...

    def text(self, frame: Any) -> str: ...

    def json(self, frame: Any) -> dict[str, Any]: ...

    def rich(self, frame: Any) -> Any: ...

    def stopped(self) -> str: ...


@contextmanager
def live_view(out: Output, watched: Watched) -> Iterator[Callable[[Any], None]]:
    """A function showing one frame: a line of JSON, a Live display on a terminal, else plain blocks."""
    if out.as_json:
        yield lambda f: out.json(watched.json(f))
        return
    if out.out is None or not out.out.is_terminal:

        def plain(f: Any) -> None:
            print(watched.text(f) + "\n", flush=True)  # a blank line between refreshes

        yield plain
        return
    from rich.live import Live

    with Live(console=out.out, auto_refresh=False, transient=False) as live:
        yield lambda f: live.update(watched.rich(f), refresh=True)


def run_watch(args: argparse.Namespace, out: Output, watched: Watched, prog: str) -> int:
    """Refresh every ``args.interval`` seconds until Ctrl-C (exit 0); each request of a refresh
    is bounded by ``--connect-timeout``."""
    interval = args.interval or DEFAULT_INTERVAL
    timeout_ms = float(args.connect_timeout) * 1000
    admin = open_admin(args)
    try:
        with live_view(out, watched) as show:
            while True:
                began = time.monotonic()
                try:
                    reading = watched.read(admin, timeout_ms)
                except (CliError, KafkaError) as exc:
                    if watched.refreshes == 0:
                        raise  # it does not exist, or may not be read: the command's error
                    show(watched.failed(exc))
                else:
                    show(watched.frame(reading, time.monotonic()))
                time.sleep(max(0.0, interval - (time.monotonic() - began)))
    except KeyboardInterrupt as exc:
        if type(exc) is not KeyboardInterrupt:  # SIGTERM: its own exit code, from main
            raise
        out.note(
            f"{prog}: stopped after {plural(watched.refreshes, 'refresh', 'refreshes')}{watched.stopped()}"
        )
        return EXIT_OK
    finally:
        admin.close()
