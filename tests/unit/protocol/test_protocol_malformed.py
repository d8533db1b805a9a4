"""Malformed frames give KafkaProtocolError: never another exception, a hang or a huge allocation."""

from __future__ import annotations

import contextlib
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafka_core.errors import KafkaProtocolError
from kafka_core.protocol import (
    REQUEST_CLASSES,
    RESPONSE_CLASSES,
    ApiKey,
    Request,
    RequestHeader,
    Response,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from kafka_core.protocol.messages import MetadataResponse

try:  # tests/unit is a package when it has an __init__.py, a rootdir otherwise
    from .test_protocol_support import message_by_name, struct_strategy
except ImportError:
    from test_protocol_support import message_by_name, struct_strategy  # type: ignore[no-redef]

_KEYS = sorted(REQUEST_CLASSES)


def _decode_req(frame: bytes) -> None:
    with contextlib.suppress(KafkaProtocolError):
        decode_request(frame)


def _decode_resp(key: int, version: int, frame: bytes) -> None:
    with contextlib.suppress(KafkaProtocolError):
        decode_response(key, version, frame)


@settings(max_examples=300, deadline=None)
@given(key=st.sampled_from(_KEYS), version=st.integers(0, 20), tail=st.binary(max_size=64))
def test_random_request_bytes(key: int, version: int, tail: bytes) -> None:
    _decode_req(struct.pack(">hhi", key, version, 1) + tail)


@settings(max_examples=300, deadline=None)
@given(key=st.sampled_from(_KEYS), version=st.integers(0, 20), frame=st.binary(max_size=64))
def test_random_response_bytes(key: int, version: int, frame: bytes) -> None:
    _decode_resp(key, version, frame)


@pytest.mark.parametrize("key", _KEYS, ids=[ApiKey(k).name for k in _KEYS])
@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_truncated_and_corrupted_frames(key: int, data: st.DataObject) -> None:
    req_cls, resp_cls = REQUEST_CLASSES[key], RESPONSE_CLASSES[key]
    version = data.draw(st.integers(req_cls.MIN_VERSION, req_cls.MAX_VERSION))
    m = message_by_name(req_cls.__name__)
    frame = encode_request(
        Request(RequestHeader(key, version, 1, "c"), data.draw(struct_strategy(m, m.top, version)))
    )
    m = message_by_name(resp_cls.__name__)
    rframe = encode_response(Response(key, version, 1, data.draw(struct_strategy(m, m.top, version))))
    for cut in range(len(frame)):
        _decode_req(frame[:cut])
    for cut in range(len(rframe)):
        _decode_resp(key, version, rframe[:cut])
    for _ in range(20):
        i = data.draw(st.integers(0, len(frame) - 1))
        flipped = bytearray(frame)
        flipped[i] ^= data.draw(st.integers(1, 255))
        _decode_req(bytes(flipped))
        j = data.draw(st.integers(0, len(rframe) - 1))
        rflipped = bytearray(rframe)
        rflipped[j] ^= data.draw(st.integers(1, 255))
        _decode_resp(key, version, bytes(rflipped))


def test_forged_array_length_fails_fast() -> None:
    frame = struct.pack(">i", 1) + struct.pack(">i", 0x7FFFFFFF) + b"\x00" * 64  # v1: brokers count
    with pytest.raises(KafkaProtocolError) as info:
        decode_response(ApiKey.METADATA, 1, frame)
    assert "elements declared" in str(info.value)
    flexible = (
        struct.pack(">i", 1) + b"\x00" + struct.pack(">i", 0) + b"\xff\xff\xff\xff\x07"
    )  # compact count
    with pytest.raises(KafkaProtocolError):
        decode_response(ApiKey.METADATA, 12, flexible)


def test_overlong_varint_and_bad_lengths() -> None:
    body = MetadataResponse().encode(12)
    with pytest.raises(KafkaProtocolError):
        MetadataResponse.decode(body[:4] + b"\xff\xff\xff\xff\xff\xff" + body[5:], 12)
    with pytest.raises(KafkaProtocolError, match="unread bytes"):
        MetadataResponse.decode(body + b"\x00", 12)  # a whole struct must use the whole buffer
    # string length -2 is neither null nor a length
    frame = struct.pack(">hhi", 3, 8, 1) + struct.pack(">h", -2)
    with pytest.raises(KafkaProtocolError) as info:
        decode_request(frame)
    assert info.value.code == 42


def test_non_nullable_null_is_rejected() -> None:
    # Metadata v8 topic name -1 (null) where the spec says not nullable
    frame = struct.pack(">hhi", 3, 8, 1) + b"\xff\xff" + struct.pack(">i", 1) + b"\xff\xff" + b"\x00\x00\x00"
    with pytest.raises(KafkaProtocolError, match="not nullable"):
        decode_request(frame)
