"""Broker restarts under load: zero lost, zero duplicated records, on storage that survives them.

Tansu runs with S3 storage on a local moto_server (``TansuBroker.persistent``), so a restart
keeps the log and the group offsets, as a real Kafka broker would. Each test restarts it while
our producer or consumer is mid-stream, then checks exact content. The end of a partition is
found with a sentinel record written afterwards (Tansu's high watermark cannot be trusted): every
record before it is the whole log, so a duplicate or a stray record cannot hide after the count.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter

import pytest
from conftest import ON_TANSU

from kafka_core import KafkaConsumer, KafkaProducer, TopicPartition
from kafka_core.consumer import ConsumedMessage
from kafka_core.devbroker import TansuBroker
from kafka_core.errors import KafkaError
from kafka_core.producer.futures import RecordFuture

# A hang guard; the first test's also covers the set-up of the module's own broker (on Apache
# Kafka a JVM start, a minute on a loaded 2-core machine running the suite on several workers).
pytestmark = [pytest.mark.broker, pytest.mark.timeout(240)]

PARTITIONS = 3
SENTINEL = b"END"
PAUSE = 0.3  # seconds the broker stays down at each restart

# Tansu's S3 storage is not crash-consistent: killed (SIGKILL) while a Produce is in flight, it
# can come back having kept the producer's sequence for the batch but not its data, either with
# its offsets taken (a hole in the log) or without (no hole). The retried batch then gets
# DUPLICATE_SEQUENCE_NUMBER, which the idempotent producer (like the Java client) rightly takes as
# "already written": those acknowledged records are gone. The chaos harness's wire capture proves
# it is the broker's (RELIABILITY.md): the retry carried the same records under the same producer
# id, epoch and sequence as the unanswered request sent before the kill, and the broker then took
# the next sequence as in order. Apache Kafka rebuilds producer state from the log, so it cannot
# happen there. Not every kill lands on a batch in flight: not strict.
TANSU_CRASH_LOSS = pytest.mark.xfail(
    ON_TANSU,
    strict=False,
    raises=AssertionError,
    reason="Tansu deviation: SIGKILL mid-Produce keeps the batch's sequence without its data "
    "(S3 storage); proven by the chaos harness's Produce capture",
)
STOP = pytest.param(False, id="stop")
CRASH = pytest.param(True, id="crash")


def halt(broker: TansuBroker, crash: bool) -> None:
    """Take the broker down: gracefully (SIGTERM) or as a crash (SIGKILL)."""
    if crash:
        broker.kill()
    else:
        broker.stop()


@pytest.fixture
def broker(persistent_tansu: TansuBroker) -> TansuBroker:
    persistent_tansu.start()  # a no-op unless an earlier test failed while it was down
    return persistent_tansu


def new_topic(broker: TansuBroker) -> str:
    name = f"chaos-{uuid.uuid4().hex[:10]}"
    broker.create_topic(name, PARTITIONS)
    return name


def value(i: int) -> bytes:
    return b"rec-%08d-" % i + b"x" * 80


def seq(v: bytes) -> int:
    return int(v[4:12])


def prefill(broker: TansuBroker, topic: str, n: int) -> dict[int, list[bytes]]:
    """Write ``n`` numbered records; return each partition's log as the producer placed it."""
    logs: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    with KafkaProducer(broker.bootstrap, linger_ms=5, batch_size=65_536) as producer:
        futures = [producer.send(topic, value(i)) for i in range(n)]
        producer.flush(60)
        for i, fut in enumerate(futures):
            meta = fut.result(0)
            assert meta.offset == len(logs[meta.partition])
            logs[meta.partition].append(value(i))
    return logs


def write_sentinels(broker: TansuBroker, topic: str) -> dict[int, int]:
    """Append a sentinel to every partition; return its offset (= the log size before it)."""
    with KafkaProducer(broker.bootstrap) as producer:
        futures = {p: producer.send(topic, SENTINEL, partition=p) for p in range(PARTITIONS)}
        producer.flush(30)
        return {p: f.result(0).offset for p, f in futures.items()}


def read_logs(broker: TansuBroker, topic: str, timeout: float = 60.0) -> dict[int, list[tuple[int, bytes]]]:
    """Read every partition up to its sentinel with confluent-kafka (an independent client)."""
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as CTopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": f"verify-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
        }
    )
    logs: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(PARTITIONS)}
    open_partitions = set(range(PARTITIONS))
    try:
        consumer.assign([CTopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        deadline = time.monotonic() + timeout
        while open_partitions and time.monotonic() < deadline:
            for msg in consumer.consume(10_000, 0.5):
                assert msg.error() is None, msg.error()
                p, offset, data = msg.partition(), msg.offset(), msg.value()
                assert p is not None and offset is not None and data is not None
                if p not in open_partitions:
                    continue  # nothing is written after a sentinel
                if data == SENTINEL:
                    open_partitions.discard(p)
                else:
                    logs[p].append((offset, data))
    finally:
        consumer.close()
    assert not open_partitions, f"sentinel never read back on partitions {sorted(open_partitions)}"
    return logs


class InOrderReader:
    """Checks, record by record, that a consumer hands over each partition's log exactly once.

    Each log is followed by a sentinel (written before reading starts): a partition is done when
    its sentinel arrives right after its last record, so nothing can be skipped at the end.
    """

    def __init__(self, topic: str, logs: dict[int, list[bytes]], start: dict[int, int] | None = None) -> None:
        self.topic = topic
        self.logs = logs
        self.next = dict(start or dict.fromkeys(logs, 0))
        self.count = 0  # records read, sentinels not counted

    @property
    def done(self) -> bool:
        return all(self.next[p] > len(log) for p, log in self.logs.items())

    def check(self, messages: list[ConsumedMessage]) -> None:
        for m in messages:
            p, log = m.partition, self.logs[m.partition]
            assert m.topic == self.topic
            assert m.offset == self.next[p], (
                f"partition {p}: got offset {m.offset}, expected {self.next[p]} "
                f"({'duplicate' if m.offset < self.next[p] else 'skipped records'})"
            )
            assert m.offset <= len(log), f"partition {p}: record after the sentinel at {m.offset}"
            assert m.value == (log[m.offset] if m.offset < len(log) else SENTINEL)
            self.next[p] += 1
            self.count += m.offset < len(log)

    def read(self, consumer: KafkaConsumer, until: int | None = None, timeout: float = 60.0) -> None:
        """Poll until ``until`` records in all, else to every sentinel."""
        deadline = time.monotonic() + timeout
        while not self.done and (until is None or self.count < until):
            if time.monotonic() > deadline:
                pytest.fail(f"consumer stalled at positions {self.next} after {self.count} records")
            self.check(consumer.poll(200))


def test_persistent_broker_keeps_records_across_restart(broker: TansuBroker) -> None:
    """The premise of this file: S3 storage survives a restart (memory storage would not)."""
    topic = new_topic(broker)
    logs = prefill(broker, topic, 300)
    broker.restart(PAUSE)
    write_sentinels(broker, topic)
    assert {p: [v for _, v in log] for p, log in read_logs(broker, topic).items()} == logs


@pytest.mark.parametrize("crash", [STOP, pytest.param(True, id="crash", marks=TANSU_CRASH_LOSS)])
def test_idempotent_producer_loses_and_duplicates_nothing_across_restarts(
    broker: TansuBroker, crash: bool
) -> None:
    topic = new_topic(broker)
    n = 20_000
    restart_at = (4_000, 9_000, 14_000)
    futures: list[RecordFuture] = []
    # The sender waits at each restart point until the broker is down, then goes on sending
    # while it is away: every restart lands mid-stream, with batches queued and in flight.
    broker_down = [threading.Event() for _ in restart_at]
    reached = [threading.Event() for _ in restart_at]
    sender_error: list[BaseException] = []

    producer = KafkaProducer(
        broker.bootstrap,
        idempotent=True,
        linger_ms=5,
        batch_size=16_384,  # many small batches: several in flight when the broker goes down
        delivery_timeout_ms=120_000,  # the Java default: a crashed Apache Kafka recovers its log first
        request_timeout_ms=5_000,
        max_block_ms=45_000,
    )

    def send_all() -> None:
        try:
            for i in range(n):
                if i in restart_at:
                    k = restart_at.index(i)
                    reached[k].set()
                    if not broker_down[k].wait(60):
                        raise TimeoutError("the test thread never stopped the broker")
                futures.append(producer.send(topic, value(i)))
                if i % 500 == 499:
                    time.sleep(0.05)  # pacing: spread the stream over a few seconds
        except BaseException as exc:  # reported by the test thread
            sender_error.append(exc)
            for event in reached:
                event.set()

    sender = threading.Thread(target=send_all, name="chaos-sender")
    try:
        sender.start()
        for k in range(len(restart_at)):
            assert reached[k].wait(60) and not sender_error, sender_error
            halt(broker, crash)
            broker_down[k].set()
            time.sleep(PAUSE)
            broker.start()
        sender.join(60)
        assert not sender.is_alive() and not sender_error, sender_error
        producer.flush(60)
    finally:
        for event in broker_down:
            event.set()
        producer.close()

    acked: dict[int, tuple[int, int]] = {}
    failed: dict[int, BaseException] = {}
    for i, fut in enumerate(futures):
        assert fut.done(), f"record {i} neither delivered nor failed after flush"
        try:
            meta = fut.result(0)
        except KafkaError as exc:  # a typed failure after its delivery timeout: not acknowledged
            failed[i] = exc
        else:
            acked[i] = (meta.partition, meta.offset)
    assert len(futures) == n
    assert len(acked) >= n * 0.9, f"{len(failed)} of {n} not acknowledged: {next(iter(failed.values()))!r}"

    write_sentinels(broker, topic)
    logs = read_logs(broker, topic)
    stored = Counter(v for log in logs.values() for _, v in log)
    duplicates = [seq(v) for v, c in stored.items() if c > 1]
    assert not duplicates, f"{len(duplicates)} records stored twice, e.g. {sorted(duplicates)[:10]}"
    assert all(v == value(seq(v)) and seq(v) < n for v in stored), "a record we never sent"
    where = {seq(v): (p, off) for p, log in logs.items() for off, v in log}
    lost = [i for i in acked if i not in where]
    assert not lost, f"{len(lost)} acknowledged records lost, e.g. {lost[:10]}"
    # Offset -1: answered DUPLICATE_SEQUENCE_NUMBER (written before, offset unknown), as in Kafka.
    moved = [i for i, loc in acked.items() if where[i] != loc and loc[1] != -1]
    assert not moved, f"{len(moved)} records not where their futures said, e.g. {moved[:10]}"
    for p, log in logs.items():
        assert [off for off, _ in log] == list(range(len(log))), f"partition {p}: offsets not contiguous"
        numbers = [seq(v) for _, v in log]
        assert numbers == sorted(numbers), f"partition {p}: send order not kept"
    assert len(stored) == len(acked) + sum(1 for i in failed if i in where)


@pytest.mark.parametrize("crash", [STOP, CRASH])
def test_consumer_resumes_from_its_position_across_restarts(broker: TansuBroker, crash: bool) -> None:
    topic = new_topic(broker)
    n = 30_000
    logs = prefill(broker, topic, n)
    write_sentinels(broker, topic)  # now, so that the reader can check the end exactly
    reader = InOrderReader(topic, logs)
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=broker.bootstrap,
        group_id=None,
        auto_offset_reset="earliest",
        max_partition_fetch_bytes=8_192,  # many fetches: one is in flight when the broker stops
        max_poll_records=500,
        fetch_max_wait_ms=100,
        # longer than a restart takes (Apache Kafka: several seconds, over 30 on a loaded 2-core
        # machine): an outage longer than this is one poll is meant to report
        # (test_consumer_fail_fast), not what this test is about
        request_timeout_ms=120_000,
    )
    try:
        for threshold in (n // 4, n // 2, 3 * n // 4):
            reader.read(consumer, until=threshold)
            assert not reader.done
            halt(broker, crash)
            down_until = time.monotonic() + PAUSE
            while time.monotonic() < down_until:  # keep polling against the dead broker
                reader.check(consumer.poll(100))
            broker.start()
        reader.read(consumer)
        assert reader.count == n
    finally:
        consumer.close()


def test_group_offsets_survive_a_restart(broker: TansuBroker) -> None:
    topic = new_topic(broker)
    n = 6_000
    logs = prefill(broker, topic, n)
    write_sentinels(broker, topic)
    group = f"chaos-{uuid.uuid4().hex[:8]}"
    options = {
        "bootstrap_servers": broker.bootstrap,
        "group_id": group,
        "partitions": {topic: list(range(PARTITIONS))},
        "enable_auto_commit": False,
        "auto_offset_reset": "earliest",  # were the commit lost, the re-read would show as duplicates
        "max_poll_records": 250,
    }
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]

    first = InOrderReader(topic, logs)
    consumer = KafkaConsumer(**options)
    try:
        first.read(consumer, until=n // 2)
        consumer.commit({TopicPartition(topic, p): off for p, off in first.next.items()})
        assert consumer.committed(tps) == {TopicPartition(topic, p): off for p, off in first.next.items()}
    finally:
        consumer.close(commit=False)
    assert 0 < first.count < n

    broker.restart(PAUSE)

    second = InOrderReader(topic, logs, start=first.next)
    consumer = KafkaConsumer(**options)
    try:
        assert consumer.committed(tps) == {TopicPartition(topic, p): off for p, off in first.next.items()}
        second.read(consumer)
        assert first.count + second.count == n
    finally:
        consumer.close(commit=False)
