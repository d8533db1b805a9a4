"""The StreamTransport's queue mode (``subscribe(..., share=True)``) on Apache Kafka 4.4.

Members of one share group split the records, each handled record accepted once; a record whose
handler keeps failing is released until its delivery count reaches ``max_deliveries``, then
rejected and never delivered again; ``skip`` rejects at once. A broker without share groups
(Tansu) is refused at ``subscribe``.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from fakes.share_groups import broker_without_share_groups, make_topic, run_share_examples, unique, wait_for

from kafka_core import KafkaAdmin, KafkaStreamTransport
from kafka_core.aio import KafkaStreamTransport as AsyncKafkaStreamTransport
from kafka_core.devbroker import KafkaCluster, TansuBroker
from kafka_core.errors import KafkaUnsupportedVersionError
from kafka_core.transport import HandlerError, Message

pytestmark = [pytest.mark.broker, pytest.mark.timeout(180)]


class Seen:
    """What handlers saw, from any thread."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.items: list[tuple[bytes | None, int | None]] = []

    def add(self, m: Message) -> None:
        with self.lock:
            self.items.append((m.value, m.delivery_count))

    def values(self) -> Counter[bytes | None]:
        with self.lock:
            return Counter(v for v, _ in self.items)


def test_members_of_one_share_group_split_the_records_each_accepted_once(real_kafka: KafkaCluster) -> None:
    bootstrap = real_kafka.bootstrap
    topic = make_topic(bootstrap, partitions=1)
    group = unique("queue")
    values = [b"job-%d" % i for i in range(40)]
    seen = Seen()

    with KafkaStreamTransport(bootstrap) as transport:
        transport.publish_many(topic, values[:20])  # before anyone joined: the group starts at earliest
        first = transport.subscribe(topic, group, seen.add, share=True)
        second = transport.subscribe(topic, group, seen.add, share=True)
        transport.publish_many(topic, values[20:])
        wait_for(lambda: sum(seen.values().values()) >= len(values), "every record to be handled")
        first.unsubscribe()
        second.unsubscribe()
    assert seen.values() == Counter(values)  # every record, once
    assert all(count == 1 for _, count in seen.items)
    with KafkaAdmin(bootstrap) as admin:
        wait_for(lambda: admin.share_group_lag(group).total == 0, "nothing left to deliver")


def test_a_failing_record_is_released_until_the_bound_then_rejected(real_kafka: KafkaCluster) -> None:
    bootstrap = real_kafka.bootstrap
    topic = make_topic(bootstrap, partitions=1)
    group = unique("queue")
    seen = Seen()
    errors: list[HandlerError] = []

    def handle(m: Message) -> None:
        seen.add(m)
        if m.value == b"poison":
            raise ValueError("cannot process")

    with KafkaStreamTransport(bootstrap, max_deliveries=3, on_error=errors.append) as transport:
        transport.publish_many(topic, [b"a", b"poison", b"b"])
        sub = transport.subscribe(topic, group, handle, share=True)
        wait_for(
            lambda: len(errors) >= 3 and seen.values()[b"b"] == 1, "the poison record's three deliveries"
        )
        time.sleep(1.0)  # a fourth delivery would show now
        assert sub.running and sub.error is None
        metrics = sub.metrics()
    assert [(e.attempt, e.action) for e in errors] == [(1, "release"), (2, "release"), (3, "reject")]
    assert sorted(c for v, c in seen.items if v == b"poison") == [1, 2, 3]
    assert seen.values()[b"a"] == 1 and seen.values()[b"b"] == 1
    assert (metrics["handled"], metrics["released"], metrics["rejected"]) == (2, 2, 1)

    # rejected: a new member of the group never gets it
    again = Seen()
    with KafkaStreamTransport(bootstrap) as transport:
        transport.publish(topic, b"after")
        transport.subscribe(topic, group, again.add, share=True)
        wait_for(lambda: again.values()[b"after"] == 1, "the record published after")
        time.sleep(1.0)
    assert again.values() == Counter([b"after"])


def test_skip_rejects_the_record_at_once(real_kafka: KafkaCluster) -> None:
    bootstrap = real_kafka.bootstrap
    topic = make_topic(bootstrap, partitions=1)
    seen = Seen()

    def handle(m: Message) -> None:
        seen.add(m)
        if m.value == b"poison":
            raise ValueError("cannot process")

    with KafkaStreamTransport(bootstrap, error_policy="skip") as transport:
        transport.publish_many(topic, [b"poison", b"ok"])
        sub = transport.subscribe(topic, unique("queue"), handle, share=True)
        wait_for(lambda: seen.values()[b"ok"] == 1, "the record after the poison one")
        time.sleep(1.0)
        assert sub.metrics()["rejected"] == 1
    assert seen.values() == Counter([b"poison", b"ok"])


def test_asyncio_queue_mode_with_a_coroutine_handler(real_kafka: KafkaCluster) -> None:
    bootstrap = real_kafka.bootstrap
    topic = make_topic(bootstrap, partitions=1)

    async def main() -> list[int | None]:
        got: list[int | None] = []
        done = asyncio.Event()

        async def handle(m: Message) -> None:
            got.append(m.delivery_count)
            if len(got) == 3:
                done.set()

        async with AsyncKafkaStreamTransport(bootstrap) as transport:
            await transport.publish_many(topic, [b"1", b"2", b"3"])
            unsubscribe = await transport.subscribe(topic, unique("queue"), handle, share=True)
            await asyncio.wait_for(done.wait(), 60)
            await unsubscribe()
        return got

    assert asyncio.run(main()) == [1, 1, 1]


def test_a_broker_without_share_groups_is_refused_at_subscribe(tansu: TansuBroker | None) -> None:
    with broker_without_share_groups(tansu) as bootstrap, KafkaStreamTransport(bootstrap) as transport:
        with pytest.raises(KafkaUnsupportedVersionError, match="no share groups"):
            transport.subscribe("t", "g", lambda m: None, share=True)
        assert transport.subscriptions() == []


def test_the_guide_example_runs(real_kafka: KafkaCluster, tmp_path: Path) -> None:
    run_share_examples("docs/transport.md", real_kafka.bootstrap, tmp_path)
