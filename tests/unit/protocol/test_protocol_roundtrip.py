"""Every message at every version: generated values survive encode -> decode -> encode unchanged."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

try:  # tests/unit is a package when it has an __init__.py, a rootdir otherwise
    from .test_protocol_support import message_by_name, message_versions, struct_strategy
except ImportError:
    from test_protocol_support import (  # type: ignore[no-redef]
        message_by_name,
        message_versions,
        struct_strategy,
    )

from kafka_core.protocol import (
    REQUEST_CLASSES,
    RESPONSE_CLASSES,
    Request,
    RequestHeader,
    Response,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    messages,
    request_header_version,
)

CASES = message_versions()
_SETTINGS = settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)


def test_every_definition_is_covered() -> None:
    names = {n for n, _ in CASES}
    assert len(CASES) > 600
    assert {c.__name__ for c in REQUEST_CLASSES.values()} <= names
    assert {c.__name__ for c in RESPONSE_CLASSES.values()} <= names


@pytest.mark.parametrize(("name", "version"), CASES, ids=[f"{n}-v{v}" for n, v in CASES])
@_SETTINGS
@given(data=st.data())
def test_struct_roundtrip(name: str, version: int, data: st.DataObject) -> None:
    m = message_by_name(name)
    cls = getattr(messages, name)
    obj = data.draw(struct_strategy(m, m.top, version))
    encoded = obj.encode(version)
    decoded = cls.decode(encoded, version)
    assert decoded == obj
    assert decoded.encode(version) == encoded


_API_CASES = [
    (key, v, kind)
    for kind, table in (("request", REQUEST_CLASSES), ("response", RESPONSE_CLASSES))
    for key, cls in sorted(table.items())
    # a message may declare flexible versions from below its first valid one (Kafka 4.1+'s
    # share-group messages: flexible "0+", valid from 1)
    for v in {
        cls.MIN_VERSION,
        cls.MAX_VERSION,
        *(max(x, cls.MIN_VERSION) for x in [cls.FLEXIBLE_MIN] if x is not None),
    }
]


@pytest.mark.parametrize(
    ("api_key", "version", "kind"), _API_CASES, ids=[f"{k}-{a}-v{v}" for a, v, k in _API_CASES]
)
@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_frame_roundtrip(api_key: int, version: int, kind: str, data: st.DataObject) -> None:
    table = REQUEST_CLASSES if kind == "request" else RESPONSE_CLASSES
    m = message_by_name(table[api_key].__name__)
    body = data.draw(struct_strategy(m, m.top, version))
    correlation_id = data.draw(st.integers(-(2**31), 2**31 - 1))
    if kind == "request":
        # header v0 (ControlledShutdown v0's, an API Kafka 4.0 removed) has no client id
        has_client_id = request_header_version(api_key, version) >= 1
        client_id = data.draw(st.none() | st.text(max_size=10)) if has_client_id else None
        req = Request(RequestHeader(api_key, version, correlation_id, client_id), body)
        frame = encode_request(req)
        back = decode_request(frame)
        assert back == req
        assert encode_request(back) == frame
    else:
        resp = Response(api_key, version, correlation_id, body)
        frame = encode_response(resp)
        back = decode_response(api_key, version, frame)
        assert back == resp
        assert encode_response(back) == frame
