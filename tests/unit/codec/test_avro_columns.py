"""The columnar Avro decoder against fastavro (the reference writer and resolver), on whichever
codec this run uses (both runs of the unit suite cover both twins)."""

from __future__ import annotations

import decimal
from typing import Any

import pyarrow as pa
import pytest
from avro_strategies import avro_schemas, expected, fastavro_bytes, framed, values_of
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafka_core.codec.avro_columns import AvroColumnDecoder, AvroSchemaError
from kafka_core.errors import KafkaCodecError

SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def schema_and_values(draw: Any) -> tuple[Any, list[Any]]:
    schema = draw(avro_schemas())
    return schema, draw(st.lists(values_of(schema), min_size=1, max_size=6))


@SETTINGS
@given(schema_and_values())
def test_random_schemas_decode_as_fastavro_wrote_them(case: tuple[Any, list[Any]]) -> None:
    schema, values = case
    decoder = AvroColumnDecoder(schema, lambda _id: schema)
    column = decoder.decode([framed(3, fastavro_bytes(schema, v)) for v in values]).values
    column.validate(full=True)
    assert column.type == decoder.arrow_type
    assert column.equals(pa.array([expected(schema, v) for v in values], decoder.arrow_type))


@SETTINGS
@given(schema_and_values())
def test_unframed_values(case: tuple[Any, list[Any]]) -> None:
    schema, values = case
    decoder = AvroColumnDecoder(schema, framed=False)
    column = decoder.decode(pa.array([fastavro_bytes(schema, v) for v in values], pa.large_binary())).values
    assert column.equals(pa.array([expected(schema, v) for v in values], decoder.arrow_type))


ORDER_V1 = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "id", "type": "int"},
        {"name": "price", "type": "float"},
        {"name": "customer", "type": "string"},
        {"name": "legacy", "type": {"type": "array", "items": "long"}},
        {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "OLD", "GONE"]}},
        {"name": "payload", "type": "bytes"},
    ],
}
ORDER_V2 = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "id", "type": "long"},  # promoted
        {"name": "price", "type": "double"},  # promoted
        {"name": "customer", "type": "string"},
        {
            "name": "status",
            "type": {
                "type": "enum",
                "name": "Status",
                "symbols": ["NEW", "OLD", "UNKNOWN"],
                "default": "UNKNOWN",
            },
        },
        {"name": "payload", "type": "string"},  # bytes read as a string
        {"name": "region", "type": "string", "default": "eu"},  # added, with a default
        {"name": "tags", "type": {"type": "map", "values": "int"}, "default": {"a": 1}},
        {
            "name": "shipTo",
            "type": [
                "null",
                {"type": "record", "name": "Addr", "fields": [{"name": "city", "type": "string"}]},
            ],
            "default": None,
        },
        {
            "name": "total",
            "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2},
            "default": "\u0001\u0000",
        },
    ],
}
V1_ROWS = [
    {"id": 1, "price": 2.5, "customer": "ann", "legacy": [1, 2], "status": "NEW", "payload": b"x"},
    {"id": -7, "price": 0.25, "customer": "bob", "legacy": [], "status": "GONE", "payload": "é".encode()},
]
V2_ROWS = [
    {
        "id": 1 << 40,
        "price": 1e300,
        "customer": "cy",
        "status": "UNKNOWN",
        "payload": "p",
        "region": "us",
        "tags": {},
        "shipTo": {"city": "Oslo"},
        "total": decimal.Decimal("1.25"),
    },
]


def _schemas(schema_id: int) -> Any:
    return {1: ORDER_V1, 2: ORDER_V2}[schema_id]


def test_evolution_and_mixed_ids_match_fastavro_resolution() -> None:
    import io

    import fastavro

    writers = [(1, ORDER_V1, r) for r in V1_ROWS] + [(2, ORDER_V2, r) for r in V2_ROWS]
    values = [framed(i, fastavro_bytes(w, r)) for i, w, r in writers] * 2
    decoder = AvroColumnDecoder(ORDER_V2, _schemas)
    column = decoder.decode(values).values
    reader = fastavro.parse_schema(ORDER_V2, _force=True)
    want = []
    for _i, w, r in writers * 2:
        read = fastavro.schemaless_reader(
            io.BytesIO(fastavro_bytes(w, r)), fastavro.parse_schema(w, _force=True), reader
        )
        if isinstance(read["total"], str):  # fastavro hands a default over as the schema gives it
            read["total"] = decimal.Decimal(
                int.from_bytes(read["total"].encode("latin-1"), "big", signed=True)
            ).scaleb(-2)
        want.append(expected(ORDER_V2, read))
    assert column.to_pylist() == pa.array(want, decoder.arrow_type).to_pylist()
    first = column.to_pylist()[0]
    assert (
        first["region"] == "eu" and first["tags"] == [("a", 1)] and first["total"] == decimal.Decimal("2.56")
    )
    assert column.to_pylist()[1]["status"] == "UNKNOWN"  # GONE is not in the reader's enum: its default


def test_incompatible_writer_fails_its_records_only() -> None:
    reader = {
        "type": "record",
        "name": "R",
        "fields": [{"name": "a", "type": "int"}, {"name": "b", "type": "string"}],
    }
    good = {
        "type": "record",
        "name": "R",
        "fields": [{"name": "a", "type": "int"}, {"name": "b", "type": "string"}],
    }
    no_b = {"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]}  # b has no default
    lookup = {5: good, 6: no_b}
    values = [
        framed(5, fastavro_bytes(good, {"a": 1, "b": "x"})),
        framed(6, fastavro_bytes(no_b, {"a": 2})),
        None,
    ]
    decoder = AvroColumnDecoder(reader, lookup.__getitem__)
    result = decoder.decode(values, "PERMISSIVE")
    assert result.values.to_pylist() == [{"a": 1, "b": "x"}, None, None]
    errors = result.errors.to_pylist()
    assert errors[0] is None and errors[2] is None
    assert "schema id 6" in errors[1] and "R.b is not written and has no default" in errors[1]
    with pytest.raises(KafkaCodecError, match="record 1: schema id 6"):
        decoder.decode(values)


def test_unknown_id_unframed_and_lookup_failure() -> None:
    def lookup(schema_id: int) -> Any:
        raise LookupError(f"registry says 40403 for {schema_id}")

    decoder = AvroColumnDecoder("long", lookup)
    values = [framed(9, b"\x02"), b"\x01\x00\x00\x00\x09\x02", b"\x00\x00", b""]
    result = decoder.decode(values, "PERMISSIVE")
    assert result.values.to_pylist() == [None] * 4
    errors = result.errors.to_pylist()
    assert errors[0] == "schema id 9: LookupError: registry says 40403 for 9"
    assert all("Schema Registry framing" in e for e in errors[1:])


def test_no_lookup_means_unknown_ids() -> None:
    result = AvroColumnDecoder("int").decode([framed(1, b"\x02")], "PERMISSIVE")
    assert result.errors.to_pylist() == ["unknown schema id 1: no writer schema lookup"]


@pytest.mark.parametrize(
    ("schema", "body", "error"),
    [
        ("int", b"\x80\x80\x80\x80\x10", "Avro int out of range"),
        ("long", b"\xff" * 10 + b"\x01", "longer than 64 bits"),
        ("long", b"\x80", "truncated Avro varint at byte 5"),
        ("string", b"\x04a", "truncated Avro value: 2 bytes needed at byte 6, 1 left"),
        ("string", b"\x03", "negative Avro length -2"),
        ("string", b"\x02\xff", "not UTF-8"),
        ({"type": "array", "items": "null"}, b"\xfe\xff\xff\xff\x0f", "larger than the value"),
        (["null", "int"], b"\x04", "union branch 2 out of range"),
        ({"type": "enum", "name": "E", "symbols": ["A"]}, b"\x02", "enum index 1 out of range"),
        (
            {"type": "bytes", "logicalType": "decimal", "precision": 38, "scale": 0},
            b"\x22" + b"\x01" * 17,
            "does not fit in 128 bits",
        ),
        (
            {"type": "long", "logicalType": "timestamp-millis"},
            b"\xfe\xff\xff\xff\xff\xff\xff\xff\xff\x01",
            "out of range",
        ),
        ({"type": "map", "values": "int"}, b"\x02\x02\xc3\x00", "map key is not UTF-8"),
    ],
)
def test_bad_input_is_a_codec_error(schema: Any, body: bytes, error: str) -> None:
    decoder = AvroColumnDecoder(schema, lambda _id: schema)
    with pytest.raises(KafkaCodecError, match=error):
        decoder.decode([framed(1, body)])
    result = decoder.decode([framed(1, body), None], "PERMISSIVE")
    assert error in result.errors[0].as_py() or pytest.fail(result.errors[0].as_py())
    assert result.values.null_count == 2


def test_permissive_rolls_back_a_half_decoded_record() -> None:
    schema = {
        "type": "record",
        "name": "R",
        "fields": [
            {"name": "xs", "type": {"type": "array", "items": "string"}},
            {"name": "n", "type": "int"},
        ],
    }
    good = fastavro_bytes(schema, {"xs": ["a", "b"], "n": 1})
    half = fastavro_bytes(schema, {"xs": ["c"], "n": 2})[:-1]  # the int is cut off
    decoder = AvroColumnDecoder(schema, lambda _id: schema)
    result = decoder.decode([framed(1, good), framed(1, half), framed(1, good)], "PERMISSIVE")
    result.values.validate(full=True)
    assert result.values.to_pylist() == [{"xs": ["a", "b"], "n": 1}, None, {"xs": ["a", "b"], "n": 1}]


def test_spark_types() -> None:
    schema = {
        "type": "record",
        "name": "T",
        "fields": [
            {"name": "il", "type": ["int", "long"]},
            {"name": "fd", "type": ["null", "float", "double"]},
            {
                "name": "u",
                "type": [
                    "null",
                    "string",
                    {"type": "record", "name": "X", "fields": [{"name": "a", "type": "int"}]},
                ],
            },
            {"name": "only_null", "type": "null"},
            {"name": "ts", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
            {"name": "uuid", "type": {"type": "string", "logicalType": "uuid"}},
            {"name": "fx", "type": {"type": "fixed", "name": "Fx", "size": 2}},
        ],
    }
    t = AvroColumnDecoder(schema).arrow_type
    assert t.field("il").type == pa.int64() and not t.field("il").nullable
    assert t.field("fd").type == pa.float64() and t.field("fd").nullable
    assert t.field("u").type == pa.struct(
        [
            pa.field("member0", pa.string()),
            pa.field("member1", pa.struct([pa.field("a", pa.int32(), nullable=False)])),
        ]
    )
    assert t.field("only_null").type == pa.null()
    assert t.field("ts").type == pa.timestamp("us")
    assert t.field("uuid").type == pa.string() and t.field("fx").type == pa.binary()


def test_bad_schemas() -> None:
    with pytest.raises(AvroSchemaError, match="recursive"):
        AvroColumnDecoder(
            {"type": "record", "name": "L", "fields": [{"name": "next", "type": ["null", "L"]}]}
        )
    with pytest.raises(AvroSchemaError, match="unknown type"):
        AvroColumnDecoder({"type": "record", "name": "R", "fields": [{"name": "x", "type": "Nope"}]})
    with pytest.raises(AvroSchemaError, match="not valid JSON"):
        AvroColumnDecoder("{nope")
    with pytest.raises(KafkaCodecError, match="binary column"):
        AvroColumnDecoder("int").decode(pa.array([1]))


@SETTINGS
@given(schema_and_values())
def test_encoder_round_trips_through_the_decoder_and_fastavro(case: tuple[Any, list[Any]]) -> None:
    """Arrow -> Avro -> Arrow is the identity, and the bytes are fastavro's own."""
    import io

    import fastavro

    from kafka_core.codec.avro_encode import AvroColumnEncoder

    schema, values = case
    decoder = AvroColumnDecoder(schema, lambda _id: schema)
    arrow = pa.array([expected(schema, v) for v in values], decoder.arrow_type)
    encoded = AvroColumnEncoder(schema, schema_id=11).encode(arrow)
    assert decoder.decode(encoded).values.equals(arrow)
    parsed = fastavro.parse_schema(schema, _force=True)
    for value, data in zip(values, encoded.to_pylist(), strict=True):
        if value is None and not isinstance(schema, list) and schema != "null":
            assert data is None
            continue
        assert data[:5] == b"\x00\x00\x00\x00\x0b"
        assert data[5:] == fastavro_bytes(schema, value)
        fastavro.schemaless_reader(io.BytesIO(data[5:]), parsed, parsed)


def test_encoder_takes_a_table_and_names_bad_rows() -> None:
    from kafka_core.codec.avro_encode import AvroColumnEncoder

    schema = {
        "type": "record",
        "name": "R",
        "fields": [{"name": "a", "type": "int"}, {"name": "b", "type": ["null", "string"]}],
    }
    table = pa.table({"b": ["x", None], "a": pa.array([1, 2], pa.int32())})
    encoded = AvroColumnEncoder(schema).encode(table)
    assert AvroColumnDecoder(schema, framed=False).decode(encoded).values.to_pylist() == [
        {"a": 1, "b": "x"},
        {"a": 2, "b": None},
    ]
    with pytest.raises(KafkaCodecError, match=r"row 1: value.a: null"):
        AvroColumnEncoder(schema).encode(pa.table({"a": [1, None], "b": ["x", "y"]}))
    with pytest.raises(KafkaCodecError, match="out of range for Avro int"):
        AvroColumnEncoder(schema).encode(pa.table({"a": [1 << 40], "b": ["x"]}))
