"""Transactional produce benchmark: N records of S bytes, T records per transaction, to a
P-partition topic; our transactional producer against confluent-kafka's in the same run.

Each client runs in its own fresh process against its own fresh topic with the same data;
measured from init_transactions' end (the producer id is in place) to the last commit's end.
Every record must land: the topic is read back and counted after each run.

    python -m bench.bench_transactions [--records 100000] [--per-transaction 1000] [--repeat 3]
"""

from __future__ import annotations

import sys
import uuid

from bench.common import (
    NotImplementedYet,
    ProduceBench,
    RunResult,
    Span,
    our_export,
)

CLIENTS = ("confluent-kafka", "kafka_core")
ANCHOR = "confluent-kafka"
LINGER_MS = 5
BATCH_BYTES = 1_048_576
TIMEOUT_S = 60.0  # per transactional call


def _transactions(values: list[bytes], per_txn: int) -> list[list[bytes]]:
    return [values[i : i + per_txn] for i in range(0, len(values), per_txn)]


def _run_confluent(bootstrap: str, topic: str, values: list[bytes], per_transaction: int) -> RunResult:
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
    for txn in _transactions(values, per_transaction):
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


def _run_ours(bootstrap: str, topic: str, values: list[bytes], per_transaction: int) -> RunResult:
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
        for txn in _transactions(values, per_transaction):
            producer.begin_transaction()
            for value in txn:
                send(topic, value)
            producer.commit_transaction(TIMEOUT_S)  # raises if any record of it failed
        span.stop()
    finally:
        producer.close()
    return RunResult("kafka_core", records=len(values), wall_s=span.wall, cpu_s=span.cpu)


RUNNERS = {"confluent-kafka": _run_confluent, "kafka_core": _run_ours}


BENCH = ProduceBench(
    module="bench.bench_transactions",
    kind="txn",
    label="transactional produce",
    records=100_000,
    timeout=300.0,
    clients=CLIENTS,
    anchor=ANCHOR,
    runners=RUNNERS,
    doc=__doc__ or "",
    options={"per_transaction": 1_000},
    note="{per_transaction} records per transaction",
)
run_transactions_bench = BENCH.run
main = BENCH.main


if __name__ == "__main__":
    sys.exit(main())
