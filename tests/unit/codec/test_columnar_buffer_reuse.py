"""Columnar decode recycles large column buffers (see _codec/bufpool.h): a buffer must never be
handed out again while an array still uses it, whichever thread releases the array."""

from __future__ import annotations

import threading

import pytest
from prerequisites import need_module

pa = need_module("pyarrow")

from kafka_core.codec import decode_record_batches_columns, encode_record_batch  # noqa: E402


def _batch(fill: bytes, size: int, count: int = 300) -> bytes:
    return bytes(encode_record_batch([(fill * 16, fill * size) for _ in range(count)], base_timestamp=1))


@pytest.mark.parametrize("zero_copy", [False, True])
def test_live_columns_are_never_overwritten_by_later_decodes(zero_copy: bool) -> None:
    kept = decode_record_batches_columns(_batch(b"a", 1000), zero_copy=zero_copy).to_arrow()
    for i in range(50):
        fill = bytes([ord("b") + i % 20])
        other = decode_record_batches_columns(_batch(fill, 1000 + 37 * i), zero_copy=zero_copy).to_arrow()
        assert set(other.column("value").to_pylist()) == {fill * (1000 + 37 * i)}
        del other
    assert set(kept.column("value").to_pylist()) == {b"a" * 1000}
    assert set(kept.column("key").to_pylist()) == {b"a" * 16}


def test_arrays_released_on_other_threads_keep_later_results_intact() -> None:
    errors: list[BaseException] = []
    batches = {bytes([c]): _batch(bytes([c]), 700 + c) for c in b"cdefgh"}

    def work(fill: bytes) -> None:
        try:
            for _ in range(40):
                got = decode_record_batches_columns(batches[fill]).to_arrow()
                assert set(got.column("value").to_pylist()) == {fill * (700 + fill[0])}
                del got  # released here, on this thread
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(fill,)) for fill in batches]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
