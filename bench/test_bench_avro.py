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


def test_the_columns_and_spark_sections_render() -> None:
    """bench_avro_columns --save and bench_spark_avro --save: their sections in RESULTS.md."""
    from bench.bench_avro_columns import codec_encode
    from bench.common import RunResult

    values = encode_orders(make_orders(300), 9)
    encode = codec_encode(values, __import__("json").dumps(ORDER_SCHEMA), 1)  # checks the bytes too
    assert [r.records for r in encode] == [300, 300]
    run = lambda client, wall: RunResult(client, records=1000, wall_s=wall, cpu_s=wall / 2)  # noqa: E731
    columns = {
        "broker": "no broker (--codec-only)",
        "date": "2026-11-28 13:00 UTC",
        "load": "1.00 1.00 1.00",
        "records": 1000,
        "results": [],
        "codec": {
            "encode": [run("fastavro schemaless_writer per row", 1.0).__dict__, run("ours", 0.25).__dict__]
        },
    }
    spark = {
        "broker": "Tansu",
        "date": "2026-11-28 13:00 UTC",
        "load": "1.00 1.00 1.00",
        "rows": 1_000_000,
        "pyspark": "4.0.1",
        "runs": {
            "write to_avro+kafka": [{"wall_s": 10.0, "cpu_s": 20.0}, {"wall_s": 8.0, "cpu_s": 16.0}],
            "write kafka_core": [{"wall_s": 5.0, "cpu_s": 6.0}, {"wall_s": 4.0, "cpu_s": 5.0}],
        },
        "peers": {"write kafka_core": "write to_avro+kafka"},
    }
    text = report.render({"environment": {}, "sections": {"avro_columns": columns, "spark_avro": spark}})
    assert "## Schema Registry: Avro as Arrow columns (issue 34)" in text
    assert "The encode alone, no broker:" in text and "| ours | 4 k | 4.00x |" in text
    assert "## Spark and Schema Registry Avro (issue 34)" in text
    assert (
        "| write kafka_core | 5.0 | 4.0 | 2.00x / 2.00x |  | 5.00 |  |" in text
    )  # a section saved before rounds
    spark["mode"] = "fresh"
    spark["runs"] = {
        "read kafka+from_avro": [
            [{"wall_s": 30.0, "cpu_s": 20.0}, {"wall_s": 16.0, "cpu_s": 12.0}],
            [{"wall_s": 20.0, "cpu_s": 20.0}, {"wall_s": 14.0, "cpu_s": 12.0}],
        ],
        "read kafka_core": [
            [
                {"wall_s": 10.0, "cpu_s": 6.0, "cpu_jvm_s": 4.0, "rows": 10},
                {"wall_s": 8.0, "cpu_s": 4.0, "cpu_jvm_s": 3.0},
            ],
            [
                {"wall_s": 20.0, "cpu_s": 8.0, "cpu_jvm_s": 5.0},
                {"wall_s": 7.0, "cpu_s": 6.0, "cpu_jvm_s": 3.0},
            ],
        ],
    }
    spark["peers"] = {"read kafka_core": "read kafka+from_avro"}
    text = report.render({"environment": {}, "sections": {"spark_avro": spark}})
    assert "Each method in a fresh process" in text
    # medians over the rounds; each ratio within its own round
    row = "| read kafka_core | 15.0 | 7.5 | 2.00x / 2.00x | 3.00x / 2.00x, 1.00x / 2.00x | 5.00 | 4.5 / 2.5 |"
    assert row in text
    assert "Rows read per pass (1,000,000 written): read kafka_core: 10." in text


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
