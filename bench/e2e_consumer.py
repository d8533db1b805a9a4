"""End-to-end consumer benchmark: read N records of S bytes from a P-partition topic.

Each client runs in its own fresh process against its own freshly filled topic (same data).
Rate and CPU are measured from the first poll that returned records to the last record (steady
state); the client's start (connect, metadata, first fetch) is reported beside them. Records are counted until N are seen: the test broker's
high watermark is wrong, so end offsets are not trusted.

    python -m bench.e2e_consumer [--records 300000] [--repeat 3] [--clients a,b,...]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

from bench.common import (
    OK,
    NotImplementedYet,
    RunResult,
    Span,
    bench_broker,
    child_main,
    create_topic,
    delete_topic,
    e2e_table,
    fill_topic,
    make_values,
    median_result,
    our_export,
    run_child,
    unique_topic,
)

CLIENTS = ("confluent-kafka", "aiokafka", "kafka-python", "kafka_core", "kafka_core-poll_columns")
ANCHOR = "confluent-kafka"
MAX_RECORDS = 10_000  # per poll call, every client
FETCH_WAIT_MS = 100  # every client: the broker's wrong high watermark makes long polls costly
DEADLINE_S = float(os.environ.get("BENCH_CONSUME_DEADLINE_S", "120"))  # give up: an error row


class Tally:
    """Counts what arrived, checks nothing was lost or doubled, and times the steady state.

    The measured span starts when the first non-empty poll has been handled and ends at the
    last record; the records of that first poll are left out of the rate, and the client's
    start (connect, metadata, first fetch) is reported apart.
    """

    def __init__(self, client: str, expected: int, value_size: int) -> None:
        self.client = client
        self.expected = expected
        self.value_size = value_size
        self.count = 0
        self.nbytes = 0
        self.start = Span().start()
        self.first_at = 0.0
        self.first_cpu = 0.0
        self.first_count = 0
        self.deadline = time.monotonic() + DEADLINE_S

    def add(self, count: int, nbytes: int) -> None:
        if count and not self.count:
            self.first_at = time.perf_counter()
            self.first_cpu = time.process_time()
            self.first_count = count
        self.count += count
        self.nbytes += nbytes

    @property
    def done(self) -> bool:
        if self.count < self.expected and time.monotonic() > self.deadline:
            raise TimeoutError(f"only {self.count} of {self.expected} records in {DEADLINE_S:.0f} s")
        return self.count >= self.expected

    def result(self) -> RunResult:
        end, end_cpu = time.perf_counter(), time.process_time()
        if self.count != self.expected:
            raise RuntimeError(f"received {self.count} records, expected {self.expected}")
        if self.nbytes != self.expected * self.value_size:
            raise RuntimeError(
                f"received {self.nbytes} value bytes, expected {self.expected * self.value_size}"
            )
        startup = self.first_at - self.start.wall_start
        startup_cpu = self.first_cpu - self.start.cpu_start
        records, wall, cpu = self.count - self.first_count, end - self.first_at, end_cpu - self.first_cpu
        if records <= 0:  # everything came in one poll: fall back to the whole consume
            records, wall, cpu = self.count, end - self.start.wall_start, end_cpu - self.start.cpu_start
        result = RunResult(self.client, records=records, wall_s=wall, cpu_s=cpu)
        result.extra.update(
            total_records=self.count, startup_s=round(startup, 3), startup_cpu_s=round(startup_cpu, 3)
        )
        result.extra["note"] = f"start {startup:.2f} s / {startup_cpu:.2f} CPU s"
        return result


def _run_confluent(bootstrap: str, topic: str, partitions: int, tally: Tally) -> RunResult:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-unused",  # required by the client; assign() never joins it
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": FETCH_WAIT_MS,
            "queued.min.messages": 1_000_000,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        while not tally.done:
            n = size = 0
            for msg in consumer.consume(MAX_RECORDS, 1.0):
                if msg.error() is not None:
                    raise RuntimeError(str(msg.error()))
                size += len(msg.value())
                n += 1
            tally.add(n, size)
        return tally.result()
    finally:
        consumer.close()


def _run_aiokafka(bootstrap: str, topic: str, partitions: int, tally: Tally) -> RunResult:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def main() -> RunResult:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            fetch_max_wait_ms=FETCH_WAIT_MS,
        )
        await consumer.start()
        try:
            consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
            await consumer.seek_to_beginning()
            while not tally.done:
                batches = await consumer.getmany(timeout_ms=1000, max_records=MAX_RECORDS)
                for records in batches.values():
                    tally.add(len(records), sum(len(r.value) for r in records))
            return tally.result()
        finally:
            await consumer.stop()

    return asyncio.run(main())


def _run_kafka_python(bootstrap: str, topic: str, partitions: int, tally: Tally) -> RunResult:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=FETCH_WAIT_MS,
    )
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        consumer.seek_to_beginning()
        while not tally.done:
            batches = consumer.poll(timeout_ms=1000, max_records=MAX_RECORDS)
            for records in batches.values():
                tally.add(len(records), sum(len(r.value) for r in records))
        return tally.result()
    finally:
        consumer.close()


def _our_consumer(bootstrap: str, topic: str, method: str) -> Any:
    """Build our consumer, or say it does not exist yet (only here: a bug later is an error)."""
    consumer = our_export("KafkaConsumer")(
        bootstrap_servers=bootstrap,
        topics=[topic],
        group_id=None,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=FETCH_WAIT_MS,  # as every peer here: RESULTS.md says so
    )
    if not callable(getattr(consumer, method, None)):
        consumer.close()
        raise NotImplementedYet(f"kafka_core.KafkaConsumer.{method} does not exist yet")
    return consumer


def _run_ours(bootstrap: str, topic: str, partitions: int, tally: Tally) -> RunResult:
    consumer = _our_consumer(bootstrap, topic, "poll")
    try:
        while not tally.done:
            records = consumer.poll(1000, MAX_RECORDS)
            tally.add(len(records), sum(len(r.value) for r in records))
        return tally.result()
    finally:
        consumer.close()


def _run_ours_columns(bootstrap: str, topic: str, partitions: int, tally: Tally) -> RunResult:
    import pyarrow.compute as pc

    consumer = _our_consumer(bootstrap, topic, "poll_columns")
    try:
        while not tally.done:
            batch = consumer.poll_columns(1000, MAX_RECORDS)
            if batch is None or batch.num_rows == 0:
                continue
            size = pc.sum(pc.binary_length(batch.column("value"))).as_py() or 0
            tally.add(batch.num_rows, size)
        result = tally.result()
    finally:
        consumer.close()
    result.client = "kafka_core-poll_columns"
    result.extra["note"] += "; pyarrow.RecordBatch per poll"
    return result


RUNNERS = {
    "confluent-kafka": _run_confluent,
    "aiokafka": _run_aiokafka,
    "kafka-python": _run_kafka_python,
    "kafka_core": _run_ours,
    "kafka_core-poll_columns": _run_ours_columns,
}


def run_consumer_bench(
    bootstrap: str,
    *,
    records: int = 300_000,
    value_size: int = 100,
    partitions: int = 3,
    repeat: int = 3,
    clients: Sequence[str] = CLIENTS,
    timeout: float = 180.0,
    log: Any = print,
) -> list[RunResult]:
    """Every client ``repeat`` times, round-robin, each on a freshly filled topic; median each."""
    values = make_values(records, value_size)
    runs: dict[str, list[RunResult]] = {c: [] for c in clients}
    for round_no in range(repeat):
        for client in clients:
            if runs[client] and runs[client][-1].status != OK:
                continue
            topic = unique_topic("consume", client)
            create_topic(bootstrap, topic, partitions)
            fill_topic(bootstrap, topic, values)
            args = ["--bootstrap", bootstrap, "--topic", topic, "--records", str(records)]
            args += ["--value-size", str(value_size), "--partitions", str(partitions)]
            result = run_child("bench.e2e_consumer", client, args, timeout)
            delete_topic(bootstrap, topic)
            runs[client].append(result)
            log(f"  consume {client} round {round_no + 1}: {_describe(result)}")
    return [median_result(runs[c]) for c in clients]


def _describe(result: RunResult) -> str:
    if result.status != OK:
        return f"{result.status} {result.detail}"
    return f"{result.rate:,.0f} msg/s, {result.cpu_per_million:.2f} CPU s/M, {result.rss_mb:.0f} MB"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--bootstrap", help="broker; default: KAFKA_BOOTSTRAP_SERVERS or embedded Tansu")
    parser.add_argument("--topic", help=argparse.SUPPRESS)
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--value-size", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--clients", default=",".join(CLIENTS))
    args = parser.parse_args(argv)

    if args.child:
        runner = RUNNERS.get(args.child)

        def run() -> RunResult:
            assert runner is not None
            tally = Tally(args.child, args.records, args.value_size)
            return runner(args.bootstrap, args.topic, args.partitions, tally)

        return child_main(args.child, {args.child: run} if runner else {})

    clients = [c for c in args.clients.split(",") if c]
    kwargs = {"records": args.records, "value_size": args.value_size, "partitions": args.partitions}
    if args.bootstrap:
        results = run_consumer_bench(args.bootstrap, repeat=args.repeat, clients=clients, **kwargs)
    else:
        with bench_broker() as bootstrap:
            results = run_consumer_bench(bootstrap, repeat=args.repeat, clients=clients, **kwargs)
    print(e2e_table(results, ANCHOR))
    return 0


if __name__ == "__main__":
    sys.exit(main())
