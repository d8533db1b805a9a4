"""schema_registry.columnar.rows against the dev registry: JSON Schema and Protobuf values written
by confluent-kafka's serializers decode into typed Arrow columns (FAILFAST and PERMISSIVE), and
columns encode to values confluent-kafka's deserializers read."""

from __future__ import annotations

import base64
import datetime
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from prerequisites import need_module

need_module("confluent_kafka")
need_module("jsonschema")
need_module("google.protobuf")

import pyarrow as pa  # noqa: E402
from confluent_kafka.schema_registry import SchemaRegistryClient as TheirClient  # noqa: E402
from confluent_kafka.schema_registry.json_schema import JSONDeserializer as TheirJSONDeserializer  # noqa: E402
from confluent_kafka.schema_registry.json_schema import JSONSerializer as TheirJSONSerializer  # noqa: E402
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer as TheirProtobufDeserializer  # noqa: E402
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer as TheirProtobufSerializer  # noqa: E402
from confluent_kafka.serialization import MessageField as TheirField  # noqa: E402
from confluent_kafka.serialization import SerializationContext as TheirContext  # noqa: E402
from google.protobuf import descriptor_pb2, descriptor_pool, timestamp_pb2  # noqa: E402
from google.protobuf.message_factory import GetMessageClass  # noqa: E402

from kafka_core.errors import KafkaCodecError, KafkaConfigError  # noqa: E402
from kafka_core.schema_registry import SchemaRegistryClient  # noqa: E402
from kafka_core.schema_registry.columnar.rows import (  # noqa: E402
    RowColumnDeserializer,
    RowColumnSerializer,
    json_schema_arrow_type,
)

ORDER_JSON = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "Order",
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "note": {"type": ["null", "string"]},
        "price": {"type": "number"},
        "ship": {"$ref": "#/definitions/Address"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "attrs": {"type": "object", "additionalProperties": {"type": "integer"}},
        "extra": {},
    },
    "required": ["id"],
    "definitions": {"Address": {"type": "object", "properties": {"city": {"type": "string"}}}},
}


@pytest.fixture
def ours(schema_registry: str) -> Iterator[SchemaRegistryClient]:
    with SchemaRegistryClient({"url": schema_registry}) as c:
        yield c


@pytest.fixture
def theirs(schema_registry: str) -> TheirClient:
    return TheirClient({"url": schema_registry})


@pytest.fixture
def topic(unique_subject: Callable[[str], str]) -> str:
    return unique_subject("rows")


def test_json_schema_types() -> None:
    assert json_schema_arrow_type(ORDER_JSON) == pa.struct(
        [
            ("id", pa.int64()),
            ("note", pa.string()),
            ("price", pa.float64()),
            ("ship", pa.struct([("city", pa.string())])),
            ("tags", pa.list_(pa.string())),
            ("attrs", pa.map_(pa.string(), pa.int64())),
            ("extra", pa.string()),
        ]
    )
    with pytest.raises(KafkaConfigError, match="recursive"):
        json_schema_arrow_type({"$ref": "#/definitions/N", "definitions": {"N": {"$ref": "#/definitions/N"}}})


def test_json_read_and_write(ours: SchemaRegistryClient, theirs: TheirClient, topic: str) -> None:
    ctx = TheirContext(topic, TheirField.VALUE)
    ser = TheirJSONSerializer(json.dumps(ORDER_JSON), theirs)
    rows = [
        {
            "id": 1,
            "note": "é",
            "price": 2.5,
            "ship": {"city": "Oslo"},
            "tags": ["a"],
            "attrs": {"x": 1},
            "extra": [1],
        },
        {"id": 2, "note": None, "price": 1, "tags": [], "attrs": {}},
    ]
    values = [ser(r, ctx) for r in rows] + [None]
    decoder = RowColumnDeserializer(ours, "json")
    column = decoder.decode(pa.array(values, pa.binary()), topic).values
    assert column.type == json_schema_arrow_type(ORDER_JSON)
    assert column.to_pylist() == [
        {
            "id": 1,
            "note": "é",
            "price": 2.5,
            "ship": {"city": "Oslo"},
            "tags": ["a"],
            "attrs": [("x", 1)],
            "extra": "[1]",
        },
        {"id": 2, "note": None, "price": 1.0, "ship": None, "tags": [], "attrs": [], "extra": None},
        None,
    ]
    # back: a struct column through our JSONSerializer, read by theirs
    out = RowColumnSerializer(ours, "json", json.dumps(ORDER_JSON)).encode(column.slice(0, 2), topic)
    back = [TheirJSONDeserializer(json.dumps(ORDER_JSON))(v, ctx) for v in out.to_pylist()]
    assert back[0]["ship"] == {"city": "Oslo"} and back[0]["attrs"] == {"x": 1} and back[1]["id"] == 2


def test_json_permissive_and_failfast(ours: SchemaRegistryClient, theirs: TheirClient, topic: str) -> None:
    ser = TheirJSONSerializer(json.dumps(ORDER_JSON), theirs)
    good = ser({"id": 1}, TheirContext(topic, TheirField.VALUE))
    bad_json = good[:5] + b"{nope"
    invalid = good[:5] + b'{"id": "x"}'  # against the schema
    values = pa.array([good, bad_json, invalid, b"\x01"], pa.binary())
    result = RowColumnDeserializer(ours, "json", mode="PERMISSIVE").decode(values, topic)
    assert [r and r["id"] for r in result.values.to_pylist()] == [1, None, None, None]
    errors = result.errors.to_pylist()
    assert errors[0] is None and "not JSON" in errors[1] and "schema" in errors[2] and errors[3]
    with pytest.raises(KafkaCodecError, match="row 1: not JSON"):
        RowColumnDeserializer(ours, "json").decode(values, topic)
    with pytest.raises(KafkaCodecError, match="row 0"):
        RowColumnSerializer(ours, "json", json.dumps(ORDER_JSON)).encode(pa.array([{"id": None}]), topic)


def _proto_classes() -> tuple[Any, Any]:
    """Two files: money.proto, and orders.proto (Ping first, then Order with an enum, a map, a
    repeated nested message and a Timestamp), built from descriptors (no protoc here)."""
    F = descriptor_pb2.FieldDescriptorProto
    pool = descriptor_pool.DescriptorPool()
    known = descriptor_pb2.FileDescriptorProto()
    timestamp_pb2.DESCRIPTOR.CopyToProto(known)
    pool.Add(known)
    money = descriptor_pb2.FileDescriptorProto(name="kc_rows/money.proto", package="kcr", syntax="proto3")
    m = money.message_type.add(name="Money")
    m.field.add(name="cents", number=1, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    pool.Add(money)
    orders = descriptor_pb2.FileDescriptorProto(
        name="kc_rows/orders.proto",
        package="kcr",
        syntax="proto3",
        dependency=["kc_rows/money.proto", "google/protobuf/timestamp.proto"],
    )
    orders.message_type.add(name="Ping").field.add(
        name="n", number=1, type=F.TYPE_INT32, label=F.LABEL_OPTIONAL
    )
    o = orders.message_type.add(name="Order")
    o.field.add(name="id", number=1, type=F.TYPE_INT32, label=F.LABEL_OPTIONAL)
    o.field.add(name="total", number=2, type=F.TYPE_MESSAGE, type_name=".kcr.Money", label=F.LABEL_OPTIONAL)
    o.field.add(
        name="state", number=3, type=F.TYPE_ENUM, type_name=".kcr.Order.State", label=F.LABEL_OPTIONAL
    )
    o.field.add(
        name="at",
        number=4,
        type=F.TYPE_MESSAGE,
        type_name=".google.protobuf.Timestamp",
        label=F.LABEL_OPTIONAL,
    )
    o.field.add(name="skus", number=5, type=F.TYPE_STRING, label=F.LABEL_REPEATED)
    entry = o.nested_type.add(name="QtyEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    entry.field.add(name="value", number=2, type=F.TYPE_INT32, label=F.LABEL_OPTIONAL)
    o.field.add(
        name="qty", number=6, type=F.TYPE_MESSAGE, type_name=".kcr.Order.QtyEntry", label=F.LABEL_REPEATED
    )
    state = o.enum_type.add(name="State")
    state.value.add(name="NEW", number=0)
    state.value.add(name="PAID", number=1)
    pool.Add(orders)
    return GetMessageClass(pool.FindMessageTypeByName("kcr.Ping")), GetMessageClass(
        pool.FindMessageTypeByName("kcr.Order")
    )


PING, ORDER = _proto_classes()
AT = datetime.datetime(2026, 1, 2, 3, 4, 5, 600000, tzinfo=datetime.UTC)


def test_protobuf_read_and_write(ours: SchemaRegistryClient, theirs: TheirClient, topic: str) -> None:
    ctx = TheirContext(topic, TheirField.VALUE)
    ser = TheirProtobufSerializer(ORDER, theirs, {"use.deprecated.format": False})
    first = ORDER(id=5, state=1, skus=["a", "b"])
    first.total.cents = 199
    first.at.FromDatetime(AT)
    first.qty["a"] = 2
    values = pa.array([ser(first, ctx), ser(ORDER(), ctx)], pa.binary())
    decoder = RowColumnDeserializer(ours, "protobuf", message="kcr.Order")
    column = decoder.decode(values, topic).values
    assert column.type == pa.struct(
        [
            ("id", pa.int32()),
            ("total", pa.struct([("cents", pa.int64())])),
            ("state", pa.string()),
            ("at", pa.timestamp("us", tz="UTC")),
            ("skus", pa.list_(pa.string())),
            ("qty", pa.map_(pa.string(), pa.int32())),
        ]
    )
    assert column.to_pylist() == [
        {"id": 5, "total": {"cents": 199}, "state": "PAID", "at": AT, "skus": ["a", "b"], "qty": [("a", 2)]},
        {"id": None, "total": None, "state": None, "at": None, "skus": [], "qty": []},
    ]
    # the registered file's first message is Ping: without a message name, that is the type
    assert RowColumnDeserializer(ours, "protobuf").arrow_type(topic) == pa.struct([("n", pa.int32())])
    # back: our ProtobufSerializer under the latest schema, read by theirs
    encoder = RowColumnSerializer(
        ours, "protobuf", use_latest_version=True, auto_register=False, message="kcr.Order"
    )
    out = encoder.encode(column, topic).to_pylist()
    back = [TheirProtobufDeserializer(ORDER, {"use.deprecated.format": False})(v, ctx) for v in out]
    assert back[0] == first and back[1] == ORDER()


def test_protobuf_schema_given_and_bad_bytes(
    ours: SchemaRegistryClient, theirs: TheirClient, topic: str
) -> None:
    ping = base64.standard_b64encode(PING.DESCRIPTOR.file.serialized_pb).decode()
    with pytest.raises(KafkaConfigError, match=r"imports kc_rows/money\.proto"):
        RowColumnDeserializer(ours, "protobuf", ping).arrow_type()
    ser = TheirProtobufSerializer(PING, theirs, {"use.deprecated.format": False})
    good = ser(PING(n=3), TheirContext(topic, TheirField.VALUE))
    values = pa.array([good, good[:6] + b"\xff\xff"], pa.binary())
    result = RowColumnDeserializer(ours, "protobuf", mode="PERMISSIVE").decode(values, topic)
    assert result.values.to_pylist() == [{"n": 3}, None]
    assert "cannot parse a Ping" in result.errors.to_pylist()[1]


class _OutOfReach:
    """Our client, but the next ``outages`` id lookups find no registry."""

    def __init__(self, client: SchemaRegistryClient, outages: int) -> None:
        self._client, self.outages = client, outages

    def get_schema(self, schema_id: int) -> Any:
        from kafka_core.errors import SchemaRegistryError

        if self.outages:
            self.outages -= 1
            raise SchemaRegistryError(-1, -1, "GET /schemas/ids: cannot reach http://registry")
        return self._client.get_schema(schema_id)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


@pytest.mark.parametrize("fmt", ["json", "protobuf"])
def test_writer_ids_unknown_of_another_format_or_out_of_reach(
    fmt: str, ours: SchemaRegistryClient, theirs: TheirClient, topic: str
) -> None:
    """The frame's id must name a schema of the format: an unknown id or an Avro schema's id is
    the record's error (it was decoded as if it named the reader schema); a registry that does
    not answer fails the decode, PERMISSIVE too, and is asked again next time."""
    from kafka_core.errors import SchemaRegistryError
    from kafka_core.schema_registry import Schema

    ctx = TheirContext(topic, TheirField.VALUE)
    if fmt == "json":
        good = TheirJSONSerializer(json.dumps(ORDER_JSON), theirs)({"id": 1}, ctx)
    else:
        good = TheirProtobufSerializer(PING, theirs, {"use.deprecated.format": False})(PING(n=1), ctx)
    avro_id = ours.register_schema(f"{topic}-avro", Schema('"long"', "AVRO"))
    unknown = b"\x00" + (2**31 - 7).to_bytes(4, "big") + good[5:]
    avro = b"\x00" + avro_id.to_bytes(4, "big") + good[5:]
    values = pa.array([good, unknown, avro], pa.binary())
    flaky = _OutOfReach(ours, outages=1)
    decoder = RowColumnDeserializer(flaky, fmt, mode="PERMISSIVE")
    with pytest.raises(SchemaRegistryError, match="cannot reach"):
        decoder.decode(values, topic)
    result = decoder.decode(values, topic)
    assert result.values.to_pylist()[1:] == [None, None] and result.values.to_pylist()[0] is not None
    errors = result.errors.to_pylist()
    assert errors[0] is None
    assert f"schema id {2**31 - 7} is not in the registry" in errors[1] and "40403" in errors[1]
    assert errors[2] == f"schema id {avro_id} is AVRO, not {fmt.upper()}"
    with pytest.raises(KafkaCodecError, match=f"row 1: schema id {2**31 - 7} is not in the registry"):
        RowColumnDeserializer(ours, fmt).decode(values, topic)


def test_json_is_validated_by_its_writer_schema_and_typed_by_the_reader(
    ours: SchemaRegistryClient, theirs: TheirClient, topic: str
) -> None:
    """A closed version 1 (additionalProperties false) pinned as the reader reads records of a
    version 2 that added a property (version 1's columns); a record its own schema refuses is bad."""
    v1 = {
        "title": "T",
        "type": "object",
        "properties": {"a": {"type": "integer"}},
        "additionalProperties": False,
    }
    v2 = {**v1, "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}}
    ctx = TheirContext(topic, TheirField.VALUE)
    first = TheirJSONSerializer(json.dumps(v1), theirs)({"a": 1}, ctx)
    second = TheirJSONSerializer(json.dumps(v2), theirs)({"a": 2, "b": "x"}, ctx)
    refused = second[:5] + b'{"a": 3, "b": 4}'  # b is a string in version 2
    reader = RowColumnDeserializer(ours, "json", subject=f"{topic}-value", version=1, mode="PERMISSIVE")
    result = reader.decode(pa.array([first, second, refused], pa.binary()))
    assert result.values.to_pylist() == [{"a": 1}, {"a": 2}, None]
    assert (
        result.errors.to_pylist()[:2] == [None, None]
        and "4 is not of type 'string'" in result.errors.to_pylist()[2]
    )


def test_protobuf_records_of_another_message_are_bad(
    ours: SchemaRegistryClient, theirs: TheirClient, topic: str
) -> None:
    """Ping and Order share a file (one schema id, message indexes [0] and [1]): with Order the
    reader, a Ping record is the record's error; it used to parse into an Order as garbage."""
    ctx = TheirContext(topic, TheirField.VALUE)
    conf = {"use.deprecated.format": False}
    order = ORDER(id=7)
    values = pa.array(
        [
            TheirProtobufSerializer(ORDER, theirs, conf)(order, ctx),
            TheirProtobufSerializer(PING, theirs, conf)(PING(n=300), ctx),
        ],
        pa.binary(),
    )
    assert values[0].as_py()[1:5] == values[1].as_py()[1:5]  # one schema id
    reader = RowColumnDeserializer(ours, "protobuf", mode="PERMISSIVE", message="kcr.Order")
    result = reader.decode(values, topic)
    assert result.values.to_pylist()[0]["id"] == 7 and result.values.to_pylist()[1] is None
    assert result.errors.to_pylist() == [None, "the record is a kcr.Ping, not a kcr.Order"]
