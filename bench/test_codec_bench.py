"""Codec microbenchmarks (pytest-benchmark): kafka_core vs aiokafka's Cython codec vs kafka-python.

Workload: one RecordBatch v2 of 1000 records, 16-byte keys, 100- or 1000-byte values.
Row decoders must touch key and value of every record (what a consumer does), and both sides
check the CRC unless the group says ``nocrc``. Compressed groups use aiokafka's levels for both
(gzip 9, lz4 9, zstd 3). Every benchmark checks its result once, so a wrong codec fails here.

    pytest bench/test_codec_bench.py                       # all
    KAFKA_CORE_PURE_PYTHON=1 pytest bench/test_codec_bench.py -k "ours or columns"  # the pure-Python twin
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from functools import cache
from typing import Any, cast

import pytest

from bench.common import make_keys, make_values

N = 1000
KEY_SIZE = 16
SIZES = (100, 1000)
TIMESTAMP = 1_700_000_000_000
ROW_IMPLS = ("ours", "aiokafka", "kafka-python")
CODECS = {"gzip": (1, 9), "snappy": (2, None), "lz4": (3, 9), "zstd": (4, 3)}  # name: (id, level)


# --------------------------------------------------------------------------- the contenders


def _ours() -> Any:
    """Our codec module: one that will not import fails the harness check, it is never skipped."""
    import kafka_core.codec as codec

    return codec


def _our_impl_name() -> str:
    try:
        import kafka_core.codec as codec
    except ImportError:
        return "unavailable"
    return str(codec.IMPLEMENTATION)


@cache
def data(size: int) -> tuple[list[bytes], list[bytes]]:
    # Compressible values so the compressed groups do real work; the uncompressed paths do not care.
    return make_keys(N, KEY_SIZE), make_values(N, size, compressible=True)


@cache
def columns(size: int) -> tuple[Any, Any]:
    import pyarrow as pa

    keys, values = data(size)
    return pa.array(keys, pa.binary()), pa.array(values, pa.binary())


def _aiokafka_encode(keys: list[bytes], values: list[bytes], codec_id: int = 0) -> bytearray:
    from aiokafka.record._crecords import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(2, codec_id, 0, -1, -1, -1, 1 << 30)
    append = builder.append
    for offset, (key, value) in enumerate(zip(keys, values, strict=True)):
        if append(offset, timestamp=TIMESTAMP, key=key, value=value, headers=[]) is None:
            raise AssertionError("aiokafka builder refused a record")
    return builder.build()


def _kafka_python_encode(keys: list[bytes], values: list[bytes], codec_id: int = 0) -> bytearray:
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(2, codec_id, 0, -1, -1, -1, 1 << 30)
    append = builder.append
    for offset, (key, value) in enumerate(zip(keys, values, strict=True)):
        if append(offset, TIMESTAMP, key, value, []) is None:
            raise AssertionError("kafka-python builder refused a record")
    return builder.build()


def _touch(records: Iterable[Any]) -> int:
    """What a consumer does at least: look at key and value of each record."""
    total = 0
    for record in records:
        if record.key is not None:
            total += len(record.value)
    return total


def _aiokafka_decode(buf: bytes, check_crc: bool = True) -> int:
    from aiokafka.record._crecords import DefaultRecordBatch

    batch = DefaultRecordBatch(buf)
    if check_crc and not batch.validate_crc():
        raise AssertionError("aiokafka: CRC mismatch")
    return _touch(batch)


def _kafka_python_decode(buf: bytes, check_crc: bool = True) -> int:
    from kafka.record.default_records import DefaultRecordBatch

    batch = DefaultRecordBatch(buf)
    if check_crc and not batch.validate_crc():
        raise AssertionError("kafka-python: CRC mismatch")
    return _touch(batch)


@cache
def reference_batch(size: int, codec_id: int = 0) -> bytes:
    """The batch every decoder reads: written by aiokafka, a peer, so it does not depend on us."""
    keys, values = data(size)
    return bytes(_aiokafka_encode(keys, values, codec_id))


def _decoded_pairs(buf: bytes) -> list[tuple[bytes | None, bytes | None]]:
    from aiokafka.record._crecords import DefaultRecordBatch

    batch = DefaultRecordBatch(buf)
    assert batch.validate_crc(), "CRC mismatch in an encoded batch"
    return [(r.key, r.value) for r in batch]


def _label(benchmark: Any, op: str, impl: str, size: int, nbytes: int, compression: str = "none") -> None:
    benchmark.group = f"{op} {size}B" + ("" if compression == "none" else f" {compression}")
    benchmark.extra_info.update(
        op=op,
        impl=impl,
        implementation=_our_impl_name() if impl == "ours" else impl,
        value_size=size,
        compression=compression,
        records=N,
        nbytes=nbytes,
    )


def _peer_encoder(impl: str, codec_id: int = 0) -> Callable[[list[bytes], list[bytes]], bytearray]:
    if impl == "aiokafka":
        return lambda keys, values: _aiokafka_encode(keys, values, codec_id)
    return lambda keys, values: _kafka_python_encode(keys, values, codec_id)


def _decoder(impl: str, check_crc: bool = True) -> Callable[[bytes], int]:
    if impl == "ours":
        codec = _ours()
        return lambda buf: _touch(codec.decode_record_batches(buf, check_crc=check_crc))
    if impl == "aiokafka":
        return lambda buf: _aiokafka_decode(buf, check_crc)
    return lambda buf: _kafka_python_decode(buf, check_crc)


# --------------------------------------------------------------------------- row paths


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("impl", ROW_IMPLS)
def test_encode(benchmark: Any, impl: str, size: int) -> None:
    keys, values = data(size)
    if impl == "ours":
        # Our API takes (key, value) pairs; building them is the caller's business, not timed.
        pairs = list(zip(keys, values, strict=True))
        codec = _ours()
        out = benchmark(lambda: codec.encode_record_batch(pairs, base_timestamp=TIMESTAMP))
    else:
        out = benchmark(_peer_encoder(impl), keys, values)
    _label(benchmark, "encode", impl, size, len(out))
    assert _decoded_pairs(bytes(out)) == list(zip(keys, values, strict=True))


@pytest.mark.parametrize("check_crc", [True, False], ids=["crc", "nocrc"])
@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("impl", ROW_IMPLS)
def test_decode(benchmark: Any, impl: str, size: int, check_crc: bool) -> None:
    if impl == "kafka-python" and not check_crc:
        pytest.skip("kafka-python is the pure-Python floor: one decode variant is enough")
    buf = reference_batch(size)
    decode = _decoder(impl, check_crc)
    total = benchmark(decode, buf)
    _label(benchmark, "decode" if check_crc else "decode-nocrc", impl, size, len(buf))
    assert total == N * size


# --------------------------------------------------------------------------- columnar paths


@pytest.mark.parametrize("size", SIZES)
def test_encode_columns(benchmark: Any, size: int) -> None:
    codec = _ours()
    keys, values = columns(size)
    codec.encode_record_batch_columns(keys, values, base_timestamp=TIMESTAMP)  # warm, as decode
    out = benchmark(codec.encode_record_batch_columns, keys, values, base_timestamp=TIMESTAMP)
    _label(benchmark, "encode-columns", "ours", size, len(out))
    assert _decoded_pairs(bytes(out)) == list(zip(*data(size), strict=True))


def _cpu_per_call(fn: Callable[[], Any], span: float = 0.1, spans: int = 3) -> float:
    """Process CPU seconds per call, every thread's (the decode helper's spinning included): the
    least over spans of about 0.1 s. Short spans would miss CPU another thread has used since
    the kernel last accounted it, which shows as a helper costing nothing."""
    fn()
    best = float("inf")
    for _ in range(spans):
        calls = 0
        wall = time.perf_counter()
        start = time.process_time()
        while time.perf_counter() - wall < span:
            fn()
            calls += 1
        best = min(best, (time.process_time() - start) / calls)
    return best


@pytest.mark.parametrize("helper", [False, True], ids=["default", "helper"])
@pytest.mark.parametrize("size", SIZES)
def test_decode_columns(benchmark: Any, size: int, helper: bool) -> None:
    """``default``: one thread; ``helper``: set_decode_helper(True), a helper thread scans a
    batch of 256 KiB or more while the CRC is checked (overlap.h). CPU time is measured too:
    with the helper it is not the wall time."""
    codec = _ours()
    buf = reference_batch(size)
    previous = codec.set_decode_helper(helper)
    try:
        # A first call outside the timing: it imports pyarrow, and pytest-benchmark sizes its
        # rounds from its first calls, so a slow first one left 5 rounds, a fragile median.
        codec.decode_record_batches_columns(buf)
        cols = benchmark(codec.decode_record_batches_columns, buf)
        cpu = _cpu_per_call(lambda: codec.decode_record_batches_columns(buf))
    finally:
        codec.set_decode_helper(previous)
    _label(benchmark, "decode-columns-helper" if helper else "decode-columns", "ours", size, len(buf))
    benchmark.extra_info["cpu_per_call"] = cpu
    keys, values = data(size)
    assert cols.values.to_pylist() == values
    assert cols.keys.to_pylist() == keys


# --------------------------------------------------------------------------- CRC32C and memory copy


def _batch_crc() -> Callable[[Any], int]:
    """The CRC32C our batch codec checks and writes: the Cython codec's fold (_codec/crc32c.h)
    where the CPU has it, else kafka_core.codec.crc (the crc32c package), as the codec does."""
    from kafka_core.codec.crc import crc32c

    try:
        from kafka_core.codec._cython import batch
    except ImportError:
        return crc32c
    if _our_impl_name() != "cython" or batch._crc32c_fold(b"") is None or not batch._crc32c_folding():
        return crc32c
    return cast(Callable[[Any], int], batch._crc32c_fold)


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("impl", ["ours", "aiokafka", "memcpy"])
def test_crc32c(benchmark: Any, impl: str, size: int) -> None:
    buf = reference_batch(size)
    if impl == "ours":
        result = benchmark(_batch_crc(), buf)
    elif impl == "aiokafka":
        from aiokafka.record._crecords.cutil import crc32c_cython

        result = benchmark(crc32c_cython, buf)
    else:
        # Memory-bandwidth reference: copy the same number of bytes into a ready buffer.
        dst = memoryview(bytearray(len(buf)))
        src = memoryview(buf)

        def copy() -> int:
            dst[:] = src
            return 0

        benchmark(copy)
        assert dst == src
        result = None
    _label(benchmark, "crc32c", impl, size, len(buf))
    if result is not None:
        import crc32c as reference

        assert result == reference.crc32c(buf)


# --------------------------------------------------------------------------- compressed


@pytest.mark.parametrize("compression", list(CODECS))
@pytest.mark.parametrize("impl", ["ours", "aiokafka"])
def test_encode_compressed(benchmark: Any, impl: str, compression: str) -> None:
    size = 100
    codec_id, level = CODECS[compression]
    keys, values = data(size)
    if impl == "ours":
        codec = _ours()
        pairs = list(zip(keys, values, strict=True))
        out = benchmark(
            lambda: codec.encode_record_batch(
                pairs, base_timestamp=TIMESTAMP, compression=compression, compression_level=level
            )
        )
    else:
        out = benchmark(_peer_encoder(impl, codec_id), keys, values)
    _label(benchmark, "encode", impl, size, len(out), compression)
    assert (bytes(out)[22] & 0x07) == codec_id, "the batch was not compressed"  # attributes byte
    assert _decoded_pairs(bytes(out)) == list(zip(keys, values, strict=True))


@pytest.mark.parametrize("compression", list(CODECS))
@pytest.mark.parametrize("impl", ["ours", "aiokafka"])
def test_decode_compressed(benchmark: Any, impl: str, compression: str) -> None:
    size = 100
    codec_id, _level = CODECS[compression]
    buf = reference_batch(size, codec_id)
    assert (buf[22] & 0x07) == codec_id
    total = benchmark(_decoder(impl), buf)
    _label(benchmark, "decode", impl, size, len(buf), compression)
    assert total == N * size
