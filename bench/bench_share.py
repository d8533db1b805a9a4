"""Share-group consume throughput (KIP-932): poll + accept, kafka_core against confluent-kafka's
ShareConsumer, in the same run on Apache Kafka (share groups need Kafka 4.1+; Tansu has none).

Every client reads the same preloaded topic as a fresh share group (its start set to the
earliest offset), implicit acknowledgement (each poll accepts the previous one's records; the
last ones are accepted by a final commit_sync), in its own fresh process. Rate and CPU (all the
process's threads) span the first non-empty poll to the commit of the last record.

    python -m bench.bench_share [--records 200000] [--size 100] [--partitions 1] [--repeat 2]

Uses KAFKA_BOOTSTRAP_SERVERS when set, else starts a one-node Apache Kafka. Not part of run_all.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import uuid
from typing import Any

CLIENTS = ("confluent-kafka", "kafka_core", "kafka_core-poll_columns")
# kafka_core's max_poll_records (also its ShareFetch max_records). confluent-kafka's ShareConsumer
# has no such limit: each poll hands over what it acquired (a whole producer batch, 9082 records
# of 100 B here); 10,000 is what bench/e2e_consumer.py gives every client per poll.
MAX_RECORDS = int(os.environ.get("BENCH_SHARE_MAX_RECORDS", "10000"))
DEADLINE_S = 180.0


def _group(bootstrap: str, topic: str) -> str:
    from kafka_core import KafkaAdmin
    from kafka_core.admin.results import ConfigResourceType

    group = f"bench-share-{uuid.uuid4().hex[:8]}"
    with KafkaAdmin(bootstrap) as admin:
        out = admin.incremental_alter_configs(
            {(ConfigResourceType.GROUP, group): {"share.auto.offset.reset": "earliest"}}
        )
        for r in out.values():
            r.result()
    return group


class Tally:
    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.count = 0
        self.first_at = self.first_cpu = 0.0
        self.first_count = 0
        self.deadline = time.monotonic() + DEADLINE_S

    def add(self, n: int) -> None:
        if n and not self.count:
            self.first_at, self.first_cpu, self.first_count = time.perf_counter(), time.process_time(), n
        self.count += n
        if self.count < self.expected and time.monotonic() > self.deadline:
            raise TimeoutError(f"only {self.count} of {self.expected} records in {DEADLINE_S:.0f} s")

    def result(self) -> dict[str, Any]:
        wall = time.perf_counter() - self.first_at
        cpu = time.process_time() - self.first_cpu
        n = self.count - self.first_count
        return {"records": self.count, "rate": n / wall, "cpu_s_per_million": cpu / n * 1e6, "wall_s": wall}


def run_confluent(bootstrap: str, topic: str, group: str, n: int) -> dict[str, Any]:
    from confluent_kafka import ShareConsumer

    c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, "log_level": 3})
    c.subscribe([topic])
    tally = Tally(n)
    while tally.count < n:
        msgs = c.poll(0.5)
        good = [m for m in msgs if m.error() is None and m.value() is not None]
        tally.add(len(good))
    c.commit_sync()
    out = tally.result()
    c.close()
    return out


def run_ours(bootstrap: str, topic: str, group: str, n: int, columns: bool) -> dict[str, Any]:
    from kafka_core import KafkaShareConsumer

    c = KafkaShareConsumer(topic, bootstrap_servers=bootstrap, group_id=group, max_poll_records=MAX_RECORDS)
    tally = Tally(n)
    while tally.count < n:
        if columns:
            batch = c.poll_columns(500)
            tally.add(0 if batch is None else batch.num_rows)
        else:
            recs = c.poll(500)
            tally.add(sum(1 for r in recs if r.value is not None))
    c.commit_sync()
    out = tally.result()
    c.close()
    return out


def child(client: str, bootstrap: str, topic: str, group: str, n: int) -> None:
    if client == "confluent-kafka":
        out = run_confluent(bootstrap, topic, group, n)
    else:
        out = run_ours(bootstrap, topic, group, n, columns=client.endswith("poll_columns"))
    print("RESULT " + json.dumps(out), flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="share consume throughput: kafka_core vs confluent-kafka")
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--clients", default=",".join(CLIENTS))
    ap.add_argument("--child", nargs=5, metavar=("CLIENT", "BOOTSTRAP", "TOPIC", "GROUP", "N"))
    args = ap.parse_args(argv)
    if args.child:
        client, bootstrap, topic, group, n = args.child
        child(client, bootstrap, topic, group, int(n))
        return 0
    from bench.common import create_topic, fill_topic, make_values

    external = os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "").strip()
    cluster = None
    if external:
        bootstrap = external
    else:
        from kafka_core.devbroker import KafkaCluster

        cluster = KafkaCluster(1).start()
        bootstrap = cluster.bootstrap
    try:
        topic = f"bench-share-{uuid.uuid4().hex[:8]}"
        create_topic(bootstrap, topic, args.partitions)
        fill_topic(bootstrap, topic, make_values(args.records, args.size))
        rows: dict[str, list[dict[str, Any]]] = {}
        load_before = os.getloadavg()
        for _ in range(args.repeat):
            for client in args.clients.split(","):
                group = _group(bootstrap, topic)
                cmd = [sys.executable, "-m", "bench.bench_share", "--child", client, bootstrap, topic, group]
                done = subprocess.run([*cmd, str(args.records)], capture_output=True, text=True, timeout=600)
                line = next((x for x in done.stdout.splitlines() if x.startswith("RESULT ")), None)
                if line is None:
                    print(f"{client}: failed: {done.stderr[-2000:]}", file=sys.stderr)
                    continue
                rows.setdefault(client, []).append(json.loads(line[7:]))
        best = {c: max(rs, key=lambda r: r["rate"]) for c, rs in rows.items()}
        anchor = best.get("confluent-kafka")
        load_after = os.getloadavg()
        print(
            f"{args.records} records of {args.size} B, {args.partitions} partition(s), best of {args.repeat}, "
            f"kafka_core max_poll_records={MAX_RECORDS}; "
            f"load average {load_before[0]:.1f} before, {load_after[0]:.1f} after "
            f"({os.cpu_count()} CPUs: judge by CPU per record and by the ratios)"
        )
        print(f"{'client':28} {'records/s':>12} {'CPU s/M rec':>12} {'vs confluent':>13} {'CPU vs':>8}")
        for c, r in best.items():
            ratio = f"{r['rate'] / anchor['rate']:.2f}x" if anchor else "-"
            cpu = f"{r['cpu_s_per_million'] / anchor['cpu_s_per_million']:.2f}x" if anchor else "-"
            print(f"{c:28} {r['rate']:12,.0f} {r['cpu_s_per_million']:12.2f} {ratio:>13} {cpu:>8}")
    finally:
        if cluster is not None:
            cluster.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
