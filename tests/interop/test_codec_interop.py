"""Byte-level interop of the record codec with the peer clients' own record readers and writers
(aiokafka: C extension and pure Python; kafka-python). No broker needed: batches we encode are
read exactly by their readers, and batches they build are decoded exactly by ours."""

from __future__ import annotations

import importlib.util
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prerequisites import need_module, unavailable

from kafka_core import codec as K
from kafka_core.codec import legacy

pytestmark = pytest.mark.interop

COMPRESSIONS = ["none", "gzip", "snappy", "lz4", "zstd"]
LEGACY_COMPRESSIONS = ["none", "gzip", "snappy", "lz4"]


# ------------------------------------------------------------------------------- the peers
def _aiokafka_supports(compression: str) -> bool:
    from aiokafka import codec

    return {
        "none": True,
        "gzip": codec.has_gzip(),
        "snappy": codec.has_snappy(),
        "lz4": codec.has_lz4(),
        "zstd": codec.has_zstd(),
    }[compression]


def _kafka_python_supports(compression: str) -> bool:
    from kafka import codec

    return {
        "none": True,
        "gzip": codec.has_gzip(),
        "snappy": codec.has_snappy(),
        "lz4": codec.has_lz4(),
        "zstd": codec.has_zstd(),
    }[compression]


def _aiokafka_c():
    need_module("aiokafka")
    try:
        from aiokafka.record import _crecords
    except ImportError:
        unavailable("aiokafka's C extension", "aiokafka.record._crecords does not import")
    return _crecords


def _peer(name: str):
    """(v2 batch class, v2 builder class, legacy batch class, legacy builder class, supports)."""
    if name == "aiokafka-c":
        c = _aiokafka_c()
        return (
            c.DefaultRecordBatch,
            c.DefaultRecordBatchBuilder,
            c.LegacyRecordBatch,
            c.LegacyRecordBatchBuilder,
            _aiokafka_supports,
        )
    if name == "aiokafka-py":
        need_module("aiokafka")
        from aiokafka.record import default_records as d
        from aiokafka.record import legacy_records as lg

        return (
            d._DefaultRecordBatchPy,
            d._DefaultRecordBatchBuilderPy,
            lg._LegacyRecordBatchPy,
            lg._LegacyRecordBatchBuilderPy,
            _aiokafka_supports,
        )
    if name == "kafka-python":
        need_module("kafka")
        from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
        from kafka.record.legacy_records import LegacyRecordBatch, LegacyRecordBatchBuilder

        return (
            DefaultRecordBatch,
            DefaultRecordBatchBuilder,
            LegacyRecordBatch,
            LegacyRecordBatchBuilder,
            _kafka_python_supports,
        )
    raise AssertionError(name)


PEERS = ["aiokafka-c", "aiokafka-py", "kafka-python"]
CODEC_ID = {name: i for i, name in enumerate(COMPRESSIONS)}


def _need(supports, compression: str, peer: str) -> None:
    if not supports(compression):
        unavailable(f"{peer}'s {compression} support", "its library is not installed (the test extra)")


def _as_tuple(r) -> tuple:
    headers = [(k, v) for k, v in r.headers] if r.headers else []
    return (r.offset, r.timestamp, r.timestamp_type, r.key, r.value, headers)


def _records():
    return [
        K.KafkaRecord(
            b"key-0",
            b"value-0",
            [("trace", b"abc"), ("empty", b""), ("null", None)],
            timestamp=1_700_000_000_000,
        ),
        K.KafkaRecord(None, b"null key", timestamp=1_700_000_000_005),
        K.KafkaRecord(b"null value", None, timestamp=1_699_999_999_990),
        K.KafkaRecord(None, None, [("ünïcødé", b"\xff\x00")], timestamp=1_700_000_000_001),
        K.KafkaRecord(b"", b""),  # base timestamp
        K.KafkaRecord(
            b"big", bytes(range(256)) * 400, [("h" * 200, b"v" * 300)], timestamp=1_700_000_001_000
        ),
        *[
            K.KafkaRecord(b"k%d" % i, b"v%d" % i * (i % 13), timestamp=1_700_000_000_000 + i)
            for i in range(150)
        ],
    ]


def _expected(records, base_offset: int, base_timestamp: int) -> list[tuple]:
    return [
        (
            base_offset + i,
            base_timestamp if r.timestamp is None else r.timestamp,
            0,
            r.key,
            r.value,
            list(r.headers),
        )
        for i, r in enumerate(records)
    ]


# ------------------------------------------------------------------------- ours -> their reader
@pytest.mark.parametrize("compression", COMPRESSIONS)
@pytest.mark.parametrize("peer", PEERS)
def test_peer_reads_our_batches(peer, compression):
    batch_cls, _, _, _, supports = _peer(peer)
    _need(supports, compression, peer)
    records = _records()
    buf = K.encode_record_batch(
        records,
        base_offset=1234,
        base_timestamp=1_700_000_000_000,
        compression=compression,
        producer_id=77,
        producer_epoch=3,
        base_sequence=10,
    )
    batch = batch_cls(bytes(buf))
    assert batch.validate_crc()
    assert batch.base_offset == 1234
    assert batch.compression_type == CODEC_ID[compression]
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (77, 3, 10)
    assert batch.max_timestamp == max(r.timestamp for r in records if r.timestamp is not None)
    assert [_as_tuple(r) for r in batch] == _expected(records, 1234, 1_700_000_000_000)


@pytest.mark.parametrize("peer", ["aiokafka-c", "aiokafka-py"])
def test_peer_reads_our_concatenated_batches(peer):
    _peer(peer)
    if peer == "aiokafka-c":
        from aiokafka.record._crecords import MemoryRecords
    else:
        from aiokafka.record.memory_records import _MemoryRecordsPy as MemoryRecords
    bufs, expected = [], []
    for i, compression in enumerate(COMPRESSIONS):
        recs = [
            K.KafkaRecord(b"k", b"batch %d rec %d" % (i, j), [("i", b"%d" % j)], timestamp=100 + j)
            for j in range(i + 1)
        ]
        bufs.append(
            bytes(
                K.encode_record_batch(recs, base_offset=i * 10, base_timestamp=100, compression=compression)
            )
        )
        expected += _expected(recs, i * 10, 100)
    data = b"".join(bufs)
    mr = MemoryRecords(data + bufs[0][:30])  # a truncated tail, as in a Fetch response
    got = []
    while mr.has_next():
        batch = mr.next_batch()
        if batch is None:
            break
        got += [_as_tuple(r) for r in batch]
    assert got == expected
    assert [_as_tuple(r) for r in K.decode_record_batches(data + bufs[0][:30])] == expected


@pytest.mark.parametrize("peer", PEERS)
def test_peer_reads_log_append_time_and_transactional(peer):
    batch_cls, *_ = _peer(peer)
    recs = [K.KafkaRecord(b"a", b"1", timestamp=5), K.KafkaRecord(b"b", b"2", timestamp=9)]
    buf = K.encode_record_batch(
        recs,
        base_timestamp=5,
        log_append_time=True,
        transactional=True,
        producer_id=1,
        producer_epoch=0,
        base_sequence=0,
    )
    batch = batch_cls(bytes(buf))
    assert batch.validate_crc()
    assert batch.is_transactional
    assert batch.timestamp_type == 1
    assert [(r.timestamp, r.timestamp_type) for r in batch] == [(9, 1), (9, 1)]


@pytest.mark.parametrize("peer", PEERS)
def test_peer_reads_our_control_batch(peer):
    batch_cls, *_ = _peer(peer)
    buf = K.encode_record_batch(
        [(b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x07")],
        base_offset=50,
        base_timestamp=1,
        producer_id=8,
        producer_epoch=2,
        transactional=True,
        control=True,
    )
    batch = batch_cls(bytes(buf))
    assert batch.validate_crc()
    assert batch.is_control_batch and batch.is_transactional
    [rec] = list(batch)
    assert rec.offset == 50


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    records=st.lists(
        st.builds(
            K.KafkaRecord,
            st.none() | st.binary(max_size=60),
            st.none() | st.binary(max_size=60),
            st.lists(st.tuples(st.text(max_size=10), st.none() | st.binary(max_size=10)), max_size=3),
            st.none() | st.integers(0, 1 << 42),
        ),
        min_size=1,
        max_size=8,
    ),
    compression=st.sampled_from(COMPRESSIONS),
)
def test_aiokafka_reads_ours_property(records, compression):
    batch_cls, *_ = _peer("aiokafka-c")
    buf = K.encode_record_batch(records, base_offset=7, base_timestamp=1 << 40, compression=compression)
    batch = batch_cls(bytes(buf))
    assert batch.validate_crc()
    assert [_as_tuple(r) for r in batch] == _expected(records, 7, 1 << 40)


# ------------------------------------------------------------------------- theirs -> our reader
def _build(
    builder_cls,
    compression: str,
    records,
    *,
    base_offset=0,
    offsets=None,
    transactional=False,
    producer=(-1, -1, -1),
):
    builder = builder_cls(2, CODEC_ID[compression], transactional, *producer, 1 << 30)
    for i, r in enumerate(records):
        offset = offsets[i] if offsets else i
        meta = builder.append(offset, r.timestamp, r.key, r.value, list(r.headers))
        assert meta is not None
    return bytes(builder.build())


@pytest.mark.parametrize("compression", COMPRESSIONS)
@pytest.mark.parametrize("peer", PEERS)
def test_we_read_peer_batches(peer, compression):
    _, builder_cls, _, _, supports = _peer(peer)
    _need(supports, compression, peer)
    records = [r for r in _records() if r.timestamp is not None]
    buf = _build(builder_cls, compression, records, transactional=True, producer=(5, 1, 0))
    out = K.decode_record_batches(buf)
    assert [_as_tuple(r) for r in out] == [
        (i, r.timestamp, 0, r.key, r.value, list(r.headers)) for i, r in enumerate(records)
    ]
    assert {(r.producer_id, r.producer_epoch, r.is_transactional, r.is_control) for r in out} == {
        (5, 1, True, False)
    }
    cols = K.decode_record_batches_columns(buf) if _has_pyarrow() else None
    if cols is not None:
        assert cols.offsets.to_pylist() == [r.offset for r in out]
        assert cols.values.to_pylist() == [r.value for r in out]
        assert cols.batches[0].producer_id == 5 and cols.batches[0].is_transactional


@pytest.mark.parametrize("compression", COMPRESSIONS)
@pytest.mark.parametrize("peer", PEERS)
def test_we_write_what_peers_write_uncompressed_layout(peer, compression):
    """With the same inputs (base timestamp = first record's, as the peers choose it), our batch
    decodes identically to theirs; uncompressed, the bytes are identical."""
    _, builder_cls, _, _, supports = _peer(peer)
    _need(supports, compression, peer)
    records = [
        K.KafkaRecord(r.key, r.value, r.headers, 1_700_000_000_000 + i) for i, r in enumerate(_records()[:20])
    ]
    theirs = _build(builder_cls, compression, records)
    (leader_epoch,) = struct.unpack_from(">i", theirs, 12)  # -1 (aiokafka) or 0 (kafka-python)
    ours = K.encode_record_batch(
        records,
        base_timestamp=1_700_000_000_000,
        compression=compression,
        partition_leader_epoch=leader_epoch,
    )
    if compression == "none":
        assert bytes(ours) == theirs
    assert K.decode_record_batches(ours) == K.decode_record_batches(theirs)


@pytest.mark.parametrize("peer", PEERS)
def test_we_read_peer_batches_with_offset_gaps(peer):
    _, builder_cls, _, _, _ = _peer(peer)
    records = [K.KafkaRecord(b"k", b"%d" % i, timestamp=10 + i) for i in range(4)]
    buf = _build(builder_cls, "none", records, offsets=[0, 3, 4, 9])
    assert [r.offset for r in K.decode_record_batches(buf)] == [0, 3, 4, 9]


# ------------------------------------------------------------------------------------- legacy
def _legacy_entries(buf: bytes) -> list[bytes]:
    out, pos = [], 0
    while pos < len(buf):
        (size,) = struct.unpack_from(">i", buf, pos + 8)
        out.append(buf[pos : pos + 12 + size])
        pos += 12 + size
    return out


def _build_legacy(peer, builder_cls, magic, compression, recs) -> bytes:
    builder = builder_cls(magic, CODEC_ID[compression], 1 << 30)
    for i, (k, v, ts) in enumerate(recs):
        builder.append(i, ts, k, v)
    try:
        return bytes(builder.build())
    except Exception as exc:  # aiokafka refuses magic 0 lz4 (KAFKA-3160)
        if compression == "lz4" and magic == 0:
            pytest.skip(f"{peer} does not write magic 0 lz4 ({exc})")
        raise


@pytest.mark.parametrize("compression", LEGACY_COMPRESSIONS)
@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("peer", PEERS)
def test_we_read_peer_legacy_message_sets(peer, magic, compression):
    _, _, _, builder_cls, supports = _peer(peer)
    _need(supports, compression, peer)
    recs = [
        (b"k%d" % i if i % 2 else None, b"v%d" % i * i if i % 3 else None, 1_600_000_000_000 + i)
        for i in range(8)
    ]
    buf = _build_legacy(peer, builder_cls, magic, compression, recs)
    out = K.decode_record_batches(buf)
    assert [(r.offset, r.key, r.value) for r in out] == [(i, k, v) for i, (k, v, _) in enumerate(recs)]
    if magic == 1:
        assert [(r.timestamp, r.timestamp_type) for r in out] == [(ts, 0) for *_, ts in recs]
    else:
        assert {(r.timestamp, r.timestamp_type) for r in out} == {(-1, -1)}
    if compression != "none":
        # as a broker stores it: the wrapper carries the absolute offset of its last message
        # (the offset is outside the CRC)
        stored = struct.pack(">q", 107 if magic == 1 else 7) + buf[8:]
        assert [r.offset for r in K.decode_record_batches(stored)] == (
            list(range(100, 108)) if magic == 1 else list(range(8))
        )


@pytest.mark.parametrize("compression", LEGACY_COMPRESSIONS)
@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("peer", PEERS)
def test_peer_reads_our_legacy_helper(peer, magic, compression):
    """encode_legacy_message_set writes real v0/v1 bytes: the peers' readers agree."""
    _, _, batch_cls, _, supports = _peer(peer)
    _need(supports, compression, peer)
    if (
        peer == "kafka-python"
        and magic == 0
        and compression == "lz4"
        and not importlib.util.find_spec("xxhash")
    ):
        unavailable("xxhash (kafka-python reads magic 0 lz4 with it)", "not installed (the test extra)")
    recs = [(b"k%d" % i, b"v%d" % i, 1_600_000_000_000 + i) for i in range(5)]
    buf = legacy.encode_legacy_message_set(recs, magic=magic, compression=compression, base_offset=30)
    got = []
    try:
        for entry in _legacy_entries(buf):
            batch = batch_cls(entry, magic)
            assert batch.validate_crc()
            got += [(r.offset, r.key, r.value, r.timestamp) for r in batch]
    except Exception as exc:  # aiokafka refuses to read magic 0 lz4 (KAFKA-3160): skipped only then
        if compression == "lz4" and magic == 0 and type(exc).__name__ == "UnsupportedCodecError":
            pytest.skip(f"{peer} does not read magic 0 lz4 ({exc})")
        raise
    expected_ts = [ts if magic == 1 else None for *_, ts in recs]
    assert [g[:3] for g in got] == [(30 + i, k, v) for i, (k, v, _) in enumerate(recs)]
    assert [g[3] for g in got] == expected_ts or [g[3] for g in got] == [-1] * len(recs)


def _has_pyarrow() -> bool:
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return False
    return True
