"""Compression codecs of Kafka record batches, through ``cramjam``; shared by both codec twins.

``compress(codec_id, data, level)`` / ``decompress(codec_id, data)`` with the codec ids of the
batch attributes (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd). What goes on the wire is what the
Java client writes and reads:

* gzip: one gzip member (cramjam writes mtime 0, OS 255: deterministic); reading accepts
  concatenated members.
* snappy: the xerial framing (``\\x82SNAPPY\\x00``, version 1, compatible 1, then blocks of
  ``int32 BE length`` + raw snappy of at most 32 KiB input each); reading accepts xerial-framed
  and plain raw snappy (librdkafka writes raw).
* lz4: the LZ4 frame format, written here as Java's ``KafkaLZ4BlockOutputStream`` does
  (independent 64 KiB blocks, no checksums), since Java's reader cannot follow linked blocks;
  reading accepts any LZ4 frame (linked blocks, checksums, content size, skippable frames).
* zstd: standard zstd frames.

Decompression is bounded: before decompressing, the frame structure is walked to bound the
output by what the frame itself says (block counts and sizes, declared lengths), so a forged
length can never make us (or cramjam, which aborts the process on a failed allocation)
allocate beyond the input's plausible expansion; anything that could exceed
``MAX_DECOMPRESSED_SIZE`` (1 GiB) is a :class:`KafkaCodecError`. A bad frame of any codec is a
:class:`KafkaCodecError` naming the codec.
"""

from __future__ import annotations

import struct
import zlib

import cramjam

from kafka_core._typing import Buffer
from kafka_core.errors import KafkaCodecError

__all__ = [
    "CODEC_GZIP",
    "CODEC_IDS",
    "CODEC_LZ4",
    "CODEC_NAMES",
    "CODEC_NONE",
    "CODEC_SNAPPY",
    "CODEC_ZSTD",
    "MAX_DECOMPRESSED_SIZE",
    "codec_id",
    "codec_name",
    "compress",
    "decompress",
    "decompress_lz4_legacy",
    "xxh32",
]

CODEC_NONE = 0
CODEC_GZIP = 1
CODEC_SNAPPY = 2
CODEC_LZ4 = 3
CODEC_ZSTD = 4

CODEC_NAMES: tuple[str, ...] = ("none", "gzip", "snappy", "lz4", "zstd")
CODEC_IDS: dict[str, int] = {name: i for i, name in enumerate(CODEC_NAMES)}

#: Largest decompressed payload we accept (and the most we ever allocate for one).
MAX_DECOMPRESSED_SIZE = 1 << 30

GZIP_DEFAULT_LEVEL = 6
ZSTD_DEFAULT_LEVEL = 3  # zstd's own default (ZSTD_CLEVEL_DEFAULT), as the Java client uses

_U32_LE = struct.Struct("<I")
_U64_LE = struct.Struct("<Q")
_I32_BE = struct.Struct(">i")


def codec_id(compression: str | int) -> int:
    """Codec id of a compression name (``"none"``, ``"gzip"``, ``"snappy"``, ``"lz4"``,
    ``"zstd"``) or of an id 0..4; anything else is a :class:`KafkaCodecError`."""
    if isinstance(compression, str):
        cid = CODEC_IDS.get(compression)
        if cid is None:
            cid = CODEC_IDS.get(compression.lower())
        if cid is None:
            raise KafkaCodecError(
                f"unknown compression {compression!r} (expected one of {', '.join(CODEC_NAMES)})"
            )
        return cid
    if isinstance(compression, int) and not isinstance(compression, bool) and 0 <= compression <= 4:
        return compression
    raise KafkaCodecError(f"unknown compression {compression!r} (expected one of {', '.join(CODEC_NAMES)})")


def codec_name(cid: int) -> str:
    if isinstance(cid, int) and 0 <= cid < len(CODEC_NAMES):
        return CODEC_NAMES[cid]
    raise KafkaCodecError(f"unknown compression id {cid!r}")


# --------------------------------------------------------------------------------------------
# xxHash32 (LZ4 frame header checksum). Only ever run over a few header bytes.
# --------------------------------------------------------------------------------------------
_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32(data: Buffer, seed: int = 0) -> int:
    """xxHash32 of ``data`` (pure Python; meant for short inputs such as frame headers)."""
    b = bytes(data)
    n = len(b)
    pos = 0
    if n >= 16:
        v1 = (seed + _P1 + _P2) & _M32
        v2 = (seed + _P2) & _M32
        v3 = seed & _M32
        v4 = (seed - _P1) & _M32
        while pos + 16 <= n:
            a, b2, c, d = struct.unpack_from("<IIII", b, pos)
            v1 = (_rotl((v1 + a * _P2) & _M32, 13) * _P1) & _M32
            v2 = (_rotl((v2 + b2 * _P2) & _M32, 13) * _P1) & _M32
            v3 = (_rotl((v3 + c * _P2) & _M32, 13) * _P1) & _M32
            v4 = (_rotl((v4 + d * _P2) & _M32, 13) * _P1) & _M32
            pos += 16
        h = (_rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)) & _M32
    else:
        h = (seed + _P5) & _M32
    h = (h + n) & _M32
    while pos + 4 <= n:
        (k,) = _U32_LE.unpack_from(b, pos)
        h = (_rotl((h + k * _P3) & _M32, 17) * _P4) & _M32
        pos += 4
    while pos < n:
        h = (_rotl((h + b[pos] * _P5) & _M32, 11) * _P1) & _M32
        pos += 1
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    h ^= h >> 16
    return h


# --------------------------------------------------------------------------------------------
# compress
# --------------------------------------------------------------------------------------------
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024

_LZ4_MAGIC = 0x184D2204
_LZ4_BLOCK = 64 * 1024
# FLG: version 01, block independence; BD: 64 KiB blocks. HC = (xxh32(FLG BD) >> 8) & 0xFF.
_LZ4_FLG_BD = bytes((0x60, 0x40))
_LZ4_HEADER = _U32_LE.pack(_LZ4_MAGIC) + _LZ4_FLG_BD + bytes(((xxh32(_LZ4_FLG_BD) >> 8) & 0xFF,))
_LZ4_END = b"\x00\x00\x00\x00"


def _check_level(codec: str, level: int | None, lo: int, hi: int) -> None:
    if level is None:
        return
    if not isinstance(level, int) or isinstance(level, bool) or not lo <= level <= hi:
        raise KafkaCodecError(f"{codec}: compression level {level!r} not in {lo}..{hi}")


def _snappy_compress(data: Buffer) -> bytes:
    view = memoryview(data).cast("B") if not isinstance(data, bytes) else memoryview(data)
    n = len(view)
    out = bytearray(_XERIAL_HEADER)
    for start in range(0, n, _XERIAL_BLOCK):
        block = cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK])
        out += _I32_BE.pack(len(block))
        out += block
    return bytes(out)


def _lz4_compress(data: Buffer, level: int | None) -> bytes:
    view = memoryview(data).cast("B") if not isinstance(data, bytes) else memoryview(data)
    n = len(view)
    if level is None:
        kwargs: dict = {"mode": "default"}
    else:
        kwargs = {"mode": "high_compression", "compression": level}
    out = bytearray(_LZ4_HEADER)
    for start in range(0, n, _LZ4_BLOCK):
        chunk = view[start : start + _LZ4_BLOCK]
        block = cramjam.lz4.compress_block(chunk, store_size=False, **kwargs)
        if len(block) < len(chunk):
            out += _U32_LE.pack(len(block))
            out += block
        else:  # incompressible: stored, flagged by the high bit
            out += _U32_LE.pack(len(chunk) | 0x80000000)
            out += chunk
    out += _LZ4_END
    return bytes(out)


def compress(codec_id: int, data: Buffer, level: int | None = None) -> bytes:
    """Compress ``data`` with codec ``codec_id`` (1..4; 0 returns the bytes unchanged).

    ``level`` None means the codec's default (gzip 6, zstd 3, lz4 fast mode); snappy has no
    levels and ignores it. Deterministic: the same input and level give the same bytes."""
    try:
        if codec_id == CODEC_GZIP:
            _check_level("gzip", level, 0, 9)
            return bytes(cramjam.gzip.compress(data, level=GZIP_DEFAULT_LEVEL if level is None else level))
        if codec_id == CODEC_SNAPPY:
            return _snappy_compress(data)
        if codec_id == CODEC_LZ4:
            _check_level("lz4", level, 1, 12)
            return _lz4_compress(data, level)
        if codec_id == CODEC_ZSTD:
            _check_level("zstd", level, -131072, 22)
            return bytes(cramjam.zstd.compress(data, level=ZSTD_DEFAULT_LEVEL if level is None else level))
        if codec_id == CODEC_NONE:
            return bytes(data)
    except KafkaCodecError:
        raise
    except Exception as exc:
        raise KafkaCodecError(f"{codec_name(codec_id)}: compression failed ({exc})") from None
    raise KafkaCodecError(f"unknown compression id {codec_id!r}")


# --------------------------------------------------------------------------------------------
# decompress
# --------------------------------------------------------------------------------------------
def _too_big(codec: str, size: int, max_size: int) -> KafkaCodecError:
    return KafkaCodecError(
        f"{codec}: decompressed size could reach {size} bytes, more than the {max_size}-byte limit"
    )


# Deflate cannot expand by more than 1032:1; below this, the whole output fits the cap.
_DEFLATE_MAX_RATIO = 1032


def _gzip_decompress(data: Buffer, max_size: int) -> bytes:
    n = len(data)
    if n * _DEFLATE_MAX_RATIO + 1024 <= max_size:
        return bytes(cramjam.gzip.decompress(data))
    # Large input: stream with zlib so that the output can never pass the cap.
    parts = []
    total = 0
    rest = bytes(data)
    while True:
        d = zlib.decompressobj(31)
        chunk = d.decompress(rest, max_size - total + 1)
        total += len(chunk)
        if total > max_size or d.unconsumed_tail:
            raise _too_big("gzip", total, max_size)
        parts.append(chunk)
        if not d.eof:
            raise KafkaCodecError("gzip: truncated stream")
        rest = d.unused_data
        if not rest:
            return b"".join(parts)


def _uvarint32(view: memoryview, pos: int) -> tuple[int, int]:
    result = shift = 0
    for i in range(5):
        if pos + i >= len(view):
            raise KafkaCodecError("snappy: truncated length preamble")
        byte = view[pos + i]
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            if result >> 32:
                raise KafkaCodecError("snappy: length preamble overflows 32 bits")
            return result, pos + i + 1
        shift += 7
    raise KafkaCodecError("snappy: length preamble longer than 5 bytes")


# A snappy copy element of 3 bytes yields at most 64 bytes: no stream expands by more than 64/3.
_SNAPPY_MAX_RATIO = 22


def _snappy_raw(view: memoryview, limit: int, max_size: int) -> bytes:
    declared, _ = _uvarint32(view, 0)
    if declared > limit:
        raise _too_big("snappy", declared, max_size)
    if declared > len(view) * _SNAPPY_MAX_RATIO:
        raise KafkaCodecError(
            f"snappy: declared length {declared} is implausible for {len(view)} compressed bytes"
        )
    out = bytes(cramjam.snappy.decompress_raw(view))
    if len(out) != declared:
        raise KafkaCodecError(f"snappy: decompressed {len(out)} bytes, the stream declared {declared}")
    return out


def _snappy_decompress(data: Buffer, max_size: int) -> bytes:
    view = memoryview(data).cast("B") if not isinstance(data, bytes) else memoryview(data)
    n = len(view)
    if n < 16 or view[:8] != _XERIAL_MAGIC:
        return _snappy_raw(view, max_size, max_size)
    pos = 16
    parts = []
    total = 0
    while pos < n:
        if pos + 4 > n:
            raise KafkaCodecError(f"snappy: truncated xerial block length at byte {pos}")
        (length,) = _I32_BE.unpack_from(view, pos)
        pos += 4
        if length <= 0 or pos + length > n:
            raise KafkaCodecError(f"snappy: xerial block length {length} at byte {pos - 4} is invalid")
        part = _snappy_raw(view[pos : pos + length], max_size - total, max_size)
        total += len(part)
        parts.append(part)
        pos += length
    return b"".join(parts)


_LZ4_BLOCK_MAX = {4: 64 << 10, 5: 256 << 10, 6: 1 << 20, 7: 4 << 20}
_LZ4_MAX_RATIO = 256  # an LZ4 block cannot expand by more than ~255:1


def _skippable(magic: int) -> bool:
    return 0x184D2A50 <= magic <= 0x184D2A5F


def _lz4_bound(view: memoryview, max_size: int, fix_broken_hc: bool) -> tuple[int, bytearray | None]:
    """Walk the LZ4 frames of ``view``; return (upper bound of the output, repaired copy or None).

    With ``fix_broken_hc``, a header checksum computed Kafka 0.8's broken way (over the magic
    too) is accepted and replaced by the correct one in a repaired copy."""
    n = len(view)
    pos = 0
    total = 0
    repaired: bytearray | None = None
    if n == 0:
        raise KafkaCodecError("lz4: empty input")
    while pos < n:
        if pos + 4 > n:
            raise KafkaCodecError(f"lz4: truncated frame magic at byte {pos}")
        (magic,) = _U32_LE.unpack_from(view, pos)
        if _skippable(magic):
            if pos + 8 > n:
                raise KafkaCodecError(f"lz4: truncated skippable frame at byte {pos}")
            (size,) = _U32_LE.unpack_from(view, pos + 4)
            pos += 8 + size
            if pos > n:
                raise KafkaCodecError("lz4: truncated skippable frame")
            continue
        if magic != _LZ4_MAGIC:
            raise KafkaCodecError(f"lz4: bad frame magic {magic:#010x} at byte {pos}")
        start = pos
        if pos + 7 > n:
            raise KafkaCodecError(f"lz4: truncated frame header at byte {pos}")
        flg = view[pos + 4]
        bd = view[pos + 5]
        if flg >> 6 != 1 or flg & 0x02 or bd & 0x8F:
            raise KafkaCodecError(f"lz4: unsupported frame descriptor {flg:#04x} {bd:#04x} at byte {pos}")
        block_max = _LZ4_BLOCK_MAX.get((bd >> 4) & 7)
        if block_max is None:
            raise KafkaCodecError(f"lz4: invalid block maximum size code in {bd:#04x}")
        block_checksum = 4 if flg & 0x10 else 0
        has_size = flg & 0x08
        content_checksum = 4 if flg & 0x04 else 0
        hdr_end = pos + 6 + (8 if has_size else 0) + (4 if flg & 0x01 else 0)
        if hdr_end + 1 > n:
            raise KafkaCodecError(f"lz4: truncated frame header at byte {pos}")
        content_size = _U64_LE.unpack_from(view, pos + 6)[0] if has_size else -1
        hc = view[hdr_end]
        if hc != (xxh32(view[pos + 4 : hdr_end]) >> 8) & 0xFF:
            if fix_broken_hc and hc == (xxh32(view[pos:hdr_end]) >> 8) & 0xFF:
                if repaired is None:
                    repaired = bytearray(view)
                repaired[hdr_end] = (xxh32(view[pos + 4 : hdr_end]) >> 8) & 0xFF
            else:
                raise KafkaCodecError(f"lz4: frame header checksum mismatch at byte {pos}")
        pos = hdr_end + 1
        frame_total = 0
        while True:
            if pos + 4 > n:
                raise KafkaCodecError(f"lz4: truncated block header at byte {pos}")
            (word,) = _U32_LE.unpack_from(view, pos)
            pos += 4
            if word == 0:
                break
            size = word & 0x7FFFFFFF
            if size > block_max:
                raise KafkaCodecError(f"lz4: block of {size} bytes exceeds the frame's {block_max}")
            frame_total += size if word & 0x80000000 else min(block_max, size * _LZ4_MAX_RATIO)
            pos += size + block_checksum
            if pos > n:
                raise KafkaCodecError("lz4: truncated block")
        pos += content_checksum
        if pos > n:
            raise KafkaCodecError("lz4: truncated content checksum")
        if content_size > frame_total:
            raise KafkaCodecError(
                f"lz4: frame at byte {start} declares {content_size} bytes, its blocks hold at most {frame_total}"
            )
        total += frame_total
        if total > max_size:
            raise _too_big("lz4", total, max_size)
    return total, repaired


def _lz4_decompress(data: Buffer, max_size: int, fix_broken_hc: bool = False) -> bytes:
    view = memoryview(data).cast("B") if not isinstance(data, bytes) else memoryview(data)
    _, repaired = _lz4_bound(view, max_size, fix_broken_hc)
    return bytes(cramjam.lz4.decompress(view if repaired is None else repaired))


_ZSTD_MAGIC = 0xFD2FB528
_ZSTD_BLOCK_MAX = 128 << 10


def _zstd_bound(view: memoryview, max_size: int) -> int:
    n = len(view)
    pos = 0
    total = 0
    if n == 0:
        raise KafkaCodecError("zstd: empty input")
    while pos < n:
        if pos + 4 > n:
            raise KafkaCodecError(f"zstd: truncated frame magic at byte {pos}")
        (magic,) = _U32_LE.unpack_from(view, pos)
        if _skippable(magic):
            if pos + 8 > n:
                raise KafkaCodecError(f"zstd: truncated skippable frame at byte {pos}")
            (size,) = _U32_LE.unpack_from(view, pos + 4)
            pos += 8 + size
            if pos > n:
                raise KafkaCodecError("zstd: truncated skippable frame")
            continue
        if magic != _ZSTD_MAGIC:
            raise KafkaCodecError(f"zstd: bad frame magic {magic:#010x} at byte {pos}")
        start = pos
        if pos + 5 > n:
            raise KafkaCodecError(f"zstd: truncated frame header at byte {pos}")
        fhd = view[pos + 4]
        pos += 5
        if fhd & 0x08:
            raise KafkaCodecError(f"zstd: reserved bit set in frame header at byte {start}")
        fcs_flag = fhd >> 6
        single = fhd & 0x20
        window = -1
        if not single:
            if pos >= n:
                raise KafkaCodecError(f"zstd: truncated frame header at byte {start}")
            wd = view[pos]
            pos += 1
            base = 1 << (10 + (wd >> 3))
            window = base + (base >> 3) * (wd & 7)
        pos += (0, 1, 2, 4)[fhd & 3]
        fcs_size = (1 if single else 0, 2, 4, 8)[fcs_flag]
        if pos + fcs_size > n:
            raise KafkaCodecError(f"zstd: truncated frame header at byte {start}")
        fcs = -1
        if fcs_size:
            fcs = int.from_bytes(view[pos : pos + fcs_size], "little") + (256 if fcs_size == 2 else 0)
            pos += fcs_size
        if single:
            window = fcs
        block_max = min(window, _ZSTD_BLOCK_MAX)
        frame_total = 0
        while True:
            if pos + 3 > n:
                raise KafkaCodecError(f"zstd: truncated block header at byte {pos}")
            word = view[pos] | view[pos + 1] << 8 | view[pos + 2] << 16
            pos += 3
            btype = (word >> 1) & 3
            size = word >> 3
            if btype == 0:  # raw
                frame_total += size
                pos += size
            elif btype == 1:  # RLE: one byte repeated `size` times
                frame_total += size
                pos += 1
            elif btype == 2:  # compressed
                if size > block_max:
                    raise KafkaCodecError(f"zstd: compressed block of {size} bytes exceeds {block_max}")
                frame_total += block_max
                pos += size
            else:
                raise KafkaCodecError(f"zstd: reserved block type at byte {pos - 3}")
            if pos > n:
                raise KafkaCodecError("zstd: truncated block")
            if total + frame_total > max_size:
                raise _too_big("zstd", total + frame_total, max_size)
            if word & 1:
                break
        if fhd & 0x04:
            pos += 4
            if pos > n:
                raise KafkaCodecError("zstd: truncated content checksum")
        if fcs > frame_total:
            raise KafkaCodecError(
                f"zstd: frame at byte {start} declares {fcs} bytes, its blocks hold at most {frame_total}"
            )
        total += frame_total
    return total


def _zstd_decompress(data: Buffer, max_size: int) -> bytes:
    view = memoryview(data).cast("B") if not isinstance(data, bytes) else memoryview(data)
    _zstd_bound(view, max_size)
    return bytes(cramjam.zstd.decompress(view))


def decompress(codec_id: int, data: Buffer, *, max_size: int = MAX_DECOMPRESSED_SIZE) -> bytes:
    """Decompress a record payload compressed with codec ``codec_id`` (0 returns it unchanged).

    Raises :class:`KafkaCodecError` naming the codec on a bad frame, and when the output could
    exceed ``max_size`` bytes."""
    try:
        if codec_id == CODEC_GZIP:
            return _gzip_decompress(data, max_size)
        if codec_id == CODEC_SNAPPY:
            return _snappy_decompress(data, max_size)
        if codec_id == CODEC_LZ4:
            return _lz4_decompress(data, max_size)
        if codec_id == CODEC_ZSTD:
            return _zstd_decompress(data, max_size)
        if codec_id == CODEC_NONE:
            return bytes(data)
    except KafkaCodecError:
        raise
    except Exception as exc:
        raise KafkaCodecError(f"{codec_name(codec_id)}: invalid compressed data ({exc})") from None
    raise KafkaCodecError(f"unknown compression id {codec_id!r}")


def decompress_lz4_legacy(data: Buffer, *, max_size: int = MAX_DECOMPRESSED_SIZE) -> bytes:
    """LZ4 frames as Kafka 0.8-0.9 wrote them in magic 0 messages: the frame header checksum
    may have been computed over the magic number too (KAFKA-3160); both forms are accepted."""
    try:
        return _lz4_decompress(data, max_size, fix_broken_hc=True)
    except KafkaCodecError:
        raise
    except Exception as exc:
        raise KafkaCodecError(f"lz4: invalid compressed data ({exc})") from None
