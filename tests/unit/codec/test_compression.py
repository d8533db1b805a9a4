"""kafka_core.codec.compression: framing, determinism, bounded decompression, bad frames."""

from __future__ import annotations

import gzip
import os
import struct
import zlib

import cramjam
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafka_core.codec import compression as C
from kafka_core.errors import KafkaCodecError

CODECS = [C.CODEC_GZIP, C.CODEC_SNAPPY, C.CODEC_LZ4, C.CODEC_ZSTD]
NAMES = {C.CODEC_GZIP: "gzip", C.CODEC_SNAPPY: "snappy", C.CODEC_LZ4: "lz4", C.CODEC_ZSTD: "zstd"}

SAMPLES = [
    b"",
    b"x",
    b"hello kafka " * 1000,
    os.urandom(70_000),  # incompressible, several blocks
    bytes(range(256)) * 600,  # > 128 KiB
]

fast = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def test_codec_ids_and_names():
    assert C.CODEC_NAMES == ("none", "gzip", "snappy", "lz4", "zstd")
    for i, name in enumerate(C.CODEC_NAMES):
        assert C.codec_id(name) == i
        assert C.codec_id(i) == i
        assert C.codec_name(i) == name
    assert C.codec_id("GZIP") == 1
    for bad in ("lzma", "", None, 5, -1, True, 1.0):
        with pytest.raises(KafkaCodecError):
            C.codec_id(bad)
    with pytest.raises(KafkaCodecError):
        C.codec_name(7)


@pytest.mark.parametrize("cid", [0, *CODECS])
@pytest.mark.parametrize("data", SAMPLES, ids=lambda d: f"{len(d)}B")
def test_round_trip_and_determinism(cid, data):
    packed = C.compress(cid, data)
    assert isinstance(packed, bytes)
    assert C.compress(cid, data) == packed
    assert C.decompress(cid, packed) == data
    # bytes-like inputs
    assert C.compress(cid, bytearray(data)) == packed
    assert C.compress(cid, memoryview(data)) == packed
    assert C.decompress(cid, bytearray(packed)) == data
    assert C.decompress(cid, memoryview(packed)) == data


@fast
@given(data=st.binary(max_size=5000), cid=st.sampled_from(CODECS))
def test_round_trip_property(data, cid):
    assert C.decompress(cid, C.compress(cid, data)) == data


@pytest.mark.parametrize(
    ("cid", "levels"),
    [(C.CODEC_GZIP, [0, 1, 6, 9]), (C.CODEC_ZSTD, [-5, 1, 3, 19]), (C.CODEC_LZ4, [1, 9, 12])],
)
def test_levels(cid, levels):
    data = b"some text that compresses, some text that compresses " * 500
    for level in levels:
        packed = C.compress(cid, data, level)
        assert C.compress(cid, data, level) == packed
        assert C.decompress(cid, packed) == data


def test_default_levels():
    data = b"abcabcabd" * 3000
    assert C.compress(C.CODEC_GZIP, data) == C.compress(C.CODEC_GZIP, data, 6)
    assert C.compress(C.CODEC_ZSTD, data) == C.compress(C.CODEC_ZSTD, data, 3)


@pytest.mark.parametrize(("cid", "level"), [(1, 10), (1, -1), (3, 0), (3, 13), (4, 23), (1, "6"), (4, 2.5)])
def test_bad_levels(cid, level):
    with pytest.raises(KafkaCodecError, match=NAMES[cid]):
        C.compress(cid, b"data", level)


def test_snappy_ignores_level():
    assert C.compress(C.CODEC_SNAPPY, b"abc" * 100, 5) == C.compress(C.CODEC_SNAPPY, b"abc" * 100)


def test_unknown_codec_id():
    for cid in (5, 6, 7, -1):
        with pytest.raises(KafkaCodecError):
            C.compress(cid, b"x")
        with pytest.raises(KafkaCodecError):
            C.decompress(cid, b"x")


# ---------------------------------------------------------------------------------------- gzip
def test_gzip_header_is_deterministic_java_like():
    packed = C.compress(C.CODEC_GZIP, b"payload" * 100)
    assert packed[:3] == b"\x1f\x8b\x08"  # magic, deflate
    assert packed[3] == 0  # no flags (no name, no comment)
    assert packed[4:8] == b"\x00\x00\x00\x00"  # mtime 0
    assert packed[9] == 255  # OS unknown
    assert gzip.decompress(packed) == b"payload" * 100


def test_gzip_reads_concatenated_members_and_stdlib_output():
    a, b = b"first member " * 50, b"second member " * 70
    assert C.decompress(C.CODEC_GZIP, gzip.compress(a) + gzip.compress(b, mtime=123)) == a + b
    assert C.decompress(C.CODEC_GZIP, C.compress(C.CODEC_GZIP, a) + C.compress(C.CODEC_GZIP, b)) == a + b


def test_gzip_bounded_streaming_path():
    data = os.urandom(2000) * 20  # 40 KB
    packed = gzip.compress(data)
    # a cap small enough that the input's worst-case expansion could exceed it: streaming path
    cap = len(packed) * 500
    assert cap < len(packed) * 1032
    assert C.decompress(C.CODEC_GZIP, packed, max_size=max(cap, len(data))) == data
    assert C.decompress(C.CODEC_GZIP, packed + packed, max_size=2 * len(data) + len(packed) * 2) == data * 2
    with pytest.raises(KafkaCodecError, match="gzip"):
        C.decompress(C.CODEC_GZIP, packed, max_size=len(data) - 1)


def test_gzip_bomb_is_capped():
    bomb = gzip.compress(b"\x00" * (8 << 20))  # ~8 KB input, 8 MiB output
    with pytest.raises(KafkaCodecError, match="gzip"):
        C.decompress(C.CODEC_GZIP, bomb, max_size=1 << 20)
    assert len(C.decompress(C.CODEC_GZIP, bomb)) == 8 << 20


@pytest.mark.parametrize(
    "garbage",
    [
        b"",
        b"\x1f\x8b",
        b"not gzip at all",
        gzip.compress(b"abc", mtime=0)[:-3],
        gzip.compress(b"abc", mtime=0) + b"junk",
    ],
    ids=["empty", "magic-only", "not-gzip", "truncated", "trailing-junk"],
)
def test_gzip_bad_frames(garbage):
    with pytest.raises(KafkaCodecError, match="gzip"):
        C.decompress(C.CODEC_GZIP, garbage)


def test_gzip_bad_frames_streaming_path():
    packed = gzip.compress(os.urandom(3000))
    for bad in (packed[:-5], packed + b"junk", packed[:10] + b"\xff" * 20):
        with pytest.raises(KafkaCodecError, match="gzip"):
            C.decompress(C.CODEC_GZIP, bad, max_size=len(packed) * 10)


# -------------------------------------------------------------------------------------- snappy
def _xerial_blocks(packed: bytes) -> list[bytes]:
    assert packed[:8] == b"\x82SNAPPY\x00"
    assert struct.unpack(">ii", packed[8:16]) == (1, 1)
    pos, blocks = 16, []
    while pos < len(packed):
        (n,) = struct.unpack_from(">i", packed, pos)
        blocks.append(packed[pos + 4 : pos + 4 + n])
        pos += 4 + n
    assert pos == len(packed)
    return blocks


def test_snappy_writes_xerial_framing():
    data = os.urandom(100 * 1024)
    blocks = _xerial_blocks(C.compress(C.CODEC_SNAPPY, data))
    assert len(blocks) == 4
    raw = [bytes(cramjam.snappy.decompress_raw(b)) for b in blocks]
    assert [len(r) for r in raw] == [32768, 32768, 32768, 100 * 1024 - 3 * 32768]
    assert b"".join(raw) == data
    assert _xerial_blocks(C.compress(C.CODEC_SNAPPY, b"")) == []


def test_snappy_reads_raw_and_foreign_xerial():
    data = b"librdkafka writes raw snappy " * 300
    assert C.decompress(C.CODEC_SNAPPY, bytes(cramjam.snappy.compress_raw(data))) == data
    # a xerial stream with unequal blocks, as another writer might produce
    parts = [data[:1000], data[1000:5000], data[5000:]]
    framed = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    for p in parts:
        block = bytes(cramjam.snappy.compress_raw(p))
        framed += struct.pack(">i", len(block)) + block
    assert C.decompress(C.CODEC_SNAPPY, framed) == data
    assert C.decompress(C.CODEC_SNAPPY, b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)) == b""


def test_snappy_forged_length_does_not_allocate():
    # preamble claims 4 GiB; cramjam alone would abort the process trying to allocate it
    forged = b"\xff\xff\xff\xff\x0f" + b"\x00" * 10
    with pytest.raises(KafkaCodecError, match="snappy"):
        C.decompress(C.CODEC_SNAPPY, forged)
    # plausible-looking but more than the input could expand to
    forged = b"\x80\x80\x80\x01" + b"\x00" * 10  # 2 MiB from 14 bytes
    with pytest.raises(KafkaCodecError, match="snappy"):
        C.decompress(C.CODEC_SNAPPY, forged)
    framed = b"\x82SNAPPY\x00" + struct.pack(">iii", 1, 1, 15) + b"\xff\xff\xff\xff\x0f" + b"\x00" * 10
    with pytest.raises(KafkaCodecError, match="snappy"):
        C.decompress(C.CODEC_SNAPPY, framed)


def test_snappy_cap():
    data = b"\x00" * 100_000
    with pytest.raises(KafkaCodecError, match="snappy"):
        C.decompress(C.CODEC_SNAPPY, C.compress(C.CODEC_SNAPPY, data), max_size=50_000)
    assert C.decompress(C.CODEC_SNAPPY, C.compress(C.CODEC_SNAPPY, data), max_size=100_000) == data


@pytest.mark.parametrize(
    "garbage",
    [
        b"",
        b"\x05abc",
        b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1) + b"\x00\x00",  # truncated block length
        b"\x82SNAPPY\x00" + struct.pack(">iii", 1, 1, 100) + b"abc",  # block past the end
        b"\x82SNAPPY\x00" + struct.pack(">iii", 1, 1, -4) + b"abcd",
        b"\x82SNAPPY\x00" + struct.pack(">iii", 1, 1, 0),
    ],
)
def test_snappy_bad_frames(garbage):
    with pytest.raises(KafkaCodecError, match="snappy"):
        C.decompress(C.CODEC_SNAPPY, garbage)


# ----------------------------------------------------------------------------------------- lz4
def _lz4_blocks(packed: bytes) -> tuple[bytes, list[tuple[bool, bytes]]]:
    assert packed[:4] == b"\x04\x22\x4d\x18"
    header = packed[4:7]
    pos, blocks = 7, []
    while True:
        (word,) = struct.unpack_from("<I", packed, pos)
        pos += 4
        if word == 0:
            break
        size = word & 0x7FFFFFFF
        blocks.append((bool(word >> 31), packed[pos : pos + size]))
        pos += size
    assert pos == len(packed)
    return header, blocks


def test_lz4_writes_java_compatible_frames():
    data = b"independent blocks " * 20_000  # ~380 KB: several 64 KiB blocks
    header, blocks = _lz4_blocks(C.compress(C.CODEC_LZ4, data))
    flg, bd, hc = header
    assert flg == 0x60  # version 01, block independence, no checksums, no content size
    assert bd == 0x40  # 64 KiB blocks
    assert hc == (C.xxh32(bytes((flg, bd))) >> 8) & 0xFF
    # every block decompresses alone (Java's KafkaLZ4BlockInputStream needs that)
    assert len(blocks) == -(-len(data) // 65536)
    for i, (stored, block) in enumerate(blocks):
        chunk = data[i * 65536 : (i + 1) * 65536]
        alone = block if stored else bytes(cramjam.lz4.decompress_block(block, output_len=65536))
        assert alone[: len(chunk)] == chunk
    assert bytes(cramjam.lz4.decompress(C.compress(C.CODEC_LZ4, data))) == data


def test_lz4_incompressible_blocks_are_stored():
    data = os.urandom(100_000)
    _, blocks = _lz4_blocks(C.compress(C.CODEC_LZ4, data))
    assert all(stored for stored, _ in blocks)
    assert b"".join(b for _, b in blocks) == data


def test_lz4_reads_foreign_frames():
    data = b"linked blocks with checksums " * 10_000
    foreign = bytes(cramjam.lz4.compress(data))  # linked blocks, block + content checksums
    assert C.decompress(C.CODEC_LZ4, foreign) == data
    skippable = struct.pack("<II", 0x184D2A51, 3) + b"abc"
    assert C.decompress(C.CODEC_LZ4, skippable + foreign + foreign) == data + data


def _lz4_frame_with_content_size(data: bytes, declared: int) -> bytes:
    flg, bd = 0x68, 0x40  # independence + content size
    desc = bytes((flg, bd)) + struct.pack("<Q", declared)
    hc = (C.xxh32(desc) >> 8) & 0xFF
    return (
        b"\x04\x22\x4d\x18"
        + desc
        + bytes((hc,))
        + struct.pack("<I", len(data) | 0x80000000)
        + data
        + b"\0\0\0\0"
    )


def test_lz4_content_size():
    assert C.decompress(C.CODEC_LZ4, _lz4_frame_with_content_size(b"abcdef", 6)) == b"abcdef"
    with pytest.raises(KafkaCodecError, match="lz4"):  # forged: more than the blocks can hold
        C.decompress(C.CODEC_LZ4, _lz4_frame_with_content_size(b"abcdef", 1 << 40))


def test_lz4_cap():
    data = b"\x00" * 300_000
    with pytest.raises(KafkaCodecError, match="lz4"):
        C.decompress(C.CODEC_LZ4, C.compress(C.CODEC_LZ4, data), max_size=100_000)


def test_lz4_legacy_broken_header_checksum():
    data = b"kafka 0.8 lz4 " * 100
    good = C.compress(C.CODEC_LZ4, data)
    broken = bytearray(good)
    broken[6] = (C.xxh32(bytes(broken[0:6])) >> 8) & 0xFF
    assert bytes(broken) != good
    with pytest.raises(KafkaCodecError, match="lz4"):
        C.decompress(C.CODEC_LZ4, bytes(broken))
    assert C.decompress_lz4_legacy(bytes(broken)) == data
    assert C.decompress_lz4_legacy(good) == data
    with pytest.raises(KafkaCodecError, match="lz4"):
        C.decompress_lz4_legacy(good[:7] + b"\xff\xff\xff\x7f")


@pytest.mark.parametrize(
    "garbage",
    [
        b"",
        b"\x04\x22\x4d",
        b"\x04\x22\x4d\x18\x60\x40",
        b"\x04\x22\x4d\x18\x60\x40\x00",  # wrong header checksum
        b"\x00\x22\x4d\x18\x60\x40\x82\x00\x00\x00\x00",  # bad magic
        b"\x04\x22\x4d\x18\xa0\x40\x82\x00\x00\x00\x00",  # version 2
        b"\x04\x22\x4d\x18\x60\x10\x82\x00\x00\x00\x00",  # block size code 1
        C.compress(C.CODEC_LZ4, b"abc" * 1000)[:-4],  # no end mark
        C.compress(C.CODEC_LZ4, b"abc" * 1000)[:12],
    ],
)
def test_lz4_bad_frames(garbage):
    with pytest.raises(KafkaCodecError, match="lz4"):
        C.decompress(C.CODEC_LZ4, garbage)


def test_lz4_corrupt_block_content():
    packed = bytearray(C.compress(C.CODEC_LZ4, b"abcdefgh" * 1000))
    packed[11:19] = b"\xff" * 8  # the first token now claims literals running past the block
    with pytest.raises(KafkaCodecError, match="lz4"):
        C.decompress(C.CODEC_LZ4, bytes(packed))


# ---------------------------------------------------------------------------------------- zstd
def test_zstd_standard_frames():
    data = b"zstd frame " * 5000
    packed = C.compress(C.CODEC_ZSTD, data)
    assert packed[:4] == b"\x28\xb5\x2f\xfd"
    assert bytes(cramjam.zstd.decompress(packed)) == data
    foreign = bytes(cramjam.zstd.compress(data, level=19))
    skippable = struct.pack("<II", 0x184D2A50, 2) + b"hi"
    assert C.decompress(C.CODEC_ZSTD, foreign + skippable + packed) == data + data


def _zstd_raw_frame(content: bytes, declared: int | None) -> bytes:
    # no content size (a window descriptor instead), or single segment with an 8-byte size
    header = bytes((0x00, 0x58)) if declared is None else bytes((0xE0,)) + struct.pack("<Q", declared)
    block = ((len(content) << 3) | 1).to_bytes(3, "little") + content  # last, raw
    return b"\x28\xb5\x2f\xfd" + header + block


def test_zstd_forged_content_size():
    assert C.decompress(C.CODEC_ZSTD, _zstd_raw_frame(b"abc", None)) == b"abc"
    assert C.decompress(C.CODEC_ZSTD, _zstd_raw_frame(b"abc", 3)) == b"abc"
    for declared in (4, 1 << 29, 1 << 40, (1 << 64) - 1):
        with pytest.raises(KafkaCodecError, match="zstd"):
            C.decompress(C.CODEC_ZSTD, _zstd_raw_frame(b"abc", declared))


def test_zstd_rle_bomb_is_capped():
    # RLE blocks: 4 bytes each expand to 128 KiB; 200 of them = 25 MiB from 800 bytes
    block = ((128 << 10) << 3 | (1 << 1)).to_bytes(3, "little") + b"z"
    last = ((128 << 10) << 3 | (1 << 1) | 1).to_bytes(3, "little") + b"z"
    frame = b"\x28\xb5\x2f\xfd" + bytes((0x00, 0x58)) + block * 199 + last
    with pytest.raises(KafkaCodecError, match="zstd"):
        C.decompress(C.CODEC_ZSTD, frame, max_size=1 << 20)
    assert C.decompress(C.CODEC_ZSTD, frame) == b"z" * (200 * (128 << 10))


@pytest.mark.parametrize(
    "garbage",
    [
        b"",
        b"\x28\xb5\x2f",
        b"\x28\xb5\x2f\xfd",
        b"\x28\xb5\x2f\xfd\x08\x58\x01\x00\x00",  # reserved bit
        b"\x28\xb5\x2f\xfd\x00\x58\x07\x00\x00",  # reserved block type
        b"\x28\xb5\x2f\xfd\x00\x58\x19\x00\x00ab",  # raw block past the end
        b"\xff\xb5\x2f\xfd\x00\x58\x01\x00\x00",  # bad magic
        b"\x28\xb5\x2f\xfd\x00\x58\x00\x00\x00",  # missing last block
        C.compress(C.CODEC_ZSTD, os.urandom(1000))[:-10],
    ],
)
def test_zstd_bad_frames(garbage):
    with pytest.raises(KafkaCodecError, match="zstd"):
        C.decompress(C.CODEC_ZSTD, garbage)


def test_zstd_corrupt_compressed_block():
    packed = bytearray(C.compress(C.CODEC_ZSTD, b"0123456789abcdef" * 2000))
    for i in range(len(packed) // 2, len(packed) - 4):
        packed[i] ^= 0x5A
    with pytest.raises(KafkaCodecError, match="zstd"):
        C.decompress(C.CODEC_ZSTD, bytes(packed))


# ------------------------------------------------------------------------------------ fuzzing
@settings(max_examples=300, deadline=None)
@given(cid=st.sampled_from(CODECS), data=st.binary(max_size=300))
def test_random_bytes_never_escape(cid, data):
    try:
        C.decompress(cid, data, max_size=1 << 22)
    except KafkaCodecError as exc:
        assert NAMES[cid] in str(exc)


@settings(max_examples=300, deadline=None)
@given(
    cid=st.sampled_from(CODECS),
    sample=st.sampled_from([b"abc" * 300, bytes(range(256)) * 3, b""]),
    edits=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), min_size=1, max_size=4),
    cut=st.none() | st.integers(0, 10_000),
)
def test_mutated_frames_never_escape(cid, sample, edits, cut):
    packed = bytearray(C.compress(cid, sample))
    for pos, byte in edits:
        packed[pos % len(packed)] = byte
    if cut is not None:
        del packed[cut % (len(packed) + 1) :]
    try:
        C.decompress(cid, bytes(packed), max_size=1 << 22)
    except KafkaCodecError as exc:
        assert NAMES[cid] in str(exc)


def test_xxh32_vectors():
    assert C.xxh32(b"") == 0x02CC5D05
    assert C.xxh32(b"a") == 0x550D7456
    assert C.xxh32(b"abc") == 0x32D153FF
    assert C.xxh32(b"Nobody inspects the spammish repetition") == 0xE2293B2F
    assert C.xxh32(b"", seed=1) != C.xxh32(b"")


def test_zlib_interop_of_gzip_payload():
    packed = C.compress(C.CODEC_GZIP, b"z" * 1000, 9)
    assert zlib.decompress(packed, 31) == b"z" * 1000
