"""The row decoder and the columnar decoder must give one verdict on the same bytes.

test_parity.py compares the Cython codec with its twin; this compares the two decoders of each
implementation with each other (both raise KafkaCodecError, or both give the same data records),
so it also runs when only the pure-Python twin is present (KAFKA_CORE_PURE_PYTHON=1).
"""

from __future__ import annotations

import struct
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafka_core._env import env_flag
from kafka_core.codec import crc32c
from kafka_core.codec._python import columnar as pcol
from kafka_core.codec._python import records as prec
from kafka_core.errors import KafkaCodecError

IMPLS: list[tuple[str, Any, Any]] = [("python", prec, pcol)]
if not env_flag("KAFKA_CORE_PURE_PYTHON"):
    from kafka_core.codec._cython import columnar as ccol  # a missing extension fails here
    from kafka_core.codec._cython import records as crec

    IMPLS.append(("cython", crec, ccol))

impls = pytest.mark.parametrize(("name", "rows", "cols"), IMPLS, ids=[i[0] for i in IMPLS])

COMMIT_KEY = b"\x00\x00\x00\x01"  # control record key: version 0, type COMMIT
MARKER_VALUE = b"\x00\x00\x00\x00\x00\x00"  # EndTxnMarker: version 0, coordinator epoch 0


def verdict_rows(rows: Any, buf: bytes, check_crc: bool) -> tuple[str, Any]:
    """('ok', data records as tuples) with control records left out, as the columns do."""
    try:
        records = rows.decode_record_batches(buf, check_crc=check_crc)
    except KafkaCodecError:
        return "error", None
    return "ok", [
        (r.offset, r.timestamp, r.timestamp_type, r.key, r.value, [tuple(h) for h in r.headers])
        for r in records
        if not r.is_control
    ]


def verdict_cols(cols: Any, buf: bytes, check_crc: bool) -> tuple[str, Any]:
    try:
        result = cols.decode_record_batches_columns(buf, check_crc=check_crc)
    except KafkaCodecError:
        return "error", None
    arrow = result.to_arrow()
    table = {name: arrow.column(name).to_pylist() for name in arrow.column_names if name != "timestamp"}
    table["timestamp"] = arrow.column("timestamp").cast(pa.int64()).to_pylist()  # no datetime range
    columns = [table[name] for name in ("offset", "timestamp", "timestamp_type", "key", "value")]
    headers = [[(h["key"], h["value"]) for h in hs] for hs in table["headers"]]
    out = [(*row, hs) for *row, hs in zip(*columns, headers, strict=True)]
    return "ok", out


def control_batch(rows: Any, key: bytes | None, *, extra: list | None = None, base_offset: int = 0) -> bytes:
    recs = [(key, MARKER_VALUE)] + (extra or [])
    return bytes(rows.encode_record_batch(recs, control=True, transactional=True, base_offset=base_offset))


@impls
def test_control_record_with_null_key_is_rejected_by_both(name: str, rows: Any, cols: Any) -> None:
    buf = control_batch(rows, None)
    with pytest.raises(KafkaCodecError, match="control record key is null"):
        cols.decode_record_batches_columns(buf)
    with pytest.raises(KafkaCodecError, match="control record key is null"):
        rows.decode_record_batches(buf)


@impls
@pytest.mark.parametrize("key", [b"", b"\x00", b"\x00\x00\x00"])
def test_control_record_with_short_key_is_rejected_by_both(
    name: str, rows: Any, cols: Any, key: bytes
) -> None:
    buf = control_batch(rows, key)
    with pytest.raises(KafkaCodecError, match="needs 4"):
        cols.decode_record_batches_columns(buf)
    with pytest.raises(KafkaCodecError, match="needs 4"):
        rows.decode_record_batches(buf)


@impls
def test_every_control_record_is_checked_not_only_the_first(name: str, rows: Any, cols: Any) -> None:
    buf = control_batch(rows, COMMIT_KEY, extra=[(None, MARKER_VALUE)])
    assert verdict_rows(rows, buf, True)[0] == "error"
    assert verdict_cols(cols, buf, True)[0] == "error"


@impls
def test_valid_control_batch_is_accepted_by_both(name: str, rows: Any, cols: Any) -> None:
    data = bytes(rows.encode_record_batch([(b"k", b"v")], base_offset=0))
    buf = data + control_batch(rows, COMMIT_KEY, base_offset=1)
    records = rows.decode_record_batches(buf)
    assert [r.is_control for r in records] == [False, True]
    assert records[1].key == COMMIT_KEY
    result = cols.decode_record_batches_columns(buf)
    assert result.batches[1].control_type == 1
    assert verdict_rows(rows, buf, True) == verdict_cols(cols, buf, True)


@impls
@pytest.mark.parametrize("field", ["base_offset", "base_timestamp"])
def test_control_batch_overflowing_int64_is_rejected_by_both(
    name: str, rows: Any, cols: Any, field: str
) -> None:
    """Offsets and timestamps of control records overflow int64 as those of data records do."""
    marker = [rows.KafkaRecord(COMMIT_KEY, MARKER_VALUE, timestamp=t) for t in (0, 1)]
    buf = bytearray(rows.encode_record_batch(marker, control=True, transactional=True, base_timestamp=0))
    at = 0 if field == "base_offset" else 27  # the header field, then a new CRC
    struct.pack_into(">q", buf, at, (1 << 63) - 1)
    _fix_crcs(buf)
    assert verdict_rows(rows, bytes(buf), True)[0] == "error"
    assert verdict_cols(cols, bytes(buf), True)[0] == "error"


# ------------------------------------------------------------------------------------------
# mutated valid batches: both decoders raise, or both give the same data records
# ------------------------------------------------------------------------------------------
def _fix_crcs(buf: bytearray) -> None:
    """Recompute each complete v2 batch's CRC, so that mutations reach the record parser."""
    pos = 0
    while len(buf) - pos >= 61:
        (length,) = struct.unpack_from(">i", buf, pos + 8)
        end = pos + 12 + length
        if length < 49 or end > len(buf) or buf[pos + 16] != 2:
            return
        struct.pack_into(">I", buf, pos + 17, crc32c(bytes(buf[pos + 21 : end])))
        pos = end


payload = st.none() | st.binary(max_size=12)
record_st = st.tuples(payload, payload, st.lists(st.tuples(st.text(max_size=4), payload), max_size=2))
batch_st = st.tuples(
    st.lists(record_st, min_size=1, max_size=4),
    st.sampled_from(["none", "gzip"]),
    st.sampled_from(["data", "control", "data-as-control"]),
    st.booleans(),  # log_append_time
    st.sampled_from([1_000, (1 << 63) - 2, -(1 << 63)]),  # base timestamp, near int64's edges too
)
edit_st = st.tuples(st.integers(0, 1 << 16), st.integers(0, 255))


def _build(rows: Any, batches: list, offset: int) -> bytearray:
    buf = bytearray()
    for recs, compression, kind, log_append, base_ts in batches:
        if kind == "control":
            recs = [(COMMIT_KEY, MARKER_VALUE)]
        buf += rows.encode_record_batch(
            recs,
            base_offset=min(offset, (1 << 63) - 1),
            base_timestamp=base_ts,
            compression=compression,
            control=kind != "data",  # data-as-control: a control batch of arbitrary records
            transactional=kind != "data",
            log_append_time=log_append,
        )
        offset += len(recs)
    return buf


@impls
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    batches=st.lists(batch_st, min_size=1, max_size=3),
    edits=st.lists(edit_st, max_size=3),
    cut=st.none() | st.integers(0, 1 << 16),
    offset=st.sampled_from([0, (1 << 63) - 3]),
    fix_crc=st.booleans(),
    check_crc=st.booleans(),
)
def test_mutated_batches_same_verdict_rows_and_columns(
    name: str,
    rows: Any,
    cols: Any,
    batches: list,
    edits: list[tuple[int, int]],
    cut: int | None,
    offset: int,
    fix_crc: bool,
    check_crc: bool,
) -> None:
    buf = _build(rows, batches, offset)
    for pos, byte in edits:
        buf[pos % len(buf)] = byte
    if cut is not None:
        del buf[cut % (len(buf) + 1) :]
    if fix_crc:
        _fix_crcs(buf)
    data = bytes(buf)
    assert verdict_rows(rows, data, check_crc) == verdict_cols(cols, data, check_crc)
