"""The client's topic watch (kafka_core/client/watch.py) over a scripted metadata source: a
topic not there yet is asked about at the retry backoff until it appears, then at the slow
refresh; deletion, recreation and growth are changes; a pattern takes new matches; a refused
topic is not hammered; a missing topic is warned about once, not per request."""

from __future__ import annotations

import asyncio
import logging
import re
import uuid
from typing import Any

import pytest

from kafka_core.client.metadata import ClusterMeta, PartitionMeta, TopicMeta
from kafka_core.client.watch import TopicView, TopicWatcher
from kafka_core.errors import KafkaConnectionError
from kafka_core.protocol.errors import ErrorCode

FAST = (10.0, 40.0)  # retry backoff ms: initial, max


class Cluster:
    """Topics by name: (partition count, id), or an error code; asks recorded."""

    def __init__(self) -> None:
        self.topics: dict[str, tuple[int, uuid.UUID]] = {}
        self.errors: dict[str, int] = {}
        self.asks: list[list[str] | None] = []
        self.down = False

    def create(self, name: str, partitions: int = 3) -> uuid.UUID:
        tid = uuid.uuid4()
        self.topics[name] = (partitions, tid)
        return tid

    async def metadata(self, names: list[str] | None) -> ClusterMeta:
        self.asks.append(names)
        if self.down:
            raise KafkaConnectionError("broker down")
        wanted = list(self.topics) if names is None else names
        out = []
        for n in wanted:
            if n in self.errors:
                out.append(TopicMeta(n, [], error_code=self.errors[n]))
            elif n in self.topics:
                count, tid = self.topics[n]
                out.append(TopicMeta(n, [PartitionMeta(p, 1) for p in range(count)], topic_id=tid))
            elif names is not None:
                out.append(TopicMeta(n, [], error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
        return ClusterMeta(brokers=[], topics=out)


async def _until(cond: Any, timeout: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not cond():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.005)


def test_missing_topic_is_asked_for_at_the_backoff_until_it_appears() -> None:
    async def run() -> tuple[list[TopicView], int, int]:
        cluster = Cluster()
        watcher = TopicWatcher(cluster.metadata, FAST)
        seen: list[TopicView] = []
        interest = watcher.watch(seen.append, topics=["late"], refresh_s=300)
        await asyncio.sleep(0.5)
        waiting = len(cluster.asks)
        tid = cluster.create("late", 3)
        await _until(lambda: seen)
        asks_at_appearance = len(cluster.asks)
        await asyncio.sleep(0.5)  # known now: the slow refresh (300 s), no more asking
        assert len(cluster.asks) == asks_at_appearance
        assert seen == [{"late": (3, tid)}] and interest.view == {"late": (3, tid)}
        watcher.close()
        return seen, waiting, asks_at_appearance

    _seen, waiting, _ = asyncio.run(run())
    # 0.5 s at a backoff growing from 10 to 40 ms: some tens of asks, not one per loop turn
    # (thousands) nor one per slow refresh (none).
    assert 5 <= waiting <= 60


def test_deleted_recreated_and_grown_topics_are_changes() -> None:
    async def run() -> list[TopicView]:
        cluster = Cluster()
        first = cluster.create("t", 2)
        watcher = TopicWatcher(cluster.metadata, FAST)
        seen: list[TopicView] = []
        watcher.watch(seen.append, topics=["t"], refresh_s=0.05, view={"t": (2, first)})
        await asyncio.sleep(0.2)
        assert seen == []  # what the owner knew: no change, no call
        del cluster.topics["t"]
        await _until(lambda: len(seen) == 1)
        second = cluster.create("t", 2)
        await _until(lambda: len(seen) == 2)
        cluster.topics["t"] = (4, second)
        await _until(lambda: len(seen) == 3)
        watcher.close()
        assert seen[1] == {"t": (2, second)} and second != first
        return seen

    seen = asyncio.run(run())
    assert seen[0] == {} and seen[2]["t"][0] == 4


def test_a_pattern_takes_new_matches_at_its_refresh() -> None:
    async def run() -> list[TopicView]:
        cluster = Cluster()
        cluster.create("other")
        watcher = TopicWatcher(cluster.metadata, FAST)
        seen: list[TopicView] = []
        watcher.watch(seen.append, pattern=re.compile(r"orders-.*"), refresh_s=0.05)
        await asyncio.sleep(0.2)
        assert seen == [] and all(a is None for a in cluster.asks)  # full requests only
        cluster.create("orders-eu")
        cluster.create("xorders-eu")  # the whole name must match
        await _until(lambda: seen)
        watcher.close()
        return seen

    [view] = asyncio.run(run())
    assert sorted(view) == ["orders-eu"]


def test_a_refused_topic_is_not_asked_for_at_the_fast_cadence() -> None:
    async def run() -> int:
        cluster = Cluster()
        cluster.errors["secret"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        watcher = TopicWatcher(cluster.metadata, FAST)
        watcher.watch(lambda view: None, topics=["secret"], refresh_s=300)
        await asyncio.sleep(0.5)
        watcher.close()
        return len(cluster.asks)

    assert asyncio.run(run()) == 1


def test_a_failing_cluster_is_asked_again_at_the_backoff_not_in_a_spin() -> None:
    async def run() -> tuple[int, list[TopicView]]:
        cluster = Cluster()
        cluster.down = True
        watcher = TopicWatcher(cluster.metadata, FAST)
        seen: list[TopicView] = []
        watcher.watch(seen.append, topics=["t"], refresh_s=0)
        await asyncio.sleep(0.5)
        asks = len(cluster.asks)
        tid = cluster.create("t", 1)
        cluster.down = False
        await _until(lambda: seen)
        watcher.close()
        assert seen == [{"t": (1, tid)}]
        return asks, seen

    asks, _ = asyncio.run(run())
    assert 5 <= asks <= 60


def test_a_missing_topic_is_warned_about_once_not_per_request(caplog: pytest.LogCaptureFixture) -> None:
    async def run() -> int:
        cluster = Cluster()
        watcher = TopicWatcher(cluster.metadata, FAST)
        seen: list[TopicView] = []
        watcher.watch(seen.append, topics=["late"], refresh_s=300)
        await asyncio.sleep(0.5)
        cluster.create("late")
        await _until(lambda: seen)
        watcher.close()
        return len(cluster.asks)

    with caplog.at_level(logging.INFO, logger="kafka_core.client.watch"):
        asks = asyncio.run(run())
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert asks > 5
    assert len(warnings) == 1 and "'late' does not exist (yet)" in warnings[0].getMessage()
    assert any("'late' is there now" in r.getMessage() for r in caplog.records)


def test_closed_interests_are_not_called_and_stop_the_asking() -> None:
    async def run() -> tuple[int, int, list[TopicView]]:
        cluster = Cluster()
        watcher = TopicWatcher(cluster.metadata, FAST)
        seen: list[TopicView] = []
        interest = watcher.watch(seen.append, topics=["late"], refresh_s=300)
        await asyncio.sleep(0.2)
        interest.close()
        await asyncio.sleep(0.05)
        before = len(cluster.asks)
        cluster.create("late")
        await asyncio.sleep(0.3)
        watcher.close()
        return before, len(cluster.asks), seen

    before, after, seen = asyncio.run(run())
    assert before == after and seen == []
