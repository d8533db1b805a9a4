"""The batch CRC32C folded with carry-less multiplies (_codec/crc32c.h) against the crc32c
package: the fold constants from first principles, the whole scheme in a pure-Python model, the
compiled fold on every length and alignment, and both decoders and the encoder with the fold on
and off (a corrupt batch still fails, encoded bytes are the same)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_core._env import env_flag

if env_flag("KAFKA_CORE_PURE_PYTHON"):
    pytest.skip("the folded CRC is the Cython codec's", allow_module_level=True)

from crc32c import crc32c

from kafka_core.codec import (
    decode_record_batches,
    decode_record_batches_columns,
    encode_record_batch,
    encode_record_batch_columns,
)
from kafka_core.codec._cython import batch as cbatch
from kafka_core.errors import KafkaCodecError

HEADER = Path(__file__).resolve().parents[3] / "_codec" / "crc32c.h"
POLY = 0x1EDC6F41  # CRC32C, normal form (x^32 implied)
REFLECTED = 0x82F63B78
M32, M64 = 0xFFFFFFFF, (1 << 64) - 1
FOLDS = cbatch._crc32c_fold(b"") is not None  # the CPU has AVX-512F and VPCLMULQDQ


def _table() -> list[int]:
    out = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ (REFLECTED if c & 1 else 0)
        out.append(c)
    return out


TABLE = _table()


def register_after(c: int, data: bytes) -> int:
    """The CRC register after ``data`` from ``c``, no inversions."""
    for b in data:
        c = (c >> 8) ^ TABLE[(c ^ b) & 0xFF]
    return c


def clmul(a: int, b: int) -> int:
    r = 0
    while b:
        if b & 1:
            r ^= a
        a <<= 1
        b >>= 1
    return r


def g(k: int) -> int:
    """What a 64-bit chunk followed by k zero bytes is multiplied by: x^(8k - 33) mod P, reflected."""
    r = 1
    for _ in range(8 * k - 33):
        r <<= 1
        if r >> 32:
            r ^= POLY | (1 << 32)
    return int(f"{r:032b}"[::-1], 2)


def fold(lane: int, d: int) -> int:
    """A 16-byte lane moved d bytes ahead."""
    return clmul(lane & M64, g(d + 8)) ^ clmul(lane >> 64, g(d))


def model(crc: int, data: bytes) -> int:
    """crc32c.h's scheme in Python: 256-byte blocks of 16 lanes, reduced as the header does."""
    c = ~crc & M32
    if len(data) < 256:
        return ~register_after(c, data) & M32
    first = bytearray(data[:256])
    first[:4] = (int.from_bytes(first[:4], "little") ^ c).to_bytes(4, "little")
    lanes = [int.from_bytes(first[16 * i : 16 * i + 16], "little") for i in range(16)]
    pos = 256
    while len(data) - pos >= 256:
        lanes = [
            fold(lanes[i], 256) ^ int.from_bytes(data[pos + 16 * i : pos + 16 * i + 16], "little")
            for i in range(16)
        ]
        pos += 256
    last = lanes[12:]
    for j, d in ((0, 192), (1, 128), (2, 64)):
        last = [last[i] ^ fold(lanes[4 * j + i], d) for i in range(4)]
    r = last[3] ^ fold(last[0], 48) ^ fold(last[1], 32) ^ fold(last[2], 16)
    return ~register_after(register_after(0, r.to_bytes(16, "little")), data[pos:]) & M32


def test_the_lane_constant_is_what_zero_extension_needs() -> None:
    rng = __import__("random").Random(5)
    for k in (8, 16, 24, 56, 72, 136, 264):
        for _ in range(4):
            v = rng.getrandbits(64)
            assert register_after(0, clmul(v, g(k)).to_bytes(16, "little")) == register_after(
                0, v.to_bytes(8, "little") + bytes(k)
            )


def test_the_header_holds_the_computed_constants() -> None:
    text = HEADER.read_text()
    pairs = [(int(a, 16), int(b, 16)) for a, b in re.findall(r"KC_K\((0x[0-9a-f]+)u, (0x[0-9a-f]+)u\)", text)]
    lanes = [
        (int(a, 16), int(b, 16))
        for a, b in re.findall(
            r"kc_fold128\(_mm512_extracti32x4_epi32\(a3, \d\), (0x[0-9a-f]+)u, (0x[0-9a-f]+)u\)", text
        )
    ]
    assert pairs == [(g(d + 8), g(d)) for d in (256, 192, 128, 64)]
    assert lanes == [(g(d + 8), g(d)) for d in (48, 32, 16)]


@pytest.mark.parametrize("n", [0, 1, 255, 256, 257, 511, 512, 513, 767, 1029])
def test_the_model_is_crc32c(n: int) -> None:
    data = os.urandom(n)
    for crc in (0, 0x12345678):
        assert model(crc, data) == crc32c(data, crc)


needs_fold = pytest.mark.skipif(not FOLDS, reason="this CPU has no AVX-512F/VPCLMULQDQ: the package is used")


@needs_fold
def test_every_length_and_alignment() -> None:
    data = os.urandom(2048 + 64)
    for n in range(0, 2048):
        for offset in (0, 1, 7) if n % 61 == 0 else (n % 64,):
            view = memoryview(data)[offset : offset + n]
            assert cbatch._crc32c_fold(view, 0) == crc32c(view), (n, offset)
    big = os.urandom((1 << 20) + 13)
    assert cbatch._crc32c_fold(big, 0xDEADBEEF) == crc32c(big, 0xDEADBEEF)


@needs_fold
@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=3000), st.integers(0, M32))
def test_fold_is_crc32c(data: bytes, crc: int) -> None:
    assert cbatch._crc32c_fold(data, crc) == crc32c(data, crc)


@pytest.fixture(params=[False, True], ids=["package", "fold"])
def folding(request: pytest.FixtureRequest) -> Iterator[bool]:
    if request.param and not FOLDS:
        pytest.skip("this CPU has no AVX-512F/VPCLMULQDQ")
    previous = cbatch._crc32c_folding(request.param)
    try:
        yield request.param
    finally:
        cbatch._crc32c_folding(previous)


def _batch(n: int) -> bytes:
    return bytes(
        encode_record_batch_columns([b"k%d" % i for i in range(n)], [os.urandom(100) for _ in range(n)])
    )


@pytest.mark.parametrize("n", [1, 3, 400])
def test_encoders_write_the_same_crc(folding: bool, n: int) -> None:
    data = _batch(n)
    assert int.from_bytes(data[17:21], "big") == crc32c(data[21:])
    records = [(b"k", b"v" * i) for i in range(n)]
    row = bytes(encode_record_batch(records, base_timestamp=1))
    assert int.from_bytes(row[17:21], "big") == crc32c(row[21:])


@pytest.mark.parametrize("n", [1, 400])
def test_a_corrupt_batch_fails_both_decoders(folding: bool, n: int) -> None:
    data = bytearray(_batch(n))
    assert len(decode_record_batches_columns(bytes(data))) == n
    assert len(decode_record_batches(bytes(data))) == n
    data[len(data) // 2 + 21] ^= 0x20
    for decode in (decode_record_batches_columns, decode_record_batches):
        with pytest.raises(KafkaCodecError, match="CRC mismatch"):
            decode(bytes(data))
