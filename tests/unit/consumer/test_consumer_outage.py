"""The consumer through outages: it resumes by itself, says why it is stuck, honours its timeouts.

The outage tests use the in-memory client of fakes.consumer_client with a switch that makes every
lookup and fetch fail as a refused connection does. The fail-fast tests use real sockets: a
closed port and a black-hole listener (accepts, never answers). Bounds are asserted with 3 s of
slack: they check that a timeout was honoured, never how fast anything is.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest
from fakes import timing
from fakes.consumer_client import FakeClient, FakeGroupClient

import kafka_core
from kafka_core.aio import KafkaConsumer as AioConsumer
from kafka_core.consumer.consumer import KafkaConsumer
from kafka_core.errors import (
    KafkaConfigError,
    KafkaConnectionError,
    KafkaError,
    KafkaProtocolError,
    KafkaTimeoutError,
)

T = "t"
SLACK = 3.0
REFUSED = "cannot connect to 127.0.0.1:9: [Errno 111] Connect call failed ('127.0.0.1', 9)"


def run(coro: Any, timeout: float = 60) -> Any:
    return asyncio.run(asyncio.wait_for(coro, timeout))


def fill(client: FakeClient, partition: int, n: int, start: int = 0) -> None:
    client.log(T, partition).append([(None, b"v%d-%d" % (partition, i), []) for i in range(start, start + n)])


class OutageClient(FakeClient):
    """While ``down``, every request fails as against a broker whose port refuses connections."""

    def __init__(self, partitions: dict[str, int]) -> None:
        super().__init__(partitions)
        self.down = False
        self.lookups_failed = 0

    async def leader_for(self, topic: str, partition: int, *, timeout_ms: float | None = None) -> int:
        if self.down:
            self.lookups_failed += 1
            await asyncio.sleep(0.01)
            raise KafkaTimeoutError(
                f"leader lookup for {topic}-{partition} did not succeed within 5.0s; last error: {REFUSED}"
            )
        return 1

    async def send(self, node: int, body: Any, version: int | None = None, **kw: Any) -> Any:
        if self.down:
            await asyncio.sleep(0.01)
            raise KafkaConnectionError(REFUSED)
        return await super().send(node, body, version, **kw)

    async def list_offsets(self, timestamps: dict, **kw: Any) -> dict:
        if self.down:
            raise KafkaTimeoutError(f"list offsets did not succeed; last error: {REFUSED}")
        return await super().list_offsets(timestamps, **kw)


async def poll_until(c: KafkaConsumer, n: int, seconds: float, *, tolerate: bool = False) -> list[Any]:
    """Poll until ``n`` records came; ``tolerate``: an outage report may still come meanwhile."""
    out: list[Any] = []
    deadline = time.monotonic() + seconds
    while len(out) < n and time.monotonic() < deadline:
        try:
            out.extend(await c.poll(100))
        except KafkaConnectionError:
            if not tolerate:
                raise
    return out


async def timed_poll(c: KafkaConsumer, timeout_ms: int) -> tuple[list[Any] | BaseException, float]:
    started = time.monotonic()
    try:
        got: list[Any] | BaseException = await c.poll(timeout_ms)
    except KafkaError as exc:
        got = exc
    return got, time.monotonic() - started


# -- the defect: a consumer that stopped for good after an outage --------------------------------


def test_consumer_resumes_after_an_outage_that_failed_every_leader_lookup() -> None:
    client = OutageClient({T: 2})
    fill(client, 0, 20)
    fill(client, 1, 20)

    async def main() -> None:
        c = KafkaConsumer(T, client=client, auto_offset_reset="earliest", fetch_max_wait_ms=20)
        assert len(await poll_until(c, 40, 10)) == 40
        client.down = True
        # Long enough for the fetches in flight to fail and every leader lookup after them too.
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            got, took = await timed_poll(c, 100)
            assert got == [] and took < 0.1 + SLACK
        assert client.lookups_failed >= 2
        client.down = False
        fill(client, 0, 5, start=20)
        fill(client, 1, 5, start=20)
        resumed = await poll_until(c, 10, 10)
        assert sorted((m.partition, m.offset) for m in resumed) == [
            (p, o) for p in (0, 1) for o in range(20, 25)
        ], "the consumer did not resume after the outage"
        await c.close()

    run(main())


def test_an_outage_longer_than_request_timeout_is_raised_with_its_cause_then_polls_resume() -> None:
    client = OutageClient({T: 1})
    client.request_timeout_ms = 300  # what the consumer reads
    fill(client, 0, 10)

    async def main() -> None:
        c = KafkaConsumer(T, client=client, auto_offset_reset="earliest", fetch_max_wait_ms=20)
        assert len(await poll_until(c, 10, 10)) == 10
        client.down = True
        errors: list[BaseException] = []
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            got, took = await timed_poll(c, 100)
            assert took < 0.1 + SLACK
            if isinstance(got, BaseException):
                errors.append(got)
            else:
                assert got == []
        assert errors, "a 2 s outage with request_timeout_ms=300 went unreported"
        assert all(isinstance(e, KafkaConnectionError) for e in errors)
        assert "Connect call failed" in str(errors[0]) and "t-0" in str(errors[0])
        assert len(errors) <= 2.0 / 0.3 + 1, "raised at every poll, not once per request_timeout_ms"
        client.down = False
        fill(client, 0, 3, start=10)
        # Until a fetch has worked again, one more report may come: the outage was still on.
        assert [m.offset for m in await poll_until(c, 3, 10, tolerate=True)] == [10, 11, 12]
        await c.close()

    run(main())


class StallClient(OutageClient):
    """While ``stalled``, the broker answers nothing: a Fetch fails at its timeout, as a
    connection does, and so does a leader lookup once a failed Fetch dropped the cached leader
    (a broker answering metadata is not a stall of the cluster but a failover in progress:
    test_consumer_outage_failover.py)."""

    def __init__(self, partitions: dict[str, int]) -> None:
        super().__init__(partitions)
        self.stalled = False
        self.cache_dropped = False

    def invalidate_metadata(self, topic: str | None = None) -> None:
        self.cache_dropped = True
        super().invalidate_metadata(topic)

    async def leader_for(self, topic: str, partition: int, *, timeout_ms: float | None = None) -> int:
        if self.stalled and self.cache_dropped:
            timeout = (timeout_ms or 5_000) / 1000.0
            await asyncio.sleep(timeout)
            raise KafkaTimeoutError(
                f"leader lookup for {topic}-{partition} did not succeed within {timeout:.1f}s"
            )
        return await super().leader_for(topic, partition, timeout_ms=timeout_ms)

    async def send(self, node: int, body: Any, version: int | None = None, **kw: Any) -> Any:
        if self.stalled:
            timeout = kw["timeout_ms"] / 1000.0
            await asyncio.sleep(timeout)
            raise KafkaTimeoutError(f"FETCH to 127.0.0.1:9 got no response within {timeout:.1f}s")
        return await super().send(node, body, version, **kw)


def test_a_stall_is_reported_once_the_stalled_fetch_times_out() -> None:
    """A fetch that timed out had no answer since it was sent: the outage counts from then, so
    poll reports it when the fetch times out, not request_timeout_ms later (found on the stall
    proxy, tests/integration/test_stall_bounds.py: reported after 2 x request_timeout_ms)."""
    client = StallClient({T: 1})
    client.request_timeout_ms = 4_000
    fill(client, 0, 10)

    async def main() -> tuple[BaseException | None, float]:
        c = KafkaConsumer(T, client=client, auto_offset_reset="earliest", fetch_max_wait_ms=20)
        assert len(await poll_until(c, 10, 10)) == 10
        await asyncio.sleep(0.1)  # the next fetch is out (and now stalls)
        client.stalled = True
        began = time.monotonic()
        first: BaseException | None = None
        while first is None and time.monotonic() - began < 12:
            got, took = await timed_poll(c, 200)
            assert took < 0.2 + SLACK
            if isinstance(got, BaseException):
                first = got
        reported = time.monotonic() - began
        client.stalled = False
        await c.close(timeout=1)
        return first, reported

    first, reported = run(main())
    assert isinstance(first, KafkaConnectionError) and "got no response within" in str(first), first
    # The stalled fetch times out after request_timeout_ms + fetch_max_wait_ms (4.02 s).
    assert reported < 4.02 + SLACK, f"a stall reported only after {reported:.1f}s"


def test_auto_commit_during_an_outage_does_not_hold_poll_past_its_timeout() -> None:
    client = FakeClient({T: 1})
    fill(client, 0, 10)

    async def main() -> None:
        c = KafkaConsumer(
            client=client,
            group_id="g",
            partitions={T: [0]},
            auto_offset_reset="earliest",
            fetch_max_wait_ms=20,
            auto_commit_interval_ms=0,
        )
        assert len(await poll_until(c, 10, 10)) == 10
        hang = asyncio.Event()
        commits = []

        async def hanging_commit(group_id: str, offsets: dict, **kw: Any) -> None:
            commits.append(dict(offsets))
            await hang.wait()

        client.commit_offsets = hanging_commit  # type: ignore[method-assign]
        for _ in range(3):
            got, took = await timed_poll(c, 300)
            assert got == [] and took < 0.3 + SLACK
        assert commits and list(commits[0].values()) == [10]
        assert len(commits) == 1, "a second commit was sent while the first was still in flight"
        hang.set()
        await c.close()

    run(main())


# -- options: each checked on its own, named with its bad value ----------------------------------


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("session_timeout_ms", -1),
        ("session_timeout_ms", 0),
        ("session_timeout_ms", 2**31),
        ("session_timeout_ms", "6000"),
        ("heartbeat_interval_ms", 0),
        ("heartbeat_interval_ms", -3),
        ("heartbeat_interval_ms", 45_000),
        ("max_poll_interval_ms", 0),
        ("max_poll_interval_ms", 2**31),
        ("auto_commit_interval_ms", -1),
        ("fetch_max_wait_ms", -1),
        ("fetch_min_bytes", -1),
        ("fetch_max_bytes", 0),
        ("max_partition_fetch_bytes", 0),
        ("coordinator_ready_timeout_ms", 0),
        ("metadata_max_age_ms", -1),
        ("max_poll_records", 0),
        ("fetch_concurrency", 0),
        ("enable_auto_commit", "yes"),
    ],
)
def test_each_bad_option_is_named_with_its_value(option: str, value: Any) -> None:
    with pytest.raises(KafkaConfigError) as info:
        KafkaConsumer(T, client=FakeClient({T: 1}), group_id="g", **{option: value})
    message = str(info.value)
    assert message.startswith(option), message
    assert repr(value) in message, message


def test_a_negative_session_timeout_is_blamed_on_itself_not_on_the_heartbeat() -> None:
    with pytest.raises(KafkaConfigError, match=r"^session_timeout_ms .*-1"):
        KafkaConsumer(T, client=FakeClient({T: 1}), group_id="g", session_timeout_ms=-1)


def test_the_brokers_invalid_session_timeout_is_raised_by_poll_naming_the_option() -> None:
    client = FakeGroupClient({T: 1})
    client.join_errors = [26, 26]

    async def main() -> None:
        c = KafkaConsumer(T, client=client, group_id="g", session_timeout_ms=10**9)
        for _ in range(2):  # and again at the next poll: never a silent never-joins
            with pytest.raises(KafkaProtocolError) as info:
                await c.poll(2_000)
            assert info.value.code == 26
            assert "session_timeout_ms=1000000000" in str(info.value)
        await c.close()

    run(main())


def test_close_returns_within_its_timeout_when_the_final_commit_hangs() -> None:
    client = FakeClient({T: 1})
    fill(client, 0, 5)

    async def main() -> None:
        c = KafkaConsumer(client=client, group_id="g", partitions={T: [0]}, auto_offset_reset="earliest")
        assert len(await poll_until(c, 5, 10)) == 5

        async def hanging_commit(group_id: str, offsets: dict, **kw: Any) -> None:
            await asyncio.sleep(3600)

        client.commit_offsets = hanging_commit  # type: ignore[method-assign]
        started = time.monotonic()
        with pytest.raises(KafkaTimeoutError, match="commit"):
            await c.close(timeout=1.0)
        assert time.monotonic() - started < 1.0 + SLACK

    run(main())


# -- fail fast against a closed port and a black hole ---------------------------------------------


@pytest.fixture
def closed_port() -> int:
    return timing.closed_port()


@pytest.fixture
def black_hole() -> Iterator[int]:
    with timing.black_hole() as port:
        yield port


GROUPS = [pytest.param(None, id="no-group"), pytest.param("g", id="group")]


@pytest.mark.parametrize("group_id", GROUPS)
def test_sync_poll_against_a_closed_port_raises_the_refusal_within_its_timeout(
    closed_port: int, group_id: str | None
) -> None:
    started = time.monotonic()
    consumer = kafka_core.KafkaConsumer(T, bootstrap_servers=f"127.0.0.1:{closed_port}", group_id=group_id)
    assert time.monotonic() - started < SLACK
    try:
        for _ in range(2):  # the consumer goes on trying: the next poll says the same
            started = time.monotonic()
            with pytest.raises(KafkaConnectionError) as info:
                consumer.poll(timeout_ms=2_000)
            assert time.monotonic() - started < 2.0 + SLACK
            assert f"127.0.0.1:{closed_port}" in str(info.value)
            assert "Connect call failed" in str(info.value) or "refused" in str(info.value).lower()
    finally:
        started = time.monotonic()
        consumer.close(timeout=2.0)
        assert time.monotonic() - started < 2.0 + SLACK


@pytest.mark.parametrize("group_id", GROUPS)
def test_async_poll_against_a_closed_port_raises_the_refusal_within_its_timeout(
    closed_port: int, group_id: str | None
) -> None:
    async def main() -> None:
        c = AioConsumer(T, bootstrap_servers=f"127.0.0.1:{closed_port}", group_id=group_id)
        started = time.monotonic()
        with pytest.raises(KafkaConnectionError, match=f"127.0.0.1:{closed_port}"):
            await c.poll(timeout_ms=1_000)
        assert time.monotonic() - started < 1.0 + SLACK
        await c.close(timeout=1.0)

    run(main())


@pytest.mark.parametrize("group_id", GROUPS)
def test_poll_against_a_black_hole_returns_within_its_timeout(black_hole: int, group_id: str | None) -> None:
    started = time.monotonic()
    consumer = kafka_core.KafkaConsumer(
        T, bootstrap_servers=f"127.0.0.1:{black_hole}", group_id=group_id, connect_timeout_ms=1_500
    )
    assert time.monotonic() - started < SLACK
    try:
        outcomes: list[Any] = []
        for _ in range(3):
            started = time.monotonic()
            try:
                outcomes.append(consumer.poll(timeout_ms=1_000))
            except KafkaError as exc:
                outcomes.append(exc)
            assert time.monotonic() - started < 1.0 + SLACK
        # Once the connection attempt has timed out, poll says so (the cause, not a bare []).
        errors = [o for o in outcomes if isinstance(o, KafkaError)]
        assert errors and f"127.0.0.1:{black_hole}" in str(errors[-1]), outcomes
    finally:
        started = time.monotonic()
        consumer.close(timeout=1.0)
        assert time.monotonic() - started < 1.0 + SLACK
