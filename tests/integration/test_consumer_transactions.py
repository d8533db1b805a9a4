"""Transactional data: control markers are never handed over; read_committed hides aborted records."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import pytest
from test_consumer import drain

from kafka_core.consumer.sync import KafkaConsumer

pytestmark = [pytest.mark.broker, pytest.mark.timeout(180)]


def write_transactions(bootstrap: str, topic: str) -> None:
    """committed k0-k4, aborted a0-a4, committed k5-k9, then one plain record."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"tx-{uuid.uuid4().hex[:8]}"})
    p.init_transactions(30)
    for keys, commit in ((range(0, 5), True), (range(5), False), (range(5, 10), True)):
        p.begin_transaction()
        for i in keys:
            p.produce(topic, key=(b"k%d" if commit else b"a%d") % i, value=b"v", partition=0)
        assert p.flush(30) == 0  # written to the log before the outcome is decided
        if commit:
            p.commit_transaction(30)
        else:
            p.abort_transaction(30)
    plain = Producer({"bootstrap.servers": bootstrap})
    plain.produce(topic, key=b"plain", value=b"v", partition=0)
    assert plain.flush(30) == 0


@pytest.mark.seaweed_deviation("no transactions (AddPartitionsToTxn not in ApiVersions)")
def test_read_uncommitted_skips_markers_only(bootstrap_servers: str, new_topic: Callable[..., str]) -> None:
    topic = new_topic(1)
    write_transactions(bootstrap_servers, topic)
    with KafkaConsumer(
        bootstrap_servers=bootstrap_servers, topics=[topic], auto_offset_reset="earliest"
    ) as c:
        got = drain(c, 16)
        assert c.poll(300) == []
    keys = [m.key for m in got]
    assert keys == [b"k%d" % i for i in range(5)] + [b"a%d" % i for i in range(5)] + [
        b"k%d" % i for i in range(5, 10)
    ] + [b"plain"]
    # Offsets have gaps where the commit/abort markers sit.
    offsets = [m.offset for m in got]
    assert offsets == sorted(offsets) and offsets[-1] > len(offsets) - 1


def write_interleaved(bootstrap: str, topic: str) -> list[bytes]:
    """Two transactional producers on partition 0, their transactions open at the same time, so
    aborted and committed records alternate in the log batch by batch, and an aborted
    transaction spans records that were committed meanwhile. Returns the committed keys in log
    order."""
    from confluent_kafka import Producer

    def producer(name: str) -> Producer:
        p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{name}-{uuid.uuid4().hex[:8]}"})
        p.init_transactions(30)
        return p

    committing, aborting = producer("c"), producer("a")
    committed: list[bytes] = []

    def write(p: Producer, keys: list[bytes]) -> None:
        for key in keys:
            p.produce(topic, key=key, value=b"v", partition=0)
        assert p.flush(30) == 0  # in the log now, in this order

    for round_ in range(3):
        committing.begin_transaction()
        aborting.begin_transaction()
        write(aborting, [b"a%d-0" % round_, b"a%d-1" % round_])
        ours = [b"c%d-0" % round_, b"c%d-1" % round_]
        write(committing, ours)
        write(aborting, [b"a%d-2" % round_])  # after records of the other that then commit
        committing.commit_transaction(30)
        committed += ours
        write(aborting, [b"a%d-3" % round_])  # after the other's commit marker
        aborting.abort_transaction(30)
    plain = Producer({"bootstrap.servers": bootstrap})
    plain.produce(topic, key=b"plain", value=b"v", partition=0)
    assert plain.flush(30) == 0
    return [*committed, b"plain"]


READ_COMMITTED_TANSU = "aborted records are still delivered to read_committed consumers"


@pytest.mark.seaweed_deviation("no transactions (AddPartitionsToTxn not in ApiVersions)")
@pytest.mark.tansu_deviation(READ_COMMITTED_TANSU)
@pytest.mark.parametrize("columns", [False, True], ids=["poll", "poll_columns"])
def test_read_committed_hides_aborted(
    bootstrap_servers: str, new_topic: Callable[..., str], columns: bool
) -> None:
    topic = new_topic(1)
    write_transactions(bootstrap_servers, topic)
    assert read_committed_keys(bootstrap_servers, topic, 11, columns) == [b"k%d" % i for i in range(10)] + [
        b"plain"
    ]


@pytest.mark.seaweed_deviation("no transactions (AddPartitionsToTxn not in ApiVersions)")
@pytest.mark.tansu_deviation(READ_COMMITTED_TANSU)
@pytest.mark.parametrize("columns", [False, True], ids=["poll", "poll_columns"])
def test_read_committed_hides_aborted_transactions_interleaved_with_committed_ones(
    bootstrap_servers: str, new_topic: Callable[..., str], columns: bool
) -> None:
    topic = new_topic(1)
    want = write_interleaved(bootstrap_servers, topic)
    assert read_committed_keys(bootstrap_servers, topic, len(want), columns) == want


def read_committed_keys(bootstrap: str, topic: str, expected: int, columns: bool) -> list[bytes]:
    """Every key a read_committed consumer gets (through poll or poll_columns), in order, once
    ``expected`` arrived and then nothing more came in a further poll."""
    with KafkaConsumer(
        bootstrap_servers=bootstrap,
        topics=[topic],
        auto_offset_reset="earliest",
        isolation_level="read_committed",
    ) as c:
        got = drain(c, expected, columns=columns)
        more = c.poll_columns(300) if columns else c.poll(300)
        assert not more, more
    return [m["key"] if columns else m.key for m in got]
