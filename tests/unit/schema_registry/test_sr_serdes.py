"""Our serializers against confluent-kafka's, the reference, on the same registry: the same bytes
for the same schema and id, and each reads what the other wrote; then subject strategies,
auto-register / use-latest / a fixed id, reader vs writer schemas, the hooks, the errors."""

from __future__ import annotations

import datetime
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prerequisites import need_module

need_module("fastavro")
need_module("google.protobuf")
need_module("jsonschema")
need_module("confluent_kafka.schema_registry.avro")
need_module("confluent_kafka.schema_registry.protobuf")
need_module("confluent_kafka.schema_registry.json_schema")

from confluent_kafka.schema_registry import SchemaRegistryClient as TheirClient  # noqa: E402
from confluent_kafka.schema_registry import record_subject_name_strategy as their_record_strategy  # noqa: E402
from confluent_kafka.schema_registry.avro import AvroDeserializer as TheirAvroDeserializer  # noqa: E402
from confluent_kafka.schema_registry.avro import AvroSerializer as TheirAvroSerializer  # noqa: E402
from confluent_kafka.schema_registry.json_schema import JSONDeserializer as TheirJSONDeserializer  # noqa: E402
from confluent_kafka.schema_registry.json_schema import JSONSerializer as TheirJSONSerializer  # noqa: E402
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer as TheirProtobufDeserializer  # noqa: E402
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer as TheirProtobufSerializer  # noqa: E402
from confluent_kafka.serialization import MessageField as TheirField  # noqa: E402
from confluent_kafka.serialization import SerializationContext as TheirContext  # noqa: E402
from google.protobuf import descriptor_pb2, descriptor_pool  # noqa: E402
from google.protobuf.message_factory import GetMessageClass  # noqa: E402

from kafka_core.errors import KafkaConfigError  # noqa: E402
from kafka_core.schema_registry import (  # noqa: E402
    AvroDeserializer,
    AvroSerializer,
    JSONDeserializer,
    JSONSerializer,
    MessageField,
    ProtobufDeserializer,
    ProtobufSerializer,
    Schema,
    SchemaRegistryClient,
    SchemaRegistryError,
    SerializationContext,
    SerializationError,
    record_subject_name_strategy,
    topic_record_subject_name_strategy,
)

ORDER = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID"]}},
        {"name": "lines", "type": {"type": "array", "items": {"type": "record", "name": "Line", "fields": [
            {"name": "sku", "type": "string"}, {"name": "qty", "type": "int"}]}}},
        {"name": "ship", "type": {"type": "record", "name": "Ship", "fields": [{"name": "city", "type": "string"}]}},
        {"name": "tags", "type": {"type": "map", "values": "string"}},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "weight", "type": "double"},
        {"name": "raw", "type": "bytes"},
        {"name": "ok", "type": "boolean"},
    ],
}  # fmt: skip
ORDER_STR = json.dumps(ORDER)
ORDER_V2 = {
    **ORDER,
    "fields": [*ORDER["fields"], {"name": "coupon", "type": ["null", "string"], "default": None}],
}  # type: ignore[list-item]


def _order(i: int = 1, note: str | None = "fragile") -> dict[str, Any]:
    return {
        "id": i,
        "at": datetime.datetime(2026, 3, 1, 12, 0, tzinfo=datetime.UTC) + datetime.timedelta(milliseconds=i),
        "status": "PAID",
        "lines": [{"sku": "A-1", "qty": 2}, {"sku": "B-7", "qty": 1}],
        "ship": {"city": "Lyon"},
        "tags": {"gift": "yes"},
        "note": note,
        "weight": 1.25,
        "raw": b"\x00\xff",
        "ok": True,
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
    return unique_subject("orders")


def _ctx(topic: str, field: MessageField = MessageField.VALUE) -> SerializationContext:
    return SerializationContext(topic, field)


def _their_ctx(topic: str, field: TheirField = TheirField.VALUE) -> TheirContext:
    return TheirContext(topic, field)


# --- Avro ----------------------------------------------------------------------------------------


def test_avro_bytes_are_confluents(ours: SchemaRegistryClient, theirs: TheirClient, topic: str) -> None:
    mine = AvroSerializer(ours, ORDER_STR)(_order(), _ctx(topic))
    reference = TheirAvroSerializer(theirs, ORDER_STR)(_order(), _their_ctx(topic))
    assert mine == reference
    assert (
        mine[0] == 0
        and int.from_bytes(mine[1:5], "big") == ours.get_latest_version(f"{topic}-value").schema_id
    )
    assert AvroDeserializer(ours)(reference, _ctx(topic)) == _order()
    assert TheirAvroDeserializer(theirs)(mine, _their_ctx(topic)) == _order()


_LONG = st.integers(-(2**63), 2**63 - 1)
_orders = st.builds(
    lambda i, note, qty, sku, weight, raw, tags, ok: {
        **_order(0),
        "id": i,
        "note": note,
        "lines": [{"sku": s, "qty": q} for s, q in zip(sku, qty, strict=False)],
        "weight": weight,
        "raw": raw,
        "tags": tags,
        "ok": ok,
    },
    _LONG,
    st.none() | st.text(),
    st.lists(st.integers(-(2**31), 2**31 - 1), max_size=5),
    st.lists(st.text(), max_size=5),
    st.floats(allow_nan=False),
    st.binary(),
    st.dictionaries(st.text(), st.text(), max_size=3),
    st.booleans(),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(order=_orders)
def test_avro_bytes_are_confluents_for_any_order(
    ours: SchemaRegistryClient, theirs: TheirClient, order: dict[str, Any]
) -> None:
    topic = "hypothesis-orders"  # one subject: the schema is registered once
    mine = AvroSerializer(ours, ORDER_STR)(order, _ctx(topic))
    assert mine == TheirAvroSerializer(theirs, ORDER_STR)(order, _their_ctx(topic))
    assert AvroDeserializer(ours)(mine) == order


def test_avro_as_our_producer_and_consumer_hooks(ours: SchemaRegistryClient, topic: str) -> None:
    """``for_topic`` makes the ``fn(obj) -> bytes`` a producer takes; the deserializer is already
    the ``fn(bytes) -> obj`` a consumer takes, memoryviews included (what our codec hands over)."""
    value_serializer = AvroSerializer(ours, ORDER_STR).for_topic(topic)
    key_serializer = AvroSerializer(ours, '"string"').for_topic(topic, MessageField.KEY)
    value, key = value_serializer(_order()), key_serializer("k-1")
    assert ours.get_subjects(subject_prefix=topic) == sorted([f"{topic}-key", f"{topic}-value"])
    value_deserializer = AvroDeserializer(ours)
    assert value_deserializer(memoryview(value)) == _order()
    assert AvroDeserializer(ours)(bytearray(key)) == "k-1"
    assert value_serializer(None) is None and value_deserializer(None) is None


@pytest.mark.parametrize(
    ("ours_strategy", "theirs_strategy", "subject"),
    [
        (record_subject_name_strategy, their_record_strategy, "shop.Order"),
        (topic_record_subject_name_strategy, None, "{topic}-shop.Order"),
    ],
)
def test_subject_name_strategies(
    ours: SchemaRegistryClient,
    theirs: TheirClient,
    topic: str,
    ours_strategy: Any,
    theirs_strategy: Any,
    subject: str,
) -> None:
    conf = {"subject.name.strategy": ours_strategy}
    mine = AvroSerializer(ours, ORDER_STR, conf=conf)(_order(), _ctx(topic))
    expected = subject.format(topic=topic)
    assert expected in ours.get_subjects()
    assert int.from_bytes(mine[1:5], "big") == ours.get_latest_version(expected).schema_id
    if theirs_strategy is not None:
        reference = TheirAvroSerializer(theirs, ORDER_STR, conf={"subject.name.strategy": theirs_strategy})
        assert reference(_order(), _their_ctx(topic)) == mine


def test_the_topic_strategy_needs_a_context(ours: SchemaRegistryClient) -> None:
    with pytest.raises(SerializationError, match="for_topic"):
        AvroSerializer(ours, ORDER_STR)(_order())
    # the record strategy needs none
    assert AvroSerializer(ours, ORDER_STR, conf={"subject.name.strategy": record_subject_name_strategy})(
        _order()
    )


def test_without_auto_register_the_schema_must_be_there(ours: SchemaRegistryClient, topic: str) -> None:
    lookup_only = AvroSerializer(ours, ORDER_STR, conf={"auto.register.schemas": False})
    with pytest.raises(SchemaRegistryError) as info:
        lookup_only(_order(), _ctx(topic))
    assert info.value.error_code == 40401
    schema_id = ours.register_schema(f"{topic}-value", Schema(ORDER_STR))
    assert int.from_bytes(lookup_only(_order(), _ctx(topic))[1:5], "big") == schema_id


def test_use_latest_version_writes_with_the_latest(
    ours: SchemaRegistryClient, theirs: TheirClient, topic: str
) -> None:
    subject = f"{topic}-value"
    ours.register_schema(subject, Schema(ORDER_STR))
    latest_id = ours.register_schema(subject, Schema(json.dumps(ORDER_V2)))
    conf = {"auto.register.schemas": False, "use.latest.version": True}
    mine = AvroSerializer(ours, ORDER_STR, conf=conf)(_order(), _ctx(topic))
    assert int.from_bytes(mine[1:5], "big") == latest_id
    assert AvroDeserializer(ours)(mine) == {**_order(), "coupon": None}  # written with v2: coupon's default
    assert mine == TheirAvroSerializer(theirs, ORDER_STR, conf=conf)(_order(), _their_ctx(topic))
    with pytest.raises(KafkaConfigError):
        AvroSerializer(ours, ORDER_STR, conf={"use.latest.version": True})  # auto.register stays on: refused


def test_a_fixed_schema_id(ours: SchemaRegistryClient, topic: str) -> None:
    schema_id = ours.register_schema(f"{topic}-other", Schema(ORDER_STR))
    fixed = AvroSerializer(ours, ORDER_STR, conf={"use.schema.id": schema_id, "auto.register.schemas": False})
    data = fixed(_order(), _ctx(topic))
    assert int.from_bytes(data[1:5], "big") == schema_id
    assert f"{topic}-value" not in ours.get_subjects()


def test_reader_schema_resolution(ours: SchemaRegistryClient, theirs: TheirClient, topic: str) -> None:
    old = AvroSerializer(ours, ORDER_STR)(_order(), _ctx(topic))
    new = AvroSerializer(ours, json.dumps(ORDER_V2))({**_order(2), "coupon": "X"}, _ctx(topic))
    assert int.from_bytes(old[1:5], "big") != int.from_bytes(new[1:5], "big")
    v2_reader = AvroDeserializer(ours, json.dumps(ORDER_V2))
    assert v2_reader(old) == {**_order(), "coupon": None}
    assert v2_reader(new)["coupon"] == "X"
    v1_reader = AvroDeserializer(ours, ORDER_STR)
    assert v1_reader(new) == _order(2)  # the new field is skipped
    their_v2 = TheirAvroDeserializer(theirs, json.dumps(ORDER_V2))
    assert their_v2(old, _their_ctx(topic)) == v2_reader(old)
    latest_reader = AvroDeserializer(ours, conf={"use.latest.version": True})
    assert latest_reader(old, _ctx(topic)) == {**_order(), "coupon": None}


def test_an_unreadable_change_is_a_serialization_error(ours: SchemaRegistryClient, topic: str) -> None:
    data = AvroSerializer(ours, ORDER_STR)(_order(), _ctx(topic))
    needs_more = {**ORDER, "fields": [*ORDER["fields"], {"name": "must", "type": "string"}]}  # type: ignore[list-item]
    with pytest.raises(SerializationError):
        AvroDeserializer(ours, json.dumps(needs_more))(data)


def test_to_dict_and_from_dict_hooks(ours: SchemaRegistryClient, topic: str) -> None:
    class Order:
        def __init__(self, fields: dict[str, Any]) -> None:
            self.fields = fields

    seen: list[Any] = []

    def to_dict(obj: Order, ctx: SerializationContext | None) -> dict[str, Any]:
        seen.append(ctx)
        return obj.fields

    data = AvroSerializer(ours, ORDER_STR, to_dict=to_dict)(Order(_order()), _ctx(topic))
    back = AvroDeserializer(ours, from_dict=lambda d, ctx: Order(d))(data, _ctx(topic))
    assert isinstance(back, Order) and back.fields == _order() and seen[0].topic == topic


@pytest.mark.parametrize("data", [b"", b"\x00\x00", b"\x01\x00\x00\x00\x01\x02"])
def test_bytes_without_the_framing(ours: SchemaRegistryClient, data: bytes) -> None:
    with pytest.raises(SerializationError):
        AvroDeserializer(ours)(data)


def test_an_unknown_schema_id(ours: SchemaRegistryClient) -> None:
    with pytest.raises(SerializationError, match="2147483000") as info:
        AvroDeserializer(ours)(b"\x00" + (2147483000).to_bytes(4, "big") + b"\x02")
    assert isinstance(info.value.__cause__, SchemaRegistryError)


def test_a_value_that_does_not_fit_the_schema(ours: SchemaRegistryClient, topic: str) -> None:
    with pytest.raises(SerializationError):
        AvroSerializer(ours, ORDER_STR)({**_order(), "id": "not a long"}, _ctx(topic))


def test_avro_references(
    ours: SchemaRegistryClient, theirs: TheirClient, unique_subject: Callable[[str], str]
) -> None:
    from kafka_core.schema_registry import SchemaReference

    address_subject = unique_subject("address")
    ours.register_schema(
        address_subject,
        Schema(
            json.dumps(
                {
                    "type": "record",
                    "name": "Address",
                    "namespace": "x",
                    "fields": [{"name": "city", "type": "string"}],
                }
            )
        ),
    )
    person = Schema(
        json.dumps(
            {
                "type": "record",
                "name": "Person",
                "namespace": "x",
                "fields": [{"name": "home", "type": "x.Address"}],
            }
        ),
        "AVRO",
        [SchemaReference("x.Address", address_subject, 1)],
    )
    topic = unique_subject("people")
    ours.register_schema(f"{topic}-value", person)
    conf = {"auto.register.schemas": False, "use.latest.version": True}
    data = AvroSerializer(ours, person, conf=conf)({"home": {"city": "Oslo"}}, _ctx(topic))
    assert AvroDeserializer(ours)(data) == {"home": {"city": "Oslo"}}
    assert TheirAvroDeserializer(theirs)(data, _their_ctx(topic)) == {"home": {"city": "Oslo"}}


# --- Protobuf ------------------------------------------------------------------------------------


def _protobuf_classes() -> tuple[type[Any], type[Any], type[Any]]:
    """Order (imports Money from another file, nests Line) and a second top-level message, built
    from descriptors (no protoc here)."""
    F = descriptor_pb2.FieldDescriptorProto
    pool = descriptor_pool.DescriptorPool()
    money = descriptor_pb2.FileDescriptorProto(name="kc_test/money.proto", package="kc", syntax="proto3")
    m = money.message_type.add(name="Money")
    m.field.add(name="cents", number=1, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    m.field.add(name="currency", number=2, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    pool.Add(money)
    orders = descriptor_pb2.FileDescriptorProto(
        name="kc_test/orders.proto", package="kc", syntax="proto3", dependency=["kc_test/money.proto"]
    )
    first = orders.message_type.add(name="Ping")
    first.field.add(name="n", number=1, type=F.TYPE_INT32, label=F.LABEL_OPTIONAL)
    o = orders.message_type.add(name="Order")
    o.field.add(name="id", number=1, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    o.field.add(name="note", number=2, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    o.field.add(name="total", number=3, type=F.TYPE_MESSAGE, type_name=".kc.Money", label=F.LABEL_OPTIONAL)
    line = o.nested_type.add(name="Line")
    line.field.add(name="sku", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    o.field.add(
        name="lines", number=4, type=F.TYPE_MESSAGE, type_name=".kc.Order.Line", label=F.LABEL_REPEATED
    )
    pool.Add(orders)
    get = lambda name: GetMessageClass(pool.FindMessageTypeByName(name))  # noqa: E731
    return get("kc.Ping"), get("kc.Order"), get("kc.Order.Line")


PING, PB_ORDER, PB_LINE = _protobuf_classes()


def _pb_order() -> Any:
    order = PB_ORDER(id=7, note="é")
    order.total.cents = 1999
    order.total.currency = "EUR"
    order.lines.add(sku="A")
    return order


def test_protobuf_bytes_are_confluents(ours: SchemaRegistryClient, theirs: TheirClient, topic: str) -> None:
    conf = {"use.deprecated.format": False}
    mine = ProtobufSerializer(PB_ORDER, ours, conf)(_pb_order(), _ctx(topic))
    reference = TheirProtobufSerializer(PB_ORDER, theirs, conf)(_pb_order(), _their_ctx(topic))
    assert mine == reference
    assert mine[5:7] == b"\x02\x02"  # the index list: one index, 1 (Order is the file's second message)
    assert "kc_test/money.proto" in ours.get_subjects()  # the import, registered as a reference
    assert ProtobufDeserializer(PB_ORDER, conf)(reference) == _pb_order()
    assert TheirProtobufDeserializer(PB_ORDER, conf)(mine, _their_ctx(topic)) == _pb_order()


@pytest.mark.parametrize(
    ("message", "indexes"), [(lambda: PING(n=3), b"\x00"), (lambda: PB_LINE(sku="Z"), b"\x04\x02\x00")]
)
def test_protobuf_message_indexes(
    ours: SchemaRegistryClient, theirs: TheirClient, topic: str, message: Callable[[], Any], indexes: bytes
) -> None:
    conf = {"use.deprecated.format": False}
    msg = message()
    mine = ProtobufSerializer(type(msg), ours, conf)(msg, _ctx(topic))
    assert mine[5 : 5 + len(indexes)] == indexes
    assert mine == TheirProtobufSerializer(type(msg), theirs, conf)(msg, _their_ctx(topic))
    assert ProtobufDeserializer(type(msg), conf)(mine) == msg


def test_protobuf_refuses_another_type(ours: SchemaRegistryClient, topic: str) -> None:
    with pytest.raises(SerializationError):
        ProtobufSerializer(PB_ORDER, ours)(PING(n=1), _ctx(topic))
    with pytest.raises(SerializationError):
        ProtobufDeserializer(PB_ORDER)(b"\x00\x00\x00\x00\x01")


# --- JSON Schema ---------------------------------------------------------------------------------

JSON_ORDER = json.dumps(
    {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "Order",
        "type": "object",
        "properties": {"id": {"type": "integer"}, "note": {"type": ["string", "null"]}},
        "required": ["id"],
    }
)


def test_json_bytes_are_confluents(ours: SchemaRegistryClient, theirs: TheirClient, topic: str) -> None:
    value = {"id": 3, "note": "crème"}
    mine = JSONSerializer(JSON_ORDER, ours)(value, _ctx(topic))
    reference = TheirJSONSerializer(JSON_ORDER, theirs)(value, _their_ctx(topic))
    assert mine == reference
    assert JSONDeserializer(JSON_ORDER)(reference) == value
    assert JSONDeserializer(None, schema_registry_client=ours)(reference) == value
    assert TheirJSONDeserializer(JSON_ORDER)(mine, _their_ctx(topic)) == value


def test_json_validation(ours: SchemaRegistryClient, topic: str) -> None:
    with pytest.raises(SerializationError, match="id"):
        JSONSerializer(JSON_ORDER, ours)({"note": "no id"}, _ctx(topic))
    unchecked = JSONSerializer(JSON_ORDER, ours, conf={"validate": False})({"note": "no id"}, _ctx(topic))
    with pytest.raises(SerializationError):
        JSONDeserializer(JSON_ORDER)(unchecked)
    assert JSONDeserializer(JSON_ORDER, conf={"validate": False})(unchecked) == {"note": "no id"}


def test_same_bytes_as_confluents_in_memory_mock() -> None:
    """confluent-kafka's ``mock://`` client (its in-memory registry) numbers schemas from 1, as a
    fresh dev registry does: the same schema is id 1 in both, and the bytes are the same."""
    from kafka_core.devtools.registry import RegistryServer

    with RegistryServer() as fresh, SchemaRegistryClient({"url": fresh.url}) as client:
        mine = AvroSerializer(client, ORDER_STR)(_order(), _ctx("mocked"))
        mock = TheirClient.new_client({"url": "mock://sr-34"})
        reference = TheirAvroSerializer(mock, ORDER_STR)(_order(), _their_ctx("mocked"))
        assert reference[:5] == b"\x00\x00\x00\x00\x01"
        assert mine == reference
        assert AvroDeserializer(client)(reference) == _order()


def test_confluents_context_works_with_ours(ours: SchemaRegistryClient, topic: str) -> None:
    data = AvroSerializer(ours, ORDER_STR)(_order(), _their_ctx(topic))  # type: ignore[arg-type]
    assert f"{topic}-value" in ours.get_subjects()
    assert AvroDeserializer(ours)(data, _their_ctx(topic)) == _order()  # type: ignore[arg-type]


def test_json_use_latest_validates_against_the_latest(ours: SchemaRegistryClient, topic: str) -> None:
    strict = json.dumps({**json.loads(JSON_ORDER), "required": ["id", "note"]})
    old = JSONSerializer(JSON_ORDER, ours)({"id": 1}, _ctx(topic))  # written under v1: no note
    ours.set_compatibility(f"{topic}-value", "NONE")
    ours.register_schema(f"{topic}-value", Schema(strict, "JSON"))
    assert JSONDeserializer(None, schema_registry_client=ours)(old, _ctx(topic)) == {"id": 1}  # the writer's
    with pytest.raises(SerializationError, match="note"):
        JSONDeserializer(None, schema_registry_client=ours, conf={"use.latest.version": True})(
            old, _ctx(topic)
        )


def test_protobuf_refuses_use_latest_on_read() -> None:
    with pytest.raises(KafkaConfigError):
        ProtobufDeserializer(PB_ORDER, {"use.latest.version": True})
