"""The Cython codec and its pure-Python twin must agree byte for byte, record for record, and
error for error (both raise KafkaCodecError on the same malformed input).

Both twins are imported directly. A missing extension fails this module (it is not skipped)
unless KAFKA_CORE_PURE_PYTHON=1 says that the extension is deliberately absent.
"""

from __future__ import annotations

import pickle
import uuid
from typing import Any

import pytest

from kafka_core._env import env_flag

if env_flag("KAFKA_CORE_PURE_PYTHON"):
    pytest.skip("KAFKA_CORE_PURE_PYTHON=1: the Cython codec is deliberately absent", allow_module_level=True)

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafka_core.codec import legacy
from kafka_core.codec._cython import columnar as ccol
from kafka_core.codec._cython import primitives as cprim  # a missing extension fails here
from kafka_core.codec._cython import records as crec
from kafka_core.codec._python import columnar as pcol
from kafka_core.codec._python import primitives as pprim
from kafka_core.codec._python import records as prec
from kafka_core.errors import KafkaCodecError

INT64 = (-(1 << 63), (1 << 63) - 1)
COMPRESSIONS = ["none", "gzip", "snappy", "lz4", "zstd"]
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

payloads = st.none() | st.binary(max_size=40) | st.binary(min_size=100, max_size=300)
headers_st = st.lists(st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=20)), max_size=3)
timestamps_st = st.none() | st.integers(0, 1 << 42)


@st.composite
def record_specs(draw: Any) -> list[tuple]:
    """(form, key, value, headers, timestamp) specs, turned into each twin's own inputs."""
    n = draw(st.integers(1, 12))
    out = []
    for _ in range(n):
        form = draw(st.sampled_from(["pair", "triple", "record"]))
        out.append((form, draw(payloads), draw(payloads), draw(headers_st), draw(timestamps_st)))
    return out


def build(mod: Any, specs: list[tuple]) -> list[Any]:
    items: list[Any] = []
    for form, key, value, headers, ts in specs:
        if form == "pair":
            items.append((key, value))
        elif form == "triple":
            items.append((key, value, headers))
        else:
            items.append(mod.KafkaRecord(key, value, headers, timestamp=ts))
    return items


options_st = st.fixed_dictionaries(
    {
        "base_offset": st.integers(0, 1 << 62),
        "base_timestamp": st.integers(0, 1 << 42),
        "compression": st.sampled_from(COMPRESSIONS),
        "producer_id": st.integers(-1, (1 << 63) - 1),
        "producer_epoch": st.integers(-1, (1 << 15) - 1),
        "base_sequence": st.integers(-1, (1 << 31) - 1),
        "transactional": st.booleans(),
        "partition_leader_epoch": st.integers(-1, (1 << 31) - 1),
        "log_append_time": st.booleans(),
    }
)


def attrs(records: list[Any]) -> list[tuple]:
    return [
        (
            r.offset,
            r.timestamp,
            r.timestamp_type,
            r.key,
            r.value,
            list(r.headers),
            r.producer_id,
            r.producer_epoch,
            r.is_transactional,
            r.is_control,
        )
        for r in records
    ]


def outcome(fn: Any, *args: Any, **kwargs: Any) -> tuple[str, Any]:
    """('ok', result) or ('error', None) for KafkaCodecError; anything else propagates."""
    try:
        return "ok", fn(*args, **kwargs)
    except KafkaCodecError:
        return "error", None


def decoded(mod: Any, buf: bytes, check_crc: bool) -> tuple[str, Any]:
    kind, result = outcome(mod.decode_record_batches, buf, check_crc=check_crc)
    return kind, attrs(result) if kind == "ok" else None


def columns(mod: Any, buf: bytes, check_crc: bool, zero_copy: bool = False) -> tuple[str, Any]:
    kind, result = outcome(mod.decode_record_batches_columns, buf, check_crc=check_crc, zero_copy=zero_copy)
    if kind == "error":
        return kind, None
    return kind, (result.to_arrow(), result.batches)


def assert_same_columns(a: tuple[str, Any], b: tuple[str, Any]) -> None:
    assert a[0] == b[0]
    if a[0] == "ok":
        assert a[1][0].equals(b[1][0])
        assert a[1][1] == b[1][1]


# ------------------------------------------------------------------------------------------
# encode / decode parity
# ------------------------------------------------------------------------------------------
@SETTINGS
@given(specs=record_specs(), options=options_st)
def test_encode_same_bytes_and_decode_same_records(specs: list[tuple], options: dict) -> None:
    c_out = crec.encode_record_batch(build(crec, specs), **options)
    p_out = prec.encode_record_batch(build(prec, specs), **options)
    assert type(c_out) is bytearray
    assert c_out == p_out
    c_records = crec.decode_record_batches(c_out)
    assert attrs(c_records) == attrs(prec.decode_record_batches(bytes(p_out)))
    base = options["base_timestamp"]
    expected = [
        (options["base_offset"] + i, (key, value, list(headers) if form != "pair" else []))
        for i, (form, key, value, headers, _ts) in enumerate(specs)
    ]
    assert [(r.offset, (r.key, r.value, r.headers)) for r in c_records] == expected
    if not options["log_append_time"]:
        assert [r.timestamp for r in c_records] == [
            ts if form == "record" and ts is not None else base for form, _k, _v, _h, ts in specs
        ]


@SETTINGS
@given(specs=record_specs(), control=st.booleans(), level=st.none() | st.integers(1, 9))
def test_flags_and_levels(specs: list[tuple], control: bool, level: int | None) -> None:
    for compression in ("gzip", "zstd", "lz4"):
        kwargs = {"base_timestamp": 1000, "compression": compression, "compression_level": level}
        kwargs["control"] = control
        c_out = crec.encode_record_batch(build(crec, specs), **kwargs)
        assert c_out == prec.encode_record_batch(build(prec, specs), **kwargs)
        assert decoded(crec, bytes(c_out), True) == decoded(prec, bytes(c_out), True)


@pytest.mark.parametrize("wrap", [bytearray, memoryview, lambda b: memoryview(bytearray(b))])
def test_bytes_like_inputs(wrap: Any) -> None:
    recs = [(wrap(b"key"), wrap(b"value"), [("h", wrap(b"hv"))]), (None, wrap(b""))]
    c_out = crec.encode_record_batch(recs, base_timestamp=5)
    assert c_out == prec.encode_record_batch(recs, base_timestamp=5)
    assert attrs(crec.decode_record_batches(wrap(bytes(c_out)))) == attrs(
        prec.decode_record_batches(wrap(bytes(c_out)))
    )


def test_records_of_the_other_twin_encode_the_same() -> None:
    recs = [prec.KafkaRecord(b"k", b"v", [("a", None)], timestamp=77), prec.KafkaRecord(None, b"x")]
    assert crec.encode_record_batch(recs, base_timestamp=1) == prec.encode_record_batch(
        recs, base_timestamp=1
    )


def test_record_objects_behave_alike() -> None:
    args = (b"k", b"v", [("h", b"1")], 12, 3, 0, 9, 1, True, False)
    c, p = crec.KafkaRecord(*args), prec.KafkaRecord(*args)
    assert repr(c) == repr(p)
    assert c == crec.KafkaRecord(*args)
    assert c != crec.KafkaRecord(b"other", *args[1:])
    assert crec.KafkaRecord(b"k", headers=()) == crec.KafkaRecord(b"k", headers=[])
    assert attrs([c]) == attrs([p])
    with pytest.raises(TypeError):
        hash(c)
    assert crec.KafkaRecord(b"k", headers=None).headers is None  # kept as given, like the twin


def test_cython_record_fields_are_read_only() -> None:
    record = crec.decode_record_batches(crec.encode_record_batch([(b"k", b"v")], base_timestamp=1))[0]
    for name in ("key", "value", "offset", "timestamp", "headers"):
        with pytest.raises(AttributeError):
            setattr(record, name, None)
    assert (record.key, record.value) == (b"k", b"v")


def test_decoded_records_pickle() -> None:
    out = crec.encode_record_batch([(b"k", b"v", [("a", None)]), (None, b"x")], base_timestamp=3)
    for mod in (crec, prec):
        records = mod.decode_record_batches(out)
        assert attrs(pickle.loads(pickle.dumps(records))) == attrs(records)


# ------------------------------------------------------------------------------------------
# columnar parity
# ------------------------------------------------------------------------------------------
@st.composite
def column_specs(draw: Any) -> tuple:
    n = draw(st.integers(1, 15))
    keys = draw(st.none() | st.lists(payloads, min_size=n, max_size=n))
    values = draw(st.lists(payloads, min_size=n, max_size=n))
    headers = draw(st.none() | st.lists(headers_st, min_size=n, max_size=n))
    timestamps = draw(st.none() | st.lists(timestamps_st, min_size=n, max_size=n))
    return keys, values, headers, timestamps


@SETTINGS
@given(spec=column_specs(), arrow=st.sampled_from(["list", "binary", "large_binary", "sliced"]))
def test_encode_columns_same_bytes(spec: tuple, arrow: str) -> None:
    keys, values, headers, timestamps = spec
    if arrow == "list":
        k, v, t = keys, values, timestamps
    elif arrow == "sliced":  # a non-zero array offset must be honoured
        k = None if keys is None else pa.array([b"x", *keys], pa.binary()).slice(1)
        v = pa.array([None, *values], pa.binary()).slice(1)
        t = None if timestamps is None else pa.array([0, *timestamps], pa.timestamp("ms")).slice(1)
    else:
        typ = pa.binary() if arrow == "binary" else pa.large_binary()
        k = None if keys is None else pa.array(keys, typ)
        v = pa.array(values, typ)
        t = None if timestamps is None else pa.array(timestamps, pa.int64())
    kwargs = {"headers": headers, "timestamps": t, "base_timestamp": 10, "base_offset": 3}
    c_out = ccol.encode_record_batch_columns(k, v, **kwargs)
    assert c_out == pcol.encode_record_batch_columns(k, v, **kwargs)
    # the same bytes as the row encoder given the equivalent records
    n = len(values)
    rows = [
        crec.KafkaRecord(
            None if keys is None else keys[i],
            values[i],
            [] if headers is None else headers[i],
            timestamp=None if timestamps is None else timestamps[i],
        )
        for i in range(n)
    ]
    assert c_out == crec.encode_record_batch(rows, base_timestamp=10, base_offset=3)


def test_encode_columns_from_string_arrays() -> None:
    for typ in (pa.string(), pa.large_string()):
        keys = pa.array(["a", None, "ccc"], typ)
        values = pa.array(["x", "yy", None], typ)
        c_out = ccol.encode_record_batch_columns(keys, values, base_timestamp=1)
        assert c_out == pcol.encode_record_batch_columns(keys, values, base_timestamp=1)


@pytest.mark.parametrize(
    "values",
    [
        pa.array([b"ab", None, b"cd"], pa.binary(2)),
        pa.array([b"ab", None, b"cd", b"ef"], pa.binary(2)).slice(1),
        pa.array(["a", None, "bcd"], pa.string_view()),
        pa.array([b"a", None, b"bcd"], pa.binary_view()),
        pa.chunked_array([pa.array([b"a"], pa.binary()), pa.array([None, b"xyz"], pa.binary())]),
    ],
    ids=["fixed", "fixed-sliced", "string_view", "binary_view", "chunked"],
)
@pytest.mark.parametrize("timestamps", ["none", "int32-chunked", "uint8"])
def test_encode_other_arrow_layouts(values: Any, timestamps: str) -> None:
    ts: Any = {
        "none": None,
        "int32-chunked": pa.chunked_array([pa.array([1, None], pa.int32()), pa.array([3], pa.int32())]),
        "uint8": pa.array([0, 1, 2], pa.uint8()),
    }[timestamps]
    c_out = ccol.encode_record_batch_columns(values, values, timestamps=ts, base_timestamp=9)
    assert c_out == pcol.encode_record_batch_columns(values, values, timestamps=ts, base_timestamp=9)


@pytest.mark.parametrize(
    ("values", "timestamps"),
    [
        (pa.array([1, 2], pa.int64()), None),
        (pa.array([[b"a"]], pa.list_(pa.binary())), None),
        ([b"x"], pa.array([1], pa.timestamp("us"))),
        ([b"x"], pa.array([1.5], pa.float64())),
        ([b"x"], pa.array([1 << 63], pa.uint64())),
        ([b"x", b"y"], [1]),
        (b"not a column", None),
    ],
)
def test_bad_columns_raise_alike(values: Any, timestamps: Any) -> None:
    for mod in (ccol, pcol):
        with pytest.raises(KafkaCodecError):
            mod.encode_record_batch_columns(None, values, timestamps=timestamps, base_timestamp=1)


@SETTINGS
@given(batches=st.lists(st.tuples(record_specs(), options_st, st.booleans()), min_size=1, max_size=4))
def test_decode_columns_same_arrow(batches: list) -> None:
    buf = bytearray()
    for specs, options, control in batches:
        if control:  # a transaction marker: version 0, type COMMIT
            buf += crec.encode_record_batch(
                [(b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00")], control=True, transactional=True
            )
        buf += crec.encode_record_batch(build(crec, specs), **options)
    c_cols = columns(ccol, bytes(buf), True)
    assert c_cols[0] == "ok"
    assert_same_columns(c_cols, columns(pcol, bytes(buf), True))
    c_views = columns(ccol, bytes(buf), True, zero_copy=True)
    assert_same_columns(c_views, columns(pcol, bytes(buf), True, zero_copy=True))
    assert c_views[1][0].column("key").type == pa.binary_view()
    assert c_views[1][0].column("value").to_pylist() == c_cols[1][0].column("value").to_pylist()
    assert c_cols[1][0].schema == pcol.decode_record_batches_columns(bytes(buf)).to_arrow().schema


# ------------------------------------------------------------------------------------------
# malformed input: the same verdict from both twins
# ------------------------------------------------------------------------------------------
def sample_buffer() -> bytes:
    recs = [
        (b"key-%d" % i, b"v" * (i * 40), [(f"h{i}", b"x" * i), ("n", None)]) if i % 3 else (None, b"")
        for i in range(8)
    ]
    one = crec.encode_record_batch(recs, base_timestamp=1 << 40, base_offset=100)
    two = crec.encode_record_batch([(b"a", None)], base_timestamp=5, compression="gzip", base_offset=108)
    return bytes(one + two)


SAMPLE = sample_buffer()


@settings(max_examples=400, deadline=None)
@given(
    edits=st.lists(st.tuples(st.integers(0, len(SAMPLE) - 1), st.integers(0, 255)), min_size=1, max_size=3),
    cut=st.integers(0, len(SAMPLE)),
    check_crc=st.booleans(),
)
def test_mutated_input_same_verdict(edits: list[tuple[int, int]], cut: int, check_crc: bool) -> None:
    buf = bytearray(SAMPLE)
    for pos, byte in edits:
        buf[pos] = byte
    data = bytes(buf[:cut])
    assert decoded(crec, data, check_crc) == decoded(prec, data, check_crc)
    assert_same_columns(columns(ccol, data, check_crc), columns(pcol, data, check_crc))
    assert_same_columns(columns(ccol, data, check_crc, True), columns(pcol, data, check_crc, True))


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=120), check_crc=st.booleans())
def test_random_bytes_same_verdict(data: bytes, check_crc: bool) -> None:
    assert decoded(crec, data, check_crc) == decoded(prec, data, check_crc)


@pytest.mark.parametrize(
    "bad",
    [
        [("not bytes", b"v")],
        [(b"k", 5)],
        [(b"k", b"v", [(None, b"x")])],
        [(b"k", b"v", [("k", "str value")])],
        [(b"k", b"v", [("\ud800", b"x")])],
        [(b"k", b"v", 7)],
        [(b"k",)],
        [object()],
        [],
    ],
)
def test_bad_encode_inputs_raise_alike(bad: list) -> None:
    with pytest.raises(KafkaCodecError):
        crec.encode_record_batch(bad, base_timestamp=1)
    with pytest.raises(KafkaCodecError):
        prec.encode_record_batch(bad, base_timestamp=1)


@pytest.mark.parametrize(
    "options",
    [
        {"compression": "brotli"},
        {"producer_epoch": 1 << 15},
        {"base_sequence": 1 << 31},
        {"base_offset": 1 << 63},
        {"base_timestamp": "now"},
        {"compression": "gzip", "compression_level": 99},
    ],
)
def test_bad_options_raise_alike(options: dict) -> None:
    with pytest.raises(KafkaCodecError):
        crec.encode_record_batch([(b"k", b"v")], **options)
    with pytest.raises(KafkaCodecError):
        prec.encode_record_batch([(b"k", b"v")], **options)


def test_timestamps_out_of_int64_raise_alike() -> None:
    for mod in (crec, prec):
        with pytest.raises(KafkaCodecError):
            mod.encode_record_batch(
                [mod.KafkaRecord(b"k", b"v", timestamp=-(1 << 62) - 1)], base_timestamp=1 << 62
            )


# ------------------------------------------------------------------------------------------
# legacy message sets go through the shared legacy.py from both twins
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("compression", ["none", "gzip", "snappy", "lz4"])
def test_legacy_same_records(magic: int, compression: str) -> None:
    old = legacy.encode_legacy_message_set(
        [(b"k1", b"v1"), (None, b"v2")], magic=magic, compression=compression, timestamp=99, base_offset=7
    )
    buf = old + bytes(crec.encode_record_batch([(b"new", b"v")], base_offset=9, base_timestamp=3))
    assert decoded(crec, buf, True) == decoded(prec, buf, True)
    assert len(decoded(crec, buf, True)[1]) == 3
    assert_same_columns(columns(ccol, buf, True), columns(pcol, buf, True))


# ------------------------------------------------------------------------------------------
# primitives
# ------------------------------------------------------------------------------------------
any_int = st.integers(-(1 << 70), 1 << 70) | st.integers(-(1 << 33), 1 << 33) | st.integers(-300, 300)


@settings(max_examples=300, deadline=None)
@given(value=any_int)
def test_primitive_encoders_agree(value: int) -> None:
    for name in (
        "zigzag_encode",
        "zigzag_decode",
        "size_of_unsigned_varint",
        "size_of_varint",
        "size_of_varlong",
        "encode_unsigned_varint",
        "encode_varint",
        "encode_varlong",
    ):
        assert outcome(getattr(cprim, name), value) == outcome(getattr(pprim, name), value), name


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=24), pos=st.integers(-2, 26))
def test_primitive_decoders_agree(data: bytes, pos: int) -> None:
    for name in (
        "decode_unsigned_varint",
        "decode_varint",
        "decode_varlong",
        "decode_compact_bytes",
        "decode_compact_string",
        "decode_uuid",
    ):
        assert outcome(getattr(cprim, name), data, pos) == outcome(getattr(pprim, name), data, pos), name
        assert outcome(getattr(cprim, name), bytearray(data), pos) == outcome(
            getattr(pprim, name), bytearray(data), pos
        ), name


@given(value=st.none() | st.binary(max_size=200), text=st.none() | st.text(max_size=50))
def test_compact_and_uuid_encoders_agree(value: bytes | None, text: str | None) -> None:
    assert cprim.encode_compact_bytes(value) == pprim.encode_compact_bytes(value)
    assert cprim.encode_compact_string(text) == pprim.encode_compact_string(text)
    u = uuid.uuid4()
    assert cprim.encode_uuid(u) == pprim.encode_uuid(u)
    assert cprim.encode_uuid(None) == pprim.encode_uuid(None)
    assert cprim.decode_uuid(cprim.encode_uuid(u)) == (u, 16)


def test_primitives_expose_the_same_api() -> None:
    assert sorted(cprim.__all__) == sorted(pprim.__all__)
    assert sorted(crec.__all__) == sorted(prec.__all__)


def test_sample_decodes_cleanly() -> None:
    # the mutation test relies on SAMPLE decoding cleanly before it is mutated
    assert decoded(crec, SAMPLE, True)[0] == "ok"
    assert len(decoded(crec, SAMPLE, True)[1]) == 9


# ------------------------------------------------------------------------------------------
# share records: decode_share_records builds one record per acquired offset in both twins
# ------------------------------------------------------------------------------------------
def share_attrs(records: list[Any]) -> list[tuple]:
    return [
        (type(r).__name__, r.topic, r.partition, r.delivery_count, *a)
        for r, a in zip(records, attrs(records), strict=True)
    ]


ranges_st = st.lists(st.tuples(st.integers(0, 40), st.integers(0, 6), st.integers(1, 9)), max_size=6).map(
    lambda raw: _disjoint(raw)
)


def _disjoint(raw: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """(start, length, count) draws as disjoint (first, last, count) ranges in offset order."""
    out: list[tuple[int, int, int]] = []
    for start, length, count in sorted(raw):
        first = max(start, out[-1][1] + 1 if out else 0)
        out.append((first, first + length, count))
    return out


@SETTINGS
@given(specs=record_specs(), more=record_specs(), acquired=ranges_st, check_crc=st.booleans())
def test_share_records_same_in_both_twins(
    specs: list[tuple], more: list[tuple], acquired: list[tuple[int, int, int]], check_crc: bool
) -> None:
    buf = bytes(crec.encode_record_batch(build(crec, specs), base_offset=3)) + bytes(
        crec.encode_record_batch(build(crec, more), base_offset=3 + len(specs) + 2, compression="gzip")
    )
    got = crec.decode_share_records(buf, "t", 7, acquired, check_crc=check_crc)
    want = prec.decode_share_records(buf, "t", 7, acquired, check_crc=check_crc)
    assert share_attrs(got) == share_attrs(want)
    # exactly the acquired offsets that have a record, each with its range's delivery count
    expected = [
        (r.offset, count)
        for r in prec.decode_record_batches(buf)
        for first, last, count in acquired
        if first <= r.offset <= last
    ]
    assert [(r.offset, r.delivery_count) for r in got] == expected
    assert all(r.topic == "t" and r.partition == 7 for r in got)


def test_share_records_subclass_identity_copy_and_pickle() -> None:
    for mod in (crec, prec):

        class Sub(mod.KafkaShareRecord):  # type: ignore[name-defined,misc]
            __slots__ = ()

        buf = bytes(crec.encode_record_batch([(b"k%d" % i, b"v%d" % i, [("h", b"x")]) for i in range(5)]))
        recs = mod.decode_share_records(buf, "t", 1, [(1, 2, 3), (4, 4, 1)], record_type=Sub)
        assert [type(r) for r in recs] == [Sub] * 3
        assert [(r.offset, r.delivery_count, r.key, r.headers) for r in recs] == [
            (1, 3, b"k1", [("h", b"x")]),
            (2, 3, b"k2", [("h", b"x")]),
            (4, 1, b"k4", [("h", b"x")]),
        ]
        assert recs[0] == recs[0] and recs[0] != recs[1] and len({recs[0], recs[1]}) == 2
        copy = recs[0]._copy_as(Sub)
        assert copy is not recs[0] and copy != recs[0]
        assert (copy.offset, copy.topic, copy.delivery_count, copy.value) == (1, "t", 3, b"v1")
        plain = mod.decode_share_records(buf, "t", 1, [(4, 4, 1)])
        back = pickle.loads(pickle.dumps(plain[0]))
        assert type(back) is mod.KafkaShareRecord
        assert (back.offset, back.key, back.delivery_count, back.topic) == (4, b"k4", 1, "t")
        made = mod.KafkaShareRecord("t", 0, 5, value=b"v", delivery_count=2)
        assert (made.offset, made.value, made.headers, made.timestamp, made.delivery_count) == (
            5,
            b"v",
            [],
            -1,
            2,
        )
        with pytest.raises(TypeError):
            mod.decode_share_records(buf, "t", 1, [(0, 9, 1)], record_type=mod.KafkaRecord)
        with pytest.raises(TypeError):
            recs[0]._copy_as(int)
