"""The main job's data: a synthetic e-commerce order stream, its Kafka form, fingerprints, aggregates.

Everything here is a Spark expression over DataFrames, so it runs on executors and nothing
proportional to the data comes back to the driver. The generator derives every field from a
hash of (seed, row id) and the row's Spark partition, so a partition recomputed after a task
retry yields the same rows.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

__all__ = [
    "CATEGORIES",
    "SCHEMA_VERSION",
    "Aggregates",
    "CategoryRevenue",
    "Fingerprint",
    "Revenue",
    "aggregates",
    "catalog",
    "fingerprint",
    "generate_orders",
    "is_run",
    "kafka_columns",
    "merge_revenue",
    "parse_orders",
    "parsed_fingerprint",
    "revenue_by_category",
    "windows_and_types",
]

SCHEMA_VERSION = "orders.v1"
CATEGORIES = (
    "electronics",
    "books",
    "home",
    "fashion",
    "grocery",
    "toys",
    "sports",
    "beauty",
)
# (event type, cumulative probability): most events place an order, a few cancel or refund one.
EVENT_TYPES = (("order_placed", 0.90), ("order_cancelled", 0.96), ("order_refunded", 1.0))
EPOCH_US = 1_748_736_000 * 1_000_000  # 2025-06-01T00:00:00Z: the day the generated events span
SPAN_US = 86_400 * 1_000_000
LATE_FRACTION = 0.08  # events delayed by up to LATE_MAX_US; the rest jitter by up to 3 s
LATE_MAX_US = 600 * 1_000_000
WINDOW = "1 hour"


def catalog(seed: int, products: int = 200) -> list[tuple[int, str, str, Decimal]]:
    """``products`` rows of (product_id, sku, category, unit_price), the same for a given seed."""
    rng = random.Random(seed)
    rows = []
    for pid in range(products):
        category = CATEGORIES[pid % len(CATEGORIES)]
        scale = (5, 400) if category == "electronics" else (2, 80)
        price = Decimal(f"{rng.uniform(*scale):.2f}")
        rows.append((pid, f"SKU-{pid:05d}", category, price))
    return rows


def _uniform(seed: int, salt: int) -> Column:
    """A uniform double in [0, 1) from (seed, id, salt): deterministic per row, independent per salt."""
    from pyspark.sql import functions as F

    bits = F.pmod(F.xxhash64(F.lit(seed), F.col("id"), F.lit(salt)), F.lit(1 << 53))
    return bits.cast("double") / float(1 << 53)


def generate_orders(spark: SparkSession, events: int, seed: int, slices: int) -> DataFrame:
    """One row per order event (order_id unique), in ``slices`` Spark partitions.

    Customer ids are log-uniform over ``events // 20`` customers (a Zipf-like skew: customer 1
    places ln 2 / ln n of all orders, 6% of a million), products are skewed towards the front of
    the catalogue. Each Spark partition plays one producer (a shop front-end, column
    ``producer``) whose events span the same day in order, with up to 3 s of jitter, and
    ``LATE_FRACTION`` of them up to ten minutes late.
    """
    from pyspark.sql import functions as F

    customers = max(100, events // 20)
    products = catalog(seed)
    cat = spark.createDataFrame(
        products, "product_id int, sku string, category string, unit_price decimal(10,2)"
    )
    u = [_uniform(seed, salt) for salt in range(6)]
    event_type = F.when(u[3] < EVENT_TYPES[0][1], EVENT_TYPES[0][0])
    for name, upto in EVENT_TYPES[1:]:
        event_type = event_type.when(u[3] < upto, name)
    lateness = F.when(u[4] < LATE_FRACTION, u[5] * LATE_MAX_US).otherwise(u[5] * 3_000_000)
    # Each Spark partition is one producer (a shop front-end) emitting its rows over the whole day.
    progress = F.least(
        F.greatest(F.col("id") * (slices / events) - F.spark_partition_id(), F.lit(0.0)), F.lit(1.0)
    )
    base = (
        spark.range(0, events, numPartitions=slices)
        .select(
            (F.col("id") + 1).alias("order_id"),
            F.format_string("C%07d", F.floor(F.pow(F.lit(float(customers)), u[0])).cast("int")).alias(
                "customer_id"
            ),
            F.floor(u[1] * u[1] * len(products)).cast("int").alias("product_id"),
            (1 + F.least(F.floor(-F.log(1.0 - u[2]) * 0.8), F.lit(9))).cast("int").alias("quantity"),
            event_type.alias("event_type"),
            F.timestamp_micros(
                (F.lit(EPOCH_US) + F.floor(progress * SPAN_US) - F.floor(lateness)).cast("long")
            ).alias("event_time"),
            F.spark_partition_id().alias("producer"),
        )
        .join(F.broadcast(cat), "product_id")
    )
    return base.select(
        "order_id",
        "customer_id",
        "product_id",
        "sku",
        "category",
        "quantity",
        "unit_price",
        (F.col("quantity") * F.col("unit_price")).cast("decimal(12,2)").alias("amount"),
        "event_type",
        "event_time",
        "producer",
    )


def kafka_columns(orders: DataFrame, run_id: str) -> DataFrame:
    """The sink's columns: key = customer id, value = the order as JSON, headers = event type,
    schema version, producer and run id (so a reader can tell this run's records from others)."""
    from pyspark.sql import functions as F

    def header(name: str, value: Column) -> Column:
        return F.struct(F.lit(name).alias("key"), value.cast("binary").alias("value"))

    return orders.select(
        F.col("customer_id").cast("binary").alias("key"),
        F.to_json(F.struct(*(c for c in orders.columns if c != "producer"))).cast("binary").alias("value"),
        F.array(
            header("event_type", F.col("event_type")),
            header("schema", F.lit(SCHEMA_VERSION)),
            header("producer", F.format_string("shop-%d", "producer")),
            header("run", F.lit(run_id)),
        ).alias("headers"),
    )


def _header(name: str) -> Column:
    """The first value of header ``name`` as a string (null when absent)."""
    from pyspark.sql import functions as F

    found = F.filter("headers", lambda h: h["key"] == F.lit(name))
    return F.when(F.size(found) > 0, found.getItem(0)["value"].cast("string"))


def is_run(run_id: str) -> Column:
    from pyspark.sql import functions as F

    return F.exists("headers", lambda h: (h["key"] == F.lit("run")) & (h["value"] == F.lit(run_id.encode())))


def _row_hash() -> Column:
    from pyspark.sql import functions as F

    return F.xxhash64("key", "value", "headers")


@dataclass(frozen=True)
class Fingerprint:
    """Order-independent summary of a set of records: equal on both sides means same multiset
    (count and the two hash aggregates) of distinct records (distinct order ids == rows)."""

    rows: int
    distinct_orders: int
    hash_sum: Decimal
    hash_xor: int
    key_bytes: int
    value_bytes: int
    others: int = 0  # records in the topic that are not this run's

    def same_records(self, other: Fingerprint) -> bool:
        return (self.rows, self.distinct_orders, self.hash_sum, self.hash_xor) == (
            other.rows,
            other.distinct_orders,
            other.hash_sum,
            other.hash_xor,
        )

    def compare(self, got: Fingerprint) -> str:
        if got.same_records(self):
            return f"{got.rows:,} events, each exactly once, checksums equal"
        return f"expected {self.describe()}; got {got.describe()}"

    def describe(self) -> str:
        return (
            f"rows {self.rows:,}, distinct order ids {self.distinct_orders:,}, "
            f"checksum {int(self.hash_sum) & 0xFFFFFFFF:08x}-{self.hash_xor & 0xFFFFFFFF:08x}"
        )


def fingerprint(records: DataFrame, keep: Column | None = None) -> Fingerprint:
    """One Spark job over records with the Kafka columns: count, distinct order ids (read from
    the JSON value), sum and xor of xxhash64(key, value, headers) and bytes of the records for
    which ``keep`` holds (all when None); the others are only counted."""
    from pyspark.sql import functions as F

    keep = F.lit(True) if keep is None else keep
    # The generator writes order_id first: cut it out (several times cheaper than a JSON path),
    # and fall back to the JSON path for any value that does not start that way.
    text = F.col("value").cast("string")
    head = F.substring_index(F.substring_index(text, ",", 1), ":", -1)
    order_id = F.coalesce(
        F.when(text.startswith('{"order_id":'), head.try_cast("long")),
        F.get_json_object(text, "$.order_id").try_cast("long"),
    )
    h = _row_hash()
    row = records.agg(
        F.count(F.when(keep, 1)).alias("rows"),
        F.count_distinct(F.when(keep, order_id)).alias("distinct"),
        F.sum(F.when(keep, h.cast("decimal(38,0)"))).alias("hash_sum"),
        F.bit_xor(F.when(keep, h)).alias("hash_xor"),
        F.sum(F.when(keep, F.length("key"))).alias("key_bytes"),
        F.sum(F.when(keep, F.length("value"))).alias("value_bytes"),
        F.count(F.when(~keep, 1)).alias("others"),
    ).first()
    return _fingerprint(row)


def _fingerprint(row: Any) -> Fingerprint:
    assert row is not None
    return Fingerprint(
        rows=int(row["rows"]),
        distinct_orders=int(row["distinct"]),
        hash_sum=Decimal(row["hash_sum"] or 0),
        hash_xor=int(row["hash_xor"] or 0),
        key_bytes=int(row["key_bytes"] or 0),
        value_bytes=int(row["value_bytes"] or 0),
        others=int(row["others"]) if "others" in row.asDict() else 0,
    )


def parse_orders(records: DataFrame) -> DataFrame:
    """Kafka records to typed orders, keeping the record hash (for fingerprints after the fact),
    the event-type header and the key (both checked against the payload), and the record's
    partition and offset when present."""
    from pyspark.sql import functions as F

    schema = (
        "order_id long, customer_id string, product_id int, sku string, category string, "
        "quantity int, unit_price decimal(10,2), amount decimal(12,2), event_type string, "
        "event_time timestamp"
    )
    position = [c for c in ("partition", "offset") if c in records.columns]
    extra = [
        "key_customer",
        "header_event_type",
        "producer",
        "record_hash",
        "key_bytes",
        "value_bytes",
        *position,
    ]
    return records.select(
        F.from_json(F.col("value").cast("string"), schema).alias("o"),
        F.col("key").cast("string").alias("key_customer"),
        _header("event_type").alias("header_event_type"),
        _header("producer").alias("producer"),
        _row_hash().alias("record_hash"),
        F.length("key").alias("key_bytes"),
        F.length("value").alias("value_bytes"),
        *position,
    ).select("o.*", *extra)


def parsed_fingerprint(orders: DataFrame) -> Fingerprint:
    """:func:`fingerprint` of orders already parsed by :func:`parse_orders`."""
    from pyspark.sql import functions as F

    h = F.col("record_hash")
    return _fingerprint(
        orders.agg(
            F.count(F.lit(1)).alias("rows"),
            F.count_distinct("order_id").alias("distinct"),
            F.sum(h.cast("decimal(38,0)")).alias("hash_sum"),
            F.bit_xor(h).alias("hash_xor"),
            F.sum("key_bytes").alias("key_bytes"),
            F.sum("value_bytes").alias("value_bytes"),
        ).first()
    )


class CategoryRevenue(NamedTuple):
    events: int  # every event of the category, whatever its type
    placed: int  # orders placed
    revenue: Decimal  # net: placed minus refunded (cancelled orders count nothing)


Revenue = dict[str, CategoryRevenue]


def revenue_by_category(orders: DataFrame) -> Revenue:
    from pyspark.sql import functions as F

    signed = (
        F.when(F.col("event_type") == "order_placed", F.col("amount"))
        .when(F.col("event_type") == "order_refunded", -F.col("amount"))
        .otherwise(F.lit(0).cast("decimal(12,2)"))
    )
    rows = (
        orders.groupBy("category")
        .agg(
            F.count(F.lit(1)).alias("events"),
            F.count(F.when(F.col("event_type") == "order_placed", 1)).alias("placed"),
            F.sum(signed).alias("revenue"),
        )
        .collect()
    )
    return {
        r["category"]: CategoryRevenue(int(r["events"]), int(r["placed"]), Decimal(r["revenue"]))
        for r in rows
    }


def merge_revenue(parts: Iterable[Revenue]) -> Revenue:
    """Per-category figures of disjoint parts (micro-batches) added up."""
    merged: Revenue = {}
    for part in parts:
        for cat, r in part.items():
            old = merged.get(cat, CategoryRevenue(0, 0, Decimal(0)))
            merged[cat] = CategoryRevenue(
                old.events + r.events, old.placed + r.placed, old.revenue + r.revenue
            )
    return merged


def windows_and_types(orders: DataFrame) -> tuple[dict[str, int], dict[str, int]]:
    """Orders per one-hour event-time window (keyed by the window start, UTC) and per event type."""
    from pyspark.sql import functions as F

    rows = orders.groupBy(F.window("event_time", WINDOW).alias("w")).count().collect()
    windows = {r["w"]["start"].strftime("%Y-%m-%d %H:%M"): int(r["count"]) for r in rows}
    types = {r["event_type"]: int(r["count"]) for r in orders.groupBy("event_type").count().collect()}
    return windows, types


@dataclass(frozen=True)
class Aggregates:
    revenue: Revenue
    windows: dict[str, int]
    top_customers: list[tuple[str, int, Decimal]]
    customers: int
    event_types: dict[str, int]
    out_of_order: int  # events behind an event time their producer already wrote to the partition
    late: int  # of those, events more than LATE_AFTER_S behind
    header_mismatches: int  # headers missing or disagreeing with the payload, or key with customer id

    def merge_key(self) -> tuple[Any, ...]:
        """What a streaming run over the same records must reproduce exactly."""
        return (self.revenue, self.windows, self.event_types)


LATE_AFTER_S = 60


def aggregates(orders: DataFrame) -> Aggregates:
    """The business figures of the run: a handful of small Spark jobs over parsed orders.

    When the orders carry their Kafka partition and offset, lateness is measured as a streaming
    job would see it: an event is out of order when its producer already wrote a later event time
    to the same partition, and late when that is more than ``LATE_AFTER_S`` later.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    per_customer = orders.groupBy("customer_id").agg(
        F.count(F.lit(1)).alias("orders"),
        F.sum(F.when(F.col("event_type") == "order_placed", F.col("amount"))).alias("spent"),
    )
    top = per_customer.orderBy(F.desc("orders"), "customer_id").limit(5).collect()
    bad = (
        (F.col("header_event_type") != F.col("event_type"))
        | F.col("header_event_type").isNull()
        | F.col("producer").isNull()
        | (F.col("key_customer") != F.col("customer_id"))
    )
    checks = orders.agg(
        F.count_distinct("customer_id").alias("customers"), F.count(F.when(bad, 1)).alias("bad")
    ).first()
    assert checks is not None
    windows, types = windows_and_types(orders)
    out_of_order = late = 0
    if "offset" in orders.columns:
        seen = (
            Window.partitionBy("producer", "partition")
            .orderBy("offset")
            .rowsBetween(Window.unboundedPreceding, -1)
        )
        behind = F.max("event_time").over(seen).cast("double") - F.col("event_time").cast("double")
        row = (
            orders.select(behind.alias("behind"))
            .agg(
                F.count(F.when(F.col("behind") > 0, 1)).alias("out_of_order"),
                F.count(F.when(F.col("behind") > LATE_AFTER_S, 1)).alias("late"),
            )
            .first()
        )
        assert row is not None
        out_of_order, late = int(row["out_of_order"]), int(row["late"])
    return Aggregates(
        revenue=revenue_by_category(orders),
        windows=windows,
        top_customers=[(r["customer_id"], int(r["orders"]), Decimal(r["spent"] or 0)) for r in top],
        customers=int(checks["customers"]),
        event_types=types,
        out_of_order=out_of_order,
        late=late,
        header_mismatches=int(checks["bad"]),
    )
