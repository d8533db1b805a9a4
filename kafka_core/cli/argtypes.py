"""Argument types shared by the subcommands: a bad value is one argparse error line (exit 2)."""

from __future__ import annotations

import argparse

__all__ = ["positive_int", "positive_seconds"]


def positive_int(text: str) -> int:
    """A whole number >= 1 (``100_000`` and ``100,000`` accepted)."""
    try:
        value = int(text.replace("_", "").replace(",", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, not {value}")
    return value


def positive_seconds(text: str) -> float:
    """A number of seconds > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, not {text}")
    return value
