"""The transport's header encoding owns what it returns, as the value encoding already does."""

from __future__ import annotations

from kafka_core.transport.payload import encode_headers, encode_value


def test_a_bytearray_header_is_copied_so_later_changes_do_not_reach_the_record() -> None:
    # The record is encoded later, on the producer's loop (linger): a bytearray that the caller
    # reuses meanwhile (another thread, with the sync face) would change the header on the wire.
    raw = bytearray(b"trace-1")
    headers = encode_headers({"trace": raw})
    raw[:] = b"trace-2"
    assert headers == [("trace", b"trace-1")]
    assert all(type(v) is bytes for _, v in headers or [])


def test_a_bytearray_value_is_copied_too() -> None:
    raw = bytearray(b"v1")
    value = encode_value(raw)
    raw[:] = b"v2"
    assert value == b"v1"
    assert type(value) is bytes
