"""The operators' admin calls against a scripted client (no broker): which open transactions
find_hanging_transactions reports and why, the checks made before anything is sent, and
secrets kept out of reprs and of what is sent."""

from __future__ import annotations

import asyncio
import hashlib
import time
from typing import Any

import pytest
from test_admin_results import FakeClient, make_admin, run

from kafka_core.admin import ClientQuotaEntity, DelegationToken, FeatureUpdate, ScramUpsertion, TopicPartition
from kafka_core.client.metadata import BrokerMeta, ClusterMeta, PartitionMeta, TopicMeta
from kafka_core.errors import KafkaConfigError, KafkaTimeoutError
from kafka_core.protocol.messages import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    DescribeProducersRequest,
    DescribeProducersResponse,
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    ElectLeadersResponse,
    ListTransactionsRequest,
    ListTransactionsResponse,
)

pytestmark = pytest.mark.timeout(30)

HOUR_MS = 3_600_000


def _producer(pid: int, start: int, age_ms: int) -> Any:
    cls = DescribeProducersResponse.ProducerState
    return cls(
        producer_id=pid,
        producer_epoch=3,
        last_sequence=0,
        last_timestamp=int(time.time() * 1000) - age_ms,
        coordinator_epoch=1,
        current_txn_start_offset=start,
    )


def _txn_broker(node: int, body: Any) -> Any:
    """Partition 0: pid 7 (no coordinator knows it), pid 8 (Ongoing, owns t-0), pid 5 (open a
    minute only); partition 1: pid 9 (its transactional id is Empty), pid 10 (none open)."""
    if isinstance(body, DescribeProducersRequest):
        part = DescribeProducersResponse.PartitionResponse
        states = {
            0: [_producer(7, 10, HOUR_MS), _producer(8, 20, HOUR_MS), _producer(5, 30, 60_000)],
            1: [_producer(9, 40, HOUR_MS), _producer(10, -1, HOUR_MS)],
        }
        return DescribeProducersResponse(
            topics=[
                DescribeProducersResponse.TopicResponse(
                    name=t.name,
                    partitions=[
                        part(partition_index=p, error_code=0, error_message=None, active_producers=states[p])
                        for p in t.partition_indexes
                    ],
                )
                for t in body.topics
            ]
        )
    if isinstance(body, ListTransactionsRequest):
        known = {8: ("t8", "Ongoing"), 9: ("t9", "Empty")}
        state = ListTransactionsResponse.TransactionState
        return ListTransactionsResponse(
            error_code=0,
            unknown_state_filters=[],
            transaction_states=[
                state(transactional_id=known[p][0], producer_id=p, transaction_state=known[p][1])
                for p in body.producer_id_filters
                if p in known and node == 1
            ],
        )
    if isinstance(body, DescribeTransactionsRequest):
        st = DescribeTransactionsResponse.TransactionState
        topic = DescribeTransactionsResponse.TopicData
        out = {
            "t8": st(
                error_code=0,
                transactional_id="t8",
                transaction_state="Ongoing",
                transaction_timeout_ms=60_000,
                transaction_start_time_ms=1,
                producer_id=8,
                producer_epoch=3,
                topics=[topic(topic="t", partitions=[0])],
            ),
            "t9": st(
                error_code=0,
                transactional_id="t9",
                transaction_state="Empty",
                transaction_timeout_ms=60_000,
                transaction_start_time_ms=-1,
                producer_id=9,
                producer_epoch=3,
                topics=[],
            ),
        }
        return DescribeTransactionsResponse(transaction_states=[out[t] for t in body.transactional_ids])
    raise AssertionError(f"unexpected {type(body).__name__}")


def test_find_hanging_reports_what_no_coordinator_will_finish_and_why() -> None:
    client = FakeClient(_txn_broker)
    client.meta = ClusterMeta(
        brokers=[BrokerMeta(1, "h", 1), BrokerMeta(2, "h", 2)],
        topics=[TopicMeta("t", [PartitionMeta(0, 1, (1, 2)), PartitionMeta(1, 2, (2, 1))])],
    )
    admin = make_admin(client)
    found = run(admin.find_hanging_transactions(topics=["t"]))
    by_pid = {h.producer_id: h for h in found}
    assert sorted(by_pid) == [7, 9]  # 8 is owned by its coordinator, 5 too young, 10 has none open
    assert by_pid[7].transactional_id is None and "no transaction coordinator knows" in by_pid[7].reason
    assert (by_pid[7].topic, by_pid[7].partition, by_pid[7].start_offset) == ("t", 0, 10)
    assert by_pid[9].transactional_id == "t9" and "state Empty" in by_pid[9].reason
    assert (by_pid[9].partition, by_pid[9].start_offset, by_pid[9].coordinator_epoch) == (1, 40, 1)
    # a minute's limit takes in pid 5's transaction, whom no coordinator knows either
    young = run(admin.find_hanging_transactions([TopicPartition("t", 0)], max_transaction_timeout_ms=30_000))
    assert sorted(h.producer_id for h in young) == [5, 7]


def test_calls_refuse_bad_input_before_sending_anything() -> None:
    client = FakeClient(lambda node, body: ElectLeadersResponse())
    admin = make_admin(client)
    with pytest.raises(KafkaConfigError):
        run(admin.find_hanging_transactions())
    with pytest.raises(KafkaConfigError):
        run(admin.abort_transaction(("t", 0), start_offset=1, producer_id=2))
    with pytest.raises(KafkaConfigError):
        run(admin.abort_transaction(("t", 0), producer_id=2, producer_epoch=1))
    with pytest.raises(KafkaConfigError):
        run(admin.alter_partition_reassignments({("t", 0): []}))
    with pytest.raises(KafkaConfigError):
        run(admin.elect_leaders("clean"))
    with pytest.raises(KafkaConfigError):
        run(admin.update_features({"metadata.version": FeatureUpdate(7, "down")}))
    with pytest.raises(KafkaConfigError):
        run(admin.alter_user_scram_credentials([ScramUpsertion("u", "pw", "SCRAM-MD5")]))
    with pytest.raises(KafkaConfigError):
        run(admin.alter_user_scram_credentials([ScramUpsertion("u", "pw", iterations=100)]))
    with pytest.raises(KafkaConfigError):
        run(admin.create_delegation_token(renewers=["alice"]))
    with pytest.raises(KafkaConfigError):
        ClientQuotaEntity.of({})
    assert client.sent == []


def test_a_scram_password_is_sent_only_salted_and_hashed() -> None:
    sent: list[Any] = []

    def broker(node: int, body: Any) -> Any:
        sent.append(body)
        result = AlterUserScramCredentialsResponse.AlterUserScramCredentialsResult
        return AlterUserScramCredentialsResponse(
            results=[result(user="etl", error_code=0, error_message=None)]
        )

    admin = make_admin(FakeClient(broker))
    secret = "correct horse battery staple"
    change = ScramUpsertion("etl", secret, "SCRAM-SHA-256", iterations=4096)
    assert secret not in repr(change)
    assert run(admin.alter_user_scram_credentials([change]))["etl"].ok
    (body,) = sent
    assert isinstance(body, AlterUserScramCredentialsRequest)
    (up,) = body.upsertions
    assert (up.name, up.mechanism, up.iterations, len(up.salt)) == ("etl", 1, 4096, 32)
    assert up.salted_password == hashlib.pbkdf2_hmac("sha256", secret.encode(), up.salt, 4096)
    assert secret.encode() not in body.encode(0)


def test_a_delegation_tokens_hmac_is_not_in_its_repr() -> None:
    token = DelegationToken("id-1", b"\x01secret-hmac", "User:a", "User:a", [], 1, 2, 3)
    assert "secret-hmac" not in repr(token) and "id-1" in repr(token)


def test_a_named_replica_that_holds_no_copy_is_answered_at_once() -> None:
    def broker(node: int, body: Any) -> Any:
        part = DescribeProducersResponse.PartitionResponse
        return DescribeProducersResponse(
            topics=[
                DescribeProducersResponse.TopicResponse(
                    name="t",
                    partitions=[
                        part(partition_index=0, error_code=6, error_message=None, active_producers=[])
                    ],
                )
            ]
        )

    client = FakeClient(broker)
    admin = make_admin(client)
    res = run(admin.describe_producers([("t", 0)], broker_id=2, timeout_ms=20_000))[TopicPartition("t", 0)]
    # asked once, of the broker named, not again until the deadline
    assert res.error.name == "NOT_LEADER_OR_FOLLOWER"
    assert [node for node, _ in client.sent] == [2]


def test_a_call_returns_its_timeout_error_when_nothing_answers() -> None:
    class Silent(FakeClient):
        async def send(self, node_id: int, body: Any, version: int | None = None, **_: Any) -> Any:
            self.sent.append((node_id, body))
            await asyncio.Event().wait()  # a broker that never answers

    admin = make_admin(Silent(lambda node, body: None))
    res = run(admin.describe_transactions(["t1"], timeout_ms=300))["t1"]
    assert isinstance(res.error, KafkaTimeoutError) and "describe_transactions" in str(res.error)
    moved = run(admin.alter_partition_reassignments({("t", 0): [1]}, timeout_ms=300))[TopicPartition("t", 0)]
    assert isinstance(moved.error, KafkaTimeoutError)
