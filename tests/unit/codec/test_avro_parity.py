"""The Cython Avro decoder and its pure-Python twin agree value for value and error for error, on
valid input and on input cut short or corrupted anywhere (fuzzing both with the same bytes)."""

from __future__ import annotations

from typing import Any

import pytest

from kafka_core._env import env_flag

if env_flag("KAFKA_CORE_PURE_PYTHON"):
    pytest.skip("KAFKA_CORE_PURE_PYTHON=1: the Cython codec is deliberately absent", allow_module_level=True)

import pyarrow as pa
from avro_strategies import avro_schemas, fastavro_bytes, framed, values_of
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafka_core.codec import avro_plan
from kafka_core.codec._cython import avro as cavro  # a missing extension fails here
from kafka_core.codec._python import avro as pavro
from kafka_core.codec.avro_columns import AvroColumnDecoder
from kafka_core.errors import KafkaCodecError

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def both(schema: Any, values: list[Any], mode: str, writers: dict[int, Any] | None = None) -> list[Any]:
    out = []
    for codec in (cavro, pavro):
        lookup = (writers or {}).get if writers else (lambda _id: schema)
        decoder = AvroColumnDecoder(schema, lookup, codec=codec)
        try:
            result = decoder.decode(values, mode)  # type: ignore[arg-type]
        except KafkaCodecError as exc:
            out.append(("raised", str(exc)))
            continue
        result.values.validate(full=True)
        out.append((result.values, None if result.errors is None else result.errors.to_pylist()))
    return out


def same(a: Any, b: Any) -> None:
    if a[0] == "raised" or b[0] == "raised":
        assert a == b
        return
    assert a[0].equals(b[0]), (a[0].to_pylist(), b[0].to_pylist())
    assert a[1] == b[1]


@st.composite
def mutated(draw: Any) -> tuple[Any, list[bytes | None]]:
    schema = draw(avro_schemas())
    bodies = [fastavro_bytes(schema, v) for v in draw(st.lists(values_of(schema), min_size=1, max_size=5))]
    values: list[bytes | None] = []
    for body in bodies:
        data = bytearray(framed(1, body))
        how = draw(st.sampled_from(["keep", "cut", "flip", "insert", "null"]))
        if how == "cut":
            del data[draw(st.integers(0, len(data))) :]
        elif how == "flip" and data:
            i = draw(st.integers(0, len(data) - 1))
            data[i] = draw(st.integers(0, 255))
        elif how == "insert":
            data.insert(draw(st.integers(0, len(data))), draw(st.integers(0, 255)))
        values.append(None if how == "null" else bytes(data))
    return schema, values


@SETTINGS
@given(mutated(), st.sampled_from(["FAILFAST", "PERMISSIVE"]))
def test_twins_agree_on_any_bytes(case: tuple[Any, list[Any]], mode: str) -> None:
    schema, values = case
    c, p = both(schema, values, mode)
    same(c, p)


@SETTINGS
@given(avro_schemas(), avro_schemas(), st.binary(max_size=64), st.data())
def test_twins_agree_across_writer_schemas(reader: Any, writer: Any, noise: bytes, data: Any) -> None:
    """A writer schema the reader may or may not resolve; values of the writer, or noise."""
    values = [
        framed(4, fastavro_bytes(writer, v)) for v in data.draw(st.lists(values_of(writer), max_size=4))
    ]
    values.append(framed(4, noise))
    c, p = both(reader, values, "PERMISSIVE", {4: writer})
    same(c, p)


def test_opcodes_are_the_same_numbers() -> None:
    """The Cython module's enum is a copy of avro_plan's numbers: a decode of every op through
    both (the hypothesis tests) only holds if they match; this names the ones a program uses."""
    assert avro_plan.OP_SKIP_UNION == 25 and avro_plan.K_MAP == 10


def test_sliced_and_chunked_input() -> None:
    body = fastavro_bytes("string", "hello")
    arr = pa.array([framed(1, body), None, framed(1, b"\x02"), framed(1, body)], pa.binary()).slice(1)
    c, p = both("string", arr, "PERMISSIVE")
    same(c, p)
    assert c[0].to_pylist() == [None, None, "hello"]
    chunked = pa.chunked_array([arr, arr])
    c, p = both("string", chunked, "PERMISSIVE")
    same(c, p)
