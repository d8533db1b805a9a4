"""The operators' commands of ``kafka-core`` (transactions, partitions, cluster) run as a user's
shell would, against Apache Kafka (``real_kafka``): a transaction left open is found by its
producer's state and aborted by its start offset, after which read_committed readers go on.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator

import pytest
from fakes.cli import ok, one_error_line, run
from fakes.timing import wait_until
from fakes.topics import wait_writable

from kafka_core import KafkaAdmin, KafkaProducer, TopicPartition
from kafka_core.client import KafkaClient
from kafka_core.devbroker import KafkaCluster

pytestmark = [pytest.mark.broker, pytest.mark.timeout(240)]


@pytest.fixture
def kafka(real_kafka: KafkaCluster) -> Iterator[KafkaCluster]:
    yield real_kafka


def new_topic(kafka: KafkaCluster, partitions: int = 1) -> str:
    name = f"clitx-{uuid.uuid4().hex[:10]}"
    kafka.create_topic(name, partitions)
    wait_writable(kafka.bootstrap, name, partitions)
    return name


def test_an_open_transaction_is_shown_and_aborted_from_the_command_line(kafka: KafkaCluster) -> None:
    topic = new_topic(kafka)
    tid = f"cli-open-{uuid.uuid4().hex[:8]}"
    servers = kafka.bootstrap
    with KafkaProducer(servers, transactional_id=tid, transaction_timeout_ms=120_000) as producer:
        producer.init_transactions(30)
        producer.begin_transaction()
        producer.send(topic, b"open", partition=0).result(30)
        pid, _ = producer.producer_id_and_epoch

        listed = json.loads(ok(run("transactions", "list", "--state", "Ongoing", "--json", servers=servers)))
        assert {"transactional_id": tid, "producer_id": pid, "state": "Ongoing"} in listed
        described = json.loads(ok(run("transactions", "describe", tid, "--json", servers=servers)))
        assert described[0]["state"] == "Ongoing" and described[0]["partitions"] == [[topic, 0]]
        table = ok(run("transactions", "describe", tid, servers=servers))
        assert tid in table and "Ongoing" in table and f"{topic}-0" in table
        missing = run("transactions", "describe", f"nope-{tid}", servers=servers)
        assert missing.returncode == 4 and "does not exist" in one_error_line(missing)

        producers = json.loads(
            ok(run("transactions", "producers", "-t", topic, "-p", "0", "--json", servers=servers))
        )
        assert [p["current_txn_start_offset"] for p in producers if p["producer_id"] == pid] == [0]
        hanging = run(
            "transactions", "find-hanging", "-t", topic, "--max-transaction-timeout", "0", servers=servers
        )
        assert ok(hanging).strip() == "no hanging transactions"  # its coordinator will finish it

        wrong = run("transactions", "abort", "-t", topic, "-p", "0", "--start-offset", "5", servers=servers)
        assert wrong.returncode == 1 and "INVALID_TXN_STATE" in one_error_line(wrong)
        usage = run("transactions", "abort", "-t", topic, "-p", "0", "--producer-id", "3", servers=servers)
        assert usage.returncode == 2
        aborted = run("transactions", "abort", "-t", topic, "-p", "0", "--start-offset", "0", servers=servers)
        assert (
            ok(aborted).strip()
            == f"aborted producer {pid} (epoch {producer.producer_id_and_epoch[1]})'s transaction on {topic}-0"
        )
        with KafkaAdmin(servers) as admin:
            tp = TopicPartition(topic, 0)
            stable = admin.list_offsets({tp: "latest"}, isolation_level="read_committed")[tp].result()
            assert stable.offset == 2
        producer.abort_transaction(30)


def test_partitions_and_cluster_commands(kafka: KafkaCluster) -> None:
    topic = new_topic(kafka, 2)
    servers = kafka.bootstrap
    node = kafka.nodes[0].node_id

    quorum = json.loads(ok(run("cluster", "quorum", "--json", servers=servers)))
    assert quorum["leader_id"] == node and quorum["replicas"][0]["role"] == "leader"
    assert f"leader {node}" in ok(run("cluster", "quorum", servers=servers))
    features = json.loads(ok(run("cluster", "features", "--json", servers=servers)))
    assert "metadata.version" in {f["feature"] for f in features["features"]}

    dirs = json.loads(ok(run("partitions", "log-dirs", "-t", topic, "--json", servers=servers)))
    assert sorted((r["topic"], r["partition"]) for d in dirs for r in d["replicas"]) == [
        (topic, 0),
        (topic, 1),
    ]

    elected = json.loads(ok(run("partitions", "elect", f"{topic}:0", "--json", servers=servers)))
    assert elected == [{"topic": topic, "partition": 0, "status": "not needed", "error": None}]
    missing = run("partitions", "elect", f"{topic}:9", servers=servers)
    assert missing.returncode == 4 and "UNKNOWN_TOPIC_OR_PARTITION" in one_error_line(missing)

    # On one node a partition can only be "moved" to where it is: taken and done at once.
    moved = run("partitions", "reassign", f"{topic}:1={node}", "--wait", "30", servers=servers)
    assert ok(moved).splitlines() == [f"{topic}:1 reassignment started", "reassignments done"]
    assert ok(run("partitions", "reassignments", servers=servers)).strip() == "no reassignments under way"
    cancel = run("partitions", "cancel", f"{topic}:1", servers=servers)
    assert cancel.returncode == 1 and "NO_REASSIGNMENT_IN_PROGRESS" in one_error_line(cancel)
    bad = run("partitions", "reassign", f"{topic}=1", servers=servers)
    assert bad.returncode == 2


def test_scram_users_and_quotas_from_the_command_line(kafka: KafkaCluster) -> None:
    servers = kafka.bootstrap
    user = f"cli-{uuid.uuid4().hex[:8]}"
    password = f"pw-{uuid.uuid4().hex}"
    made = run(
        "users", "set-password", user, "--mechanism", "SCRAM-SHA-256", "--password-stdin",
        servers=servers, stdin=password.encode() + b"\n",
    )  # fmt: skip
    assert ok(made).strip() == f"SCRAM-SHA-256 password of {user} set"
    assert password.encode() not in made.stdout + made.stderr
    no_tty = run("users", "set-password", user, servers=servers, stdin=b"")
    assert no_tty.returncode == 2 and "--password-stdin" in one_error_line(no_tty)

    def listed() -> list[dict[str, object]]:
        proc = run("users", "list", user, "--json", servers=servers)
        return json.loads(proc.stdout) if proc.returncode == 0 else []

    assert wait_until(
        lambda: (
            listed() == [{"user": user, "credentials": [{"mechanism": "SCRAM-SHA-256", "iterations": 8192}]}]
        ),
        30,
    )

    async def sign_in() -> None:
        async with KafkaClient(
            kafka.listeners["SASL_PLAINTEXT"],
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="SCRAM-SHA-256",
            sasl_username=user,
            sasl_password=password,
            api_timeout_ms=15_000,
        ) as client:
            await client.metadata([])

    asyncio.run(sign_in())
    assert ok(run("users", "delete", user, servers=servers)).strip() == f"{user}: SCRAM-SHA-256 deleted"
    assert wait_until(lambda: run("users", "list", user, servers=servers).returncode == 4, 30)

    alter = run("quotas", "alter", "--user", user, "--set", "producer_byte_rate=1048576", servers=servers)
    assert ok(alter).strip() == f"quotas of user={user} altered"

    def quotas() -> list[dict[str, object]]:
        return json.loads(ok(run("quotas", "describe", "--user", user, "--json", servers=servers)))

    assert wait_until(
        lambda: quotas() == [{"entity": {"user": user}, "quotas": {"producer_byte_rate": 1048576.0}}], 30
    )
    bad = run("quotas", "alter", "--user", user, "--set", "no_such_quota=1", servers=servers)
    assert bad.returncode == 1 and "INVALID_REQUEST" in one_error_line(bad)
    ok(run("quotas", "alter", "--user", user, "--remove", "producer_byte_rate", servers=servers))
    assert wait_until(lambda: quotas() == [], 30)
    assert run("quotas", "alter", "--user", user, servers=servers).returncode == 2
