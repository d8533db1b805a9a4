"""schema_registry.columnar over a registry client double (the real client and dev registry are
exercised in tests/integration/test_sr_columns.py): reader schema from the subject's latest
version, writer schemas by id with their references, several topics in one column."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pytest

from kafka_core.codec.avro_encode import AvroColumnEncoder
from kafka_core.errors import KafkaCodecError, KafkaConfigError
from kafka_core.schema_registry.columnar import AvroColumnDeserializer, AvroColumnSerializer


@dataclass(frozen=True)
class Ref:
    name: str
    subject: str
    version: int


@dataclass(frozen=True)
class Sch:
    schema_str: str
    schema_type: str = "AVRO"
    references: tuple[Ref, ...] = ()


@dataclass(frozen=True)
class Registered:
    schema_id: int
    schema: Sch
    subject: str
    version: int


@dataclass
class FakeRegistry:
    """Schemas by id and subject versions; counts the lookups."""

    by_id: dict[int, Sch] = field(default_factory=dict)
    versions: dict[str, list[int]] = field(default_factory=dict)
    calls: list[str] = field(default_factory=list)

    def add(self, subject: str, schema: Sch) -> int:
        schema_id = len(self.by_id) + 1
        self.by_id[schema_id] = schema
        self.versions.setdefault(subject, []).append(schema_id)
        return schema_id

    def get_schema(self, schema_id: int) -> Sch:
        self.calls.append(f"id {schema_id}")
        if schema_id not in self.by_id:
            raise LookupError(f"Schema {schema_id} not found (40403)")
        return self.by_id[schema_id]

    def get_version(self, subject: str, version: int) -> Registered:
        schema_id = self.versions[subject][version - 1]
        return Registered(schema_id, self.by_id[schema_id], subject, version)

    def get_latest_version(self, subject: str) -> Registered:
        self.calls.append(f"latest {subject}")
        return self.get_version(subject, len(self.versions[subject]))


ADDRESS = {
    "type": "record",
    "name": "Address",
    "namespace": "shop",
    "fields": [{"name": "city", "type": "string"}],
}
V1 = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [{"name": "id", "type": "int"}, {"name": "ship", "type": "Address"}],
}
V2 = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "ship", "type": "Address"},
        {"name": "note", "type": ["null", "string"], "default": None},
    ],
}


def registry() -> tuple[FakeRegistry, int, int]:
    reg = FakeRegistry()
    reg.add("address", Sch(json.dumps(ADDRESS)))
    ref = (Ref("shop.Address", "address", 1),)
    v1 = reg.add("orders-value", Sch(json.dumps(V1), references=ref))
    v2 = reg.add("orders-value", Sch(json.dumps(V2), references=ref))
    return reg, v1, v2


def encode(schema: dict[str, Any], schema_id: int, rows: list[dict[str, Any]]) -> list[bytes]:
    full = json.loads(json.dumps(schema).replace('"Address"', json.dumps(ADDRESS)))
    return AvroColumnEncoder(full, schema_id).encode(pa.array(rows)).to_pylist()


def test_latest_reader_schema_mixed_writer_ids_and_references() -> None:
    reg, v1, v2 = registry()
    values = encode(V1, v1, [{"id": 1, "ship": {"city": "Oslo"}}]) + encode(
        V2, v2, [{"id": 2, "ship": {"city": "Rome"}, "note": "x"}]
    )
    decoder = AvroColumnDeserializer(reg)
    column, errors = decoder.decode_column(pa.array(values), pa.array(["orders", "orders"]))
    assert errors is None
    assert column.to_pylist() == [
        {"id": 1, "ship": {"city": "Oslo"}, "note": None},
        {"id": 2, "ship": {"city": "Rome"}, "note": "x"},
    ]
    assert reg.calls.count("latest orders-value") == 1 and reg.calls.count(f"id {v1}") == 1
    decoder.decode_column(pa.array(values), pa.array(["orders", "orders"]))
    assert reg.calls.count(f"id {v1}") == 1  # compiled once per id


def test_several_topics_keep_row_order_and_must_agree() -> None:
    reg, v1, v2 = registry()
    reg.versions["more-value"] = [v2]
    a = encode(V2, v2, [{"id": 1, "ship": {"city": "A"}, "note": None}])
    b = encode(V1, v1, [{"id": 2, "ship": {"city": "B"}}])
    values = pa.array([b[0], a[0], b[0]])
    column, _ = AvroColumnDeserializer(reg).decode_column(values, pa.array(["more", "orders", "more"]))
    assert [r["id"] for r in column.to_pylist()] == [2, 1, 2]
    reg.add("other-value", Sch('"string"'))
    with pytest.raises(KafkaConfigError, match="different reader schemas"):
        AvroColumnDeserializer(reg).decode_column(values, pa.array(["other", "orders", "other"]))


def test_permissive_unknown_id_and_failfast() -> None:
    reg, v1, _ = registry()
    values = pa.array([*encode(V1, v1, [{"id": 1, "ship": {"city": "Oslo"}}]), b"\x00\x00\x00\x00c\x02"])
    topics = pa.array(["orders"] * 2)
    column, errors = AvroColumnDeserializer(
        reg, json.dumps(V2).replace('"Address"', json.dumps(ADDRESS)), mode="PERMISSIVE"
    ).decode_column(values, topics)
    assert column.to_pylist()[1] is None
    assert errors.to_pylist() == [None, "schema id 99: LookupError: Schema 99 not found (40403)"]
    with pytest.raises(KafkaCodecError, match="record 1: schema id 99"):
        AvroColumnDeserializer(reg).decode_column(values, topics)
    with pytest.raises(KafkaConfigError, match="mode"):
        AvroColumnDeserializer(reg, mode="DROPMALFORMED")  # type: ignore[arg-type]


def test_serializer_with_the_latest_version() -> None:
    reg, _, v2 = registry()
    table = pa.table({"id": [7], "ship": [{"city": "Kyiv"}], "note": [None]})
    values = AvroColumnSerializer(reg, use_latest_version=True).encode_column(table, "orders")
    assert values.to_pylist()[0][:5] == b"\x00" + v2.to_bytes(4, "big")
    assert AvroColumnDeserializer(reg).decode(values, "orders").values.to_pylist() == [
        {"id": 7, "ship": {"city": "Kyiv"}, "note": None}
    ]
    with pytest.raises(KafkaConfigError):
        AvroColumnSerializer(reg)


class FlakyRegistry(FakeRegistry):
    """Out of reach for the first ``outages`` id lookups (as our client reports it), and an
    unknown id answered with HTTP 404, as a real registry answers."""

    def __init__(self, outages: int) -> None:
        super().__init__()
        self.outages = outages

    def get_schema(self, schema_id: int) -> Sch:
        from kafka_core.errors import SchemaRegistryError

        self.calls.append(f"id {schema_id}")
        if self.outages:
            self.outages -= 1
            raise SchemaRegistryError(-1, -1, "GET /schemas/ids: cannot reach http://registry")
        if schema_id not in self.by_id:
            raise SchemaRegistryError(404, 40403, f"Schema {schema_id} not found")
        return self.by_id[schema_id]


def test_a_registry_out_of_reach_fails_the_decode_and_is_asked_again() -> None:
    """PERMISSIVE nulls bad records, not the records of an id the registry could not be asked
    about: the decode raises (a Spark task fails and is retried), and the next decode asks again."""
    from kafka_core.errors import SchemaRegistryError

    reg = FlakyRegistry(outages=1)
    v1 = reg.add(
        "orders-value",
        Sch(json.dumps({"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]})),
    )
    values = pa.array(
        [
            *AvroColumnEncoder(json.loads(reg.by_id[v1].schema_str), v1)
            .encode(pa.array([{"a": 5}]))
            .to_pylist(),
            b"\x00\x00\x00\x00c\x02",
        ]
    )
    decoder = AvroColumnDeserializer(reg, reg.by_id[v1].schema_str, mode="PERMISSIVE")
    with pytest.raises(SchemaRegistryError, match="cannot reach"):
        decoder.decode(values)
    result = decoder.decode(values)
    assert result.values.to_pylist() == [{"a": 5}, None]
    assert result.errors.to_pylist() == [
        None,
        "schema id 99: LookupError: not in the registry: Schema 99 not found (HTTP status code 404, SR code 40403)",
    ]
    assert reg.calls == [f"id {v1}", f"id {v1}", "id 99"]
