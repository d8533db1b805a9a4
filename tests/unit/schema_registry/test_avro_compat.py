"""The dev registry's Avro compatibility check against what it stands for: when it says a reader
schema can read a writer schema, fastavro's own schema resolution reads the writer's data with it
(hypothesis over record schemas that add, drop, promote and wrap fields); when it says no for a
field the reader needs and cannot fill, fastavro fails too."""

from __future__ import annotations

import io
import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from prerequisites import need_module

need_module("fastavro")
from fastavro import parse_schema, schemaless_reader, schemaless_writer  # noqa: E402

from kafka_core.devtools.registry.avro_compat import incompatibilities  # noqa: E402

TYPES: list[Any] = [
    "int",
    "long",
    "float",
    "double",
    "string",
    "bytes",
    "boolean",
    ["null", "string"],
    ["null", "long"],
    {"type": "array", "items": "int"},
    {"type": "map", "values": "long"},
]
PROMOTIONS = {
    "int": ["long", "float", "double"],
    "long": ["float", "double"],
    "float": ["double"],
    "string": ["bytes"],
    "bytes": ["string"],
}
DEFAULTS = {"int": 0, "long": 0, "float": 0.0, "double": 0.0, "string": "", "bytes": "", "boolean": False}


def _value(t: Any, rng: random.Random) -> Any:
    if isinstance(t, list):
        return None if rng.random() < 0.5 else _value(t[1], rng)
    if isinstance(t, dict):
        if t["type"] == "array":
            return [_value(t["items"], rng) for _ in range(rng.randint(0, 3))]
        return {f"k{i}": _value(t["values"], rng) for i in range(rng.randint(0, 3))}
    return {
        "null": None,
        "int": rng.randint(-(2**31), 2**31 - 1),
        "long": rng.randint(-(2**63), 2**63 - 1),
        "float": 1.5,
        "double": rng.random(),
        "string": "s" * rng.randint(0, 5),
        "bytes": b"b" * rng.randint(0, 5),
        "boolean": rng.random() < 0.5,
    }[t]


def _default(t: Any) -> Any:
    if isinstance(t, list):
        return None
    if isinstance(t, dict):
        return [] if t["type"] == "array" else {}
    return DEFAULTS[t]


@st.composite
def schema_pairs(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any]]:
    writer_types = draw(st.lists(st.sampled_from(range(len(TYPES))), min_size=1, max_size=6))
    writer_fields = [{"name": f"f{i}", "type": TYPES[t]} for i, t in enumerate(writer_types)]
    reader_fields = []
    for field in writer_fields:
        action = draw(st.sampled_from(["keep", "drop", "promote", "wrap", "change"]))
        t = field["type"]
        if action == "drop":
            continue
        if action == "promote" and isinstance(t, str) and t in PROMOTIONS:
            t = draw(st.sampled_from(PROMOTIONS[t]))
        elif action == "wrap" and not isinstance(t, list):
            t = ["null", t]
        elif action == "change":
            t = TYPES[draw(st.sampled_from(range(len(TYPES))))]
        reader_fields.append({"name": field["name"], "type": t})
    for j in range(draw(st.integers(0, 2))):
        t = TYPES[draw(st.sampled_from(range(len(TYPES))))]
        added: dict[str, Any] = {"name": f"new{j}", "type": t}
        if draw(st.booleans()):
            added["default"] = _default(t)
        reader_fields.append(added)
    record = {"type": "record", "name": "R"}
    return {**record, "fields": writer_fields}, {**record, "fields": reader_fields}


@settings(max_examples=300, deadline=None)
@given(pair=schema_pairs(), seed=st.integers(0, 2**32))
def test_what_the_check_accepts_fastavro_reads(
    pair: tuple[dict[str, Any], dict[str, Any]], seed: int
) -> None:
    writer, reader = (parse_schema(s) for s in pair)
    if incompatibilities(reader, writer):
        return
    rng = random.Random(seed)
    for _ in range(3):
        record = {f["name"]: _value(f["type"], rng) for f in pair[0]["fields"]}
        buffer = io.BytesIO()
        schemaless_writer(buffer, writer, record)
        buffer.seek(0)
        read = schemaless_reader(buffer, writer, reader)
        assert set(read) == {f["name"] for f in pair[1]["fields"]}


def test_a_needed_field_without_default_fails_in_both() -> None:
    writer = parse_schema({"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]})
    reader = parse_schema(
        {
            "type": "record",
            "name": "R",
            "fields": [{"name": "a", "type": "int"}, {"name": "b", "type": "string"}],
        }
    )
    assert incompatibilities(reader, writer)
    buffer = io.BytesIO()
    schemaless_writer(buffer, writer, {"a": 1})
    buffer.seek(0)
    try:
        schemaless_reader(buffer, writer, reader)
    except Exception:
        return
    raise AssertionError("fastavro read a record whose reader needs a field the writer lacks")


def test_recursive_and_named_types() -> None:
    linked = {
        "type": "record",
        "name": "Node",
        "fields": [{"name": "v", "type": "int"}, {"name": "next", "type": ["null", "Node"], "default": None}],
    }
    wider = {**linked, "fields": [{"name": "v", "type": "long"}, linked["fields"][1]]}
    assert incompatibilities(parse_schema(wider), parse_schema(linked)) == []
    assert incompatibilities(parse_schema(linked), parse_schema(wider))  # long cannot be read as int
    other_fields = [
        {"name": "v", "type": "int"},
        {"name": "next", "type": ["null", "Other"], "default": None},
    ]
    renamed = {**linked, "name": "Other", "fields": other_fields}
    assert incompatibilities(parse_schema(renamed), parse_schema(linked))
    aliased = {
        **renamed,
        "aliases": ["Node"],
        "fields": [
            {"name": "v", "type": "int"},
            {"name": "next", "type": ["null", "Other"], "default": None},
        ],
    }
    assert incompatibilities(parse_schema(aliased), parse_schema(linked)) == []
