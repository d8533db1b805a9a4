"""The share consumer (KIP-932) against Apache Kafka: sharing, release/reject, redelivery after a
member dies, the delivery attempt limit, interoperation with confluent-kafka, bad input, and a
broker without share groups. Runs on Apache Kafka in every session (``real_kafka``)."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from fakes.share_kafka import share_setup
from prerequisites import need_module

from kafka_core import AcknowledgeType, KafkaProducer, KafkaShareConsumer
from kafka_core.aio import KafkaShareConsumer as AsyncShareConsumer
from kafka_core.devtools.brokers.kafka import KafkaCluster
from kafka_core.errors import KafkaClosedError
from kafka_core.share import KafkaAcknowledgementError, KafkaShareGroupsUnsupportedError

ROOT = Path(__file__).resolve().parents[2]
DEADLINE_S = 90.0


def test_three_members_share_one_partition_exactly_once(real_kafka: KafkaCluster) -> None:
    n = 300
    topic, group = share_setup(real_kafka, n)

    async def run() -> list[list[bytes]]:
        consumers = [
            AsyncShareConsumer(
                topic, bootstrap_servers=real_kafka.bootstrap, group_id=group, max_poll_records=20
            )
            for _ in range(3)
        ]
        got: list[list[bytes]] = [[], [], []]
        try:
            deadline = time.monotonic() + DEADLINE_S
            while sum(map(len, got)) < n and time.monotonic() < deadline:
                batches = await asyncio.gather(*(c.poll(300) for c in consumers))
                for i, recs in enumerate(batches):
                    got[i].extend(r.value for r in recs)
            for c in consumers:
                await c.commit_sync()
        finally:
            for c in consumers:
                await c.close()
        return got

    got = asyncio.run(run())
    union = [v for vs in got for v in vs]
    assert sorted(union, key=int) == [str(i).encode() for i in range(n)]  # every record exactly once


def test_release_comes_back_and_reject_never_does(real_kafka: KafkaCluster) -> None:
    topic, group = share_setup(real_kafka, 4)
    with KafkaShareConsumer(
        topic, bootstrap_servers=real_kafka.bootstrap, group_id=group, share_acknowledgement_mode="explicit"
    ) as c:
        first: dict[bytes, int] = {}
        deadline = time.monotonic() + DEADLINE_S
        while len(first) < 4 and time.monotonic() < deadline:
            for r in c.poll(500):
                first[r.value] = r.delivery_count
                c.acknowledge(r, {b"0": "release", b"1": AcknowledgeType.REJECT}.get(r.value, "accept"))
        assert first == {b"0": 1, b"1": 1, b"2": 1, b"3": 1}
        assert all(err is None for err in c.commit_sync().values())
        again = []
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            for r in c.poll(500):
                again.append((r.value, r.delivery_count))
                c.acknowledge(r)
            if again:
                c.commit_sync()
                # the released record came back once, counted; the rejected one stays away
                if time.monotonic() > deadline - 10:
                    break
        assert again == [(b"0", 2)]
        snap = c.metrics()["share"]
        assert snap["records_released"] == 1 and snap["records_rejected"] == 1
        assert snap["records_redelivered"] == 1


def test_delivery_attempt_limit_archives_a_failing_record(real_kafka: KafkaCluster) -> None:
    topic, group = share_setup(real_kafka, 1, {"share.delivery.count.limit": "2"})
    counts = []
    with KafkaShareConsumer(
        topic, bootstrap_servers=real_kafka.bootstrap, group_id=group, share_acknowledgement_mode="explicit"
    ) as c:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            for r in c.poll(500):
                counts.append(r.delivery_count)
                c.acknowledge(r, AcknowledgeType.RELEASE)  # the record keeps failing
            c.commit_sync()
    assert counts == [1, 2]  # archived at the limit: never delivered a third time


HOLDER = textwrap.dedent(
    """
    import sys, time
    from kafka_core import KafkaShareConsumer
    c = KafkaShareConsumer(sys.argv[2], bootstrap_servers=sys.argv[1], group_id=sys.argv[3],
                           share_acknowledgement_mode="explicit")
    held = []
    while not held:
        held = c.poll(500)
    print(" ".join(r.value.decode() for r in held), flush=True)
    time.sleep(600)
    """
)


def test_records_of_a_killed_member_go_to_another_after_the_lock(real_kafka: KafkaCluster) -> None:
    topic, group = share_setup(real_kafka, 5, {"share.record.lock.duration.ms": "15000"})
    child = subprocess.Popen(
        [sys.executable, "-c", HOLDER, real_kafka.bootstrap, topic, group],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        assert child.stdout is not None
        held = set(child.stdout.readline().split())
        assert held, "the child got no records"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    seen: dict[str, int] = {}
    with KafkaShareConsumer(topic, bootstrap_servers=real_kafka.bootstrap, group_id=group) as c:
        deadline = time.monotonic() + DEADLINE_S
        while not held <= set(seen) and time.monotonic() < deadline:
            for r in c.poll(500):
                seen[r.value.decode()] = r.delivery_count
    assert held <= set(seen)
    assert all(seen[v] >= 2 for v in held)  # delivered again, counted
    assert set(seen) == {str(i) for i in range(5)}


def test_kafka_core_and_confluent_share_the_work(real_kafka: KafkaCluster) -> None:
    confluent_kafka = need_module("confluent_kafka")
    n = 400
    topic, group = share_setup(real_kafka, 0)
    ours = KafkaShareConsumer(
        topic, bootstrap_servers=real_kafka.bootstrap, group_id=group, max_poll_records=10
    )
    theirs = confluent_kafka.ShareConsumer({"bootstrap.servers": real_kafka.bootstrap, "group.id": group})
    theirs.subscribe([topic])
    got_ours: list[bytes] = []
    got_theirs: list[bytes] = []
    sent = 0
    try:
        with KafkaProducer(bootstrap_servers=real_kafka.bootstrap) as producer:
            deadline = time.monotonic() + DEADLINE_S
            while len(got_ours) + len(got_theirs) < n and time.monotonic() < deadline:
                if sent < n:
                    for _ in range(20):
                        producer.send(topic, value=str(sent).encode())
                        sent += 1
                    producer.flush()
                got_ours.extend(r.value for r in ours.poll(200))
                got_theirs.extend(m.value() for m in theirs.poll(0.2) if m.error() is None)
            ours.commit_sync()
            theirs.commit_sync()
    finally:
        ours.close()
        theirs.close()
    both = got_ours + got_theirs
    assert len(both) == len(set(both))  # no record accepted twice
    assert sorted(both, key=int) == [str(i).encode() for i in range(n)]  # none lost
    assert got_ours and got_theirs  # both members did work


def test_bad_acknowledgements_are_clear_errors_and_lose_nothing(real_kafka: KafkaCluster) -> None:
    topic, group = share_setup(real_kafka, 3)
    c = KafkaShareConsumer(
        topic, bootstrap_servers=real_kafka.bootstrap, group_id=group, share_acknowledgement_mode="explicit"
    )
    recs: list[Any] = []
    deadline = time.monotonic() + DEADLINE_S
    while not recs and time.monotonic() < deadline:
        recs = c.poll(500)
    assert recs
    with pytest.raises(KafkaAcknowledgementError, match="not acknowledged"):
        c.poll(100)  # explicit mode: the last poll's records first
    stranger = type(recs[0])(topic, 0, 10_000)
    with pytest.raises(KafkaAcknowledgementError, match="not delivered to this consumer"):
        c.acknowledge(stranger)
    with pytest.raises(ValueError, match="acknowledgement type"):
        c.acknowledge(recs[0], "maybe")
    c.acknowledge(recs[0], "accept")
    with pytest.raises(KafkaAcknowledgementError, match="already acknowledged"):
        c.acknowledge(recs[0], "reject")
    for r in recs[1:]:
        c.acknowledge(r, "release")
    assert all(err is None for err in c.commit_sync().values())
    c.close()
    with pytest.raises(KafkaClosedError):
        c.acknowledge(recs[0])
    # nothing lost: the released records are delivered again
    with KafkaShareConsumer(topic, bootstrap_servers=real_kafka.bootstrap, group_id=group) as other:
        again: list[bytes] = []
        deadline = time.monotonic() + DEADLINE_S
        want = sorted(r.value for r in recs[1:])
        while sorted(again) != want and time.monotonic() < deadline:
            again.extend(r.value for r in other.poll(500))
        assert sorted(again) == want


def test_columnar_poll_and_batch_acknowledgement(real_kafka: KafkaCluster) -> None:
    topic, group = share_setup(real_kafka, 6)
    with KafkaShareConsumer(
        topic, bootstrap_servers=real_kafka.bootstrap, group_id=group, share_acknowledgement_mode="explicit"
    ) as c:
        batch = None
        deadline = time.monotonic() + DEADLINE_S
        while batch is None and time.monotonic() < deadline:
            batch = c.poll_columns(500)
        assert batch is not None
        assert set(batch.column("delivery_count").to_pylist()) == {1}
        c.acknowledge_batch(batch, "release", rows=[0])
        c.acknowledge_batch(batch, "accept", rows=range(1, batch.num_rows))
        with pytest.raises(KafkaAcknowledgementError):
            c.acknowledge_batch(batch, "accept", rows=[0])
        c.commit_sync()
        first = batch.column("value")[0].as_py()
        again = None
        deadline = time.monotonic() + DEADLINE_S
        while again is None and time.monotonic() < deadline:
            again = c.poll_columns(500)
        assert again is not None
        rows = again.to_pylist()
        assert any(r["value"] == first and r["delivery_count"] == 2 for r in rows)
        c.acknowledge_batch(again)


def test_from_config_takes_java_names(real_kafka: KafkaCluster) -> None:
    topic, group = share_setup(real_kafka, 1)
    c = KafkaShareConsumer.from_config(
        {
            "bootstrap.servers": real_kafka.bootstrap,
            "group.id": group,
            "share.acknowledgement.mode": "explicit",
        },
        topics=[topic],
    )
    try:
        assert c.subscription() == [topic]
        recs: list[Any] = []
        deadline = time.monotonic() + DEADLINE_S
        while not recs and time.monotonic() < deadline:
            recs = c.poll(500)
        c.acknowledge(recs[0])
        c.commit_sync()
    finally:
        c.close()


def test_a_broker_without_share_groups_says_so(tansu: Any) -> None:
    from kafka_core.devtools.brokers.tansu import TansuBroker

    broker = tansu
    own = None
    if broker is None:
        own = broker = TansuBroker().start()
    try:
        c = KafkaShareConsumer("t", bootstrap_servers=broker.bootstrap, group_id="g")
        try:
            with pytest.raises(KafkaShareGroupsUnsupportedError, match=re.escape("KIP-932")):
                c.poll(5_000)
        finally:
            c.close()
    finally:
        if own is not None:
            own.close()


def test_the_guide_example_runs(real_kafka: KafkaCluster) -> None:
    text = (ROOT / "docs" / "share-groups.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert blocks
    for code in blocks:
        code = code.replace("127.0.0.1:9092", real_kafka.bootstrap)
        done = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            timeout=180,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        assert done.returncode == 0, done.stderr[-3000:]
