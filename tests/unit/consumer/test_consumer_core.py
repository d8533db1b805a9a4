"""The asyncio consumer against an in-memory client: positions, seeks, errors, reconnects."""

from __future__ import annotations

import pytest
from fakes.consumer_client import FakeClient
from fakes.consumer_helpers import TP0, TP1, T, consume, fill, new, run

from kafka_core.consumer.consumer import KafkaConsumer
from kafka_core.consumer.message import ConsumedMessage
from kafka_core.errors import KafkaCodecError, KafkaConfigError, KafkaProtocolError, KafkaTimeoutError


def test_static_assignment_reads_everything_in_order():
    client = FakeClient({T: 2})
    fill(client, 0, 35)
    fill(client, 1, 20)

    async def main():
        c = new(client)
        msgs = await consume(c, 55)
        assert c.assignment() == {TP0, TP1}
        await c.close()
        return msgs

    msgs = run(main())
    assert len(msgs) == 55
    for p, n in ((0, 35), (1, 20)):
        mine = [m for m in msgs if m.partition == p]
        assert [m.offset for m in mine] == list(range(n))
        assert mine[3].key == b"k3" and mine[3].value == b"v%d-3" % p and mine[3].headers == [("h", b"x")]
        assert isinstance(mine[0], ConsumedMessage) and mine[0].topic == T
    assert not client.closed  # a client passed in is not ours to close


def test_latest_starts_at_the_end_and_sees_new_records():
    client = FakeClient({T: 1})
    fill(client, 0, 10)

    async def main():
        c = new(client, auto_offset_reset="latest")
        assert await c.poll(50) == []
        fill(client, 0, 5, start=10)
        msgs = await consume(c, 5)
        await c.close()
        return [m.offset for m in msgs]

    assert run(main()) == [10, 11, 12, 13, 14]


def test_max_records_and_position_advance_only_on_hand_over():
    client = FakeClient({T: 1})
    fill(client, 0, 30, batch=30)

    async def main():
        c = new(client)
        first = await consume(c, 1, max_records=7)
        pos = await c.position(TP0)
        rest = await consume(c, 23, max_records=7)
        await c.close()
        return first, pos, rest

    first, pos, rest = run(main())
    assert [m.offset for m in first] == list(range(7)) and pos == 7
    assert [m.offset for m in rest][:23] == list(range(7, 30))


def test_records_below_position_are_dropped_from_whole_batches():
    client = FakeClient({T: 1})
    fill(client, 0, 20, batch=20)

    async def main():
        c = new(client)
        await c.start()
        c.seek(TP0, 13)
        msgs = await consume(c, 7)
        await c.close()
        return [m.offset for m in msgs]

    assert run(main()) == list(range(13, 20))


def test_seek_to_beginning_and_end():
    client = FakeClient({T: 1})
    fill(client, 0, 10)

    async def main():
        c = new(client)
        a = [m.offset for m in await consume(c, 10)]
        c.seek_to_beginning()
        b = [m.offset for m in await consume(c, 10)]
        c.seek_to_end()
        assert await c.poll(50) == []
        assert await c.position(TP0) == 10
        await c.close()
        return a, b

    a, b = run(main())
    assert a == b == list(range(10))


def test_pause_and_resume():
    client = FakeClient({T: 2})
    fill(client, 0, 10)
    fill(client, 1, 10)

    async def main():
        c = new(client)
        await c.start()
        c.pause([TP1])
        got = await consume(c, 10)
        more = await c.poll(50)
        assert c.paused() == {TP1}
        c.resume([TP1])
        later = await consume(c, 10)
        await c.close()
        return got + more, later

    before, after = run(main())
    assert {m.partition for m in before} == {0} and len(before) == 10
    assert {m.partition for m in after} == {1} and len(after) == 10


def test_poll_columns_matches_poll():
    client = FakeClient({T: 2})
    fill(client, 0, 25, batch=7)
    fill(client, 1, 12, batch=5)

    async def main():
        c = new(client)
        rows = await consume(c, 37, columns=True)
        await c.close()
        return rows

    rows = run(main())
    assert sorted(rows) == sorted([(0, i) for i in range(25)] + [(1, i) for i in range(12)])


def test_columns_schema():
    client = FakeClient({T: 1})
    fill(client, 0, 3)

    async def main():
        c = new(client)
        b = None
        for _ in range(50):
            b = await c.poll_columns(50)
            if b is not None:
                break
        await c.close()
        return b

    b = run(main())
    assert b.schema.names == [
        "topic",
        "partition",
        "offset",
        "timestamp",
        "timestamp_type",
        "key",
        "value",
        "headers",
    ]
    assert b.column("key").to_pylist() == [b"k0", b"k1", b"k2"]
    assert b.column("headers").to_pylist()[0] == [{"key": "h", "value": b"x"}]


def test_out_of_range_resets_per_policy():
    client = FakeClient({T: 1})
    fill(client, 0, 10)

    async def main():
        c = new(client)
        await c.start()
        c.seek(TP0, 500)
        msgs = await consume(c, 10)
        await c.close()
        return [m.offset for m in msgs]

    assert run(main()) == list(range(10))


def test_out_of_range_with_none_raises():
    client = FakeClient({T: 1})
    fill(client, 0, 10)

    async def main():
        c = KafkaConsumer(partitions={T: [0]}, client=client, auto_offset_reset="none", fetch_max_wait_ms=20)
        with pytest.raises(KafkaProtocolError) as info:
            await consume(c, 1)  # no committed offset and policy none
        assert info.value.name == "OFFSET_OUT_OF_RANGE"
        c.seek(TP0, 99)
        with pytest.raises(KafkaProtocolError, match="out of range"):
            await consume(c, 1)
        c.seek(TP0, 4)
        msgs = await consume(c, 6)
        await c.close()
        return [m.offset for m in msgs]

    assert run(main()) == list(range(4, 10))


def test_corrupt_batch_raises_with_location_and_can_be_skipped():
    client = FakeClient({T: 1})
    fill(client, 0, 10, batch=5)
    log = client.log(T, 0)
    base, last, data = log.batches[1]
    bad = bytearray(data)
    bad[-1] ^= 0xFF  # breaks the CRC
    log.batches[1] = (base, last, bytes(bad))
    fill(client, 0, 5, batch=5, start=10)

    async def main():
        c = new(client)
        good = await consume(c, 5)
        with pytest.raises(KafkaCodecError) as info:
            await consume(c, 6)
        err = info.value
        assert (err.topic, err.partition, err.offset) == (T, 0, 5)
        assert "t[0]" in str(err) and "offset 5" in str(err)
        # again, until the application skips it
        with pytest.raises(KafkaCodecError):
            await consume(c, 1)
        c.seek(TP0, err.last_offset + 1)
        rest = await consume(c, 5)
        await c.close()
        return good, rest

    good, rest = run(main())
    assert [m.offset for m in good] == list(range(5))
    assert [m.offset for m in rest] == list(range(10, 15))


def test_lost_connection_resumes_without_skipping():
    client = FakeClient({T: 1})
    fill(client, 0, 10)

    async def main():
        c = new(client)
        first = await consume(c, 10)
        client.fail_fetches = 3
        fill(client, 0, 10, start=10)
        second = await consume(c, 10)
        await c.close()
        return first + second

    offsets = [m.offset for m in run(main())]
    assert offsets == list(range(20))
    assert client.fail_fetches == 0


def test_iteration_and_run_stop():
    client = FakeClient({T: 1})
    fill(client, 0, 8)

    async def main():
        c = new(client)
        seen: list[int] = []
        async for m in c:
            seen.append(m.offset)
            if len(seen) == 8:
                break
        handled: list[int] = []

        async def handler(m: ConsumedMessage) -> None:
            handled.append(m.offset)
            if m.offset == 11:
                c.stop()

        fill(client, 0, 4, start=8)
        await c.run(handler)
        await c.close()
        return seen, handled

    seen, handled = run(main())
    assert seen == list(range(8)) and handled == [8, 9, 10, 11]


# -- group offset storage with explicit partitions ---------------------------------------------


def test_committed_offsets_are_the_start_and_auto_commit_is_at_least_once():
    client = FakeClient({T: 1})
    fill(client, 0, 20)
    client.committed["g"][TP0] = __import__("kafka_core.client.metadata", fromlist=["x"]).OffsetAndMetadata(
        12
    )

    async def main():
        c = KafkaConsumer(partitions={T: [0]}, group_id="g", client=client, auto_commit_interval_ms=0)
        msgs = await consume(c, 8)
        # The records were handed over but the next poll has not happened: not committed yet.
        assert client.committed["g"][TP0].offset == 12
        await c.poll(10)
        assert client.committed["g"][TP0].offset == 20
        assert await c.committed([TP0]) == {TP0: 20}
        await c.close()
        return [m.offset for m in msgs]

    assert run(main()) == list(range(12, 20))


def test_manual_commit_of_messages_and_offsets_and_on_close():
    client = FakeClient({T: 2})
    fill(client, 0, 10)

    async def main():
        c = KafkaConsumer(
            partitions={T: [0, 1]},
            group_id="g",
            client=client,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        msgs = await consume(c, 10)
        await c.commit(msgs[3])
        assert client.committed["g"][TP0].offset == 4
        await c.commit({TP1: 7})
        assert client.committed["g"][TP1].offset == 7
        await c.commit()
        assert client.committed["g"][TP0].offset == 10
        await c.close()

    run(main())


def test_commit_on_close_with_auto_commit():
    client = FakeClient({T: 1})
    fill(client, 0, 5)

    async def main():
        c = KafkaConsumer(partitions={T: [0]}, group_id="g", client=client, auto_offset_reset="earliest")
        await consume(c, 5)
        assert TP0 not in client.committed["g"]
        await c.close()

    run(main())
    assert client.committed["g"][TP0].offset == 5


def test_commit_failure_surfaces():
    client = FakeClient({T: 1})
    fill(client, 0, 5)

    async def main():
        c = KafkaConsumer(partitions={T: [0]}, group_id="g", client=client, auto_offset_reset="earliest")
        await consume(c, 5)
        client.commit_error = KafkaProtocolError(27, "REBALANCE_IN_PROGRESS", False)
        with pytest.raises(KafkaProtocolError):
            await c.commit()
        with pytest.raises(KafkaProtocolError):
            await c.close()

    run(main())


def test_coordinator_gate_blocks_start_and_touches_nothing():
    client = FakeClient({T: 1})
    fill(client, 0, 5)
    client.coordinator_error = KafkaTimeoutError("coordinator not available")

    async def main():
        c = KafkaConsumer(partitions={T: [0]}, group_id="g", client=client, auto_offset_reset="earliest")
        with pytest.raises(KafkaTimeoutError, match="not consuming"):
            await c.poll(10)
        assert client.fetch_requests == []
        await c.close()

    run(main())
    assert client.committed["g"] == {}


def test_lag_and_offsets_for_times():
    client = FakeClient({T: 1})
    fill(client, 0, 10)

    async def main():
        c = new(client)
        await consume(c, 4, max_records=4)
        lag = await c.lag()
        await c.close()
        return lag

    assert run(main()) == {TP0: 6}


@pytest.mark.parametrize(
    "kw",
    [
        {"auto_offset_reset": "middle"},
        {"isolation_level": "dirty"},
        {"partitions": {T: [0]}},
        {"heartbeat_interval_ms": 50_000},
        {"max_poll_records": 0},
    ],
)
def test_bad_options(kw):
    with pytest.raises(KafkaConfigError):
        KafkaConsumer(topics=[T], client=FakeClient({T: 1}), **kw)


def test_nothing_to_consume_and_pattern_without_group():
    with pytest.raises(KafkaConfigError):
        KafkaConsumer(client=FakeClient({}))
    with pytest.raises(KafkaConfigError):
        KafkaConsumer(pattern="t.*", client=FakeClient({}))


def test_stop_mid_batch_rewinds_so_nothing_is_skipped():
    client = FakeClient({T: 1})
    fill(client, 0, 10, batch=10)

    async def main():
        c = new(client)
        handled: list[int] = []

        def handler(m: ConsumedMessage) -> None:
            handled.append(m.offset)
            if m.offset == 3:
                c.stop()

        await c.run(handler)
        rest = await consume(c, 6)
        await c.close()
        return handled, [m.offset for m in rest]

    handled, rest = run(main())
    assert handled == [0, 1, 2, 3] and rest == [4, 5, 6, 7, 8, 9]


def test_retriable_partition_errors_are_retried_and_others_raised():
    client = FakeClient({T: 1})
    fill(client, 0, 5)
    client.partition_errors = [6, 5, 3]  # not leader, leader not available, unknown partition

    async def main():
        c = new(client)
        got = await consume(c, 5)
        client.partition_errors = [29]  # TOPIC_AUTHORIZATION_FAILED
        fill(client, 0, 2, start=5)
        with pytest.raises(KafkaProtocolError) as info:
            await consume(c, 2)
        assert info.value.code == 29
        await c.close()
        return [m.offset for m in got]

    assert run(main()) == list(range(5))


def test_fetch_options_reach_the_request():
    client = FakeClient({T: 1})

    async def main():
        c = KafkaConsumer(
            topics=[T],
            client=client,
            fetch_max_wait_ms=77,
            fetch_min_bytes=123,
            fetch_max_bytes=4567,
            max_partition_fetch_bytes=890,
            isolation_level="read_committed",
        )
        await c.poll(100)
        await c.close()

    run(main())
    body = client.fetch_bodies[0]
    assert (body.max_wait_ms, body.min_bytes, body.max_bytes, body.isolation_level) == (77, 123, 4567, 1)
    assert body.topics[0].partitions[0].partition_max_bytes == 890


def test_breaking_out_of_iteration_loses_nothing():
    client = FakeClient({T: 1})
    fill(client, 0, 10, batch=10)

    async def main():
        c = new(client)
        seen: list[int] = []
        async for m in c:
            seen.append(m.offset)
            if m.offset == 2:
                break
        rest = await consume(c, 7)
        await c.close()
        return seen, [m.offset for m in rest]

    seen, rest = run(main())
    assert seen == [0, 1, 2] and rest == list(range(3, 10))


class _PendingTransactionOffsets(FakeClient):
    """A coordinator holding offsets a committed transaction sent, its markers not written yet:
    a plain OffsetFetch answers the older offsets, a stable one (KIP-447) the transaction's."""

    def __init__(self, partitions: dict[str, int], stable: dict, older: dict) -> None:
        super().__init__(partitions)
        self.stable, self.older = stable, older

    async def fetch_committed_offsets(self, group_id: str, partitions: object = None, **kw: object) -> dict:
        return dict(self.stable if kw.get("require_stable") else self.older)


def test_committed_reads_what_a_committed_transaction_sent():
    """Right after commit_transaction the group's offsets are the transaction's (as Java's
    committed(), which reads stable offsets); a plain read answered the older ones (Kafka 3.9)."""
    from kafka_core.client.metadata import OffsetAndMetadata

    client = _PendingTransactionOffsets({T: 2}, stable={TP0: OffsetAndMetadata(7)}, older={})

    async def main():
        c = KafkaConsumer(partitions={T: [0, 1]}, group_id="g", client=client)
        try:
            return await c.committed([TP0, TP1])
        finally:
            await c.close()

    assert run(main()) == {TP0: 7, TP1: None}
