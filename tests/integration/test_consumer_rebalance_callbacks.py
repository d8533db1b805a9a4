"""Sync rebalance callbacks run in the polling thread, so they may call the blocking consumer.

Tansu answers JoinGroup after about half the session timeout, so these use 6 s sessions.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from test_consumer import drain, produce
from test_consumer_group import Poller, member, parked_joins, wait_until

from kafka_core.client.metadata import TopicPartition
from kafka_core.consumer.sync import KafkaConsumer

pytestmark = [pytest.mark.broker, pytest.mark.timeout(240)]


def test_sync_callbacks_commit_and_seek(bootstrap_servers: str, new_topic: Callable[..., str]) -> None:
    topic = new_topic(2)
    group = f"g-{uuid.uuid4().hex[:8]}"
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    produce(bootstrap_servers, topic, 20, partitions=2)  # offsets 0..9 in each partition
    log: list[tuple[Any, ...]] = []
    a: KafkaConsumer

    def on_assign(tps: set) -> None:
        log.append(("assign", frozenset(tps), threading.get_ident()))
        if sum(e[0] == "assign" for e in log) == 1:
            for tp in tps:
                a.seek(tp, 5)  # the first assignment starts half way

    def on_revoke(tps: set) -> None:
        a.commit()  # auto-commit is off: only this stores the offsets
        log.append(("revoke", frozenset(tps), threading.get_ident(), a.committed(sorted(tps))))

    a = KafkaConsumer(
        bootstrap_servers=bootstrap_servers,
        topics=[topic],
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=6_000,
        heartbeat_interval_ms=500,
        assignors=("range",),
        on_assign=on_assign,
        on_revoke=on_revoke,
    )
    main = threading.get_ident()
    got = drain(a, 10)
    assert sorted((m.partition, m.offset) for m in got) == [(p, o) for p in (0, 1) for o in range(5, 10)]
    # A second member joins: a's revocation (with its commit) runs in a's polling thread.
    pa = Poller(a)
    events: list = []
    b = member(bootstrap_servers, topic, group, events, "b")
    pb = Poller(b)
    try:
        assert wait_until(lambda: bool(b.assignment()) and bool(a.assignment()) and len(log) >= 3), log
    finally:
        pa.stop()
        pb.stop()
        b.close()
    a.close()  # on_revoke again, in this thread
    assert log[0][:3] == ("assign", frozenset({tp0, tp1}), main)
    kind, revoked, thread, committed = log[1]
    assert (kind, revoked, thread) == ("revoke", frozenset({tp0, tp1}), pa._thread.ident)
    assert committed == {tp0: 10, tp1: 10}
    assert log[2][0] == "assign" and log[2][2] == pa._thread.ident
    last = log[-1]
    assert last[0] == "revoke" and last[2] == main
    assert all(v == 10 for v in last[3].values())
    # b started from what a's callback committed: nothing below offset 10 came to b.
    assert all(m.offset >= 10 for m in pb.messages)


def test_poll_returns_at_timeout_during_a_join(
    bootstrap_servers: str, new_topic: Callable[..., str], on_tansu: bool
) -> None:
    """While the broker holds the JoinGroup (parked_joins), a short poll returns empty."""
    topic = new_topic(1)
    group = f"g-{uuid.uuid4().hex[:8]}"
    with parked_joins(bootstrap_servers, topic, group, on_tansu):
        produce(bootstrap_servers, topic, 3, partitions=1)
        c = KafkaConsumer(
            bootstrap_servers=bootstrap_servers,
            topics=[topic],
            group_id=group,
            auto_offset_reset="earliest",
            session_timeout_ms=6_000,
            heartbeat_interval_ms=500,
        )
        try:
            empty_while_joining = 0
            got: list = []
            deadline = time.monotonic() + 60
            while len(got) < 3 and time.monotonic() < deadline:
                batch = c.poll(50)
                if not batch and c.group_metadata().generation_id == -1:  # still joining
                    empty_while_joining += 1
                got.extend(batch)
            assert [m.offset for m in got] == [0, 1, 2]
            assert empty_while_joining >= 1
        finally:
            c.close()
