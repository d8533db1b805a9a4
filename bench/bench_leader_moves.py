"""Produce and consume stalls over planned leader moves on a three-node Apache Kafka, kafka_core
beside confluent-kafka in the same run (issue 42, KIP-951).

Both clients run at once through the same faults: each has a topic of its own with one partition
(replicas [1, 2, 3], so node 1 leads it at first; acks=all, idempotent producers, one record
every 1/rate s), a producer and a consumer (no group, from the start). The faults, in order:

- ``controlled-shutdown``: SIGTERM of the partitions' leader (it hands its leaderships over
  first), then the node started again and back in the ISR;
- ``preferred-election``: a preferred-leader election moving both partitions back to node 1 (which
  lost them in the shutdown), asked with confluent-kafka's admin;
- ``rolling-restart``: SIGTERM and start of each node in turn, each back in the ISR before the next.

Per fault and client: the producer's longest gap between two acknowledgements and the consumer's
longest gap between two records received, over the fault (from its start to 3 s after its end);
and at the end the books (records acknowledged, received, lost, received twice). Figures on a
shared machine are noisy: the load average is printed with them, and the two clients always share
the fault, so their ratio is the figure to read.

    python -m bench.bench_leader_moves [--rate 200] [--rounds 1] [--json out.json]
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import os
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

CLIENTS = ("kafka_core", "confluent")
SETTLE_S = 3.0  # after a fault's end, still counted in it


@dataclass
class Flow:
    """One client's producer and consumer: the times of every acknowledgement and record."""

    client: str
    topic: str
    acks: list[float] = field(default_factory=list)
    received: list[float] = field(default_factory=list)
    values: list[int] = field(default_factory=list)
    acked: set[int] = field(default_factory=set)
    errors: list[str] = field(default_factory=list)
    sent: int = 0
    stopped_at: float | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def ack(self, seq: int) -> None:
        with self.lock:
            self.acks.append(time.monotonic())
            self.acked.add(seq)

    def drained(self, stop: threading.Event) -> bool:
        """The consumer may stop: the producer has stopped and everything it had acknowledged
        was received (or a minute has passed since it stopped)."""
        if not stop.is_set():
            return False
        if self.stopped_at is None:
            self.stopped_at = time.monotonic()
        with self.lock:
            done = self.acked <= set(self.values)
        return done or time.monotonic() - self.stopped_at > 60

    def got(self, seq: int) -> None:
        with self.lock:
            self.received.append(time.monotonic())
            self.values.append(seq)


def gap_and_start(times: list[float], start: float, end: float) -> tuple[float, float]:
    """The longest time without an event inside [start, end] (its edges count as events), and
    the monotonic time it began."""
    inside = sorted(t for t in times if start <= t <= end)
    points = [start, *inside, end]
    return max((b - a, a) for a, b in itertools.pairwise(points))


def _wall(monotonic_at: float) -> str:
    """A monotonic instant as the DEBUG log's clock (HH:MM:SS.mmm), to find a gap in it."""
    at = time.time() - (time.monotonic() - monotonic_at)
    return time.strftime("%H:%M:%S", time.localtime(at)) + f".{int(at % 1 * 1000):03d}"


# -- the two clients -----------------------------------------------------------------------------


def _ours_produce(bootstrap: str, flow: Flow, rate: float, stop: threading.Event) -> None:
    from kafka_core import KafkaProducer

    with KafkaProducer(bootstrap, acks="all", linger_ms=5, delivery_timeout_ms=120_000) as producer:
        seq = 0
        next_at = time.monotonic()
        while not stop.is_set():
            n = seq

            def done(fut: Any, n: int = n) -> None:
                if fut.exception() is None:
                    flow.ack(n)
                else:
                    flow.errors.append(str(fut.exception()))

            producer.send(flow.topic, str(n).encode(), partition=0).add_done_callback(done)
            flow.sent = seq = seq + 1
            next_at += 1 / rate
            time.sleep(max(0.0, next_at - time.monotonic()))
        producer.flush(60)


def _ours_consume(bootstrap: str, flow: Flow, stop: threading.Event) -> None:
    from kafka_core import KafkaConsumer

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, partitions={flow.topic: [0]}, auto_offset_reset="earliest"
    )
    try:
        while not flow.drained(stop):
            for m in consumer.poll(timeout_ms=200):
                flow.got(int(m.value or b"-1"))
    finally:
        consumer.close()


def _peer_produce(bootstrap: str, flow: Flow, rate: float, stop: threading.Event) -> None:
    from confluent_kafka import Producer

    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5}
    )

    def done(err: Any, msg: Any) -> None:
        if err is None:
            flow.ack(int(msg.value()))
        else:
            flow.errors.append(str(err))

    seq = 0
    next_at = time.monotonic()
    while not stop.is_set():
        producer.produce(flow.topic, str(seq).encode(), partition=0, on_delivery=done)
        flow.sent = seq = seq + 1
        producer.poll(0)
        next_at += 1 / rate
        while time.monotonic() < next_at:
            producer.poll(max(0.0, min(0.01, next_at - time.monotonic())))
    producer.flush(60)


def _peer_consume(bootstrap: str, flow: Flow, stop: threading.Event) -> None:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"lm-{uuid.uuid4().hex[:6]}",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(flow.topic, 0, OFFSET_BEGINNING)])
    try:
        while not flow.drained(stop):
            m = consumer.poll(0.2)
            if m is not None and m.error() is None:
                flow.got(int(m.value() or b"-1"))
    finally:
        consumer.close()


# -- the cluster and its faults ------------------------------------------------------------------


def _admin(bootstrap: str) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap})


def _leader(bootstrap: str, topic: str) -> int:
    md = _admin(bootstrap).list_topics(topic, timeout=10)
    return int(md.topics[topic].partitions[0].leader)


def _wait_isr_full(bootstrap: str, topics: list[str], timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            md = _admin(bootstrap).list_topics(timeout=10)
            if all(len(md.topics[t].partitions[0].isrs) == 3 for t in topics):
                return
        except Exception:  # a node restarting: asked again
            pass
        time.sleep(0.5)
    raise TimeoutError(f"ISR of {topics} not full after {timeout} s")


def _elect_preferred(bootstrap: str, topics: list[str]) -> None:
    from confluent_kafka import ElectionType, TopicPartition

    admin = _admin(bootstrap)  # kept until the answer: a collected client fails its futures
    admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(t, 0) for t in topics]).result(30)


FAULTS = ("controlled-shutdown", "preferred-election", "rolling-restart")


def run(rate: float, rounds: int, faults: tuple[str, ...] = FAULTS) -> dict[str, Any]:
    from confluent_kafka.admin import NewTopic

    from kafka_core.devbroker import KafkaCluster

    cluster = KafkaCluster(3, overrides={"auto.leader.rebalance.enable": "false"})
    cluster.start()
    bootstrap = cluster.bootstrap
    out: dict[str, Any] = {"rate": rate, "faults": [], "load": [], "books": {}}
    try:
        flows = {c: Flow(c, f"lm-{c}-{uuid.uuid4().hex[:6]}") for c in CLIENTS}
        topics = [f.topic for f in flows.values()]
        admin = _admin(bootstrap)  # kept: the futures fail if the client is collected first
        futures = admin.create_topics(
            [
                NewTopic(
                    t,
                    num_partitions=1,
                    replication_factor=-1,
                    replica_assignment=[[1, 2, 3]],
                    config={"min.insync.replicas": "2"},
                )
                for t in topics
            ]
        )
        for f in futures.values():
            f.result(30)
        _wait_isr_full(bootstrap, topics)
        stop, produced = threading.Event(), threading.Event()  # producers stop; then consumers drain
        producers = [
            threading.Thread(target=_ours_produce, args=(bootstrap, flows["kafka_core"], rate, stop)),
            threading.Thread(target=_peer_produce, args=(bootstrap, flows["confluent"], rate, stop)),
        ]
        consumers = [
            threading.Thread(target=_ours_consume, args=(bootstrap, flows["kafka_core"], produced)),
            threading.Thread(target=_peer_consume, args=(bootstrap, flows["confluent"], produced)),
        ]
        threads = producers + consumers
        for t in threads:
            t.start()
        # Both flowing before the first fault: a producer still starting (its InitProducerId
        # can take seconds on a fresh cluster) would have its start counted as a stall.
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not all(f.acks and f.received for f in flows.values()):
            time.sleep(0.2)
        time.sleep(5)

        def fault(name: str, action: Any) -> None:
            if name not in faults:
                return
            out["load"].append(os.getloadavg()[0])
            logging.getLogger("bench").info("fault %s starts", name)
            start = time.monotonic()
            detail = action()
            end = time.monotonic()
            logging.getLogger("bench").info("fault %s ends", name)
            time.sleep(SETTLE_S)
            row: dict[str, Any] = {"fault": name, "seconds": round(end - start, 2), "detail": detail}
            for c, flow in flows.items():
                with flow.lock:
                    produce, produce_at = gap_and_start(flow.acks, start, end + SETTLE_S)
                    consume, consume_at = gap_and_start(flow.received, start, end + SETTLE_S)
                row[c] = {
                    "produce_stall_s": round(produce, 3),
                    "consume_stall_s": round(consume, 3),
                    "produce_stall_from": _wall(produce_at),
                    "consume_stall_from": _wall(consume_at),
                }
            out["faults"].append(row)
            print(json.dumps(row), flush=True)

        for _ in range(rounds):
            if "preferred-election" in faults and _leader(bootstrap, topics[0]) != 1:
                # node 1 (the preferred replica) leads before the shutdown, so that the election
                # after it moves the leadership back: otherwise a round's election moves nothing
                _elect_preferred(bootstrap, topics)
                time.sleep(2)
            victim = _leader(bootstrap, topics[0])

            def shutdown(victim: int = victim) -> str:
                cluster.stop_node(victim)
                return f"node {victim} stopped"

            if "controlled-shutdown" in faults or "preferred-election" in faults:
                fault("controlled-shutdown", shutdown)
                cluster.start_node(victim)
                _wait_isr_full(bootstrap, topics)
                time.sleep(2)

            def elect() -> str:
                before = _leader(bootstrap, topics[0])
                _elect_preferred(bootstrap, topics)
                return f"leaders from node {before} to node {_leader(bootstrap, topics[0])}"

            fault("preferred-election", elect)
            time.sleep(2)

            def rolling() -> str:
                for node in (3, 2, 1):
                    cluster.stop_node(node)
                    cluster.start_node(node)
                    _wait_isr_full(bootstrap, topics)
                return "nodes 3, 2, 1 in turn"

            fault("rolling-restart", rolling)
            time.sleep(2)
        stop.set()
        for t in producers:
            t.join(120)
        produced.set()
        for t in consumers:
            t.join(120)
        for c, flow in flows.items():
            values = flow.values
            out["books"][c] = {
                "sent": flow.sent,
                "acked": len(flow.acked),
                "received": len(values),
                "distinct_received": len(set(values)),
                "lost": len(flow.acked - set(values)),
                "errors": flow.errors[:5],
            }
    finally:
        cluster.close()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=200.0, help="records/s per producer")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--json", help="write the figures here too")
    parser.add_argument("--fault", action="append", choices=FAULTS, help="only these (repeatable)")
    parser.add_argument("--log", help="kafka_core's DEBUG log to this file")
    args = parser.parse_args()
    if args.log:
        logging.basicConfig(
            filename=args.log,
            level=logging.DEBUG,
            format="%(asctime)s.%(msecs)03d %(threadName)s %(name)s %(message)s",
            datefmt="%H:%M:%S",
        )
    import confluent_kafka

    result = run(args.rate, args.rounds, tuple(args.fault or FAULTS))
    result["peer"] = (
        f"confluent-kafka {confluent_kafka.version()[0]} (librdkafka {confluent_kafka.libversion()[0]})"
    )
    print("| fault | s | kafka_core produce / consume stall s | confluent-kafka produce / consume stall s |")
    print("|---|---|---|---|")
    for row in result["faults"]:
        ours, peer = row["kafka_core"], row["confluent"]
        print(
            f"| {row['fault']} | {row['seconds']} | {ours['produce_stall_s']} / {ours['consume_stall_s']} | "
            f"{peer['produce_stall_s']} / {peer['consume_stall_s']} |"
        )
    print(json.dumps({"books": result["books"], "load": result["load"], "peer": result["peer"]}))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
