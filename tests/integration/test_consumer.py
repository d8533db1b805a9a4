"""The consumer against the real test broker (Tansu, or KAFKA_BOOTSTRAP_SERVERS).

Test data is written with confluent-kafka's producer, independent of our own code.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from fakes.stamps import RECENT_MS
from prerequisites import unavailable

from kafka_core.client.metadata import TopicPartition
from kafka_core.consumer.sync import KafkaConsumer
from kafka_core.devbroker import BrokerStartError, KafkaCluster, TansuBroker
from kafka_core.protocol.errors import ErrorCode

pytestmark = [pytest.mark.broker, pytest.mark.timeout(180)]


def produce(bootstrap: str, topic: str, n: int, partitions: int = 3, start: int = 0, **extra: Any) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **extra})
    for i in range(start, start + n):
        p.produce(
            topic,
            key=b"k%d" % i,
            value=b"v%d" % i,
            partition=i % partitions,
            headers=[("n", str(i).encode())],
            timestamp=RECENT_MS + i,
        )
    assert p.flush(30) == 0


def drain(c: Any, n: int, *, timeout: float = 30.0, columns: bool = False) -> list[Any]:
    out: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(out) < n and time.monotonic() < deadline:
        if columns:
            b = c.poll_columns(500)
            if b is not None:
                out.extend(b.to_pylist())
        else:
            out.extend(c.poll(500))
    return out


@pytest.mark.seaweed_deviation("drops record headers")
def test_static_assignment_reads_all_partitions(
    bootstrap_servers: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(3)
    produce(bootstrap_servers, topic, 300)
    with KafkaConsumer(
        bootstrap_servers=bootstrap_servers, topics=[topic], auto_offset_reset="earliest"
    ) as c:
        msgs = drain(c, 300)
        assert c.assignment() == {TopicPartition(topic, p) for p in range(3)}
        assert c.poll(200) == []
    assert len(msgs) == 300
    by_key = {m.key: m for m in msgs}
    for i in range(300):
        m = by_key[b"k%d" % i]
        assert (m.topic, m.partition, m.value) == (topic, i % 3, b"v%d" % i)
        assert m.headers == [("n", str(i).encode())]
        assert m.timestamp == RECENT_MS + i and m.timestamp_type == 0
    for p in range(3):
        assert [m.offset for m in msgs if m.partition == p] == list(range(100))


def test_fetches_by_topic_id_when_the_broker_can(
    bootstrap_servers: str, new_topic: Callable[..., str]
) -> None:
    from kafka_core.protocol import ApiKey

    topic = new_topic(2)
    produce(bootstrap_servers, topic, 10, partitions=2)
    with KafkaConsumer(
        bootstrap_servers=bootstrap_servers, topics=[topic], auto_offset_reset="earliest"
    ) as c:
        got = drain(c, 10)
        client = c.async_object._client
        negotiated = c._loop_thread.run(client.negotiated_versions())
        used = c._loop_thread.call(lambda: c.async_object._fetcher.fetch_version)
        has_id = c._loop_thread.call(lambda: client.cached_metadata().topic(topic).topic_id is not None)
    assert sorted((m.partition, m.offset) for m in got) == [(p, o) for p in (0, 1) for o in range(5)]
    best = min(v[ApiKey.FETCH] for v in negotiated.values())
    assert used == (min(best, 17) if has_id else min(best, 12))
    if best >= 13 and has_id:
        assert used >= 13  # by topic id, as Kafka 4 clients do


@pytest.mark.seaweed_deviation("drops record headers")
def test_poll_columns(bootstrap_servers: str, new_topic: Callable[..., str]) -> None:
    topic = new_topic(3)
    produce(bootstrap_servers, topic, 90)
    with KafkaConsumer(
        bootstrap_servers=bootstrap_servers, topics=[topic], auto_offset_reset="earliest"
    ) as c:
        rows = drain(c, 90, columns=True)
    assert len(rows) == 90
    assert {r["topic"] for r in rows} == {topic}
    assert sorted(r["key"] for r in rows) == sorted(b"k%d" % i for i in range(90))
    row = next(r for r in rows if r["key"] == b"k7")
    assert row["partition"] == 1 and row["value"] == b"v7" and row["headers"] == [{"key": "n", "value": b"7"}]


def test_latest_skips_existing_records(bootstrap_servers: str, new_topic: Callable[..., str]) -> None:
    # ListOffsets latest on Tansu is the last batch's base + 1: the consumer must not trust it.
    topic = new_topic(1)
    produce(bootstrap_servers, topic, 50, partitions=1, **{"linger.ms": 100})
    with KafkaConsumer(bootstrap_servers=bootstrap_servers, topics=[topic], auto_offset_reset="latest") as c:
        assert c.poll(1000) == []
        assert c.position(TopicPartition(topic, 0)) == 50
        produce(bootstrap_servers, topic, 5, partitions=1, start=50)
        msgs = drain(c, 5)
    assert [m.offset for m in msgs] == [50, 51, 52, 53, 54]


def test_seek_pause_resume_iteration(bootstrap_servers: str, new_topic: Callable[..., str]) -> None:
    topic = new_topic(2)
    produce(bootstrap_servers, topic, 40, partitions=2)
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    with KafkaConsumer(
        bootstrap_servers=bootstrap_servers, partitions={topic: [0, 1]}, auto_offset_reset="earliest"
    ) as c:
        c.pause([tp1])
        got = drain(c, 20)
        assert {m.partition for m in got} == {0} and len(got) == 20
        c.resume([tp1])
        c.seek(tp0, 15)
        got = drain(c, 25)
        assert sorted((m.partition, m.offset) for m in got) == [(0, o) for o in range(15, 20)] + [
            (1, o) for o in range(20)
        ]
        c.seek_to_beginning([tp0])
        seen = []
        for m in c:
            seen.append(m.offset)
            if len(seen) == 20:
                c.stop()
        assert sorted(seen) == list(range(20))


def test_run_handler_in_caller_thread(bootstrap_servers: str, new_topic: Callable[..., str]) -> None:
    topic = new_topic(3)
    produce(bootstrap_servers, topic, 30)
    threads = set()
    seen: list[int] = []
    with KafkaConsumer(
        bootstrap_servers=bootstrap_servers, topics=[topic], auto_offset_reset="earliest"
    ) as c:

        def handler(m: Any) -> None:
            threads.add(threading.get_ident())
            seen.append(m.offset)
            if len(seen) == 30:
                c.stop()

        c.run(handler)
    assert threads == {threading.get_ident()} and len(seen) == 30


@pytest.mark.seaweed_deviation(
    "refuses an OffsetCommit from outside a group (generation -1): INVALID_GROUP_ID"
)
def test_group_offsets_with_explicit_partitions(
    bootstrap_servers: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(2)
    group = f"g-{uuid.uuid4().hex[:8]}"
    produce(bootstrap_servers, topic, 40, partitions=2)
    tps = {TopicPartition(topic, 0), TopicPartition(topic, 1)}
    opts = {"bootstrap_servers": bootstrap_servers, "group_id": group, "partitions": {topic: [0, 1]}}
    with KafkaConsumer(**opts, auto_offset_reset="earliest", enable_auto_commit=False) as c:
        assert c.committed(tps) == {tp: None for tp in tps}
        first = drain(c, 40)
        assert len(first) == 40
        c.commit({TopicPartition(topic, 0): 5})
        c.commit(next(m for m in first if m.partition == 1 and m.offset == 9))
        assert c.committed(tps) == {TopicPartition(topic, 0): 5, TopicPartition(topic, 1): 10}
        lag = c.lag()
        assert lag == {tp: 0 for tp in tps}
    # A new member of the group starts from the committed offsets, not from auto_offset_reset.
    with KafkaConsumer(**opts, auto_offset_reset="latest") as c:
        again = drain(c, 25)
        assert sorted((m.partition, m.offset) for m in again) == [(0, o) for o in range(5, 20)] + [
            (1, o) for o in range(10, 20)
        ]
    # Closing with auto-commit committed what was handed over.
    with KafkaConsumer(**opts, auto_offset_reset="latest") as c:
        assert c.committed(tps) == {tp: 20 for tp in tps}
        assert c.poll(300) == []


@pytest.mark.seaweed_deviation("ListOffsets for a timestamp past the end answers offset 0, not -1")
@pytest.mark.tansu_deviation("ListOffsets by timestamp searches broker write times, not record timestamps")
def test_offsets_for_times(bootstrap_servers: str, new_topic: Callable[..., str]) -> None:
    topic = new_topic(1)
    produce(bootstrap_servers, topic, 10, partitions=1)
    tp = TopicPartition(topic, 0)
    with KafkaConsumer(bootstrap_servers=bootstrap_servers, partitions={topic: [0]}) as c:
        assert c.offsets_for_times({tp: 4_000_000_000_000}) == {tp: None}
        got = c.offsets_for_times({tp: RECENT_MS + 4})
        assert got[tp].offset == 4 and got[tp].timestamp == RECENT_MS + 4


def test_reconnects_after_broker_restart() -> None:
    # A private broker: restarting the session one would disturb other tests.
    try:
        broker = TansuBroker().start()
    except BrokerStartError as exc:  # no Tansu binary, or it would not start: anything else is a bug
        unavailable("a private Tansu broker", f"it did not start: {exc}")
    try:
        broker.create_topic("restart", 1)
        produce(broker.bootstrap, "restart", 10, partitions=1)
        with KafkaConsumer(
            bootstrap_servers=broker.bootstrap, topics=["restart"], auto_offset_reset="earliest"
        ) as c:
            assert [m.offset for m in drain(c, 10)] == list(range(10))
            old_id = _topic_id(broker.bootstrap, "restart")
            # Memory storage: the log comes back empty, and the topic with a new id when it is
            # created again, so this is a recreated topic: the consumer reconnects and, seeing
            # the new id, resets per auto_offset_reset instead of trusting its old position.
            broker.restart()
            with contextlib.suppress(BrokerStartError):  # the consumer's metadata may auto-create it first
                broker.create_topic("restart", 1)
            produce(broker.bootstrap, "restart", 25, partitions=1)
            got = drain(c, 25, timeout=60)
            new_id = _topic_id(broker.bootstrap, "restart")
        # Recreated (as a client of its own sees it), and the consumer read everything of the new
        # log, once, in order: nothing skipped, nothing repeated.
        assert old_id is not None and new_id != old_id
        assert [(m.offset, m.key) for m in got] == [(i, b"k%d" % i) for i in range(25)]
    finally:
        broker.close()


def _topic_id(bootstrap: str, topic: str) -> Any:
    from kafka_core import KafkaClient

    with KafkaClient(bootstrap) as client:
        meta = client.metadata([topic]).topic(topic)
        return None if meta is None else meta.topic_id


def _produce_raw(bootstrap: str, topic: str, batch: bytes) -> int:
    """Append one record batch exactly as given (our protocol layer, not our producer)."""
    import asyncio

    from kafka_core.aio import KafkaClient
    from kafka_core.protocol.messages import ProduceRequest

    async def go() -> int:
        async with KafkaClient(bootstrap) as client:
            body = ProduceRequest(
                acks=-1,
                timeout_ms=10_000,
                topic_data=[
                    ProduceRequest.TopicProduceData(
                        name=topic,
                        partition_data=[ProduceRequest.PartitionProduceData(index=0, records=batch)],
                    )
                ],
            )
            # v13+ names topics by id only; this request names it.
            resp = await client.send_to_leader(topic, 0, body, max_version=12)
            return resp.responses[0].partition_responses[0].error_code

    return asyncio.run(go())


def _corrupt_stored_batch(cluster: KafkaCluster, topic: str, index: int) -> None:
    """Flip the last byte (record data, under the CRC) of the partition-0 log's ``index``-th batch
    in Apache Kafka's segment file. Fetches serve the file's bytes as they are (page cache)."""
    [segment] = [p for n in cluster.nodes for p in (n.directory / "data" / f"{topic}-0").glob("*.log")]
    with segment.open("r+b") as f:
        data = f.read()
        pos = 0
        for _ in range(index):
            pos += 12 + int.from_bytes(data[pos + 8 : pos + 12], "big")  # base offset, length, batch
        last = pos + 12 + int.from_bytes(data[pos + 8 : pos + 12], "big") - 1
        f.seek(last)
        f.write(bytes([data[last] ^ 0xFF]))


@pytest.mark.seaweed_deviation("accepts a batch whose CRC is wrong and serves its records as good")
def test_corrupt_batch_from_the_broker_is_a_typed_error(
    bootstrap_servers: str, new_topic: Callable[..., str], kafka_cluster: KafkaCluster | None
) -> None:
    from kafka_core.codec import encode_record_batch
    from kafka_core.errors import KafkaCodecError

    topic = new_topic(1)
    good = bytes(encode_record_batch([(b"a", b"1"), (b"b", b"2")]))
    bad = bytearray(encode_record_batch([(b"c", b"3"), (b"d", b"4")]))
    bad[-1] ^= 0xFF  # the CRC no longer matches
    assert _produce_raw(bootstrap_servers, topic, good) == 0
    answer = _produce_raw(bootstrap_servers, topic, bytes(bad))
    if answer == ErrorCode.CORRUPT_MESSAGE:
        # Apache Kafka checks CRCs on produce: store a good batch and corrupt its copy on disk.
        if kafka_cluster is None:
            pytest.skip("this broker validates CRCs on produce and its log is out of reach")
        assert _produce_raw(bootstrap_servers, topic, good) == 0
        _corrupt_stored_batch(kafka_cluster, topic, 1)
    else:
        assert answer == 0  # Tansu stores it as sent
    assert _produce_raw(bootstrap_servers, topic, good) == 0
    tp = TopicPartition(topic, 0)
    with KafkaConsumer(
        bootstrap_servers=bootstrap_servers, topics=[topic], auto_offset_reset="earliest"
    ) as c:
        first = drain(c, 2)
        assert [m.offset for m in first] == [0, 1]
        with pytest.raises(KafkaCodecError) as info:
            drain(c, 1)
        err = info.value
        assert (err.topic, err.partition, err.offset) == (topic, 0, 2)
        c.seek(tp, err.last_offset + 1)  # the application chooses to skip it
        rest = drain(c, 2)
    assert [(m.offset, m.key) for m in rest] == [(4, b"a"), (5, b"b")]


def test_break_out_of_iteration_then_poll_continues(
    bootstrap_servers: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(1)
    produce(bootstrap_servers, topic, 50, partitions=1)
    with KafkaConsumer(
        bootstrap_servers=bootstrap_servers, topics=[topic], auto_offset_reset="earliest"
    ) as c:
        for m in c:
            if m.offset == 9:
                break
        rest = drain(c, 40)
    assert [m.offset for m in rest] == list(range(10, 50))


@pytest.mark.parametrize("lanes", [1, 3])
def test_fetch_lanes_read_everything_once_in_order(
    bootstrap_servers: str, new_topic: Callable[..., str], lanes: int
) -> None:
    """fetch_concurrency: one connection per lane to the broker (besides lane 0, which carries
    every other request and never a Fetch), every record exactly once."""
    topic = new_topic(3)
    produce(bootstrap_servers, topic, 3000)
    with KafkaConsumer(
        bootstrap_servers=bootstrap_servers,
        topics=[topic],
        auto_offset_reset="earliest",
        fetch_concurrency=lanes,
        max_partition_fetch_bytes=4096,  # many small fetches, interleaved across lanes
    ) as c:
        msgs = drain(c, 3000, columns=lanes == 3)
        nodes = c._async_obj._client._nodes.values()
        fetch_conns = max(len(n.all_conns()) for n in nodes)
    assert fetch_conns == lanes + 1
    assert len(msgs) == 3000
    for p in range(3):
        got = [
            m["offset"] if isinstance(m, dict) else m.offset
            for m in msgs
            if (m["partition"] if isinstance(m, dict) else m.partition) == p
        ]
        assert got == list(range(1000))


def test_fetch_concurrency_must_be_positive(bootstrap_servers: str) -> None:
    from kafka_core.errors import KafkaConfigError

    with pytest.raises(KafkaConfigError, match="fetch_concurrency"):
        KafkaConsumer(bootstrap_servers=bootstrap_servers, topics=["x"], fetch_concurrency=0)


@pytest.mark.seaweed_deviation(
    "refuses an OffsetCommit from outside a group (generation -1): INVALID_GROUP_ID"
)
def test_from_config_with_deserializers_against_the_broker(
    bootstrap_servers: str, new_topic: Callable[..., str]
) -> None:
    """Java-style names and deserializers on the sync face: keys and values come decoded, and a
    value the deserializer rejects raises naming its record (skipped by a seek past it)."""
    from kafka_core.consumer.message import KafkaDeserializationError

    topic = new_topic(1)
    produce(bootstrap_servers, topic, 5, partitions=1)  # values b"v0".."v4"
    group = f"g-{uuid.uuid4().hex[:8]}"
    config = {"bootstrap.servers": bootstrap_servers, "group.id": group, "auto.offset.reset": "earliest"}

    def value(raw: bytes) -> int:
        n = int(raw[1:])
        if n == 3:
            raise ValueError("three")
        return n

    with KafkaConsumer.from_config(
        config, partitions={topic: [0]}, key_deserializer=bytes.decode, value_deserializer=value
    ) as c:
        got: list[Any] = []
        error = None
        deadline = time.monotonic() + 30
        while error is None and time.monotonic() < deadline:
            try:
                got.extend(c.poll(500))
            except KafkaDeserializationError as exc:
                error = exc
        assert [(m.key, m.value) for m in got] == [("k0", 0), ("k1", 1), ("k2", 2)]
        assert error is not None and (error.topic, error.partition, error.offset) == (topic, 0, 3)
        c.seek(TopicPartition(topic, 0), 4)
        assert [(m.key, m.value) for m in drain(c, 1)] == [("k4", 4)]


def test_a_sync_consumer_shares_a_sync_clients_loop(
    bootstrap_servers: str, new_topic: Callable[..., str]
) -> None:
    """client=: the consumer runs on the client's loop thread; closing it leaves the client open."""
    from kafka_core import KafkaClient
    from kafka_core.errors import KafkaConfigError

    topic = new_topic(1)
    produce(bootstrap_servers, topic, 5, partitions=1)
    with KafkaClient(bootstrap_servers) as client:
        with KafkaConsumer(topics=[topic], auto_offset_reset="earliest", client=client) as c:
            assert c.loop_thread is client.loop_thread
            assert [m.offset for m in drain(c, 5)] == list(range(5))
        assert client.metadata([topic]).topic(topic) is not None  # still usable
        with pytest.raises(KafkaConfigError, match=r"sync kafka_core\.KafkaClient"):
            KafkaConsumer(topics=[topic], client=client.async_object)
