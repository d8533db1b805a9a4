"""decode_record_batches_columns(zero_copy=True): binary_view keys and values, same contents as
the copying mode in both twins; the Cython twin's views really point into the input and keep it
alive. Also the twins' KafkaRecord construction checks and the Cython fast attribute path.
"""

from __future__ import annotations

import gc
import types
from typing import Any

import pytest
from prerequisites import need_module

from kafka_core._env import env_flag

pa = need_module("pyarrow")

from kafka_core.codec import legacy  # noqa: E402
from kafka_core.codec._python import columnar as pcol  # noqa: E402
from kafka_core.codec._python import records as prec  # noqa: E402
from kafka_core.errors import KafkaCodecError  # noqa: E402

PURE = env_flag("KAFKA_CORE_PURE_PYTHON")
if PURE:
    ccol = crec = None
    TWINS: list[Any] = [pcol]
else:
    from kafka_core.codec._cython import columnar as ccol  # a missing extension fails here
    from kafka_core.codec._cython import records as crec

    TWINS = [ccol, pcol]
cython_only = pytest.mark.skipif(PURE, reason="KAFKA_CORE_PURE_PYTHON=1: no Cython codec")

RECORDS = [
    (b"k" * 16, b"v" * 100, [("h", b"x"), ("n", None)]),
    (None, b"short"),  # inline view (<= 12 bytes)
    (b"twelve bytes", None),
    (b"", b""),
    (b"thirteen byte", b"\x00" * 13),
]


def batches(compression: str = "none") -> bytes:
    first = prec.encode_record_batch(RECORDS, base_offset=10, base_timestamp=1000, compression=compression)
    marker = prec.encode_record_batch(
        [(b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00")], control=True, transactional=True, base_offset=15
    )
    second = prec.encode_record_batch([(b"a" * 40, b"b" * 3)], base_offset=16, base_timestamp=5)
    return bytes(first + marker + second)


def same(zero: Any, copied: Any) -> None:
    assert zero.keys.type == pa.binary_view() and zero.values.type == pa.binary_view()
    assert copied.keys.type == pa.binary()
    zero.keys.validate(full=True)
    zero.values.validate(full=True)
    for name in ("offsets", "timestamps", "timestamp_types", "keys", "values", "headers"):
        assert getattr(zero, name).to_pylist() == getattr(copied, name).to_pylist(), name
    assert zero.batches == copied.batches
    assert zero.to_arrow().schema.field("key").type == pa.binary_view()


@pytest.mark.parametrize("twin", TWINS, ids=lambda m: m.__name__.split(".")[-2])
@pytest.mark.parametrize("compression", ["none", "gzip", "lz4", "zstd"])
def test_zero_copy_matches_copying(twin: Any, compression: str) -> None:
    buf = batches(compression)
    same(
        twin.decode_record_batches_columns(buf, zero_copy=True),
        twin.decode_record_batches_columns(buf),
    )


@pytest.mark.parametrize("twin", TWINS, ids=lambda m: m.__name__.split(".")[-2])
def test_zero_copy_legacy_entries(twin: Any) -> None:
    buf = legacy.encode_legacy_message_set(
        [(b"key-of-twenty-bytes!", b"v" * 30), (None, b"x"), (b"k", None)], magic=1, base_offset=3
    )
    same(
        twin.decode_record_batches_columns(buf, zero_copy=True),
        twin.decode_record_batches_columns(buf),
    )


@pytest.mark.parametrize("twin", TWINS, ids=lambda m: m.__name__.split(".")[-2])
def test_zero_copy_empty_input(twin: Any) -> None:
    cols = twin.decode_record_batches_columns(b"", zero_copy=True)
    assert len(cols) == 0 and cols.keys.type == pa.binary_view()


@pytest.mark.parametrize("twin", TWINS, ids=lambda m: m.__name__.split(".")[-2])
def test_zero_copy_bad_input_raises(twin: Any) -> None:
    buf = bytearray(batches())
    buf[70] ^= 0xFF
    with pytest.raises(KafkaCodecError):
        twin.decode_record_batches_columns(bytes(buf), zero_copy=True)
    buf = bytearray(batches())
    buf[61] = 0x7F  # the first record's length: -64
    with pytest.raises(KafkaCodecError):
        twin.decode_record_batches_columns(bytes(buf), zero_copy=True, check_crc=False)


@cython_only
@pytest.mark.parametrize("compression", ["none", "lz4"])
def test_capsule_import_fallback_gives_the_same_columns(compression: str) -> None:
    """pyarrow's address import is used when present; the public PyCapsule path is the fallback."""
    buf = batches(compression)
    fast = [ccol.decode_record_batches_columns(buf, zero_copy=z).to_arrow() for z in (False, True)]
    ccol._use_capsule_import(True)
    try:
        slow = [ccol.decode_record_batches_columns(buf, zero_copy=z).to_arrow() for z in (False, True)]
    finally:
        ccol._use_capsule_import(False)
    assert all(a.equals(b) for a, b in zip(fast, slow, strict=True))


@cython_only
def test_views_point_into_the_input() -> None:
    buf = batches()
    cols = ccol.decode_record_batches_columns(buf, zero_copy=True)
    start = pa.py_buffer(buf).address
    regions = cols.values.buffers()[2:]
    assert regions, "long values must reference a data buffer"
    for region in regions:
        assert start <= region.address and region.address + region.size <= start + len(buf)


@cython_only
def test_views_keep_the_input_alive_and_pinned() -> None:
    buf = bytearray(batches())
    expected = ccol.decode_record_batches_columns(bytes(buf)).values.to_pylist()
    cols = ccol.decode_record_batches_columns(buf, zero_copy=True)
    with pytest.raises(BufferError):
        buf.extend(b"\x00" * 4096)  # would move the memory the views point at
    del buf
    gc.collect()
    assert cols.values.to_pylist() == expected
    table = pa.Table.from_batches([cols.to_arrow()])
    del cols
    gc.collect()
    assert table.column("value").to_pylist() == expected


@cython_only
def test_compressed_payload_kept_alive() -> None:
    cols = ccol.decode_record_batches_columns(batches("zstd"), zero_copy=True)
    values = cols.values
    del cols
    gc.collect()
    assert values.to_pylist()[0] == b"v" * 100


@cython_only
def test_views_released_with_the_arrays() -> None:
    buf = bytearray(batches())
    cols = ccol.decode_record_batches_columns(buf, zero_copy=True)
    del cols
    gc.collect()
    buf.extend(b"\x00")  # no export left


# ------------------------------------------------------------------------------------------
# KafkaRecord: the same checks at construction in both twins
# ------------------------------------------------------------------------------------------
BAD_RECORDS = [
    {"offset": "1"},
    {"offset": 1 << 63},
    {"timestamp": 1.5},
    {"timestamp": -(1 << 63) - 1},
    {"timestamp_type": 2},
    {"producer_id": None},
    {"producer_epoch": 1 << 15},
]


@cython_only
@pytest.mark.parametrize("kwargs", BAD_RECORDS)
def test_record_construction_errors_match(kwargs: dict) -> None:
    with pytest.raises(KafkaCodecError) as c_err:
        crec.KafkaRecord(b"k", b"v", **kwargs)
    with pytest.raises(KafkaCodecError) as p_err:
        prec.KafkaRecord(b"k", b"v", **kwargs)
    assert str(c_err.value) == str(p_err.value)


def test_twin_record_normalises_like_cython() -> None:
    record = prec.KafkaRecord(b"k", b"v", timestamp=True, offset=7, is_transactional=1, is_control=0)
    assert record.timestamp == 1 and type(record.timestamp) is int
    assert record.is_transactional is True and record.is_control is False


@cython_only
def test_cython_key_and_value_are_member_descriptors() -> None:
    """records.pyx swaps Cython's key/value properties for slot descriptors (a direct slot load
    in CPython's specialised LOAD_ATTR); if the swap stops applying it falls back silently to the
    slower properties, which this test catches."""
    for name in ("key", "value"):
        assert type(crec.KafkaRecord.__dict__[name]) is types.MemberDescriptorType, name
    record = crec.decode_record_batches(crec.encode_record_batch([(b"k", None)], base_timestamp=1))[0]
    assert (record.key, record.value) == (b"k", None)
    for name in ("key", "value"):
        with pytest.raises(AttributeError):
            setattr(record, name, b"x")
        with pytest.raises(AttributeError):
            delattr(record, name)
