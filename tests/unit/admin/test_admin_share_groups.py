"""Share group admin calls (KIP-932) against a scripted client: what is sent, what comes back.

Covers the answers a live broker rarely gives on demand: a coordinator that moved, a broker
without share groups, per-partition errors beside a group error, a broker too old for lag.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Any
from unittest import mock

import pytest

from kafka_core.admin import ConfigResource, ConfigResourceType, SharePartitionOffset, TopicPartition
from kafka_core.admin import admin as admin_module
from kafka_core.admin.admin import KafkaAdmin
from kafka_core.client.metadata import BrokerMeta, ClusterMeta, PartitionMeta, TopicMeta
from kafka_core.errors import KafkaProtocolError, KafkaUnsupportedVersionError
from kafka_core.protocol import ApiKey
from kafka_core.protocol.messages import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsResponse,
    DeleteGroupsResponse,
    DeleteShareGroupOffsetsResponse,
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsResponse,
    ListGroupsRequest,
    ListGroupsResponse,
    ListOffsetsResponse,
    ShareGroupDescribeRequest,
    ShareGroupDescribeResponse,
)

pytestmark = pytest.mark.timeout(30)

TOPIC_ID = uuid.uuid4()


class FakeClient:
    """The public client surface the admin uses; ``answer(node, body)`` scripts the responses."""

    request_timeout_ms = 30_000.0

    def __init__(self, answer: Callable[[int, Any], Any], unsupported: tuple[int, ...] = ()) -> None:
        self.answer = answer
        self.unsupported = unsupported
        self.sent: list[tuple[int, Any]] = []
        self.noted: list[tuple[int, str | None]] = []
        self.coordinator = 2

    async def start(self) -> None:
        pass

    async def close(self) -> None:
        pass

    async def api_version(self, node_id: int, api_key: int, *, max_version: int | None = None) -> int:
        if api_key in self.unsupported:
            raise KafkaUnsupportedVersionError(
                f"broker {node_id} does not support API {ApiKey(api_key).name}"
            )
        return {ApiKey.LIST_GROUPS: 5, ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: 1}.get(api_key, 1)

    async def send(self, node_id: int, body: Any, version: int | None = None, **_: Any) -> Any:
        self.sent.append((node_id, body))
        return self.answer(node_id, body)

    async def find_coordinator(self, key: str, key_type: int = 0, **_: Any) -> BrokerMeta:
        return BrokerMeta(self.coordinator, "h", self.coordinator)

    async def retry(self, what: str, attempt: Callable[[], Any], timeout_ms: float | None = None) -> Any:
        return await attempt()

    async def metadata(self, topics: list[str] | None = None, **_: Any) -> ClusterMeta:
        partitions = [PartitionMeta(p, leader=1) for p in range(3)]
        return ClusterMeta(
            brokers=[BrokerMeta(1, "h", 1), BrokerMeta(2, "h", 2)],
            topics=[TopicMeta(t, partitions) for t in topics or []],
        )

    def note_error(self, code: int, topic: str | None = None, *, coordinator_key: str | None = None) -> bool:
        self.noted.append((code, coordinator_key or topic))
        if code == 16 and coordinator_key is not None:  # NOT_COORDINATOR: the next lookup finds the new one
            self.coordinator = 1
        return True

    def invalidate_metadata(self, topic: str | None = None) -> None:
        pass


def make_admin(client: FakeClient) -> KafkaAdmin:
    """An admin built as a user builds one, with the fake client where it makes its KafkaClient."""
    with mock.patch.object(admin_module, "KafkaClient", lambda *_args, **_options: client):
        return KafkaAdmin("127.0.0.1:1", retry_backoff_ms=1)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def described(group_id: str, error: int = 0, state: str = "Stable") -> Any:
    r = ShareGroupDescribeResponse
    member = r.Member(
        member_id="m1",
        member_epoch=3,
        client_id="c1",
        client_host="/127.0.0.1",
        subscribed_topic_names=["t"],
        assignment=r.Assignment(
            topic_partitions=[r.TopicPartitions(topic_id=TOPIC_ID, topic_name="t", partitions=[1, 0])]
        ),
    )
    return r.DescribedGroup(
        error_code=error,
        error_message="Group x not found." if error else None,
        group_id=group_id,
        group_state=state,
        group_epoch=4,
        assignment_epoch=3,
        assignor_name="simple",
        members=[] if error else [member],
    )


# -- list, describe, delete ------------------------------------------------------------------------


def test_list_share_groups_filters_by_type_on_every_broker_and_merges() -> None:
    g = ListGroupsResponse.ListedGroup

    def answer(node: int, body: Any) -> Any:
        assert isinstance(body, ListGroupsRequest)
        return ListGroupsResponse(
            groups=[g(group_id=f"s{node}", protocol_type="share", group_state="Empty", group_type="share")]
        )

    client = FakeClient(answer)
    listed = run(make_admin(client).list_share_groups(states=["Empty"]))
    assert [(x.group_id, x.state, x.group_type) for x in listed] == [
        ("s1", "Empty", "share"),
        ("s2", "Empty", "share"),
    ]
    assert sorted(n for n, _ in client.sent) == [1, 2]
    assert all(b.types_filter == ["share"] and b.states_filter == ["Empty"] for _, b in client.sent)


@pytest.mark.parametrize(
    "call",
    [
        lambda a: a.list_share_groups(),
        lambda a: a.describe_share_groups(["g"]),
        lambda a: a.delete_share_groups(["g"]),
        lambda a: a.list_share_group_offsets("g"),
        lambda a: a.alter_share_group_offsets("g", {("t", 0): 1}),
        lambda a: a.delete_share_group_offsets("g", ["t"]),
    ],
)
def test_a_broker_without_share_groups_is_a_clear_typed_error(call: Callable[[KafkaAdmin], Any]) -> None:
    client = FakeClient(
        lambda n, b: pytest.fail("nothing should be sent"), unsupported=(ApiKey.SHARE_GROUP_DESCRIBE,)
    )
    with pytest.raises(KafkaUnsupportedVersionError, match=r"has no share groups .*KIP-932"):
        run(call(make_admin(client)))
    assert client.sent == []


def test_describe_share_groups_members_epochs_and_errors_by_name() -> None:
    def answer(node: int, body: Any) -> Any:
        assert isinstance(body, ShareGroupDescribeRequest)
        return ShareGroupDescribeResponse(
            groups=[described(g, error=69 if g == "nope" else 0) for g in body.group_ids]
        )

    client = FakeClient(answer)
    res = run(make_admin(client).describe_share_groups(["g", "nope"]))
    d = res["g"].result()
    assert (d.group_type, d.protocol_type, d.protocol, d.state) == ("share", "share", "simple", "Stable")
    assert (d.group_epoch, d.assignment_epoch) == (4, 3)
    [m] = d.members
    assert m.assignment == [TopicPartition("t", 0), TopicPartition("t", 1)]
    assert (m.member_epoch, m.client_id, m.subscribed_topics) == (3, "c1", ["t"])
    err = res["nope"].error
    assert isinstance(err, KafkaProtocolError) and err.name == "GROUP_ID_NOT_FOUND"
    assert "not found" in str(err)


def test_describe_goes_round_again_when_the_coordinator_moved() -> None:
    def answer(node: int, body: Any) -> Any:
        return ShareGroupDescribeResponse(groups=[described("g", error=16 if node == 2 else 0)])

    client = FakeClient(answer)
    res = run(make_admin(client).describe_share_groups("g"))
    assert res["g"].ok
    assert [n for n, _ in client.sent] == [2, 1]
    assert (16, "g") in client.noted


def test_delete_share_groups_per_group_results() -> None:
    r = DeleteGroupsResponse.DeletableGroupResult

    def answer(node: int, body: Any) -> Any:
        return DeleteGroupsResponse(
            results=[r(group_id=g, error_code=68 if g == "busy" else 0) for g in body.groups_names]
        )

    res = run(make_admin(FakeClient(answer)).delete_share_groups(["idle", "busy"]))
    assert res["idle"].ok
    assert res["busy"].error.name == "NON_EMPTY_GROUP"  # type: ignore[union-attr]


# -- start offsets and lag -------------------------------------------------------------------------


def offsets_answer(group_error: int = 0, lag: int = -1) -> Callable[[int, Any], Any]:
    r = DescribeShareGroupOffsetsResponse
    end = ListOffsetsResponse

    def answer(node: int, body: Any) -> Any:
        if isinstance(body, DescribeShareGroupOffsetsRequest):
            parts = [
                r.DescribeShareGroupOffsetsResponsePartition(
                    partition_index=0, start_offset=3, leader_epoch=0, lag=lag
                ),
                r.DescribeShareGroupOffsetsResponsePartition(
                    partition_index=1, start_offset=-1, leader_epoch=-1
                ),
                r.DescribeShareGroupOffsetsResponsePartition(
                    partition_index=2, start_offset=0, error_code=29, error_message="no"
                ),
            ]
            topic = r.DescribeShareGroupOffsetsResponseTopic(
                topic_name="t", topic_id=TOPIC_ID, partitions=parts
            )
            return r(
                groups=[
                    r.DescribeShareGroupOffsetsResponseGroup(
                        group_id="g",
                        topics=[] if group_error else [topic],
                        error_code=group_error,
                        error_message="Group g not found." if group_error else None,
                    )
                ]
            )
        return end(
            topics=[
                end.ListOffsetsTopicResponse(
                    name=t.name,
                    partitions=[
                        end.ListOffsetsPartitionResponse(
                            partition_index=p.partition_index, offset=10, timestamp=-1
                        )
                        for p in t.partitions
                    ],
                )
                for t in body.topics
            ]
        )

    return answer


def test_list_share_group_offsets_start_offsets_lag_and_partition_errors() -> None:
    client = FakeClient(offsets_answer(lag=5))
    offsets = run(make_admin(client).list_share_group_offsets("g", [("t", 0), TopicPartition("t", 2)]))
    [(_, body)] = client.sent
    [group] = body.groups
    assert group.group_id == "g" and [(t.topic_name, t.partitions) for t in group.topics] == [("t", [0, 2])]
    assert offsets[TopicPartition("t", 0)] == SharePartitionOffset("t", 0, 3, 0, 5, None)
    assert offsets[TopicPartition("t", 1)].start_offset == -1
    assert offsets[TopicPartition("t", 1)].leader_epoch is None
    assert offsets[TopicPartition("t", 2)].error.name == "TOPIC_AUTHORIZATION_FAILED"  # type: ignore[union-attr]


def test_list_share_group_offsets_of_an_unknown_group_raises_its_error() -> None:
    with pytest.raises(KafkaProtocolError, match=r"GROUP_ID_NOT_FOUND.*not found"):
        run(make_admin(FakeClient(offsets_answer(group_error=69))).list_share_group_offsets("g"))


@pytest.mark.parametrize(("broker_lag", "expected"), [(5, 5), (-1, 7)])
def test_share_group_lag_prefers_the_brokers_count_else_end_minus_start(
    broker_lag: int, expected: int
) -> None:
    lag = run(make_admin(FakeClient(offsets_answer(lag=broker_lag))).share_group_lag("g"))
    p0 = lag[("t", 0)]
    assert (p0.committed, p0.end, p0.lag) == (3, 10, expected)  # type: ignore[union-attr]
    uninitialized = lag[("t", 1)]
    assert (uninitialized.committed, uninitialized.lag) == (None, None)  # type: ignore[union-attr]
    assert lag.total == expected


def test_alter_share_group_offsets_group_error_applies_to_every_partition() -> None:
    r = AlterShareGroupOffsetsResponse
    sent: list[Any] = []

    def answer(node: int, body: Any) -> Any:
        assert isinstance(body, AlterShareGroupOffsetsRequest)
        sent.append(body)
        if len(sent) == 1:
            return r(error_code=68, error_message="The group is not empty.")
        return r(
            responses=[
                r.AlterShareGroupOffsetsResponseTopic(
                    topic_name=t.topic_name,
                    partitions=[
                        r.AlterShareGroupOffsetsResponsePartition(
                            partition_index=p.partition_index, error_code=3 if p.partition_index == 9 else 0
                        )
                        for p in t.partitions
                    ],
                )
                for t in body.topics
            ]
        )

    admin = make_admin(FakeClient(answer))
    busy = run(admin.alter_share_group_offsets("g", {("t", 0): 4, ("t", 1): 0}))
    assert {tp: res.error.name for tp, res in busy.items()} == {  # type: ignore[union-attr]
        TopicPartition("t", 0): "NON_EMPTY_GROUP",
        TopicPartition("t", 1): "NON_EMPTY_GROUP",
    }
    done = run(admin.alter_share_group_offsets("g", {("t", 0): 4, ("t", 9): 0}))
    assert done[TopicPartition("t", 0)].ok
    assert done[TopicPartition("t", 9)].error.name == "UNKNOWN_TOPIC_OR_PARTITION"  # type: ignore[union-attr]
    [topic] = sent[1].topics
    assert [(p.partition_index, p.start_offset) for p in topic.partitions] == [(0, 4), (9, 0)]


def test_delete_share_group_offsets_per_topic() -> None:
    r = DeleteShareGroupOffsetsResponse

    def answer(node: int, body: Any) -> Any:
        return r(
            responses=[
                r.DeleteShareGroupOffsetsResponseTopic(
                    topic_name=t.topic_name, error_code=3 if t.topic_name == "gone" else 0
                )
                for t in body.topics
            ]
        )

    res = run(make_admin(FakeClient(answer)).delete_share_group_offsets("g", ["t", "gone", "t"]))
    assert list(res) == ["t", "gone"] and res["t"].ok
    assert res["gone"].error.name == "UNKNOWN_TOPIC_OR_PARTITION"  # type: ignore[union-attr]


def test_group_config_resource() -> None:
    assert ConfigResource.group("g") == ConfigResource(ConfigResourceType.GROUP, "g")
    assert ConfigResource.of(("group", "g")) == ConfigResource.group("g")
