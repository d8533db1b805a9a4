"""Exception hierarchy shared by every layer, so callers can catch one base type."""

from __future__ import annotations


class KafkaError(Exception):
    """Base of every error raised by kafka_core."""


class KafkaCodecError(KafkaError, ValueError):
    """A wire buffer could not be encoded or decoded (what went wrong and where)."""
