"""The Cython Avro encoder and its pure-Python twin write the same bytes as each other and as
fastavro, and fail on the same first bad value with the same KafkaCodecError."""

from __future__ import annotations

import decimal
import random
from typing import Any

import pytest

from kafka_core._env import env_flag

if env_flag("KAFKA_CORE_PURE_PYTHON"):
    pytest.skip("KAFKA_CORE_PURE_PYTHON=1: the Cython codec is deliberately absent", allow_module_level=True)

import pyarrow as pa
from avro_strategies import avro_schemas, expected, fastavro_bytes, values_of
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafka_core.codec import avro_encode
from kafka_core.codec._cython import avro_enc as cenc  # a missing extension fails here
from kafka_core.codec._python import avro_enc as penc
from kafka_core.codec.avro_columns import AvroColumnDecoder
from kafka_core.codec.avro_encode import AvroColumnEncoder
from kafka_core.errors import KafkaCodecError

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def both(schema: Any, values: Any, schema_id: int | None = 7) -> list[Any]:
    """Each twin's binary column, or ("raised", message)."""
    out: list[Any] = []
    for codec in (cenc, penc):
        try:
            column = AvroColumnEncoder(schema, schema_id, codec=codec).encode(values)
        except KafkaCodecError as exc:
            out.append(("raised", str(exc)))
            continue
        column.validate(full=True)
        out.append(column.to_pylist())
    return out


def arrow_of(schema: Any, values: list[Any]) -> Any:
    return pa.array([expected(schema, v) for v in values], AvroColumnDecoder(schema).arrow_type)


@st.composite
def schema_and_values(draw: Any) -> tuple[Any, list[Any]]:
    schema = draw(avro_schemas())
    return schema, draw(st.lists(values_of(schema), min_size=1, max_size=6))


@SETTINGS
@given(schema_and_values(), st.integers(0, 3))
def test_twins_write_fastavros_bytes(case: tuple[Any, list[Any]], cut: int) -> None:
    schema, values = case
    arrow = arrow_of(schema, values)
    c, p = both(schema, arrow)
    assert c == p
    for value, data in zip(values, c, strict=True):
        if value is None and not isinstance(schema, list) and schema != "null":
            assert data is None
        else:
            assert data == b"\x00\x00\x00\x00\x07" + fastavro_bytes(schema, value)
    # a slice (every child array read at its offset) and chunks give the same rows
    cut = min(cut, len(values))
    assert both(schema, arrow.slice(cut), None)[0] == [None if d is None else d[5:] for d in c[cut:]]
    chunked = pa.chunked_array([arrow.slice(0, cut), arrow.slice(cut)], arrow.type)
    assert both(schema, chunked)[0] == c


def _poison(value: Any, rng: random.Random) -> Any:
    """``value`` with one part replaced by something its schema may refuse."""
    if isinstance(value, dict) and value:
        key = rng.choice(sorted(value))
        return {**value, key: _poison(value[key], rng)}
    if isinstance(value, list) and value:
        i = rng.randrange(len(value))
        item = value[i]  # a map's (key, value) pair keeps its key: Arrow has no null entry or key
        item = (item[0], _poison(item[1], rng)) if isinstance(item, tuple) else _poison(item, rng)
        return [*value[:i], item, *value[i + 1 :]]
    return rng.choice([None, None, value])


@SETTINGS
@given(schema_and_values(), st.randoms(use_true_random=False))
def test_twins_fail_alike(case: tuple[Any, list[Any]], rng: random.Random) -> None:
    """Nulls where the schema may not allow them: the same rows, or the same first error."""
    schema, values = case
    arrow_type = AvroColumnDecoder(schema).arrow_type
    rows = [_poison(expected(schema, v), rng) for v in values]
    try:
        arrow = pa.array(rows, arrow_type)
        arrow.validate(full=True)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return
    c, p = both(schema, arrow)
    assert c == p


RECORD = {
    "type": "record",
    "name": "R",
    "fields": [
        {"name": "i", "type": "int"},
        {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B"]}},
        {"name": "f", "type": {"type": "fixed", "name": "F", "size": 2}},
        {"name": "d", "type": {"type": "bytes", "logicalType": "decimal", "precision": 4, "scale": 2}},
        {"name": "x", "type": "float"},
        {"name": "u", "type": ["int", "string"]},
        {"name": "n", "type": "null"},
    ],
}
GOOD = {"i": 1, "e": "A", "f": b"ab", "d": decimal.Decimal("1.25"), "x": 0.5, "u": 3, "n": None}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"i": 1 << 40}, r"row 1: value\.i: 1099511627776 is out of range for Avro int"),
        ({"i": None}, r"row 1: value\.i: null for a field its Avro schema does not let be null"),
        ({"e": "C"}, r"row 1: value\.e: 'C' is not a symbol of enum E"),
        ({"f": b"abc"}, r"row 1: value\.f: 3 bytes for fixed F of 2"),
        ({"d": decimal.Decimal("100.00")}, r"row 1: value\.d: 100\.00 has more than the 4 digits"),
        ({"x": 1e300}, r"row 1: value\.x: 1e\+300 is out of range for Avro float"),
        ({"u": None}, r"row 1: value\.u: no member set and the union has no null"),
        ({"n": 5}, r"row 1: value\.n: 5 given for null"),
    ],
)
def test_bad_values_are_named(change: dict[str, Any], message: str) -> None:
    rows = [GOOD, {**GOOD, **change}]
    table = pa.table(
        {
            "i": pa.array([r["i"] for r in rows], pa.int64()),
            "e": [r["e"] for r in rows],
            "f": pa.array([r["f"] for r in rows], pa.binary()),
            "d": pa.array([r["d"] for r in rows], pa.decimal128(10, 2)),
            "x": pa.array([r["x"] for r in rows], pa.float64()),
            "u": pa.array(
                [None if r["u"] is None else {"member0": r["u"], "member1": None} for r in rows],
                pa.struct([("member0", pa.int32()), ("member1", pa.string())]),
            ),
            "n": pa.array([r["n"] for r in rows], pa.int64()),
        }
    )
    c, p = both(RECORD, table)
    assert c == p
    assert c[0] == "raised"
    import re

    assert re.search(message, c[1]), c[1]


def test_good_record_and_loose_input_types() -> None:
    """Columns of other Arrow types than the decoder's (narrower ints, large strings, millisecond
    timestamps, a missing nullable field, dictionary strings) are cast, column at a time."""
    schema = {
        "type": "record",
        "name": "L",
        "fields": [
            {"name": "a", "type": "long"},
            {"name": "s", "type": "string"},
            {"name": "t", "type": {"type": "long", "logicalType": "timestamp-millis"}},
            {"name": "missing", "type": ["null", "string"]},
            {"name": "k", "type": {"type": "enum", "name": "K", "symbols": ["X", "Y"]}},
        ],
    }
    table = pa.table(
        {
            "k": pa.array(["Y", "X"]).dictionary_encode(),
            "t": pa.array([-1, 1_500], pa.timestamp("ms", tz="UTC")),
            "s": pa.array(["é", ""], pa.large_string()),
            "a": pa.array([-3, 4], pa.int8()),
        }
    )
    c, p = both(schema, table, None)
    assert c == p
    import datetime

    utc = datetime.UTC
    rows = [
        {
            "a": -3,
            "s": "é",
            "t": datetime.datetime(1969, 12, 31, 23, 59, 59, 999000, utc),
            "missing": None,
            "k": "Y",
        },
        {
            "a": 4,
            "s": "",
            "t": datetime.datetime(1970, 1, 1, 0, 0, 1, 500000, utc),
            "missing": None,
            "k": "X",
        },
    ]
    assert c == [fastavro_bytes(schema, r) for r in rows]


def test_wrong_column_shapes_are_codec_errors() -> None:
    with pytest.raises(KafkaCodecError, match="column for record R"):
        AvroColumnEncoder(RECORD).encode(pa.array([1, 2]))
    with pytest.raises(KafkaCodecError, match="column for an Avro array"):
        AvroColumnEncoder({"type": "array", "items": "int"}).encode(pa.array([1]))
    with pytest.raises(KafkaCodecError, match="value"):
        AvroColumnEncoder("int").encode(pa.array([[1]]))


def test_opcodes_are_the_same_numbers() -> None:
    """The twin's and the Cython enum's numbers are avro_encode's: the parity tests above only
    hold if they match; this names the last of each."""
    assert avro_encode.OP_MEMBERS == penc.OP_MEMBERS == 15
    assert avro_encode.E_TOO_BIG == penc.E_TOO_BIG == 10


def test_chosen_implementation_is_the_extension() -> None:
    from kafka_core import codec

    if codec.IMPLEMENTATION == "cython":
        assert avro_encode.implementation() is cenc
