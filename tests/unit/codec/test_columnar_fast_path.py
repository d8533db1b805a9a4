"""The Cython columnar decoder takes most records through a C fast path (_codec/fastscan.h) and
hands the rest (headers, long varints, overflow, the region's tail) to the generic reader. These
batches are built byte by byte to sit on each boundary; the result must match the row decoder
and the pure-Python twin exactly, and bad input must fail the same way."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prerequisites import need_module

from kafka_core._env import env_flag

if env_flag("KAFKA_CORE_PURE_PYTHON"):
    pytest.skip("compares the Cython decoder with its twin", allow_module_level=True)

pa = need_module("pyarrow")

from crc32c import crc32c  # noqa: E402

from kafka_core.codec._cython import columnar as ccol  # noqa: E402
from kafka_core.codec._cython import records as crec  # noqa: E402
from kafka_core.codec._python import columnar as pcol  # noqa: E402
from kafka_core.codec._python.primitives import encode_varint, encode_varlong  # noqa: E402
from kafka_core.errors import KafkaCodecError  # noqa: E402

INT64_MAX = (1 << 63) - 1
INT64_MIN = -(1 << 63)


def raw_record(
    off_delta: int,
    ts_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: list[tuple[bytes, bytes | None]] = (),
) -> bytes:
    body = b"\x00" + encode_varlong(ts_delta) + encode_varint(off_delta)
    for field in (key, value):
        body += encode_varint(-1) if field is None else encode_varint(len(field)) + field
    body += encode_varint(len(headers))
    for hk, hv in headers:
        body += encode_varint(len(hk)) + hk
        body += encode_varint(-1) if hv is None else encode_varint(len(hv)) + hv
    return encode_varint(len(body)) + body


def raw_batch(
    records: list[bytes],
    *,
    base_offset: int = 0,
    base_ts: int = 1_700_000_000_000,
    last_delta: int | None = None,
    log_append: bool = False,
) -> bytes:
    region = b"".join(records)
    attributes = 8 if log_append else 0
    after_crc = (
        struct.pack(
            ">hiqqqhii",
            attributes,
            len(records) - 1 if last_delta is None else last_delta,
            base_ts,
            base_ts,
            -1,
            -1,
            -1,
            len(records),
        )
        + region
    )
    head = struct.pack(">qiib", base_offset, 4 + 1 + 4 + len(after_crc), -1, 2)
    return head + struct.pack(">I", crc32c(after_crc)) + after_crc


def outcome(fn: Any, buf: bytes) -> tuple[str, Any]:
    try:
        return "ok", fn(buf)
    except KafkaCodecError:
        return "error", None


def check_same(buf: bytes) -> tuple[str, Any]:
    """Cython columns == pure-Python columns == Cython rows (same success or failure)."""
    c = outcome(lambda b: ccol.decode_record_batches_columns(b).to_arrow(), buf)
    p = outcome(lambda b: pcol.decode_record_batches_columns(b).to_arrow(), buf)
    rows = outcome(crec.decode_record_batches, buf)
    assert c[0] == p[0] == rows[0], (c[0], p[0], rows[0])
    if c[0] == "ok":
        assert c[1].equals(p[1])
        assert c[1].column("offset").to_pylist() == [r.offset for r in rows[1]]
        assert c[1].column("timestamp").cast(pa.int64()).to_pylist() == [r.timestamp for r in rows[1]]
        assert c[1].column("key").to_pylist() == [r.key for r in rows[1]]
        assert c[1].column("value").to_pylist() == [r.value for r in rows[1]]
        assert c[1].column("headers").to_pylist() == [
            [{"key": k, "value": v} for k, v in r.headers] for r in rows[1]
        ]
    return c


def test_fast_and_generic_records_interleave() -> None:
    recs = []
    for i in range(200):
        headers = [(b"h", b"x" * i)] if i % 7 == 3 else []
        key = None if i % 11 == 0 else b"k" * (i % 20)
        value = None if i % 13 == 5 else b"v" * (i * 3 % 150)
        recs.append(raw_record(i, i % 5, key, value, headers))
    kind, table = check_same(raw_batch(recs))
    assert kind == "ok" and table.num_rows == 200
    assert table.column("key").null_count == len([i for i in range(200) if i % 11 == 0])


@pytest.mark.parametrize(
    "off_delta, ts_delta",
    [
        (63, 63),
        (64, -64),
        (8191, 8192),
        (1 << 20, -(1 << 20)),
        ((1 << 20) - 1, (1 << 21)),
        (1 << 30, 1 << 40),
    ],
)
def test_varint_widths_on_both_sides_of_three_bytes(off_delta: int, ts_delta: int) -> None:
    recs = [raw_record(0, 0, b"a", b"b")] + [raw_record(off_delta, ts_delta, b"k", b"v" * 40)] * 3
    assert check_same(raw_batch(recs, last_delta=off_delta))[0] == "ok"


def test_a_value_of_a_megabyte_takes_the_generic_path() -> None:
    big = b"z" * ((1 << 20) + 3)  # its length needs a 4-byte varint
    recs = [raw_record(0, 0, b"a", b"b" * 30), raw_record(1, 0, b"k", big), raw_record(2, 0, None, b"c" * 30)]
    kind, table = check_same(raw_batch(recs))
    assert kind == "ok" and table.column("value")[1].as_py() == big


@pytest.mark.parametrize(
    "base_offset, base_ts, expect",
    [
        (INT64_MAX - 5, 0, "error"),  # the offsets overflow
        (INT64_MAX - (1 << 21), 0, "ok"),  # just outside the fast path's once-per-batch check
        (INT64_MAX - 40, 0, "ok"),
        (0, INT64_MIN + 2, "ok"),
        (0, INT64_MAX - 3, "error"),  # the timestamps overflow
    ],
)
def test_offsets_and_timestamps_near_int64_limits(base_offset: int, base_ts: int, expect: str) -> None:
    recs = [raw_record(i, i - 1, b"k", b"v" * 30) for i in range(30)]
    assert check_same(raw_batch(recs, base_offset=base_offset, base_ts=base_ts))[0] == expect


def test_log_append_time_rows() -> None:
    recs = [raw_record(i, 1000 + i, b"k", b"v" * 30) for i in range(40)]
    kind, table = check_same(raw_batch(recs, log_append=True, base_ts=10))
    assert kind == "ok" and set(table.column("timestamp_type").to_pylist()) == {1}


@pytest.mark.parametrize(
    "bad",
    [
        lambda r: r[:-1],  # the last record runs short
        lambda r: r[:40] + b"\x7f" + r[41:],  # a length byte changed
        lambda r: r + b"\x00",  # a byte left over
    ],
)
def test_malformed_regions_fail_alike(bad: Any) -> None:
    recs = b"".join(raw_record(i, 0, b"key", b"v" * 30) for i in range(20))
    region = bad(recs)
    buf = raw_batch([region])
    # the count in the header is 1 (one "record" of raw bytes): fix it to 20
    buf = buf[:57] + struct.pack(">i", 20) + buf[61:]
    buf = buf[:17] + struct.pack(">I", crc32c(buf[21:])) + buf[21:]
    assert check_same(buf)[0] == "error"


def record_rows(
    values: st.SearchStrategy[bytes | None], min_size: int, max_size: int
) -> st.SearchStrategy[list]:
    """Arguments of raw_record: deltas across the 3-byte varint limit, nulls, at most one header."""
    return st.lists(
        st.tuples(
            st.integers(-(1 << 22), 1 << 22),
            st.integers(-(1 << 22), 1 << 22),
            st.none() | st.binary(max_size=40),
            values,
            st.lists(
                st.tuples(
                    st.text(st.characters(max_codepoint=127), min_size=1, max_size=4).map(str.encode),
                    st.none() | st.binary(max_size=5),
                ),
                max_size=1,
            ),
        ),
        min_size=min_size,
        max_size=max_size,
    )


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=record_rows(st.none() | st.binary(max_size=200), 1, 30), cut=st.none() | st.integers(0, 400))
def test_any_shape_matches(rows: list[tuple], cut: int | None) -> None:
    buf = raw_batch([raw_record(*row) for row in rows], last_delta=0)
    if cut is not None and cut < len(buf) - 61:
        # corrupt one byte of the records region (CRC fixed up, so the structure is what fails)
        pos = 61 + cut
        buf = buf[:pos] + bytes([buf[pos] ^ 0x41]) + buf[pos + 1 :]
        buf = buf[:17] + struct.pack(">I", crc32c(buf[21:])) + buf[21:]
    check_same(buf)
