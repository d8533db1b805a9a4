"""Incremental fetch sessions (KIP-227) on Apache Kafka, over a few hundred partitions (issue 40).

Every Fetch the consumer sends and every answer it gets are recorded as they go to and come from
the broker (the consumer's client, wrapped). An idle consumer must long-poll on one connection
(its caught-up partitions share one session, whatever ``fetch_concurrency``), keep that session,
send requests that name no partition and get answers that carry none, and its fetch rounds must
look at no partition (the fetcher's ``touched`` count, not time); its close must close the
broker's sessions (FINAL_EPOCH: the broker then knows none of their ids). Sessions the broker loses
or refuses (a Fetch sent with a session id it never gave, or a skipped epoch: the broker's own
FETCH_SESSION_ID_NOT_FOUND and INVALID_FETCH_SESSION_EPOCH) fall back to a full Fetch, and
across them, seeks and pauses every record arrives exactly once (twice only where the test
sought back). Runs on Apache Kafka in every session (``real_kafka``).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable
from typing import Any

import pytest

from kafka_core import KafkaAdmin, KafkaProducer, NewTopic
from kafka_core.aio import KafkaClient
from kafka_core.client.metadata import TopicPartition
from kafka_core.consumer.consumer import KafkaConsumer
from kafka_core.consumer.fetch.fetcher import PARK_LANE
from kafka_core.devtools.brokers.kafka import KafkaCluster
from kafka_core.protocol import ErrorCode
from kafka_core.protocol.messages import FetchRequest

pytestmark = [pytest.mark.broker, pytest.mark.timeout(120)]

PARTITIONS = 300
GUARD_S = 45.0  # hang guard, not a timing assertion


def _topic(kafka: KafkaCluster) -> str:
    name = f"fetch-sessions-{uuid.uuid4().hex[:10]}"
    with KafkaAdmin(kafka.bootstrap) as admin:
        [result] = admin.create_topics([NewTopic(name, num_partitions=PARTITIONS)]).values()
        assert result.ok, f"creating {name!r}: {result.error}"
    return name


def _produce(kafka: KafkaCluster, topic: str, per_partition: int, start: int = 0) -> None:
    with KafkaProducer(bootstrap_servers=kafka.bootstrap, linger_ms=5) as producer:
        futures = [
            producer.send(topic, b"%d-%d" % (p, i), partition=p)
            for i in range(start, start + per_partition)
            for p in range(PARTITIONS)
        ]
        producer.flush(60)
        for f in futures:
            f.result(30)


class Wire:
    """Records the consumer's Fetch requests and answers; ``tamper`` may alter a request first."""

    def __init__(self, consumer: KafkaConsumer) -> None:
        self.fetches: list[tuple[FetchRequest, Any]] = []
        self.lanes: list[int] = []  # each Fetch's connection (lane) to its broker
        self.tamper: Callable[[FetchRequest], None] | None = None
        client = consumer._client
        send = client.send

        async def recording(node: int, body: Any, version: int | None = None, **kw: Any) -> Any:
            if isinstance(body, FetchRequest) and self.tamper is not None:
                self.tamper(body)
            resp = await send(node, body, version, **kw)
            if isinstance(body, FetchRequest):
                self.fetches.append((body, resp))
                self.lanes.append(kw.get("lane", 0))
            return resp

        client.send = recording

    def since(self, n: int) -> list[tuple[FetchRequest, Any]]:
        return self.fetches[n:]


def _named(req: FetchRequest) -> int:
    return sum(len(t.partitions) for t in req.topics)


def _answered(resp: Any) -> int:
    return sum(len(t.partitions) for t in resp.responses)


def _consumer(kafka: KafkaCluster, topic: str) -> KafkaConsumer:
    return KafkaConsumer(
        bootstrap_servers=kafka.bootstrap,
        partitions={topic: range(PARTITIONS)},
        group_id=None,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=100,
        fetch_concurrency=3,
    )


async def _session_known(kafka: KafkaCluster, session_id: int) -> bool:
    """Whether the broker holds fetch session ``session_id``: asked with an epoch no session has
    reached, it answers INVALID_FETCH_SESSION_EPOCH for one it holds, FETCH_SESSION_ID_NOT_FOUND
    for one it does not."""
    async with KafkaClient(kafka.bootstrap) as client:
        [broker] = (await client.metadata()).brokers
        probe = FetchRequest(max_wait_ms=0, session_id=session_id, session_epoch=2**31 - 2, topics=[])
        resp = await client.send(broker.node_id, probe)
    assert resp.error_code in (ErrorCode.INVALID_FETCH_SESSION_EPOCH, ErrorCode.FETCH_SESSION_ID_NOT_FOUND), (
        resp.error_code
    )
    return bool(resp.error_code == ErrorCode.INVALID_FETCH_SESSION_EPOCH)


async def _read(c: KafkaConsumer, n: int, out: list[Any]) -> None:
    deadline = time.monotonic() + GUARD_S
    want = len(out) + n
    while len(out) < want and time.monotonic() < deadline:
        out.extend(await c.poll(200, 1_000))
    assert len(out) >= want, f"{len(out)} of {want} records within {GUARD_S} s"


async def _idle(c: KafkaConsumer, seconds: float) -> int:
    """Poll ``seconds`` with nothing to read; the records that came anyway."""
    stray = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        stray += len(await c.poll(100, 1_000))
    return stray


def test_an_idle_consumer_keeps_its_sessions_and_its_fetches_name_no_partition(
    real_kafka: KafkaCluster,
) -> None:
    topic = _topic(real_kafka)
    _produce(real_kafka, topic, 2)

    async def main() -> None:
        c = _consumer(real_kafka, topic)
        wire = Wire(c)
        try:
            got: list[Any] = []
            await _read(c, 2 * PARTITIONS, got)
            assert await _idle(c, 1.0) == 0  # the positions' last updates go out
            fetcher = c._fetcher
            touched, mark = fetcher.touched, len(wire.fetches)
            assert await _idle(c, 2.0) == 0
            idle = wire.since(mark)
            assert len(idle) >= 3, "the consumer stopped fetching"
            # One connection long-polls, whatever fetch_concurrency: its session kept, never
            # reopened, epochs one after another.
            assert set(wire.lanes[mark:]) == {PARK_LANE}, f"idle Fetches on lanes {set(wire.lanes[mark:])}"
            epochs: dict[int, list[int]] = defaultdict(list)
            for req, resp in idle:
                assert req.session_id != 0 and req.session_epoch > 0, "an idle Fetch without a session"
                assert resp.error_code == 0 and resp.session_id == req.session_id
                assert _named(req) == 0 and not req.forgotten_topics_data, "an idle Fetch named partitions"
                assert _answered(resp) == 0, "an idle answer carried partitions"
                epochs[req.session_id].append(req.session_epoch)
            for seq in epochs.values():
                assert seq == list(range(seq[0], seq[0] + len(seq)))
            assert len(epochs) == 1, f"{len(epochs)} sessions long-polled"
            # An idle round's work is no partition, whatever the assignment holds.
            assert fetcher.touched == touched, f"idle rounds looked at {fetcher.touched - touched} partitions"
            given = {resp.session_id for _, resp in wire.fetches if resp.session_id}
            assert given and all([await _session_known(real_kafka, sid) for sid in given])
        finally:
            await c.close()
        closes = [req for req, _ in wire.since(len(wire.fetches) - len(given))]
        assert {req.session_id for req in closes} == given and all(req.session_epoch == -1 for req in closes)
        assert not any([await _session_known(real_kafka, sid) for sid in given]), (
            "a session outlived the close"
        )

    asyncio.run(asyncio.wait_for(main(), 90))


def test_nothing_is_lost_or_read_twice_across_session_resets_seeks_and_pauses(
    real_kafka: KafkaCluster,
) -> None:
    topic = _topic(real_kafka)
    first, second = 4, 3
    _produce(real_kafka, topic, first)

    async def main() -> None:
        c = _consumer(real_kafka, topic)
        wire = Wire(c)
        sent = Counter[str]()

        def tamper(req: FetchRequest) -> None:
            # Every few incremental Fetches: a session id the broker never gave, or an epoch ahead.
            if req.session_id == 0 or req.session_epoch <= 0:
                return
            sent["incremental"] += 1
            if sent["incremental"] % 5 == 0:
                req.session_id ^= 0x5A5A5A5
            elif sent["incremental"] % 7 == 0:
                req.session_epoch += 3

        wire.tamper = tamper
        got: list[Any] = []
        try:
            await _read(c, PARTITIONS, got)
            paused = [TopicPartition(topic, p) for p in range(0, PARTITIONS, 6)]
            c.pause(paused)
            since_pause = len(got)
            await _read(c, 200, got)
            await asyncio.to_thread(_produce, real_kafka, topic, second, first)
            end = time.monotonic() + 0.5
            while time.monotonic() < end:  # the paused ones' new records stay with the broker
                got.extend(await c.poll(100, 1_000))
            assert not {m.partition for m in got[since_pause:]} & {tp.partition for tp in paused}, (
                "records of paused partitions handed over"
            )
            c.resume(paused)
            sought = [TopicPartition(topic, p) for p in range(3, PARTITIONS, 10)]
            await _read(c, (first + second) * PARTITIONS - len(got), got)
            for tp in sought:
                c.seek(tp, 2)
            await _read(c, len(sought) * (first + second - 2), got)
            assert await _idle(c, 1.0) == 0, "records read twice"
        finally:
            await c.close()
        codes = Counter(resp.error_code for _, resp in wire.fetches)
        assert codes[ErrorCode.FETCH_SESSION_ID_NOT_FOUND], "no session was lost"
        assert codes[ErrorCode.INVALID_FETCH_SESSION_EPOCH], "no epoch was refused"
        full = [req for req, _ in wire.fetches if req.session_epoch == 0]
        assert len(full) > len(c._fetcher.sessions), "no full Fetch after a lost session"
        # Each partition in order, every record once; the sought ones again from offset 2.
        by_partition: dict[int, list[int]] = defaultdict(list)
        for m in got:
            by_partition[m.partition].append(m.offset)
        total = first + second
        again = {tp.partition for tp in sought}
        for p in range(PARTITIONS):
            offsets = by_partition[p]
            expected = list(range(total)) + (list(range(2, total)) if p in again else [])
            assert offsets == expected, f"partition {p}: {offsets}"
        assert all(m.value == b"%d-%d" % (m.partition, m.offset) for m in got), (
            "a record's value is not its own"
        )

    asyncio.run(asyncio.wait_for(main(), 100))
