"""Sans-IO Kafka protocol: request/response framing on top of the generated message classes.

A *frame* here is one request or response without its 4-byte size prefix. Decoding a frame and
encoding the result gives the same bytes back, which lets a proxy or a test re-serialise what a
real client or broker sent: unknown tagged fields are kept in ``unknown_tagged_fields`` (so are
known ones that a sender wrote explicitly with their default value, which Java would omit), and
bytes after a body are kept in ``trailing``.

Record payloads (``records`` fields of Produce/Fetch) decode to ``memoryview`` slices of the frame
and encode without a copy: :func:`encode_request_parts` returns them as separate buffers for
``writev``. Every failure is a :class:`KafkaProtocolError`.
"""

from __future__ import annotations

import struct
from typing import Any

from kafka_core.errors import KafkaProtocolError
from kafka_core.protocol import _runtime as _rt
from kafka_core.protocol._base import Struct
from kafka_core.protocol.errors import (
    ERRORS,
    ErrorCode,
    ErrorInfo,
    error_for,
    raise_for_code,
    raise_for_response,
    response_errors,
)
from kafka_core.protocol.messages import DATA_CLASSES, REQUEST_CLASSES, RESPONSE_CLASSES, ApiKey

__all__ = [
    "DATA_CLASSES",
    "ERRORS",
    "REQUEST_CLASSES",
    "RESPONSE_CLASSES",
    "ApiKey",
    "ErrorCode",
    "ErrorInfo",
    "KafkaProtocolError",
    "Request",
    "RequestHeader",
    "Response",
    "decode_request",
    "decode_response",
    "encode_request",
    "encode_request_parts",
    "encode_response",
    "encode_response_parts",
    "error_for",
    "expects_response",
    "raise_for_code",
    "raise_for_response",
    "request_header_version",
    "response_correlation_id",
    "response_errors",
    "response_header_version",
]

_API_VERSIONS = 18
_HDR = struct.Struct(">hhi")


def _request_class(api_key: int) -> type[Struct]:
    cls = REQUEST_CLASSES.get(api_key)
    if cls is None:
        raise error_for(_rt.INVALID_REQUEST, f"unknown API key {api_key}")
    return cls


def _response_class(api_key: int) -> type[Struct]:
    cls = RESPONSE_CLASSES.get(api_key)
    if cls is None:
        raise error_for(_rt.CORRUPT_MESSAGE, f"unknown API key {api_key}")
    return cls


def _flexible(cls: type, api_version: int) -> bool:
    fmin = cls.FLEXIBLE_MIN  # type: ignore[attr-defined]
    return fmin is not None and api_version >= fmin


def request_header_version(api_key: int, api_version: int) -> int:
    """2 for flexible request versions, else 1 (header v0 was ControlledShutdown v0's, an API Kafka 4.0
    removed and the package does not define)."""
    return 2 if _flexible(_request_class(api_key), api_version) else 1


def response_header_version(api_key: int, api_version: int) -> int:
    """1 for flexible versions, else 0; ApiVersions always answers with header v0 (KIP-511)."""
    if api_key == _API_VERSIONS:
        return 0
    return 1 if _flexible(_response_class(api_key), api_version) else 0


class RequestHeader:
    """Request header v0-v2; ``client_id`` is always a classic (int16-length) nullable string."""

    __slots__ = ("api_key", "api_version", "client_id", "correlation_id", "unknown_tagged_fields")

    def __init__(
        self,
        api_key: int,
        api_version: int,
        correlation_id: int,
        client_id: str | None = None,
        unknown_tagged_fields: list[tuple[int, bytes]] | None = None,
    ) -> None:
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.client_id = client_id
        self.unknown_tagged_fields = [] if unknown_tagged_fields is None else unknown_tagged_fields

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RequestHeader):
            return NotImplemented
        return (
            self.api_key == other.api_key
            and self.api_version == other.api_version
            and self.correlation_id == other.correlation_id
            and self.client_id == other.client_id
            and self.unknown_tagged_fields == other.unknown_tagged_fields
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"RequestHeader(api_key={self.api_key}, api_version={self.api_version}, "
            f"correlation_id={self.correlation_id}, client_id={self.client_id!r})"
        )


class Request:
    """A request: its header and its body (an instance of ``REQUEST_CLASSES[api_key]``).

    ``trailing`` holds bytes a sender put after the body (librdkafka does on some Metadata
    requests; Java brokers ignore them); they are written back so that a frame round-trips.
    """

    __slots__ = ("body", "header", "trailing")

    def __init__(self, header: RequestHeader, body: Any, trailing: bytes = b"") -> None:
        self.header = header
        self.body = body
        self.trailing = trailing

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Request):
            return NotImplemented
        return self.header == other.header and self.body == other.body and self.trailing == other.trailing

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Request({self.header!r}, {self.body!r})"


class Response:
    """A response; ``api_key``/``api_version`` come from the request it answers, not the wire."""

    __slots__ = ("api_key", "api_version", "body", "correlation_id", "header_tagged_fields", "trailing")

    def __init__(
        self,
        api_key: int,
        api_version: int,
        correlation_id: int,
        body: Any,
        header_tagged_fields: list[tuple[int, bytes]] | None = None,
        trailing: bytes = b"",
    ) -> None:
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.body = body
        self.header_tagged_fields = [] if header_tagged_fields is None else header_tagged_fields
        self.trailing = trailing

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Response):
            return NotImplemented
        return (
            self.api_key == other.api_key
            and self.api_version == other.api_version
            and self.correlation_id == other.correlation_id
            and self.body == other.body
            and self.header_tagged_fields == other.header_tagged_fields
            and self.trailing == other.trailing
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"Response(api_key={self.api_key}, api_version={self.api_version}, "
            f"correlation_id={self.correlation_id}, body={self.body!r})"
        )


# ------------------------------------------------------------------------------------------------
# requests


def _write_request_header(b: bytearray, h: RequestHeader, hv: int) -> None:
    try:
        b += _rt.I16.pack(h.api_key)
        b += _rt.I16.pack(h.api_version)
        b += _rt.I32.pack(h.correlation_id)
        if hv >= 1:
            _rt.wstr_n(b, h.client_id, "RequestHeader.client_id")
        if hv >= 2:
            _rt.wtags0(b, h.unknown_tagged_fields)
    except _rt.ENCODE_ERRORS as exc:
        raise error_for(_rt.INVALID_REQUEST, f"cannot encode the request header: {exc}") from exc


def _request_buffer(req: Request) -> tuple[bytearray, list]:
    h = req.header
    cls = _request_class(h.api_key)
    if type(req.body) is not cls:
        raise error_for(
            _rt.INVALID_REQUEST,
            f"request body is {type(req.body).__name__}, API key {h.api_key} needs {cls.__name__}",
        )
    b = bytearray()
    ins: list = []
    _write_request_header(b, h, request_header_version(h.api_key, h.api_version))
    req.body.write_into(b, ins, h.api_version)
    if req.trailing:
        b += req.trailing
    return b, ins


def encode_request(req: Request) -> bytes:
    """The request frame (no size prefix)."""
    b, ins = _request_buffer(req)
    return _rt.flatten(b, ins)


def encode_request_parts(req: Request) -> list[bytes | bytearray | memoryview]:
    """The request frame as buffers for ``writev``; Produce record payloads are not copied."""
    b, ins = _request_buffer(req)
    return _rt.join_parts(b, ins)


def decode_request(frame: Any) -> Request:
    """Parse one request frame (as a broker or a proxy would)."""
    buf = _rt.as_view(frame)
    try:
        api_key, api_version, correlation_id = _HDR.unpack_from(buf, 0)
    except _rt.DECODE_ERRORS as exc:
        raise error_for(_rt.INVALID_REQUEST, f"request header: {exc}") from exc
    cls = _request_class(api_key)
    hv = request_header_version(api_key, api_version)
    pos = 8
    client_id = None
    tags: list = []
    try:
        if hv >= 1:
            client_id, pos = _rt.rstr_n(buf, pos, "RequestHeader.client_id")
        if hv >= 2:
            tags, pos = _rt.rtags0(buf, pos)
    except _rt.DECODE_ERRORS as exc:
        raise error_for(_rt.INVALID_REQUEST, f"request header: {exc}") from exc
    body, pos = cls.read_from(buf, pos, api_version)
    header = RequestHeader(api_key, api_version, correlation_id, client_id, tags)
    return Request(header, body, bytes(buf[pos:]))


# ------------------------------------------------------------------------------------------------
# responses


def _response_buffer(resp: Response) -> tuple[bytearray, list]:
    cls = _response_class(resp.api_key)
    if type(resp.body) is not cls:
        raise error_for(
            _rt.INVALID_REQUEST,
            f"response body is {type(resp.body).__name__}, API key {resp.api_key} needs {cls.__name__}",
        )
    b = bytearray()
    try:
        b += _rt.I32.pack(resp.correlation_id)
        if response_header_version(resp.api_key, resp.api_version) >= 1:
            _rt.wtags0(b, resp.header_tagged_fields)
    except _rt.ENCODE_ERRORS as exc:
        raise error_for(_rt.INVALID_REQUEST, f"cannot encode the response header: {exc}") from exc
    ins: list = []
    resp.body.write_into(b, ins, resp.api_version)
    if resp.trailing:
        b += resp.trailing
    return b, ins


def encode_response(resp: Response) -> bytes:
    b, ins = _response_buffer(resp)
    return _rt.flatten(b, ins)


def encode_response_parts(resp: Response) -> list[bytes | bytearray | memoryview]:
    """The response frame as buffers; Fetch record payloads are not copied."""
    b, ins = _response_buffer(resp)
    return _rt.join_parts(b, ins)


def response_correlation_id(frame: Any) -> int:
    """The correlation id of a response frame: what a client needs to find the request it answers
    (and so the API key and version that :func:`decode_response` needs)."""
    try:
        return _rt.I32.unpack_from(frame, 0)[0]
    except _rt.DECODE_ERRORS as exc:
        raise error_for(_rt.CORRUPT_MESSAGE, f"response header: {exc}") from exc


def expects_response(req: Request) -> bool:
    """False only for Produce with ``acks=0``, which the broker never answers."""
    return not (req.header.api_key == ApiKey.PRODUCE and req.body.acks == 0)


def decode_response(api_key: int, api_version: int, frame: Any) -> Response:
    """Parse one response frame to a request sent with ``api_key``/``api_version``.

    A broker that does not support the requested ApiVersions version answers with a v0 body
    (KIP-511); such a response decodes with ``api_version`` 0 so that the caller can read the
    broker's supported range from it.
    """
    cls = _response_class(api_key)
    buf = _rt.as_view(frame)
    hv = response_header_version(api_key, api_version)
    try:
        (correlation_id,) = _rt.I32.unpack_from(buf, 0)
        pos = 4
        tags: list = []
        if hv >= 1:
            tags, pos = _rt.rtags0(buf, pos)
    except _rt.DECODE_ERRORS as exc:
        raise error_for(_rt.CORRUPT_MESSAGE, f"response header: {exc}") from exc
    if api_key == _API_VERSIONS and api_version > 0:
        fallback = _api_versions_v0(cls, buf, pos, api_version)
        if fallback is not None:
            return Response(api_key, 0, correlation_id, fallback, tags)
    body, end = cls.read_from(buf, pos, api_version)
    return Response(api_key, api_version, correlation_id, body, tags, bytes(buf[end:]))


def _api_versions_v0(cls: Any, buf: memoryview, pos: int, api_version: int) -> Any:
    """The v0 body of an ApiVersions answer if the frame is one and not a valid ``api_version`` body."""
    try:
        _, end = cls.read_from(buf, pos, api_version)
        if end == len(buf):
            return None
    except KafkaProtocolError:
        pass
    try:
        body, end = cls.read_from(buf, pos, 0)
    except KafkaProtocolError:
        return None
    return body if end == len(buf) else None
