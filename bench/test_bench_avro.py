"""The Avro bench's harness, correctness only (no timings): the shared order events, the report's
section, and a small run of every client against a broker (bench/bench_avro.py)."""

from __future__ import annotations

import io
from typing import Any

import pytest

from bench import report
from bench.avro_order import ORDER_SCHEMA, encode_orders, make_orders


def test_orders_are_deterministic_and_varied() -> None:
    a, b = make_orders(200), make_orders(200)
    assert a == b and make_orders(200, seed=1) != a
    assert {o["status"] for o in a} == {"NEW", "PAID", "SHIPPED", "CANCELLED"}
    assert any(o["discount_cents"] is None for o in a) and any(o["discount_cents"] is not None for o in a)
    assert all(1 <= len(o["items"]) <= 4 for o in a) and len({o["order_id"] for o in a}) == 200


def test_encoded_orders_are_confluent_framed_and_decode_back() -> None:
    from fastavro import parse_schema, schemaless_reader

    orders = make_orders(50)
    values = encode_orders(orders, 7)
    parsed = parse_schema(ORDER_SCHEMA)
    for order, value in zip(orders, values, strict=True):
        assert value[:5] == b"\x00\x00\x00\x00\x07"
        buffer = io.BytesIO(value)
        buffer.seek(5)
        assert schemaless_reader(buffer, parsed) == order


def test_the_avro_section_renders_with_ratios_and_errors() -> None:
    avro: dict[str, Any] = {
        "broker": "Tansu",
        "date": "2026-11-28 11:00 UTC",
        "load": "1.00, 1.00, 1.00",
        "load_after": "2.00, 1.00, 1.00",
        "records": 1000,
        "partitions": 3,
        "medians": {
            "confluent-kafka": {"rate": 20_000.0, "cpu_s_per_million": 30.0},
            "kafka_core": {"rate": 40_000.0, "cpu_s_per_million": 15.0},
        },
        "errors": {"kafka_core-bytes": "boom"},
    }
    text = report.render({"environment": {}, "sections": {"avro": avro}})
    assert "| kafka_core `poll` + AvroDeserializer | 40 k | 2.00x | 15.00 | 0.50x |" in text
    assert "error: boom" in text and "load average 1.00, 1.00, 1.00 before, 2.00, 1.00, 1.00 after" in text


@pytest.fixture(scope="module")
def bootstrap() -> Any:
    from bench.common import bench_broker

    with bench_broker() as address:
        yield address


@pytest.mark.broker
def test_every_client_decodes_every_record(bootstrap: str) -> None:
    from bench.bench_avro import CLIENTS, run

    rows, errors, _, _ = run(bootstrap, records=3000, partitions=2, repeat=1, clients=list(CLIENTS))
    assert errors == {}
    assert sorted(rows) == sorted(CLIENTS)
    assert all(r[0]["records"] == 3000 and r[0]["rate"] > 0 for r in rows.values())
