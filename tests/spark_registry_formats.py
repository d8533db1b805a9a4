"""Registry-format test data shared by the Spark tests (local, Connect): an Order as JSON Schema
(open, and closed with a version 2 that adds a property) and as Protobuf (built from descriptors,
no protoc; version 2 adds field 4), written by confluent-kafka's serializers, plus records a
PERMISSIVE read must turn into errors (an id no registry handed out, an unparsable payload)."""

from __future__ import annotations

import base64
import datetime
import json
from typing import Any

from confluent_kafka.schema_registry import SchemaRegistryClient as TheirClient
from confluent_kafka.serialization import MessageField, SerializationContext

__all__ = ["AT", "ORDER_JSON", "UNKNOWN_ID", "RegistryFormat", "proto_order"]

AT = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)

ORDER_JSON = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "Order",
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "note": {"type": ["null", "string"]},
        "tags": {"type": "array", "items": {"type": "string"}},
        "ship": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
    "required": ["id"],
}


def proto_order(coupon: bool = False) -> Any:
    """An Order message class built from descriptors (no protoc here): id, a Timestamp, tags (and
    with ``coupon``, version 2's added field 4), each version in a pool of its own."""
    from google.protobuf import descriptor_pb2, descriptor_pool, timestamp_pb2
    from google.protobuf.message_factory import GetMessageClass

    F = descriptor_pb2.FieldDescriptorProto
    pool = descriptor_pool.DescriptorPool()
    known = descriptor_pb2.FileDescriptorProto()
    timestamp_pb2.DESCRIPTOR.CopyToProto(known)
    pool.Add(known)
    file = descriptor_pb2.FileDescriptorProto(
        name="kc_spark/order.proto",
        package="kcs",
        syntax="proto3",
        dependency=["google/protobuf/timestamp.proto"],
    )
    o = file.message_type.add(name="Order")
    o.field.add(name="id", number=1, type=F.TYPE_INT32, label=F.LABEL_OPTIONAL)
    o.field.add(
        name="at",
        number=2,
        type=F.TYPE_MESSAGE,
        type_name=".google.protobuf.Timestamp",
        label=F.LABEL_OPTIONAL,
    )
    o.field.add(name="tags", number=3, type=F.TYPE_STRING, label=F.LABEL_REPEATED)
    if coupon:
        o.field.add(name="coupon", number=4, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    pool.Add(file)
    return GetMessageClass(pool.FindMessageTypeByName("kcs.Order"))


UNKNOWN_ID = 987_654_321  # an id no registry here has handed out

ORDER_JSON_CLOSED = {**ORDER_JSON, "additionalProperties": False}
ORDER_JSON_V2 = {
    **ORDER_JSON_CLOSED,
    "properties": {**ORDER_JSON["properties"], "coupon": {"type": "string"}},  # type: ignore[dict-item]
}


class RegistryFormat:
    """One registry format's side of a test: confluent-kafka's serializers write the input
    (version 1, then version 2), its deserializer reads what the sink wrote back."""

    def __init__(self, name: str, registry: str) -> None:
        self.name = name
        self.client = TheirClient({"url": registry})
        if name == "json":
            from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer

            self.schema = json.dumps(ORDER_JSON_CLOSED)
            self._v1 = JSONSerializer(self.schema, self.client)
            self._v2 = JSONSerializer(json.dumps(ORDER_JSON_V2), self.client)
            self._out = JSONDeserializer(self.schema)
        else:
            from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer

            self._cls1, self._cls2 = proto_order(), proto_order(coupon=True)
            self.schema = base64.standard_b64encode(self._cls1.DESCRIPTOR.file.serialized_pb).decode()
            conf = {"use.deprecated.format": False}
            self._v1 = ProtobufSerializer(self._cls1, self.client, conf)
            self._v2 = ProtobufSerializer(self._cls2, self.client, conf)
            self._out = ProtobufDeserializer(self._cls1, conf)

    @property
    def parse_error(self) -> str:
        """What the error of ``bad()``'s unparsable record says."""
        return "not JSON" if self.name == "json" else "cannot parse"

    def framed(self, topic: str, i: int, v2: bool = False) -> bytes:
        ctx = SerializationContext(topic, MessageField.VALUE)
        if self.name == "json":
            row: dict[str, Any] = {"id": i, "tags": [str(i)], "ship": {"city": f"c{i}"}}
            return self._v2({**row, "coupon": "C"}, ctx) if v2 else self._v1(row, ctx)
        message = self._cls2(coupon="C") if v2 else self._cls1()
        message.id = i
        message.tags.append(str(i))
        message.at.FromDatetime(AT + datetime.timedelta(seconds=i))
        return self._v2(message, ctx) if v2 else self._v1(message, ctx)

    def bad(self, topic: str) -> list[bytes]:
        """A record under an id the registry does not know, and one its format cannot parse."""
        good = self.framed(topic, 99)
        schema_id = int.from_bytes(good[1:5], "big")
        unknown = b"\x00" + UNKNOWN_ID.to_bytes(4, "big") + good[5:]
        corrupt = (
            b"\x00" + schema_id.to_bytes(4, "big") + (b"{nope" if self.name == "json" else b"\x00\xff\xff")
        )
        return [unknown, corrupt]

    def read_back(self, topic: str, value: bytes) -> tuple[int, list[str]]:
        got = self._out(value, SerializationContext(topic, MessageField.VALUE))
        if self.name == "json":
            assert "coupon" not in got  # version 1's columns only: the reader schema's
            return got["id"], got["tags"]
        assert got.at.ToDatetime(tzinfo=datetime.UTC) == AT + datetime.timedelta(seconds=got.id)
        return got.id, list(got.tags)
