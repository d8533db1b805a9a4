"""Fetch v13+ names topics by id: version choice, id mapping, stale ids and recreated topics."""

from __future__ import annotations

import uuid
from collections import defaultdict

import pytest
from fakes.consumer_client import FakeClient, FakeLog
from fakes.consumer_helpers import T, consume, fill, new, run

from kafka_core.client.metadata import TopicPartition
from kafka_core.consumer.consumer import KafkaConsumer
from kafka_core.consumer.fetch.requests import topics_of
from kafka_core.errors import KafkaProtocolError
from kafka_core.protocol.messages import FetchRequest, FetchResponse


def offsets(msgs: list) -> list[tuple[int, int]]:
    return sorted((m.partition, m.offset) for m in msgs)


@pytest.mark.parametrize(
    ("broker_max", "has_ids", "expected"),
    [(17, True, 17), (15, True, 15), (12, True, 12), (17, False, 12)],
)
def test_fetch_version_follows_broker_and_metadata(broker_max: int, has_ids: bool, expected: int) -> None:
    client = FakeClient({T: 2})
    client.fetch_version = broker_max
    if not has_ids:
        client.topic_ids.clear()  # Metadata below v10: no ids, so names (and Fetch <= 12)
    fill(client, 0, 12)
    fill(client, 1, 7)

    async def main() -> list:
        c = new(client)
        got = await consume(c, 19)
        await c.close()
        return got

    got = run(main())
    assert offsets(got) == [(0, i) for i in range(12)] + [(1, i) for i in range(7)]
    assert client.fetch_versions and set(client.fetch_versions) == {expected}
    body = client.fetch_bodies[0]
    if expected >= 13:
        assert body.topics[0].topic_id == client.topic_ids[T]


def test_recreated_topic_is_reset_per_policy() -> None:
    client = FakeClient({T: 1})
    fill(client, 0, 8)

    async def main() -> tuple[list, list]:
        c = new(client)
        first = await consume(c, 8)
        # Delete and recreate: a new id and a new, shorter log; the old id is now unknown.
        client.topic_ids[T] = uuid.uuid4()
        client.logs = defaultdict(FakeLog)
        fill(client, 0, 3)
        second = await consume(c, 3)
        await c.close()
        return first, second

    first, second = run(main())
    assert [m.offset for m in first] == list(range(8))
    assert [(m.offset, m.value) for m in second] == [(i, b"v0-%d" % i) for i in range(3)]
    assert client.unknown_id_answers >= 1  # a fetch under the old id met UNKNOWN_TOPIC_ID first


def test_recreated_topic_with_reset_none_raises() -> None:
    client = FakeClient({T: 1})
    fill(client, 0, 4)

    async def main() -> None:
        c = KafkaConsumer(partitions={T: [0]}, client=client, fetch_max_wait_ms=20, auto_offset_reset="none")
        c.seek(TopicPartition(T, 0), 0)  # a known position: the policy only matters once it is lost
        assert len(await consume(c, 4)) == 4
        client.topic_ids[T] = uuid.uuid4()
        with pytest.raises(KafkaProtocolError) as info:
            await consume(c, 1)
        assert info.value.code == 1  # OFFSET_OUT_OF_RANGE: no valid position in the new topic
        await c.close()

    run(main())


def test_response_topics_map_back_to_names() -> None:
    a, b = uuid.uuid4(), uuid.uuid4()
    request = FetchRequest(
        topics=[
            FetchRequest.FetchTopic(topic="a", topic_id=a, partitions=[]),
            FetchRequest.FetchTopic(topic="b", topic_id=b, partitions=[]),
        ]
    )
    resp = FetchResponse(
        responses=[
            FetchResponse.FetchableTopicResponse(topic_id=b, partitions=[]),
            FetchResponse.FetchableTopicResponse(topic_id=a, partitions=[]),
        ]
    )
    assert [name for name, _ in topics_of(resp, request)] == ["b", "a"]
    # An unknown id echoed back as zeros (Tansu): matched by position.
    zero = FetchResponse(responses=[FetchResponse.FetchableTopicResponse(partitions=[])])
    assert [name for name, _ in topics_of(zero, request)] == ["a"]


@pytest.mark.parametrize("code", [100, 103])  # UNKNOWN_TOPIC_ID, INCONSISTENT_TOPIC_ID
def test_stale_topic_id_errors_refresh_and_retry(code: int) -> None:
    client = FakeClient({T: 1})
    fill(client, 0, 6)
    client.partition_errors = [code, code]
    refreshes: list[str | None] = []
    invalidate = client.invalidate_metadata

    def spy(topic: str | None = None) -> None:
        refreshes.append(topic)
        invalidate(topic)

    client.invalidate_metadata = spy  # type: ignore[method-assign]

    async def main() -> list:
        c = new(client)
        got = await consume(c, 6)
        await c.close()
        return got

    got = run(main())
    assert [m.offset for m in got] == list(range(6))  # nothing lost, nothing repeated
    assert refreshes.count(T) >= 2 and not client.partition_errors
