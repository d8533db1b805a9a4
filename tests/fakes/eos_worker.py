"""A consume-transform-produce application for tests/integration/test_eos_kill_kafka.py, run as
a child process that the test SIGKILLs in the middle of a transaction.

It reads ``--input`` read_committed in group ``--group``, writes each record's value upper-cased to
the same partition of ``--output`` and commits the input offsets with the output in one
transaction per poll (transactional id ``--tid``), until the group's committed offsets cover
``--total`` input records; then it exits 0. Its stdout, one line each, flushed, tells the test
where it is: ``PROTOCOL <transactions version>``, ``BEGIN <n>``, ``COMMITTED <n> <offsets sum>``,
``DONE``. With ``--pause-at PHASE --pause-txn K`` it stops in its K-th transaction at PHASE and
prints ``PAUSED <phase>`` (then sleeps until killed):

- ``mid-send``: half the batch sent, not flushed (records may or may not have reached the log);
- ``after-send``: the whole batch sent and flushed (in the log, not committed);
- ``after-offsets``: the offsets sent to the transaction too (the commit is the one step left).
"""

from __future__ import annotations

import argparse
import time

from kafka_core import KafkaConsumer, KafkaProducer, TopicPartition


def main() -> int:
    ap = argparse.ArgumentParser()
    for name in ("bootstrap", "input", "output", "group", "tid"):
        ap.add_argument(f"--{name}", required=True)
    ap.add_argument("--partitions", type=int, required=True)
    ap.add_argument("--total", type=int, required=True)
    ap.add_argument("--max-records", type=int, default=9)
    ap.add_argument("--pause-at", choices=("mid-send", "after-send", "after-offsets"))
    ap.add_argument("--pause-txn", type=int, default=1)
    # a pause inside each transaction, after its sends: a kill at a random moment then lands
    # inside a transaction, and cannot come after the worker already finished everything
    ap.add_argument("--pace-ms", type=int, default=0)
    args = ap.parse_args()

    def say(line: str) -> None:
        print(line, flush=True)

    producer = KafkaProducer(
        args.bootstrap,
        transactional_id=args.tid,
        linger_ms=5,
        retry_backoff_ms=50,
        reconnect_backoff_max_ms=200,
        transaction_timeout_ms=60_000,
    )
    # The producer first: init_transactions aborts what a killed predecessor left open, so the
    # group's offsets are stable when the consumer asks for them.
    producer.init_transactions(60)
    say(f"PROTOCOL {producer.transaction_version}")
    consumer = KafkaConsumer(
        bootstrap_servers=args.bootstrap,
        topics=[args.input],
        group_id=args.group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        isolation_level="read_committed",
        session_timeout_ms=6_000,
        heartbeat_interval_ms=500,
        fetch_max_wait_ms=100,
    )
    tps = [TopicPartition(args.input, p) for p in range(args.partitions)]
    n = 0
    while True:
        batch = consumer.poll(500, max_records=args.max_records)
        if not batch:
            continue
        n += 1
        producer.begin_transaction()
        say(f"BEGIN {n}")
        pause = args.pause_at if n == args.pause_txn else None
        offsets: dict[TopicPartition, int] = {}
        for i, m in enumerate(batch):
            if pause == "mid-send" and i == len(batch) // 2:
                pause_here(say, pause)
            producer.send(args.output, bytes(m.value).upper(), key=m.key, partition=m.partition)
            offsets[TopicPartition(m.topic, m.partition)] = m.offset + 1
        if pause == "after-send":
            producer.flush(30)
            pause_here(say, pause)
        if args.pace_ms:
            time.sleep(args.pace_ms / 1000)
        producer.send_offsets_to_transaction(offsets, consumer.group_metadata(), timeout=30)
        if pause == "after-offsets":
            producer.flush(30)
            pause_here(say, pause)
        producer.commit_transaction(60)
        committed = consumer.committed(tps)
        total = sum(v or 0 for v in committed.values())
        say(f"COMMITTED {n} {total}")
        if total >= args.total:
            break
    consumer.close(commit=False)
    producer.close()
    say("DONE")
    return 0


def pause_here(say: object, phase: str) -> None:
    """Stop for good at ``phase`` (the test kills the process here)."""
    assert callable(say)
    say(f"PAUSED {phase}")
    while True:
        time.sleep(60)


if __name__ == "__main__":
    raise SystemExit(main())
