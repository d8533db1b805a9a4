"""Admin result building and error mapping, against a scripted client (no broker).

The fake client answers each request with what the test scripts, so the cases a live broker
rarely produces (NOT_CONTROLLER for one topic, a coordinator that moved, a group described as
Dead, an error that never clears) are exercised exactly.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from typing import Any
from unittest import mock

import pytest

from kafka_core.admin import (
    AlterConfigOp,
    ConfigResource,
    ConfigResourceType,
    GroupLag,
    NewTopic,
    PartitionLag,
    Result,
    TopicPartition,
)
from kafka_core.admin import admin as admin_module
from kafka_core.admin.admin import KafkaAdmin
from kafka_core.admin.engine import per_resource
from kafka_core.admin.offsets import spec_timestamp
from kafka_core.client.metadata import BrokerMeta, ClusterMeta, PartitionMeta, TopicMeta
from kafka_core.consumer.group.classic_meta import Assignment, encode_assignment
from kafka_core.errors import (
    KafkaConfigError,
    KafkaProtocolError,
    KafkaTimeoutError,
    KafkaUnsupportedVersionError,
)
from kafka_core.protocol import ApiKey
from kafka_core.protocol.errors import error_for
from kafka_core.protocol.messages import (
    ConsumerGroupDescribeResponse,
    CreatePartitionsResponse,
    CreateTopicsResponse,
    DeleteRecordsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    ListGroupsResponse,
    OffsetDeleteResponse,
)

pytestmark = pytest.mark.timeout(30)


class FakeClient:
    """Just the public client surface the admin uses; ``answer(node, body)`` scripts responses."""

    request_timeout_ms = 30_000.0

    def __init__(self, answer: Callable[[int, Any], Any], versions: dict[int, int] | None = None) -> None:
        self.answer = answer
        self.versions = versions or {}
        self.sent: list[tuple[int, Any]] = []
        self.controller_refreshes = 0
        self.noted: list[tuple[int, str | None]] = []
        self.meta = ClusterMeta(brokers=[BrokerMeta(1, "h", 1), BrokerMeta(2, "h", 2)], topics=[])

    async def start(self) -> None:
        pass

    async def close(self) -> None:
        pass

    async def controller_node(self, *, refresh: bool = False) -> int:
        self.controller_refreshes += refresh
        return 2 if self.controller_refreshes else 1

    async def any_node(self) -> int:
        return 1

    async def api_version(self, node_id: int, api_key: int, *, max_version: int | None = None) -> int:
        if api_key in self.versions and self.versions[api_key] < 0:
            raise KafkaUnsupportedVersionError(
                f"broker {node_id} does not support API {ApiKey(api_key).name}"
            )
        return self.versions.get(api_key, 99)

    async def send(self, node_id: int, body: Any, version: int | None = None, **_: Any) -> Any:
        self.sent.append((node_id, body))
        return self.answer(node_id, body)

    async def find_coordinator(self, key: str, key_type: int = 0, **_: Any) -> BrokerMeta:
        return BrokerMeta(2, "h", 2)

    async def retry(self, what: str, attempt: Callable[[], Any], timeout_ms: float | None = None) -> Any:
        return await attempt()

    async def metadata(self, topics: list[str] | None = None, **_: Any) -> ClusterMeta:
        return self.meta

    def note_error(self, code: int, topic: str | None = None, *, coordinator_key: str | None = None) -> bool:
        self.noted.append((code, coordinator_key or topic))
        return True

    def invalidate_metadata(self, topic: str | None = None) -> None:
        pass


def make_admin(client: FakeClient) -> KafkaAdmin:
    """An admin built as a user builds one, with the fake client where it makes its KafkaClient."""
    with mock.patch.object(admin_module, "KafkaClient", lambda *_args, **_options: client):
        return KafkaAdmin("127.0.0.1:1", retry_backoff_ms=1)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


# -- Result and the retry engine -----------------------------------------------------------------


def test_result_value_and_error() -> None:
    ok: Result[int] = Result(5)
    assert ok.ok and ok.result() == 5 and ok.error is None
    err = error_for(36, "t")
    bad: Result[int] = Result(error=err)
    assert not bad.ok and bad.value is None
    with pytest.raises(KafkaProtocolError) as raised:
        bad.result()
    assert raised.value is err and (err.code, err.name) == (36, "TOPIC_ALREADY_EXISTS")


def test_engine_retries_only_the_failing_key_and_keeps_final_errors() -> None:
    calls: list[list[str]] = []

    async def attempt(pending: list[str]) -> dict[str, Any]:
        calls.append(pending)
        out: dict[str, Any] = {"a": 1, "b": error_for(17)}  # b: INVALID_TOPIC_EXCEPTION, final
        out["c"] = error_for(5) if len(calls) < 3 else 3  # c: LEADER_NOT_AVAILABLE twice
        return {k: out[k] for k in pending}

    res = run(per_resource("op", ["a", "b", "c"], attempt, 10_000, backoff=(1, 1)))
    assert list(res) == ["a", "b", "c"]
    assert res["a"].value == 1 and res["c"].value == 3
    assert res["b"].error.code == 17  # type: ignore[union-attr]
    assert calls == [["a", "b", "c"], ["c"], ["c"]]


def test_engine_gives_up_at_the_deadline_keeping_code_and_name() -> None:
    async def attempt(pending: list[str]) -> dict[str, Any]:
        return {"x": error_for(16, "coordinator moved")}

    started = time.monotonic()
    res = run(per_resource("op", ["x"], attempt, 300, backoff=(10, 20)))
    assert time.monotonic() - started < 0.3 + 2.0
    err = res["x"].error
    assert isinstance(err, KafkaProtocolError) and (err.code, err.name) == (16, "NOT_COORDINATOR")
    assert "still failing after 0.3s" in str(err) and "coordinator moved" in str(err)


def test_engine_bounds_a_hanging_attempt_and_raises_missing_apis() -> None:
    async def hang(pending: list[str]) -> dict[str, Any]:
        await asyncio.sleep(60)
        return {}

    res = run(per_resource("op", ["x"], hang, 200))
    assert isinstance(res["x"].error, KafkaTimeoutError)

    async def unsupported(pending: list[str]) -> dict[str, Any]:
        raise KafkaUnsupportedVersionError("broker 1 does not support API CREATE_PARTITIONS")

    with pytest.raises(KafkaUnsupportedVersionError, match="CREATE_PARTITIONS"):
        run(per_resource("op", ["x"], unsupported, 1000))


# -- calls ---------------------------------------------------------------------------------------


def test_create_topics_not_controller_moves_on_for_that_topic_only() -> None:
    def answer(node: int, body: Any) -> Any:
        r = CreateTopicsResponse.CreatableTopicResult
        results = []
        for t in body.topics:
            code = 41 if (t.name == "a" and node == 1) else (36 if t.name == "dup" else 0)
            results.append(r(name=t.name, error_code=code, error_message=None))
        return CreateTopicsResponse(topics=results)

    client = FakeClient(answer)
    res = run(make_admin(client).create_topics([NewTopic("a", 3, 1, {"k": "v"}), "b", NewTopic("dup")]))
    assert res["a"].ok and res["b"].ok
    assert res["dup"].error.name == "TOPIC_ALREADY_EXISTS"  # type: ignore[union-attr]
    assert client.controller_refreshes == 1
    first, second = client.sent
    assert first[0] == 1 and [t.name for t in first[1].topics] == ["a", "b", "dup"]
    assert first[1].topics[0].configs[0].name == "k" and first[1].topics[0].num_partitions == 3
    assert second[0] == 2 and [t.name for t in second[1].topics] == ["a"]


def test_describe_groups_decodes_assignments_maps_dead_and_forgets_moved_coordinators() -> None:
    assignment = encode_assignment(Assignment(partitions={"t": [1, 0]}))
    rounds: list[int] = []

    def answer(node: int, body: Any) -> Any:
        rounds.append(len(body.groups))
        member = DescribeGroupsResponse.DescribedGroupMember
        g = DescribeGroupsResponse.DescribedGroup
        groups = []
        for gid in body.groups:
            if gid == "live":
                m = member(
                    member_id="m1", client_id="c", client_host="/1.2.3.4", member_assignment=assignment
                )
                groups.append(
                    g(
                        group_id=gid,
                        group_state="Stable",
                        protocol_type="consumer",
                        protocol_data="range",
                        members=[m],
                    )
                )
            elif gid == "moving" and len(rounds) == 1:
                groups.append(g(group_id=gid, error_code=16, members=[]))
            elif gid == "moving":
                groups.append(g(group_id=gid, group_state="Empty", protocol_type="consumer", members=[]))
            else:
                groups.append(g(group_id=gid, group_state="Dead", protocol_type="", members=[]))
        return DescribeGroupsResponse(groups=groups)

    client = FakeClient(answer, versions={ApiKey.CONSUMER_GROUP_DESCRIBE: -1})  # no KIP-848 groups
    res = run(make_admin(client).describe_groups(["live", "moving", "ghost"]))
    live = res["live"].result()
    assert (live.state, live.protocol) == ("Stable", "range")
    assert live.members[0].assignment == [TopicPartition("t", 0), TopicPartition("t", 1)]
    assert res["moving"].result().state == "Empty"
    assert res["ghost"].error.name == "GROUP_ID_NOT_FOUND"  # type: ignore[union-attr]
    assert (16, "moving") in client.noted and rounds == [3, 1]


def test_describe_groups_asks_consumer_group_describe_for_a_kip848_group() -> None:
    """Kafka 4 answers DescribeGroups for a KIP-848 group GROUP_ID_NOT_FOUND (v6+: "not a
    classic group"; v5: state Dead): ConsumerGroupDescribe then gives the group; one it does
    not know either stays GROUP_ID_NOT_FOUND."""
    tid = uuid.uuid4()

    def answer(node: int, body: Any) -> Any:
        if isinstance(body, DescribeGroupsRequest):
            g = DescribeGroupsResponse.DescribedGroup
            return DescribeGroupsResponse(
                groups=[
                    g(group_id="new", error_code=69, error_message="Group new is not a classic group."),
                    g(group_id="ghost", group_state="Dead", members=[]),
                ]
            )
        r = ConsumerGroupDescribeResponse
        parts = r.TopicPartitions

        def member(mid: str, epoch: int, now: list[int], target: list[int]) -> Any:
            return r.Member(
                member_id=mid,
                rack_id="r1",
                member_epoch=epoch,
                client_id="c",
                client_host="/1.2.3.4",
                subscribed_topic_names=["t"],
                assignment=r.Assignment(
                    topic_partitions=[parts(topic_id=tid, topic_name="t", partitions=now)]
                ),
                target_assignment=r.Assignment(
                    topic_partitions=[parts(topic_id=tid, topic_name="t", partitions=target)]
                ),
            )

        assert body.group_ids == ["new", "ghost"]
        return r(
            groups=[
                r.DescribedGroup(
                    group_id="new",
                    group_state="reconciling",
                    group_epoch=4,
                    assignment_epoch=4,
                    assignor_name="uniform",
                    members=[member("a", 4, [1, 0], [0]), member("b", 3, [], [1])],
                ),
                r.DescribedGroup(group_id="ghost", error_code=69, error_message="Group ghost not found."),
            ]
        )

    client = FakeClient(answer)
    res = run(make_admin(client).describe_groups(["new", "ghost"]))
    new = res["new"].result()
    assert (new.group_type, new.protocol_type, new.protocol, new.state) == (
        "consumer",
        "consumer",
        "uniform",
        "Reconciling",
    )
    assert (new.group_epoch, new.assignment_epoch) == (4, 4)
    a, b = new.members
    assert (a.member_id, a.member_epoch, a.rack_id, a.subscribed_topics) == ("a", 4, "r1", ["t"])
    assert a.assignment == [TopicPartition("t", 0), TopicPartition("t", 1)]
    assert a.target_assignment == [TopicPartition("t", 0)]
    assert (b.assignment, b.target_assignment) == ([], [TopicPartition("t", 1)])
    assert res["ghost"].error.code == 69  # type: ignore[union-attr]
    assert [type(body).__name__ for _, body in client.sent] == [
        "DescribeGroupsRequest",
        "ConsumerGroupDescribeRequest",
    ]


def test_list_groups_gives_each_group_its_type() -> None:
    def answer(node: int, body: Any) -> Any:
        g = ListGroupsResponse.ListedGroup
        if node == 1:
            return ListGroupsResponse(
                groups=[g(group_id="c", protocol_type="consumer", group_state="Stable", group_type="classic")]
            )
        return ListGroupsResponse(
            groups=[g(group_id="k", protocol_type="consumer", group_state="Empty", group_type="consumer")]
        )

    listed = run(make_admin(FakeClient(answer)).list_groups())
    assert [(x.group_id, x.group_type, x.state) for x in listed] == [
        ("c", "classic", "Stable"),
        ("k", "consumer", "Empty"),
    ]


def test_delete_group_offsets_group_error_applies_to_every_partition() -> None:
    client = FakeClient(lambda node, body: OffsetDeleteResponse(error_code=69, topics=[]))
    res = run(make_admin(client).delete_group_offsets("g", [("t", 0), TopicPartition("t", 1)]))
    assert [r.error.code for r in res.values()] == [69, 69]  # type: ignore[union-attr]


def test_missing_api_is_raised_with_its_name() -> None:
    client = FakeClient(lambda node, body: None, versions={ApiKey.OFFSET_DELETE: -1})
    with pytest.raises(KafkaUnsupportedVersionError, match="OFFSET_DELETE"):
        run(make_admin(client).delete_group_offsets("g", [("t", 0)]))


def test_create_partitions_and_delete_records_results() -> None:
    def answer(node: int, body: Any) -> Any:
        if body.API_KEY == ApiKey.CREATE_PARTITIONS:
            r = CreatePartitionsResponse.CreatePartitionsTopicResult
            return CreatePartitionsResponse(
                results=[
                    r(name=t.name, error_code=37 if t.count < 2 else 0, error_message="too few")
                    for t in body.topics
                ]
            )
        t = DeleteRecordsResponse.DeleteRecordsTopicResult
        p = DeleteRecordsResponse.DeleteRecordsPartitionResult
        return DeleteRecordsResponse(
            topics=[
                t(
                    name=x.name,
                    partitions=[
                        p(
                            partition_index=q.partition_index,
                            low_watermark=q.offset,
                            error_code=1 if q.offset > 10 else 0,
                        )
                        for q in x.partitions
                    ],
                )
                for x in body.topics
            ]
        )

    client = FakeClient(answer)
    client.meta = ClusterMeta(
        brokers=[BrokerMeta(1, "h", 1), BrokerMeta(2, "h", 2)],
        topics=[TopicMeta("t", [PartitionMeta(0, 1), PartitionMeta(1, 2)])],
    )
    admin = make_admin(client)
    res = run(admin.create_partitions({"grow": 4, "shrink": 1}))
    assert res["grow"].ok and res["shrink"].error.name == "INVALID_PARTITIONS"  # type: ignore[union-attr]
    deleted = run(admin.delete_records({("t", 0): 5, ("t", 1): 50, ("t", 9): 1}))
    assert deleted[TopicPartition("t", 0)].result() == 5
    assert deleted[TopicPartition("t", 1)].error.name == "OFFSET_OUT_OF_RANGE"  # type: ignore[union-attr]
    assert deleted[TopicPartition("t", 9)].error.code == 3  # type: ignore[union-attr]
    leaders = sorted(node for node, body in client.sent if body.API_KEY == ApiKey.DELETE_RECORDS)
    assert leaders == [1, 2]  # one request per leader
    with pytest.raises(KafkaConfigError):
        run(admin.create_partitions({"t": 0}))


def test_max_timestamp_on_an_old_broker_is_a_typed_error_for_that_partition() -> None:
    client = FakeClient(lambda node, body: None, versions={ApiKey.LIST_OFFSETS: 6})
    client.meta = ClusterMeta(brokers=[BrokerMeta(1, "h", 1)], topics=[TopicMeta("t", [PartitionMeta(0, 1)])])
    res = run(make_admin(client).list_offsets({("t", 0): "max_timestamp"}))
    err = res[TopicPartition("t", 0)].error
    assert isinstance(err, KafkaUnsupportedVersionError) and "LIST_OFFSETS v7" in str(err)


# -- value types ---------------------------------------------------------------------------------


def test_offset_specs() -> None:
    assert [spec_timestamp(s) for s in ("earliest", "latest", "max_timestamp", 1234)] == [-2, -1, -3, 1234]
    for bad in ("newest", -5, True, 1.5):
        with pytest.raises(KafkaConfigError):
            spec_timestamp(bad)  # type: ignore[arg-type]


def test_group_lag_total_and_lookup() -> None:
    a, b, c = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("t", 2)
    lag = GroupLag(
        "g",
        {
            a: PartitionLag("t", 0, 3, 10, 7),
            b: PartitionLag("t", 1, None, 4, None),
            c: PartitionLag("t", 2, 5, 5, 0),
        },
    )
    assert lag.total == lag["total"] == 7
    assert lag[("t", 1)].committed is None  # type: ignore[union-attr]
    assert [p.partition for p in lag] == [0, 1, 2] and len(lag) == 3
    with pytest.raises(KeyError):
        lag["nope"]


def test_config_resources_and_ops() -> None:
    assert ConfigResource.of(("topic", "t")) == ConfigResource.topic("t")
    assert ConfigResource.of(("broker", 3)) == ConfigResource(ConfigResourceType.BROKER, "3")
    with pytest.raises(KafkaConfigError):
        ConfigResource.of(("nope", "x"))
    assert [AlterConfigOp("k", op=o).code() for o in ("set", "delete", "append", "subtract")] == [0, 1, 2, 3]
    with pytest.raises(KafkaConfigError):
        AlterConfigOp("k", op="merge").code()
