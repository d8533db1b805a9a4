"""Exit codes, the one-line error, and rendering (tables, JSON) for every ``kafka-core`` command.

Listings go to stdout, as a table for people or as JSON (``--json``) for scripts; progress and
errors go to stderr, so ``kafka-core ... --json | jq`` always reads clean JSON. Tables are drawn
with rich when it is installed (the ``[cli]`` extra) and as plain aligned text when it is not:
every install has the ``kafka-core`` command, so it must work with what a plain install has.
"""

from __future__ import annotations

import base64
import json
import sys
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = [
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_NOT_FOUND",
    "EXIT_OK",
    "EXIT_TIMEOUT",
    "EXIT_UNREACHABLE",
    "EXIT_USAGE",
    "CliError",
    "Output",
    "one_line",
    "plain_table",
    "plural",
    "text_or_base64",
]

# Exit codes scripts can trust (docs/cli.md lists them).
EXIT_OK = 0
EXIT_FAILED = 1  # the operation failed: a Kafka error, records not delivered, a topic that exists...
EXIT_USAGE = 2  # bad arguments or options (argparse's own code)
EXIT_UNREACHABLE = 3  # no broker answered within --connect-timeout
EXIT_NOT_FOUND = 4  # the topic or group named does not exist
EXIT_TIMEOUT = 5  # consume ran out of time: --count not reached in --timeout, or never assigned a partition
EXIT_INTERRUPTED = 130  # Ctrl-C (128 + SIGINT), after a clean stop


class CliError(Exception):
    """A failure the command reports as one line on stderr and an exit code (no traceback)."""

    def __init__(self, message: str, code: int = EXIT_FAILED) -> None:
        super().__init__(message)
        self.code = code


def one_line(text: object, limit: int = 500) -> str:
    """An error message folded onto one line (broker messages may span several)."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def plural(count: int, noun: str, nouns: str | None = None) -> str:
    """``1 record``, ``2 records``, ``1,000 records``."""
    return f"{count:,} {noun if count == 1 else nouns or noun + 's'}"


def text_or_base64(data: bytes | None) -> Any:
    """JSON form of key/value bytes: the text when it is UTF-8, else ``{"base64": ...}``."""
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode("ascii")}


def _rich_console() -> Any:
    """rich's Console class, or None when rich is not installed (a plain install)."""
    try:
        from rich.console import Console
    except ImportError:
        return None
    return Console


def plain_table(
    columns: Sequence[str],
    rows: Iterable[Sequence[Any]],
    *,
    title: str | None = None,
    numeric: Iterable[str] = (),
) -> str:
    """A table as aligned plain text (no rich): the title, a header, a rule, one line per row."""
    right = set(numeric)
    cells = [["-" if v is None else str(v) for v in row] for row in rows]
    widths = [max([len(name), *(len(r[i]) for r in cells)]) for i, name in enumerate(columns)]

    def fmt(values: Sequence[str]) -> str:
        parts = [
            v.rjust(w) if name in right else v.ljust(w)
            for name, v, w in zip(columns, values, widths, strict=True)
        ]
        return "  ".join(parts).rstrip()

    lines = [title] if title else []
    lines += [fmt(list(columns)), fmt(["-" * w for w in widths]), *(fmt(r) for r in cells)]
    return "\n".join(lines)


class Output:
    """Where a command writes: rich consoles (or plain text without rich) for people, JSON for ``--json``."""

    def __init__(self, *, as_json: bool = False) -> None:
        self.as_json = as_json
        console = _rich_console()
        self.out: Any = None
        self.err: Any = None  # a rich Console on stderr, for progress displays; None without rich
        if console is not None:
            # A pipe gets no colour and a wide page, so tables are not folded at 80 columns.
            wide = None if sys.stdout.isatty() else 200
            self.out = console(width=wide, highlight=False, soft_wrap=False)
            self.err = console(stderr=True, highlight=False)

    @property
    def interactive(self) -> bool:
        """Progress displays only for a person watching a terminal (stderr), never with --json."""
        return not self.as_json and self.err is not None and bool(self.err.is_terminal)

    def json(self, data: Any) -> None:
        sys.stdout.write(json.dumps(data, default=str) + "\n")
        sys.stdout.flush()

    def line(self, text: str, style: str | None = None) -> None:
        if self.out is None:
            print(text, flush=True)
        else:
            self.out.print(text, style=style, markup=False)

    def note(self, text: str, style: str | None = "dim") -> None:
        """A remark for the person (stderr), never mixed into the data on stdout."""
        if self.err is None:
            print(text, file=sys.stderr, flush=True)
        else:
            self.err.print(text, style=style, markup=False)

    def table(
        self,
        columns: Sequence[str],
        rows: Iterable[Sequence[Any]],
        *,
        title: str | None = None,
        numeric: Iterable[str] = (),
    ) -> None:
        if self.out is None:
            self.line(plain_table(columns, rows, title=title, numeric=numeric))
            return
        from rich.table import Table

        right = set(numeric)
        table = Table(title=title, title_justify="left", header_style="bold")
        for name in columns:
            table.add_column(name, justify="right" if name in right else "left", overflow="fold")
        for row in rows:
            table.add_row(*("-" if v is None else str(v) for v in row))
        self.out.print(table)
