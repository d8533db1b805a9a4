"""Frames for bench/fuzz.py: valid seeds of every response API and of record batches, their
mutations, and the record decoders under test (split out to keep each module short).

Seeds are filled from the protocol schema (tools/protocol_gen/schema_table.py, generated from
Kafka's JSON definitions) with a seeded RNG: the same seed gives the same
frames, so a finding is reproducible.
"""

from __future__ import annotations

import importlib.util
import random
import struct
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafka_core._env import env_flag
from kafka_core.codec import crc32c, legacy
from kafka_core.codec._python import columnar as py_columnar
from kafka_core.codec._python import records as py_records
from kafka_core.errors import KafkaProtocolError
from kafka_core.protocol import RESPONSE_CLASSES, Response, encode_response
from kafka_core.protocol import messages as proto_messages

INT32_MAX = (1 << 31) - 1
SCHEMA_TABLE = Path(__file__).resolve().parents[1] / "tools" / "protocol_gen" / "schema_table.py"

# Values a forged length field takes: negative, just past the data, and gigabytes.
FORGED_I16 = [-2, -1, 0x7FFF, 0x4000, 0x00FF]
FORGED_I32 = [-2, -1, INT32_MAX, -(1 << 31), 1 << 30, 0x7FFFFFF0, 0x0000FFFF, 0x00100000]
FORGED_UVARINT = [
    b"\xff\xff\xff\xff\x0f",  # 2**32 - 1
    b"\xff\xff\xff\xff\x07",  # 2**31 - 1
    b"\x80\x80\x80\x80\x04",  # 2**30
    b"\xff\xff\xff\xff\xff\x01",  # longer than 5 bytes
    b"\x00",  # compact null
    b"\xfe\xff\xff\xff\x0f",  # zigzag: 2**31 - 1 as a signed varint
    b"\x01",  # zigzag -1
    b"\x03",  # zigzag -2
]


# ------------------------------------------------------------------------------------------
# decoders
# ------------------------------------------------------------------------------------------
def record_decoders() -> dict[str, Callable[[bytes, bool], Any]]:
    """Row and columnar decoders of both implementations (the Python twin alone when
    KAFKA_CORE_PURE_PYTHON=1 says the extension is deliberately absent)."""
    impls: list[tuple[str, Any, Any]] = [("py", py_records, py_columnar)]
    if not env_flag("KAFKA_CORE_PURE_PYTHON"):
        from kafka_core.codec._cython import columnar as cy_columnar
        from kafka_core.codec._cython import records as cy_records

        impls.insert(0, ("cy", cy_records, cy_columnar))
    out: dict[str, Callable[[bytes, bool], Any]] = {}
    for name, rows, cols in impls:
        out[f"rows-{name}"] = lambda b, crc, f=rows.decode_record_batches: f(b, check_crc=crc)
        out[f"columns-{name}"] = lambda b, crc, f=cols.decode_record_batches_columns: f(b, check_crc=crc)
    return out


# ------------------------------------------------------------------------------------------
# seeds
# ------------------------------------------------------------------------------------------
@dataclass
class _Struct:
    name: str
    fields: list[_Field]


@dataclass
class _Field:
    attr: str
    type: str  # the element type for arrays; the struct's name for structs
    is_array: bool
    versions: range
    nullable: range
    struct: _Struct | None


@dataclass
class _Message:
    name: str
    top: _Struct


def _load_definitions() -> dict[str, _Message]:
    """Every response's fields, from the generator's schema data in the repository (so the fuzzer
    needs no files outside it): message name -> its top struct and nested structs."""
    spec = importlib.util.spec_from_file_location("protocol_schema_table", SCHEMA_TABLE)
    assert spec is not None and spec.loader is not None, SCHEMA_TABLE
    table = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(table)
    schema: dict[str, tuple[Any, ...]] = table.SCHEMA

    out: dict[str, _Message] = {}
    for name, (kind, _key, _valid, _flex, _unstable, _listeners, fields, children) in schema.items():
        if kind != "response":
            continue
        structs: dict[str, _Struct] = {}

        def build(specs: tuple[Any, ...], structs: dict[str, _Struct] = structs) -> list[_Field]:
            return [
                _Field(
                    attr=f[1],
                    type=f[2],
                    is_array=f[3],
                    versions=range(f[4][0], f[4][1] + 1),
                    nullable=range(f[5][0], f[5][1] + 1),
                    struct=structs[f[11]] if f[11] else None,
                )
                for f in specs
            ]

        for struct_name, struct_fields in children.items():  # children come before their parents
            structs[struct_name] = _Struct(struct_name, build(struct_fields))
        out[name] = _Message(name, _Struct(name, build(fields)))
    return out


_INT_RANGES = {
    "int8": (-(1 << 7), (1 << 7) - 1),
    "int16": (-(1 << 15), (1 << 15) - 1),
    "uint16": (0, (1 << 16) - 1),
    "int32": (-(1 << 31), INT32_MAX),
    "uint32": (0, (1 << 32) - 1),
    "int64": (-(1 << 63), (1 << 63) - 1),
}


def _scalar(rng: random.Random, ftype: str, record_seeds: list[bytes]) -> Any:
    if ftype in _INT_RANGES:
        lo, hi = _INT_RANGES[ftype]
        return rng.choice([0, 1, -1 if lo < 0 else 2, rng.randint(lo, hi), rng.randint(0, 1000)])
    if ftype == "bool":
        return rng.random() < 0.5
    if ftype == "float64":
        return rng.uniform(-1e6, 1e6)
    if ftype == "string":
        return "".join(rng.choice("abcxyz-_.é") for _ in range(rng.randint(0, 10)))
    if ftype == "bytes":
        return rng.randbytes(rng.randint(0, 24))
    if ftype == "records":
        return rng.choice(record_seeds)
    if ftype == "uuid":
        return uuid.UUID(int=rng.getrandbits(128))
    raise ValueError(f"unknown field type {ftype}")


def _populate(rng: random.Random, m: Any, sd: Any, v: int, record_seeds: list[bytes], depth: int = 0) -> Any:
    top = getattr(proto_messages, m.name)
    cls = top if sd is m.top else getattr(top, sd.name)
    kwargs: dict[str, Any] = {}
    for f in sd.fields:
        if v not in f.versions:
            continue
        if v in f.nullable and rng.random() < 0.15:
            kwargs[f.attr] = None
            continue

        def one(f: Any = f) -> Any:
            if f.struct is not None:
                return _populate(rng, m, f.struct, v, record_seeds, depth + 1)
            return _scalar(rng, f.type, record_seeds)

        if f.is_array:
            kwargs[f.attr] = [one() for _ in range(rng.randint(0, 3 if depth < 2 else 1))]
        else:
            kwargs[f.attr] = one()
    return cls(**kwargs)


def record_seeds(rng: random.Random) -> list[bytes]:
    """Valid record buffers: one to three v2 batches of each codec, control batches, legacy sets."""
    enc = py_records.encode_record_batch
    out: list[bytes] = []
    for i in range(40):
        buf = bytearray()
        for j in range(rng.randint(1, 3)):
            kind = rng.random()
            if kind < 0.15:
                buf += enc(
                    [(b"\x00\x00\x00" + bytes([i & 1]), b"\x00\x00\x00\x00\x00\x00")],
                    control=True,
                    transactional=True,
                    base_offset=j * 10,
                    base_timestamp=0,
                )
                continue
            recs = [
                (
                    None if rng.random() < 0.2 else rng.randbytes(rng.randint(0, 12)),
                    None if rng.random() < 0.1 else rng.randbytes(rng.randint(0, 200)),
                    [(f"h{k}", None if k % 2 else rng.randbytes(3)) for k in range(rng.randint(0, 2))],
                )
                for _ in range(rng.randint(1, 6))
            ]
            buf += enc(
                recs,
                base_offset=j * 10,
                base_timestamp=rng.choice([0, 1_700_000_000_000]),
                compression=rng.choice(["none", "none", "gzip", "snappy", "lz4", "zstd"]),
                log_append_time=rng.random() < 0.1,
                producer_id=rng.choice([-1, 7]),
                transactional=rng.random() < 0.1,
            )
        out.append(bytes(buf))
    legacy_sets = [
        legacy.encode_legacy_message_set(
            [(b"k", b"v" * 20), (None, b"w")], magic=m, compression=c, timestamp=5
        )
        for m in (0, 1)
        for c in ("none", "gzip")
    ]
    return out + [bytes(s) for s in legacy_sets]


def response_seeds(
    rng: random.Random, records: list[bytes], per_version: int
) -> list[tuple[int, int, bytes]]:
    """(api_key, version, frame) for every response API at every version it has."""
    defs = _load_definitions()
    out: list[tuple[int, int, bytes]] = []
    for key in sorted(RESPONSE_CLASSES):
        cls = RESPONSE_CLASSES[key]
        m = defs.get(cls.__name__)
        for v in range(cls.MIN_VERSION, cls.MAX_VERSION + 1):
            for n in range(per_version):
                body = _populate(rng, m, m.top, v, records) if m is not None and n else cls()
                try:
                    frame = encode_response(Response(key, v, rng.randint(0, INT32_MAX), body))
                except KafkaProtocolError:  # a random value this version cannot carry
                    frame = encode_response(Response(key, v, 1, cls()))
                out.append((key, v, frame))
    return out


# ------------------------------------------------------------------------------------------
# mutation
# ------------------------------------------------------------------------------------------
def _forge(rng: random.Random, buf: bytearray) -> str:
    pos = rng.randrange(len(buf) + 1)
    kind = rng.randrange(3)
    if kind == 0:
        buf[pos : pos + 2] = struct.pack(">h", rng.choice(FORGED_I16))
        return "forge-i16"
    if kind == 1:
        buf[pos : pos + 4] = struct.pack(">i", rng.choice(FORGED_I32))
        return "forge-i32"
    v = rng.choice(FORGED_UVARINT)
    buf[pos : pos + rng.choice([1, len(v)])] = v
    return "forge-varint"


def mutate(rng: random.Random, seed: bytes, other: bytes) -> tuple[bytes, list[str]]:
    """One to three mutations of ``seed`` (``other`` is spliced in by a splice)."""
    buf = bytearray(seed)
    done: list[str] = []
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        op = rng.randrange(8)
        if not buf:
            op = 6
        if op == 0:
            for _ in range(rng.randint(1, 4)):
                i = rng.randrange(len(buf))
                buf[i] ^= 1 << rng.randrange(8)
            done.append("bitflip")
        elif op == 1:
            i = rng.randrange(len(buf))
            buf[i] = rng.choice([0x00, 0xFF, 0x7F, 0x80, 0x01, rng.randrange(256)])
            done.append("byte")
        elif op == 2:
            del buf[rng.randrange(len(buf)) :]
            done.append("truncate")
        elif op in (3, 4):
            done.append(_forge(rng, buf))
        elif op == 5:
            cut = rng.randrange(len(buf) + 1)
            buf[cut:] = other[rng.randrange(len(other) + 1) :]
            done.append("splice")
        elif op == 6:
            i = rng.randrange(len(buf) + 1)
            buf[i:i] = rng.randbytes(rng.randint(1, 8))
            done.append("insert")
        else:
            i = rng.randrange(len(buf))
            del buf[i : i + rng.randint(1, 8)]
            done.append("delete")
    return bytes(buf), done


def fix_crcs(buf: bytes) -> bytes:
    """Recompute the CRC of each whole v2 batch, so that a mutation reaches the record parser."""
    out = bytearray(buf)
    pos = 0
    while len(out) - pos >= 61:
        (length,) = struct.unpack_from(">i", out, pos + 8)
        end = pos + 12 + length
        if length < 49 or end > len(out) or out[pos + 16] != 2:
            break
        struct.pack_into(">I", out, pos + 17, crc32c(bytes(out[pos + 21 : end])))
        pos = end
    return bytes(out)
