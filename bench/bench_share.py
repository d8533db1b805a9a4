"""Share-group consume throughput (KIP-932): poll + accept, kafka_core against confluent-kafka's
ShareConsumer, in the same run on Apache Kafka (share groups need Kafka 4.1+; Tansu has none).

Every client reads the same preloaded topic as a fresh share group (its start set to the
earliest offset), implicit acknowledgement (each poll accepts the previous one's records; the
last ones are accepted by a final commit_sync), in its own fresh process. Rate and CPU (all the
process's threads) span the first non-empty poll to the commit of the last record. Figures are
medians of ``--repeat`` rounds (each round runs every client once, in turn).

``raw-sharefetch`` is the broker's ceiling in the same run: ShareFetch after ShareFetch on one
share session, each accepting (piggybacked) everything the one before acquired, no record
decoded. A share partition lets a member hold at most group.share.partition.max.record.locks
(2000 by default) unacknowledged records and acquires whole producer batches, so the next
ShareFetch can acquire only once the previous records are acknowledged: consuming is one
broker round trip per producer batch (or per 2000 records of small batches), in series, for
every client. ``--batch-records N`` preloads with small producer batches to show that case:
there a ShareFetch acquires at most max_poll_records (what kafka_core asks for),
so the default 500 makes four times the round trips of 2000 (BENCH_SHARE_MAX_RECORDS=500).
It stays so on purpose: records acquired but not polled within the lock duration come back
with their delivery count raised, so a fetch never acquires more than the application said
it can take at once.

    python -m bench.bench_share [--records 200000] [--size 100] [--partitions 1] [--repeat 3] [--batch-records 100] [--save]

Uses KAFKA_BOOTSTRAP_SERVERS when set, else starts a one-node Apache Kafka. Not part of run_all:
``--save`` keeps the medians as bench/results.json's ``share`` section (with the date, load,
machine and command) and renders RESULTS.md and the guides' figures from it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime
from typing import Any

CLIENTS = (
    "confluent-kafka",
    "kafka_core",
    "kafka_core-poll_columns",
    "kafka_core-columns+ack_batch",
    "raw-sharefetch",
)
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


def run_ours(
    bootstrap: str, topic: str, group: str, n: int, columns: bool, ack_batch: bool = False
) -> dict[str, Any]:
    """``ack_batch``: explicit mode, each poll_columns batch accepted by acknowledge_batch."""
    from kafka_core import KafkaShareConsumer

    mode = "explicit" if ack_batch else "implicit"
    c = KafkaShareConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        max_poll_records=MAX_RECORDS,
        share_acknowledgement_mode=mode,
    )
    tally = Tally(n)
    while tally.count < n:
        if columns:
            batch = c.poll_columns(500)
            if batch is not None and ack_batch:
                c.acknowledge_batch(batch)
            tally.add(0 if batch is None else batch.num_rows)
        else:
            recs = c.poll(500)
            tally.add(sum(1 for r in recs if r.value is not None))
    c.commit_sync()
    out = tally.result()
    c.close()
    return out


def run_raw(bootstrap: str, topic: str, group: str, n: int) -> dict[str, Any]:
    """The broker's ceiling: ShareFetch after ShareFetch on one share session, each accepting
    (piggybacked) every offset the one before acquired, no record decoded, no poll machinery."""

    return asyncio.run(_raw(bootstrap, topic, group, n))


async def _raw(bootstrap: str, topic: str, group: str, n: int) -> dict[str, Any]:
    from kafka_core.client.cluster import KafkaClient
    from kafka_core.share.fetch import NodeSession, ShareRequests, leader_of
    from kafka_core.share.membership import ShareMembership
    from kafka_core.share.records import AcknowledgeType, Acks

    client = KafkaClient(bootstrap)
    member = ShareMembership(client, group, on_change=lambda: None)
    await member.start([topic])
    requests = ShareRequests(
        client,
        group,
        member_id=lambda: member.member_id,
        topic_id=member.topic_id,
        topic_name=member.topic_name,
        max_wait_ms=500,
        min_bytes=1,
        max_bytes=52_428_800,
        max_records=MAX_RECORDS,
        request_timeout_ms=30_000,
    )
    while not member.assignment:
        await member.wait_joined(1.0)
        await asyncio.sleep(0.05)
    tps = sorted(member.assignment)
    await client.metadata([topic])
    sessions: dict[int, NodeSession] = {}
    acks: dict[Any, Acks] = {}
    tally = Tally(n)
    while tally.count < n:
        meta = client.cached_metadata()
        by_node: dict[int, list[Any]] = {}
        for tp in tps:
            by_node.setdefault(leader_of(meta, tp) or 0, []).append(tp)
        got = 0
        for node, parts in by_node.items():
            sess = sessions.setdefault(node, NodeSession(node))
            mine = {tp: a for tp, a in acks.items() if tp in parts} if sess.epoch else {}
            chunks, _, _ = await requests.fetch(sess, parts, mine)
            for tp in mine:
                acks.pop(tp)
            for c in chunks:
                a = acks.setdefault(c.tp, Acks())
                for first, last, _count in c.ranges:
                    a.add_range(first, last, int(AcknowledgeType.ACCEPT))
                got += c.size
        tally.add(got)
    for node, sess in sessions.items():
        mine = {tp: a for tp, a in acks.items() if leader_of(client.cached_metadata(), tp) == node}
        await requests.acknowledge(sess, mine, close=True)
    out = tally.result()
    await member.leave()
    await client.close()
    return out


def child(client: str, bootstrap: str, topic: str, group: str, n: int) -> None:
    if client == "confluent-kafka":
        out = run_confluent(bootstrap, topic, group, n)
    elif client == "raw-sharefetch":
        out = run_raw(bootstrap, topic, group, n)
    else:
        ack_batch = client.endswith("ack_batch")
        out = run_ours(bootstrap, topic, group, n, "columns" in client, ack_batch)
    print("RESULT " + json.dumps(out), flush=True)


def _median(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """The median round by rate and, apart, the median CPU per record."""
    import statistics

    return {
        "rate": statistics.median(r["rate"] for r in rounds),
        "cpu_s_per_million": statistics.median(r["cpu_s_per_million"] for r in rounds),
    }


def fill_small_batches(bootstrap: str, topic: str, values: list[bytes], batch_records: int) -> None:
    """Preload with producer batches of at most ``batch_records`` records (confluent-kafka's
    batch.num.messages): the broker acquires whole batches, so this sets how a ShareFetch fills."""
    from confluent_kafka import Producer

    p = Producer(
        {"bootstrap.servers": bootstrap, "batch.num.messages": batch_records, "linger.ms": 5, "log_level": 3}
    )
    for v in values:
        while True:
            try:
                p.produce(topic, v)
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    if p.flush(60.0):
        raise RuntimeError(f"preloading {topic}: records still unsent after 60 s")


def save(
    args: argparse.Namespace,
    broker: str,
    started: datetime,
    rows: dict[str, list[dict[str, Any]]],
    medians: dict[str, dict[str, Any]],
    load_before: tuple[float, float, float],
    load_after: tuple[float, float, float],
) -> None:
    """The run as bench/results.json's ``share`` section; RESULTS.md rendered from it."""
    from bench.common import machine_summary
    from bench.report import save_section

    section = {
        "broker": broker,
        "command": shlex.join(["python", "-m", "bench.bench_share", *(sys.argv[1:])]),
        "date": f"{started:%Y-%m-%d %H:%M} UTC",
        "load": ", ".join(f"{x:.2f}" for x in load_before),
        "load_after": ", ".join(f"{x:.2f}" for x in load_after),
        "machine": {k: v for k, v in machine_summary().items() if k != "load"},
        "mode": "full",
        "records": args.records,
        "medians": medians,
        "rounds": {c: [r["rate"] for r in rs] for c, rs in rows.items()},
    }
    save_section("share", section)
    print("saved to bench/results.json (share) and rendered bench/RESULTS.md")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="share consume throughput: kafka_core vs confluent-kafka")
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--batch-records", type=int, default=0, help="producer batches of at most N records (0: large)"
    )
    ap.add_argument("--clients", default=",".join(CLIENTS))
    ap.add_argument("--save", action="store_true", help="keep the medians in bench/results.json")
    ap.add_argument("--child", nargs=5, metavar=("CLIENT", "BOOTSTRAP", "TOPIC", "GROUP", "N"))
    args = ap.parse_args(argv)
    if args.child:
        client, bootstrap, topic, group, n = args.child
        child(client, bootstrap, topic, group, int(n))
        return 0
    from bench.common import create_topic, fill_topic, make_values

    external = os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "").strip()
    cluster = None
    started = datetime.now(UTC)
    if external:
        bootstrap = external
        broker = f"external cluster at {external}"
    else:
        from kafka_core.devbroker import KafkaCluster

        cluster = KafkaCluster(1).start()
        bootstrap = cluster.bootstrap
        broker = f"Apache Kafka {cluster.version} (one KRaft node), loopback"
    try:
        topic = f"bench-share-{uuid.uuid4().hex[:8]}"
        create_topic(bootstrap, topic, args.partitions)
        if args.batch_records:
            fill_small_batches(bootstrap, topic, make_values(args.records, args.size), args.batch_records)
        else:
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
        med = {c: _median(rs) for c, rs in rows.items()}
        anchor = med.get("confluent-kafka")
        ceiling = med.get("raw-sharefetch")
        load_after = os.getloadavg()
        print(
            f"{args.records} records of {args.size} B, {args.partitions} partition(s), "
            f"producer batches of {f'{args.batch_records} records' if args.batch_records else 'up to 1 MB'}, median of "
            f"{args.repeat} rounds, kafka_core max_poll_records={MAX_RECORDS}; "
            f"load average {load_before[0]:.1f} before, {load_after[0]:.1f} after "
            f"({os.cpu_count()} CPUs: judge by CPU per record and by the ratios)"
        )
        print(
            f"{'client':28} {'records/s':>12} {'CPU s/M rec':>12} {'vs confluent':>13} {'CPU vs':>8} "
            f"{'of ceiling':>11}  rounds (records/s)"
        )
        for c, r in med.items():
            ratio = f"{r['rate'] / anchor['rate']:.2f}x" if anchor else "-"
            cpu = f"{r['cpu_s_per_million'] / anchor['cpu_s_per_million']:.2f}x" if anchor else "-"
            ceil = f"{r['rate'] / ceiling['rate']:.0%}" if ceiling else "-"
            each = " ".join(f"{x['rate']:,.0f}" for x in rows[c])
            print(
                f"{c:28} {r['rate']:12,.0f} {r['cpu_s_per_million']:12.2f} {ratio:>13} {cpu:>8} {ceil:>11}  {each}"
            )
        if args.save and not args.batch_records:
            save(args, broker, started, rows, med, load_before, load_after)
    finally:
        if cluster is not None:
            cluster.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
