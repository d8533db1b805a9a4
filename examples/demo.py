"""The small produce/consume demo, without Spark: produce, consume back, verify, report.

Not the project's main job, which is the Spark pipeline (``bash ci/demo.sh``). Runs against
``KAFKA_BOOTSTRAP_SERVERS`` or, when unset, an embedded Tansu broker started for the run. Every
record is checked on the way back (count, order per partition, content), so the figures printed
are for data that really arrived intact.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
import uuid

from kafka_core import KafkaConsumer, KafkaProducer
from kafka_core.codec import IMPLEMENTATION
from kafka_core.devbroker import TansuBroker, broker_from_env


def _payload(i: int, size: int) -> bytes:
    head = f"{i:012d}".encode()
    return head + b"x" * max(0, size - len(head))


def run(bootstrap: str, tansu: TansuBroker | None, count: int, size: int, partitions: int) -> int:
    topic = f"demo-{uuid.uuid4().hex[:8]}"
    if tansu is not None:
        tansu.create_topic(topic, partitions)
    values = [_payload(i, size) for i in range(count)]
    keys = [b"key-%d" % (i % 1000) for i in range(count)]

    cpu0, t0 = time.process_time(), time.perf_counter()
    with KafkaProducer(bootstrap_servers=bootstrap, acks=-1, linger_ms=5) as producer:
        futures = [producer.send(topic, v, key=k) for k, v in zip(keys, values, strict=True)]
        producer.flush()
        metas = [f.result() for f in futures]
    produce_s, produce_cpu = time.perf_counter() - t0, time.process_time() - cpu0

    cpu0 = time.process_time()
    seen: dict[int, list[int]] = {}
    received = 0
    first = last = 0.0
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, topics=[topic], group_id=None, auto_offset_reset="earliest"
    )
    try:
        deadline = time.monotonic() + 120
        while received < count and time.monotonic() < deadline:
            for msg in consumer.poll(timeout_ms=1000, max_records=100_000):
                if not received:
                    first = time.perf_counter()
                i = int(msg.value[:12])
                if msg.value != values[i] or msg.key != keys[i]:
                    print(f"MISMATCH at {msg.topic}/{msg.partition}@{msg.offset}", file=sys.stderr)
                    return 1
                seen.setdefault(msg.partition, []).append(i)
                received += 1
            last = time.perf_counter()
    finally:
        consumer.close()
    consume_cpu = time.process_time() - cpu0

    ordered = all(lst == sorted(lst) for lst in seen.values())
    distinct = len({i for lst in seen.values() for i in lst})
    per_partition = {m.partition for m in metas}
    consume_s = max(last - first, 1e-9)
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"kafka_core demo — codec: {IMPLEMENTATION}, broker: {bootstrap}, topic: {topic}")
    print(
        f"  produced {count:,} x {size} B to {len(per_partition)} partitions "
        f"in {produce_s:.2f} s: {count / produce_s:,.0f} msg/s, "
        f"CPU {produce_cpu / count * 1e6:.2f} s per million"
    )
    print(
        f"  consumed {received:,} (distinct {distinct:,}), per-partition order kept: {ordered}, "
        f"{received / consume_s:,.0f} msg/s first-to-last, CPU {consume_cpu / max(received, 1) * 1e6:.2f} s per million"
    )
    print(f"  peak RSS {rss_mb:.0f} MB")
    ok = received == count and distinct == count and ordered
    print("  result:", "OK — every record came back intact" if ok else "FAILED")
    return 0 if ok else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=300_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=3)
    args = parser.parse_args()
    if os.environ.get("KAFKA_BOOTSTRAP_SERVERS"):
        with broker_from_env() as bootstrap:
            return run(bootstrap, None, args.count, args.size, args.partitions)
    with TansuBroker() as tansu:
        return run(tansu.bootstrap, tansu, args.count, args.size, args.partitions)


if __name__ == "__main__":
    sys.exit(main())
