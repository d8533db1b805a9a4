"""Schema Registry Avro decode: N order events (bench/avro_order.py: 12 fields, a nested record,
an array of records, nullables, an enum, a timestamp) read from a 3-partition topic and decoded,
each client in its own fresh process, against the dev registry, in the same run.

- ``confluent-kafka+AvroDeserializer`` (anchor): their Consumer, their AvroDeserializer per message
- ``kafka_core-poll+AvroDeserializer``: our ``poll`` with our AvroDeserializer per message
- ``kafka_core-poll_columns+registry``: our ``poll_columns(value_decoder=AvroColumnDeserializer)``,
  typed Arrow columns, no Python object per record

Rate and CPU (all the process's threads) span the first decoded record to the last; every client
counts its records and sums ``total_cents`` of what it decoded (checked equal across clients).
``--codec`` adds the codec alone, no broker: the decode, fastavro's ``schemaless_reader`` per
value (what AvroDeserializer runs) against ``AvroColumnDecoder.decode`` of the same framed values;
and the encode, fastavro's ``schemaless_writer`` per row dict (what AvroSerializer runs) against
``AvroColumnEncoder.encode`` of the same rows as one Arrow column. ``--codec-only``: that alone.

    python -m bench.bench_avro_columns [--records 1000000] [--repeat 3] [--codec | --codec-only] [--save]

``--save`` keeps the results as bench/results.json's ``avro_columns`` section (date, load,
machine, command) and renders bench/RESULTS.md.

Uses KAFKA_BOOTSTRAP_SERVERS when set, else the bench broker. Prints a table with the load
average before and after (the machine is shared: ratios, not absolutes, are the figures).
"""

from __future__ import annotations

import argparse
import datetime
import os
import time
from collections.abc import Sequence
from typing import Any

from bench.common import (
    OK,
    RunResult,
    Span,
    bench_broker,
    child_main,
    create_topic,
    delete_topic,
    e2e_table,
    fill_topic,
    median_result,
    run_child,
    unique_topic,
)

CLIENTS = (
    "confluent-kafka+AvroDeserializer",
    "kafka_core-poll+AvroDeserializer",
    "kafka_core-poll_columns+registry",
)
ANCHOR = CLIENTS[0]
MAX_RECORDS = 10_000
PARTITIONS = 3


class Tally:
    def __init__(self, client: str, expected: int) -> None:
        self.client = client
        self.expected = expected
        self.count = 0
        self.total = 0
        self.span: Span | None = None
        self.deadline = time.monotonic() + 600

    def add(self, n: int, total: int) -> None:
        if n and self.span is None:
            self.span = Span().start()
        self.count += n
        self.total += total
        if time.monotonic() > self.deadline:
            raise TimeoutError(f"{self.count} of {self.expected} records after 600 s")

    @property
    def done(self) -> bool:
        return self.count >= self.expected

    def result(self) -> RunResult:
        assert self.span is not None
        self.span.stop()
        return RunResult(
            client=self.client,
            records=self.count,
            wall_s=self.span.wall,
            cpu_s=self.span.cpu,
            extra={"total_cents": self.total},
        )


def _run_confluent(bootstrap: str, registry: str, topic: str, tally: Tally) -> RunResult:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    deserialize = AvroDeserializer(SchemaRegistryClient({"url": registry}))
    ctx = SerializationContext(topic, MessageField.VALUE)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-avro",
            "enable.auto.commit": False,
            "log_level": 3,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        while not tally.done:
            msgs = consumer.consume(MAX_RECORDS, 1.0)
            total = 0
            for msg in msgs:
                if msg.error() is not None:
                    raise RuntimeError(str(msg.error()))
                total += deserialize(msg.value(), ctx)["total_cents"]
            tally.add(len(msgs), total)
        return tally.result()
    finally:
        consumer.close()


def _our_consumer(bootstrap: str, topic: str, **kwargs: Any) -> Any:
    from kafka_core import KafkaConsumer

    return KafkaConsumer(
        bootstrap_servers=bootstrap,
        partitions={topic: list(range(PARTITIONS))},
        group_id=None,
        auto_offset_reset="earliest",
        **kwargs,
    )


def _run_ours_poll(bootstrap: str, registry: str, topic: str, tally: Tally) -> RunResult:
    from kafka_core.schema_registry import AvroDeserializer, SchemaRegistryClient

    deserializer = AvroDeserializer(SchemaRegistryClient({"url": registry}))
    consumer = _our_consumer(bootstrap, topic, value_deserializer=deserializer)
    try:
        while not tally.done:
            records = consumer.poll(1000, MAX_RECORDS)
            tally.add(len(records), sum(r.value["total_cents"] for r in records))
        return tally.result()
    finally:
        consumer.close()


def _run_ours_columns(bootstrap: str, registry: str, topic: str, tally: Tally) -> RunResult:
    import pyarrow.compute as pc

    from kafka_core.schema_registry import SchemaRegistryClient
    from kafka_core.schema_registry.columnar import AvroColumnDeserializer

    decoder = AvroColumnDeserializer(SchemaRegistryClient({"url": registry}))
    consumer = _our_consumer(bootstrap, topic)
    try:
        while not tally.done:
            batch = consumer.poll_columns(1000, MAX_RECORDS, value_decoder=decoder)
            if batch is None or batch.num_rows == 0:
                continue
            totals = pc.struct_field(batch.column("value"), "total_cents")
            tally.add(batch.num_rows, pc.sum(totals).as_py() or 0)
        return tally.result()
    finally:
        consumer.close()


RUNNERS = {
    CLIENTS[0]: _run_confluent,
    CLIENTS[1]: _run_ours_poll,
    CLIENTS[2]: _run_ours_columns,
}


def codec_only(values: list[bytes], schema: str, repeat: int) -> list[RunResult]:
    """The decode alone, in this process: best of ``repeat``."""
    import io

    import fastavro
    import pyarrow as pa

    from kafka_core.codec.avro_columns import AvroColumnDecoder

    parsed = fastavro.parse_schema(__import__("json").loads(schema))
    reader = fastavro.schemaless_reader
    column = pa.array(values, pa.binary())

    def with_fastavro() -> RunResult:
        span = Span().start()
        for v in values:
            reader(io.BytesIO(v[5:]), parsed, parsed)
        span.stop()
        return RunResult(
            "fastavro schemaless_reader per value", records=len(values), wall_s=span.wall, cpu_s=span.cpu
        )

    def with_columns() -> RunResult:
        decoder = AvroColumnDecoder(schema, lambda _id: schema)
        span = Span().start()
        decoder.decode(column)
        span.stop()
        return RunResult(
            "kafka_core AvroColumnDecoder.decode", records=len(values), wall_s=span.wall, cpu_s=span.cpu
        )

    return [
        max((run() for _ in range(repeat)), key=lambda r: r.rate) for run in (with_fastavro, with_columns)
    ]


def codec_encode(values: list[bytes], schema: str, repeat: int) -> list[RunResult]:
    """The encode alone, in this process, of the rows ``values`` hold: best of ``repeat``."""
    import io
    import json

    import fastavro
    import pyarrow as pa

    from kafka_core.codec.avro_columns import AvroColumnDecoder
    from kafka_core.codec.avro_encode import AvroColumnEncoder

    parsed = fastavro.parse_schema(json.loads(schema))
    parsed_reader = fastavro.schemaless_reader
    rows = [parsed_reader(io.BytesIO(v[5:]), parsed, parsed) for v in values]
    column = AvroColumnDecoder(schema, lambda _id: schema).decode(pa.array(values, pa.binary())).values
    writer = fastavro.schemaless_writer
    header = values[0][:5]

    def with_fastavro() -> RunResult:
        span = Span().start()
        for row in rows:
            out = io.BytesIO()
            out.write(header)
            writer(out, parsed, row)
            out.getvalue()
        span.stop()
        return RunResult(
            "fastavro schemaless_writer per row", records=len(values), wall_s=span.wall, cpu_s=span.cpu
        )

    def with_columns() -> RunResult:
        encoder = AvroColumnEncoder(schema, int.from_bytes(header[1:], "big"))
        span = Span().start()
        encoded = encoder.encode(column)
        span.stop()
        if encoded[0].as_py() != values[0]:
            raise SystemExit("AvroColumnEncoder wrote other bytes than fastavro")
        return RunResult(
            "kafka_core AvroColumnEncoder.encode", records=len(values), wall_s=span.wall, cpu_s=span.cpu
        )

    return [
        max((run() for _ in range(repeat)), key=lambda r: r.rate) for run in (with_fastavro, with_columns)
    ]


def print_codec(values: list[bytes], schema: str, repeat: int) -> dict[str, list[RunResult]]:
    decode = codec_only(values, schema, repeat)
    print(e2e_table(decode, decode[0].client, unit="records/s"))
    encode = codec_encode(values, schema, repeat)
    print(e2e_table(encode, encode[0].client, unit="records/s"))
    return {"decode": decode, "encode": encode}


def save(
    argv: Sequence[str] | None,
    started: datetime.datetime,
    load_before: str,
    records: int,
    repeat: int,
    results: list[RunResult],
    codec: dict[str, list[RunResult]],
) -> None:
    """bench/results.json's ``avro_columns`` section, RESULTS.md rendered from it."""
    import dataclasses
    import shlex
    import sys

    from bench.brokers import broker_description
    from bench.common import machine_summary
    from bench.report import save_section

    args = list(sys.argv[1:] if argv is None else argv)
    save_section(
        "avro_columns",
        {
            "broker": broker_description() if results else "no broker (--codec-only)",
            "command": shlex.join(["python", "-m", "bench.bench_avro_columns", *args]),
            "date": f"{started:%Y-%m-%d %H:%M} UTC",
            "load": load_before,
            "load_after": _load(),
            "machine": {k: v for k, v in machine_summary().items() if k != "load"},
            "records": records,
            "repeat": repeat,
            "results": [dataclasses.asdict(r) for r in results],
            "codec": {k: [dataclasses.asdict(r) for r in rs] for k, rs in codec.items()},
        },
    )
    print("saved to bench/results.json (avro_columns) and rendered bench/RESULTS.md")


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--bootstrap")
    parser.add_argument("--registry", help=argparse.SUPPRESS)
    parser.add_argument("--topic", help=argparse.SUPPRESS)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--clients", default=",".join(CLIENTS))
    parser.add_argument("--codec", action="store_true", help="also the decode and encode alone, no broker")
    parser.add_argument("--codec-only", action="store_true", help="only the decode and encode alone")
    parser.add_argument(
        "--save", action="store_true", help="keep the results in bench/results.json (avro_columns)"
    )
    args = parser.parse_args(argv)

    if args.child:
        runner = RUNNERS.get(args.child)

        def run() -> RunResult:
            assert runner is not None
            return runner(args.bootstrap, args.registry, args.topic, Tally(args.child, args.records))

        return child_main(args.child, {args.child: run} if runner else {})

    from bench.avro_order import ORDER_SCHEMA_STR, encode_orders, make_orders
    from kafka_core.devtools.registry import RegistryServer
    from kafka_core.schema_registry import Schema, SchemaRegistryClient

    started, load_before = datetime.datetime.now(datetime.UTC), _load()
    print(f"load average before: {load_before}")
    orders = make_orders(args.records)
    if args.codec_only:
        codec = print_codec(encode_orders(orders, 1), ORDER_SCHEMA_STR, args.repeat)
        print(f"load average after: {_load()}")
        if args.save:
            save(argv, started, load_before, args.records, args.repeat, [], codec)
        return 0
    clients = [c for c in args.clients.split(",") if c]
    with (
        RegistryServer() as registry,
        _given(args.bootstrap) if args.bootstrap else bench_broker() as bootstrap,
    ):
        client = SchemaRegistryClient({"url": registry.url})
        runs: dict[str, list[RunResult]] = {c: [] for c in clients}
        encoded: dict[int, list[bytes]] = {}
        for round_no in range(args.repeat):
            for name in clients:
                topic = unique_topic("avro", name.split("+")[0])
                schema_id = client.register_schema(f"{topic}-value", Schema(ORDER_SCHEMA_STR, "AVRO"))
                if schema_id not in encoded:  # the same schema has the same id under every subject
                    encoded[schema_id] = encode_orders(orders, schema_id)
                values = encoded[schema_id]
                create_topic(bootstrap, topic, PARTITIONS)
                fill_topic(bootstrap, topic, values)
                argv2 = ["--bootstrap", bootstrap, "--registry", registry.url, "--topic", topic]
                result = run_child(
                    "bench.bench_avro_columns", name, [*argv2, "--records", str(args.records)], 900
                )
                delete_topic(bootstrap, topic)
                runs[name].append(result)
                print(
                    f"  {name} round {round_no + 1}: {result.status} {result.rate:,.0f}/s, "
                    f"{result.cpu_per_million:.2f} CPU s/M {result.detail}",
                    flush=True,
                )
        results = [median_result(runs[c]) for c in clients]
        totals = {r.extra.get("total_cents") for r in results if r.status == OK}
        if len(totals) > 1:
            raise SystemExit(f"clients decoded different totals: {totals}")
        print(e2e_table(results, ANCHOR, unit="records/s"))
        values = encode_orders(orders, 1)
        codec = print_codec(values, ORDER_SCHEMA_STR, args.repeat) if args.codec else {}
    print(f"load average after: {_load()}")
    if args.save:
        save(argv, started, load_before, args.records, args.repeat, results, codec)
    return 0


class _given:
    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap

    def __enter__(self) -> str:
        return self.bootstrap

    def __exit__(self, *exc: object) -> None:
        return None


if __name__ == "__main__":
    raise SystemExit(main())
