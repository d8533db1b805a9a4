"""Base class of every generated struct and message (kafka_core/protocol/messages/)."""

from __future__ import annotations

from typing import Any, ClassVar

from kafka_core.errors import KafkaProtocolError
from kafka_core.protocol._runtime import (
    CORRUPT_MESSAGE,
    DECODE_ERRORS,
    ENCODE_ERRORS,
    INVALID_REQUEST,
    UNSUPPORTED_VERSION,
    Reader,
    UnsupportedFieldError,
    Writer,
    as_view,
    flatten,
    join_parts,
    protocol_error,
)


class Struct:
    """Base of every generated struct and message: equality, repr, encode/decode entry points."""

    __slots__ = ()
    _FIELDS: ClassVar[tuple[str, ...]] = ()
    _WRITERS: ClassVar[dict[int, Writer]] = {}
    _READERS: ClassVar[dict[int, Reader]] = {}
    _IS_REQUEST: ClassVar[bool] = False
    MIN_VERSION: ClassVar[int] = 0
    MAX_VERSION: ClassVar[int] = 0
    FLEXIBLE_MIN: ClassVar[int | None] = None
    # set on top-level messages only
    API_KEY: ClassVar[int | None] = None
    LATEST_VERSION_UNSTABLE: ClassVar[bool] = False
    LISTENERS: ClassVar[tuple[str, ...]] = ()

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, f) == getattr(other, f) for f in self._FIELDS) and (
            self.unknown_tagged_fields == other.unknown_tagged_fields  # type: ignore[attr-defined]
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        inner = ", ".join(f"{f}={getattr(self, f)!r}" for f in self._FIELDS)
        if self.unknown_tagged_fields:  # type: ignore[attr-defined]
            inner += f", unknown_tagged_fields={self.unknown_tagged_fields!r}"  # type: ignore[attr-defined]
        return f"{type(self).__qualname__}({inner})"

    # -- encoding

    def _writer(self, version: int) -> Writer:
        w = self._WRITERS.get(version)
        if w is None:
            raise protocol_error(
                UNSUPPORTED_VERSION,
                f"{type(self).__qualname__} has no version {version} "
                f"(valid: {self.MIN_VERSION}-{self.MAX_VERSION})",
            )
        return w

    def write_into(self, b: bytearray, ins: list, version: int) -> None:
        """Append this struct at ``version`` to ``b`` (records registered in ``ins``)."""
        w = self._writer(version)
        try:
            w(self, b, ins)
        except KafkaProtocolError:
            raise
        except ENCODE_ERRORS as exc:
            if isinstance(exc, UnsupportedFieldError):
                code = UNSUPPORTED_VERSION
            else:
                code = INVALID_REQUEST if self._IS_REQUEST else CORRUPT_MESSAGE
            raise protocol_error(code, f"cannot encode {type(self).__qualname__} v{version}: {exc}") from exc

    def encode(self, version: int) -> bytes:
        b = bytearray()
        ins: list = []
        self.write_into(b, ins, version)
        return flatten(b, ins)

    def encode_parts(self, version: int) -> list:
        """The encoding as a list of buffers; record payloads are the caller's own objects."""
        b = bytearray()
        ins: list = []
        self.write_into(b, ins, version)
        return join_parts(b, ins)

    # -- decoding

    @classmethod
    def read_from(cls, buf: memoryview, pos: int, version: int) -> tuple[Any, int]:
        r = cls._READERS.get(version)
        if r is None:
            raise protocol_error(
                UNSUPPORTED_VERSION,
                f"{cls.__qualname__} has no version {version} (valid: {cls.MIN_VERSION}-{cls.MAX_VERSION})",
            )
        try:
            return r(buf, pos)
        except DECODE_ERRORS as exc:
            code = INVALID_REQUEST if cls._IS_REQUEST else CORRUPT_MESSAGE
            raise protocol_error(code, f"malformed {cls.__qualname__} v{version}: {exc}") from exc

    @classmethod
    def decode(cls, buf: Any, version: int) -> Any:
        """Decode exactly one struct filling ``buf``; trailing bytes are an error."""
        view = as_view(buf)
        obj, pos = cls.read_from(view, 0, version)
        if pos != len(view):
            code = INVALID_REQUEST if cls._IS_REQUEST else CORRUPT_MESSAGE
            raise protocol_error(
                code, f"{cls.__qualname__} v{version}: {len(view) - pos} unread bytes after the body"
            )
        return obj
