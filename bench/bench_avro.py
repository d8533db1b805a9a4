"""Avro through the Schema Registry, row-wise: decode N order events (bench/avro_order.py: 12
fields, a nested record, an array of records, nullables, an enum, a timestamp) from a topic,
kafka_core's ``poll`` with our ``AvroDeserializer`` as ``value_deserializer`` against
confluent-kafka's Consumer with its ``AvroDeserializer`` called per message (what its docs show),
in the same run, on the same topic and the same registry (the dev registry, in this process).

Every client runs in its own fresh process and reads the whole preloaded topic by assignment
(no group); rate and CPU (process time, all threads) span the first non-empty poll to the last
record, and each client touches a decoded field of every record (the sum of ``total_cents`` is
checked against the data). ``kafka_core-bytes`` is our ``poll`` without a deserializer: the
share of the time that is the consumer rather than Avro. Medians of ``--repeat`` rounds.

    python -m bench.bench_avro [--records 1000000] [--partitions 3] [--repeat 3] [--clients a,b] [--save]

``--save`` keeps the medians as bench/results.json's ``avro`` section (date, load, machine,
command) and renders RESULTS.md from it. The broker: KAFKA_BOOTSTRAP_SERVERS, or the embedded
one ``KAFKA_CORE_BENCH_BROKER`` names (Tansu by default).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

CLIENTS = ("confluent-kafka", "kafka_core", "kafka_core-bytes")
ANCHOR = "confluent-kafka"
MAX_RECORDS = 10_000  # per poll call, every client (as bench/e2e_consumer.py)
FETCH_WAIT_MS = 100
DEADLINE_S = float(os.environ.get("BENCH_AVRO_DEADLINE_S", "300"))
CHUNK = 50_000  # orders made and encoded at a time: a million dicts at once would take GBs


class Tally:
    """Counts records and the checked field; times from the first non-empty poll to the last record."""

    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.count = 0
        self.total_cents = 0
        self.first_at = self.first_cpu = 0.0
        self.first_count = 0
        self.deadline = time.monotonic() + DEADLINE_S
        self.started_at, self.started_cpu = time.perf_counter(), time.process_time()

    def add(self, n: int, cents: int) -> None:
        if n and not self.count:
            self.first_at, self.first_cpu, self.first_count = time.perf_counter(), time.process_time(), n
        self.count += n
        self.total_cents += cents
        if self.count < self.expected and time.monotonic() > self.deadline:
            raise TimeoutError(f"only {self.count} of {self.expected} records in {DEADLINE_S:.0f} s")

    def result(self) -> dict[str, Any]:
        wall, cpu = time.perf_counter() - self.first_at, time.process_time() - self.first_cpu
        n = self.count - self.first_count
        if n <= 0:  # everything came in the first poll (a smoke run): the whole consume
            wall, cpu = time.perf_counter() - self.started_at, time.process_time() - self.started_cpu
            n = self.count
        return {
            "records": self.count,
            "total_cents": self.total_cents,
            "rate": n / wall,
            "cpu_s_per_million": cpu / n * 1e6,
            "wall_s": wall,
        }


def run_confluent(bootstrap: str, topic: str, partitions: int, n: int, registry: str) -> dict[str, Any]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    deserialize = AvroDeserializer(SchemaRegistryClient({"url": registry}))
    ctx = SerializationContext(topic, MessageField.VALUE)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-unused",  # required by the client; assign() never joins it
            "enable.auto.commit": False,
            "fetch.wait.max.ms": FETCH_WAIT_MS,
            "queued.min.messages": 1_000_000,
        }
    )
    tally = Tally(n)
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        while tally.count < n:
            got = cents = 0
            for msg in consumer.consume(MAX_RECORDS, 1.0):
                if msg.error() is not None:
                    raise RuntimeError(str(msg.error()))
                cents += deserialize(msg.value(), ctx)["total_cents"]
                got += 1
            tally.add(got, cents)
        return tally.result()
    finally:
        consumer.close()


def run_ours(
    bootstrap: str, topic: str, partitions: int, n: int, registry: str, decode: bool
) -> dict[str, Any]:
    from kafka_core import KafkaConsumer
    from kafka_core.schema_registry import AvroDeserializer, SchemaRegistryClient

    deserializer = AvroDeserializer(SchemaRegistryClient({"url": registry})) if decode else None
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        topics=[topic],
        group_id=None,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=FETCH_WAIT_MS,
        value_deserializer=deserializer,
    )
    tally = Tally(n)
    try:
        while tally.count < n:
            records = consumer.poll(1000, MAX_RECORDS)
            if decode:
                tally.add(len(records), sum(r.value["total_cents"] for r in records))
            else:
                tally.add(len(records), 0)
        return tally.result()
    finally:
        consumer.close()


RUNNERS: dict[str, Callable[[str, str, int, int, str], dict[str, Any]]] = {
    "confluent-kafka": run_confluent,
    "kafka_core": lambda b, t, p, n, r: run_ours(b, t, p, n, r, decode=True),
    "kafka_core-bytes": lambda b, t, p, n, r: run_ours(b, t, p, n, r, decode=False),
}


def preload(bootstrap: str, topic: str, records: int, schema_id: int) -> int:
    """Fills ``topic`` with ``records`` order events; returns the sum of their total_cents."""
    from bench.avro_order import encode_orders, make_orders
    from bench.common import fill_topic

    values: list[bytes] = []
    cents = 0
    for start in range(0, records, CHUNK):
        chunk = make_orders(min(CHUNK, records - start), seed=34 + start)
        cents += sum(o["total_cents"] for o in chunk)
        values += encode_orders(chunk, schema_id)
    fill_topic(bootstrap, topic, values)
    return cents


def _median(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "rate": statistics.median(r["rate"] for r in rounds),
        "cpu_s_per_million": statistics.median(r["cpu_s_per_million"] for r in rounds),
    }


def run(
    bootstrap: str, records: int, partitions: int, repeat: int, clients: list[str]
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, str], tuple[float, ...], tuple[float, ...]]:
    """Preload a fresh topic, then ``repeat`` rounds of every client, each in a fresh process:
    (each client's rounds, each failed client's error, load average before, after)."""
    from bench.avro_order import ORDER_SCHEMA_STR
    from bench.common import create_topic
    from kafka_core.devtools.registry import RegistryServer
    from kafka_core.schema_registry import Schema, SchemaRegistryClient

    with RegistryServer() as registry:
        topic = f"bench-avro-{uuid.uuid4().hex[:8]}"
        schema_id = SchemaRegistryClient({"url": registry.url}).register_schema(
            f"{topic}-value", Schema(ORDER_SCHEMA_STR)
        )
        create_topic(bootstrap, topic, partitions)
        t0 = time.monotonic()
        expected_cents = preload(bootstrap, topic, records, schema_id)
        print(f"preloaded {records:,} order events in {time.monotonic() - t0:.0f} s", file=sys.stderr)
        rows: dict[str, list[dict[str, Any]]] = {}
        errors: dict[str, str] = {}
        load_before = os.getloadavg()
        for _ in range(repeat):
            for client in clients:
                cmd = [sys.executable, "-m", "bench.bench_avro", "--child", client, bootstrap, topic]
                cmd += [str(partitions), str(records), registry.url]
                done = subprocess.run(cmd, capture_output=True, text=True, timeout=DEADLINE_S + 120)
                line = next((x for x in done.stdout.splitlines() if x.startswith("RESULT ")), None)
                if line is None:
                    errors[client] = (
                        done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "no result"
                    )
                    print(f"{client}: failed: {done.stderr[-2000:]}", file=sys.stderr)
                    continue
                result = json.loads(line[7:])
                if client != "kafka_core-bytes" and result["total_cents"] != expected_cents:
                    errors[client] = f"decoded sum {result['total_cents']} != {expected_cents}"
                    continue
                if result["records"] != records:
                    errors[client] = f"{result['records']} records, expected {records}"
                    continue
                rows.setdefault(client, []).append(result)
        return rows, errors, load_before, os.getloadavg()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Avro decode through poll: kafka_core vs confluent-kafka")
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--clients", default=",".join(CLIENTS))
    ap.add_argument("--save", action="store_true", help="keep the medians in bench/results.json (avro)")
    ap.add_argument(
        "--child", nargs=6, metavar=("CLIENT", "BOOTSTRAP", "TOPIC", "PARTITIONS", "N", "REGISTRY")
    )
    args = ap.parse_args(argv)
    if args.child:
        client, bootstrap, topic, partitions, n, registry = args.child
        print(
            "RESULT " + json.dumps(RUNNERS[client](bootstrap, topic, int(partitions), int(n), registry)),
            flush=True,
        )
        return 0

    from bench.brokers import bench_broker, broker_description

    started = datetime.now(UTC)
    with bench_broker() as bootstrap:
        rows, errors, load_before, load_after = run(
            bootstrap, args.records, args.partitions, args.repeat, args.clients.split(",")
        )
    medians = {c: _median(rs) for c, rs in rows.items()}
    anchor = medians.get(ANCHOR)
    print(
        f"{args.records:,} Avro order events, {args.partitions} partitions, {broker_description()}, median of "
        f"{args.repeat} rounds; load average {load_before[0]:.1f} before, {load_after[0]:.1f} after "
        f"({os.cpu_count()} CPUs)"
    )
    print(f"{'client':20} {'records/s':>12} {'CPU s/M rec':>12} {'vs confluent':>13} {'CPU vs':>8}  rounds")
    for client, m in medians.items():
        ratio = f"{m['rate'] / anchor['rate']:.2f}x" if anchor else "-"
        cpu = f"{m['cpu_s_per_million'] / anchor['cpu_s_per_million']:.2f}x" if anchor else "-"
        each = " ".join(f"{r['rate']:,.0f}" for r in rows[client])
        print(f"{client:20} {m['rate']:12,.0f} {m['cpu_s_per_million']:12.2f} {ratio:>13} {cpu:>8}  {each}")
    for client, error in errors.items():
        print(f"{client:20} ERROR {error}")
    if args.save:
        from bench.common import machine_summary
        from bench.report import save_section

        save_section(
            "avro",
            {
                "broker": broker_description(),
                "command": shlex.join(["python", "-m", "bench.bench_avro", *sys.argv[1:]]),
                "date": f"{started:%Y-%m-%d %H:%M} UTC",
                "load": ", ".join(f"{x:.2f}" for x in load_before),
                "load_after": ", ".join(f"{x:.2f}" for x in load_after),
                "machine": {k: v for k, v in machine_summary().items() if k != "load"},
                "records": args.records,
                "partitions": args.partitions,
                "repeat": args.repeat,
                "medians": medians,
                "errors": errors,
                "rounds": {c: [r["rate"] for r in rs] for c, rs in rows.items()},
            },
        )
        print("saved to bench/results.json (avro) and rendered bench/RESULTS.md")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
