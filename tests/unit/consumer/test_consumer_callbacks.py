"""Rebalance callbacks in the application's thread (sync face) and poll timeouts during a join."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

from fakes.consumer_client import FakeGroupClient
from fakes.consumer_helpers import TP0, TP1, T, fill, run

from kafka_core._sync import LoopThread
from kafka_core.consumer.consumer import KafkaConsumer as AsyncConsumer
from kafka_core.consumer.sync import KafkaConsumer
from kafka_core.errors import KafkaClosedError

GROUP = dict(group_id="g", fetch_max_wait_ms=20, session_timeout_ms=1_000, heartbeat_interval_ms=20)


def test_poll_returns_at_its_timeout_while_the_join_goes_on() -> None:
    client = FakeGroupClient({T: 1})
    fill(client, 0, 5)
    client.join_delay = 1.0

    async def main() -> tuple[list, bool, list]:
        c = AsyncConsumer(topics=[T], client=client, auto_offset_reset="earliest", **GROUP)
        first = await c.poll(20)
        # Not a member yet, and the join was not cut short: it goes on in the background.
        joining = c.group_metadata().generation_id == -1 and len(client.joins) == 1
        got: list = []
        for _ in range(200):
            got.extend(await c.poll(20))
            if len(got) >= 5:
                break
        await c.close()
        return first, joining, got

    first, joining, got = run(main())
    assert first == [] and joining
    assert [m.offset for m in got] == list(range(5))
    assert client.generation == 1  # one join, not restarted by each poll


def _sync_consumer(client: FakeGroupClient, loop_thread: LoopThread, **kw: Any) -> KafkaConsumer:
    sync_client = SimpleNamespace(loop_thread=loop_thread, async_object=client)
    return KafkaConsumer(topics=[T], client=sync_client, auto_offset_reset="earliest", **GROUP, **kw)


def test_sync_callbacks_run_in_the_polling_thread_and_may_block() -> None:
    client = FakeGroupClient({T: 2})
    fill(client, 0, 10)
    fill(client, 1, 10)
    loop_thread = LoopThread()
    events: list[tuple[Any, ...]] = []
    me = threading.get_ident()
    joins_during_revoke: list[int] = []
    c: KafkaConsumer

    def on_assign(tps: set) -> None:
        events.append(("assign", sorted(tps), threading.get_ident()))
        if TP0 in tps:
            c.seek(TP0, 7)  # blocking consumer method, from the callback

    def on_revoke(tps: set) -> None:
        events.append(("revoke", sorted(tps), threading.get_ident()))
        c.commit({TP1: 4})  # blocking commit inside the revocation, before the rejoin
        events.append(("committed", c.committed([TP1])))
        joins_during_revoke.append(len(client.joins))

    try:
        c = _sync_consumer(client, loop_thread, on_assign=on_assign, on_revoke=on_revoke)
        got: list = []
        for _ in range(200):
            got.extend(c.poll(20))
            if len(got) >= 13:
                break
        assert sorted((m.partition, m.offset) for m in got if m.partition == 0) == [
            (0, i) for i in range(7, 10)
        ]
        # A rebalance (eager): revoke, with its commit, completes before the member rejoins.
        joins_before = len(client.joins)
        client.heartbeat_errors = [27]  # REBALANCE_IN_PROGRESS
        for _ in range(300):
            c.poll(20)
            if sum(e[0] == "assign" for e in events) >= 2:
                break
        c.close()
    finally:
        loop_thread.stop()
    kinds = [e[0] for e in events]
    assert kinds[:4] == ["assign", "revoke", "committed", "assign"], events
    assert all(e[2] == me for e in events if e[0] in ("assign", "revoke"))
    assert events[2] == ("committed", {TP1: 4})
    assert len(client.joins) > joins_before
    assert joins_during_revoke[0] == joins_before  # no JoinGroup sent until the callback returned
    assert kinds[-2:] == ["revoke", "committed"]  # close: on_revoke ran here too


def test_close_from_another_thread_ends_a_polling_thread() -> None:
    client = FakeGroupClient({T: 1})
    fill(client, 0, 3)
    loop_thread = LoopThread()
    revoked_in: list[int] = []
    outcome: list[BaseException] = []
    c = _sync_consumer(client, loop_thread, on_revoke=lambda tps: revoked_in.append(threading.get_ident()))

    def poll_forever() -> None:
        try:
            while True:
                c.poll(20)
        except BaseException as exc:
            outcome.append(exc)

    try:
        worker = threading.Thread(target=poll_forever, daemon=True)
        worker.start()
        for _ in range(500):
            if c.assignment():
                break
            threading.Event().wait(0.01)
        c.close()
        worker.join(10)
        alive = worker.is_alive()
    finally:
        loop_thread.stop()
    assert not alive and isinstance(outcome[0], KafkaClosedError)
    assert len(revoked_in) == 1  # on_revoke ran once, in one of the application's threads
