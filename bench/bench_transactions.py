"""Transactional produce benchmark: N records of S bytes, T records per transaction, to a
P-partition topic; our transactional producer against confluent-kafka's in the same run.

Each client runs in its own fresh process against its own fresh topic with the same data;
measured from init_transactions' end (the producer id is in place) to the last commit's end.
Every record must land: the topic is read back and counted after each run.

    python -m bench.bench_transactions [--records 100000] [--per-transaction 1000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import sys
import uuid
from collections.abc import Sequence
from typing import Any

from bench.common import (
    ERROR,
    OK,
    NotImplementedYet,
    RunResult,
    Span,
    bench_broker,
    child_main,
    count_topic,
    create_topic,
    delete_topic,
    e2e_table,
    make_values,
    median_result,
    our_export,
    run_child,
    unique_topic,
)

CLIENTS = ("confluent-kafka", "kafka_core")
ANCHOR = "confluent-kafka"
LINGER_MS = 5
BATCH_BYTES = 1_048_576
TIMEOUT_S = 60.0  # per transactional call


def _transactions(values: list[bytes], per_txn: int) -> list[list[bytes]]:
    return [values[i : i + per_txn] for i in range(0, len(values), per_txn)]


def _run_confluent(bootstrap: str, topic: str, values: list[bytes], per_txn: int) -> RunResult:
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": f"bench-ck-{uuid.uuid4().hex[:8]}",
            "linger.ms": LINGER_MS,
            "batch.size": 1_000_000,  # librdkafka's maximum
            "log_level": 3,
        }
    )
    producer.list_topics(topic, timeout=10)
    producer.init_transactions(TIMEOUT_S)
    span = Span().start()
    produce, poll = producer.produce, producer.poll
    for txn in _transactions(values, per_txn):
        producer.begin_transaction()
        for value in txn:
            while True:
                try:
                    produce(topic, value)
                    break
                except BufferError:
                    poll(0.005)
        producer.commit_transaction(TIMEOUT_S)  # flushes first; raises on any failed record
    span.stop()
    return RunResult("confluent-kafka", records=len(values), wall_s=span.wall, cpu_s=span.cpu)


def _run_ours(bootstrap: str, topic: str, values: list[bytes], per_txn: int) -> RunResult:
    cls = our_export("KafkaProducer")
    if not callable(getattr(cls, "init_transactions", None)):
        raise NotImplementedYet("kafka_core.KafkaProducer.init_transactions does not exist yet")
    producer = cls(
        bootstrap_servers=bootstrap,
        transactional_id=f"bench-kc-{uuid.uuid4().hex[:8]}",
        linger_ms=LINGER_MS,
        batch_size=BATCH_BYTES,
    )
    try:
        producer.partitions_for(topic)
        producer.init_transactions(TIMEOUT_S)
        span = Span().start()
        send = producer.send
        for txn in _transactions(values, per_txn):
            producer.begin_transaction()
            for value in txn:
                send(topic, value)
            producer.commit_transaction(TIMEOUT_S)  # raises if any record of it failed
        span.stop()
    finally:
        producer.close()
    return RunResult("kafka_core", records=len(values), wall_s=span.wall, cpu_s=span.cpu)


RUNNERS = {"confluent-kafka": _run_confluent, "kafka_core": _run_ours}


def run_transactions_bench(
    bootstrap: str,
    *,
    records: int = 100_000,
    value_size: int = 100,
    per_transaction: int = 1_000,
    partitions: int = 3,
    repeat: int = 3,
    clients: Sequence[str] = CLIENTS,
    timeout: float = 300.0,
    log: Any = print,
) -> list[RunResult]:
    """Every client ``repeat`` times, round-robin (so drifting load hits all alike); median each."""
    runs: dict[str, list[RunResult]] = {c: [] for c in clients}
    for round_no in range(repeat):
        for client in clients:
            if runs[client] and runs[client][-1].status != OK:
                continue  # not implemented / broken: once is enough
            topic = unique_topic("txn", client)
            create_topic(bootstrap, topic, partitions)
            args = ["--bootstrap", bootstrap, "--topic", topic, "--records", str(records)]
            args += ["--value-size", str(value_size), "--per-transaction", str(per_transaction)]
            result = run_child("bench.bench_transactions", client, args, timeout)
            if result.status == OK:
                landed = count_topic(bootstrap, topic, partitions, records)
                if landed != records:
                    result.status = ERROR
                    result.detail = f"{landed} of {records} records on the topic after the run"
                result.extra["note"] = f"{per_transaction} records per transaction"
            delete_topic(bootstrap, topic)
            runs[client].append(result)
            log(f"  transactional produce {client} round {round_no + 1}: {_describe(result)}")
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
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--value-size", type=int, default=100)
    parser.add_argument("--per-transaction", type=int, default=1_000)
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--clients", default=",".join(CLIENTS))
    args = parser.parse_args(argv)

    if args.child:
        values = make_values(args.records, args.value_size)
        runner = RUNNERS.get(args.child)
        bound = (
            {args.child: (lambda: runner(args.bootstrap, args.topic, values, args.per_transaction))}
            if runner
            else {}
        )
        return child_main(args.child, bound)

    clients = [c for c in args.clients.split(",") if c]
    kwargs = {
        "records": args.records,
        "value_size": args.value_size,
        "per_transaction": args.per_transaction,
        "partitions": args.partitions,
    }
    if args.bootstrap:
        results = run_transactions_bench(args.bootstrap, repeat=args.repeat, clients=clients, **kwargs)
    else:
        with bench_broker() as bootstrap:
            results = run_transactions_bench(bootstrap, repeat=args.repeat, clients=clients, **kwargs)
    print(e2e_table(results, ANCHOR))
    return 0


if __name__ == "__main__":
    sys.exit(main())
