"""The Avro order event every Schema Registry bench decodes (row-wise, columnar and Spark): about
a dozen fields with a nested record, an array of records, nullable fields, an enum, a decimal-free
money amount in cents and a timestamp — what a production topic of order events carries.

``ORDER_SCHEMA`` (a dict) / ``ORDER_SCHEMA_STR`` (its JSON), ``make_orders(n)`` (dicts, the same
for every run of a seed) and ``encode_orders(orders, schema_id)`` (Confluent-framed bytes: magic
0, the id, fastavro's encoding) are the shared pieces.
"""

from __future__ import annotations

import datetime
import io
import json
import random
import struct
from collections.abc import Iterable
from typing import Any

__all__ = ["ORDER_SCHEMA", "ORDER_SCHEMA_STR", "ORDER_SUBJECT_SUFFIX", "encode_orders", "make_orders"]

ORDER_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "OrderEvent",
    "namespace": "bench.shop",
    "fields": [
        {"name": "order_id", "type": "string"},
        {"name": "customer_id", "type": "long"},
        {"name": "created_at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {
            "name": "status",
            "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID", "SHIPPED", "CANCELLED"]},
        },
        {"name": "currency", "type": "string"},
        {"name": "total_cents", "type": "long"},
        {"name": "discount_cents", "type": ["null", "long"], "default": None},
        {
            "name": "shipping",
            "type": {
                "type": "record",
                "name": "Address",
                "fields": [
                    {"name": "street", "type": "string"},
                    {"name": "city", "type": "string"},
                    {"name": "zip", "type": "string"},
                    {"name": "country", "type": "string"},
                ],
            },
        },
        {
            "name": "items",
            "type": {
                "type": "array",
                "items": {
                    "type": "record",
                    "name": "Item",
                    "fields": [
                        {"name": "sku", "type": "string"},
                        {"name": "quantity", "type": "int"},
                        {"name": "price_cents", "type": "long"},
                    ],
                },
            },
        },
        {"name": "coupon", "type": ["null", "string"], "default": None},
        {"name": "express", "type": "boolean"},
        {"name": "weight_kg", "type": "double"},
    ],
}
ORDER_SCHEMA_STR = json.dumps(ORDER_SCHEMA)
ORDER_SUBJECT_SUFFIX = "-value"

_CITIES = [
    ("Berlin", "DE"),
    ("Paris", "FR"),
    ("Lyon", "FR"),
    ("Madrid", "ES"),
    ("Milan", "IT"),
    ("Austin", "US"),
]
_STATUSES = ["NEW", "PAID", "SHIPPED", "CANCELLED"]
_EPOCH = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


def make_orders(n: int, *, seed: int = 34) -> list[dict[str, Any]]:
    """``n`` order events, the same for a given seed (1 to 4 items each, about half with a discount)."""
    rng = random.Random(seed)
    orders = []
    for i in range(n):
        city, country = _CITIES[rng.randrange(len(_CITIES))]
        items = [
            {
                "sku": f"SKU-{rng.randrange(100_000):05d}",
                "quantity": rng.randint(1, 5),
                "price_cents": rng.randint(99, 50_000),
            }
            for _ in range(rng.randint(1, 4))
        ]
        total = sum(it["quantity"] * it["price_cents"] for it in items)
        orders.append(
            {
                "order_id": f"ord-{seed}-{i:09d}",
                "customer_id": rng.randrange(10_000_000),
                "created_at": _EPOCH + datetime.timedelta(milliseconds=i * 37 + rng.randrange(37)),
                "status": _STATUSES[rng.randrange(4)],
                "currency": "USD" if country == "US" else "EUR",
                "total_cents": total,
                "discount_cents": rng.randrange(total // 10 + 1) if rng.random() < 0.5 else None,
                "shipping": {
                    "street": f"{rng.randint(1, 200)} Main Street",
                    "city": city,
                    "zip": f"{rng.randrange(100_000):05d}",
                    "country": country,
                },
                "items": items,
                "coupon": f"SAVE{rng.randint(5, 30)}" if rng.random() < 0.2 else None,
                "express": rng.random() < 0.3,
                "weight_kg": round(rng.uniform(0.1, 25.0), 3),
            }
        )
    return orders


def encode_orders(orders: Iterable[dict[str, Any]], schema_id: int) -> list[bytes]:
    """Confluent-framed Avro values of ``orders`` under ``schema_id`` (what AvroSerializer writes)."""
    from fastavro import parse_schema, schemaless_writer

    parsed = parse_schema(ORDER_SCHEMA)
    header = struct.pack(">bI", 0, schema_id)
    out = []
    for order in orders:
        buffer = io.BytesIO()
        buffer.write(header)
        schemaless_writer(buffer, parsed, order)
        out.append(buffer.getvalue())
    return out
