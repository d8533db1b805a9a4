"""Credentials that keep themselves out of logs, ``repr`` and error messages."""

from __future__ import annotations

__all__ = ["Secret", "secret"]


class Secret(str):
    """A password that stays itself for the code that uses it (``encode``, SASLprep) but shows as
    ``'******'`` in ``repr``, ``str`` and f-strings: a ``vars(client)`` dump, a log line or an
    error message that names the options does not carry it (as the Java client's ``Password``)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "'******'"

    def __str__(self) -> str:
        return "******"

    def __format__(self, spec: str) -> str:
        return format("******", spec)


def secret(value: str | None) -> str | None:
    """``value`` as a :class:`Secret` (None stays None, a Secret stays itself)."""
    return value if value is None or isinstance(value, Secret) else Secret(value)
