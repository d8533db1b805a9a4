"""The asyncio KafkaConsumer: static or group assignment, fetch pipeline, offsets.

The sync ``kafka_core.KafkaConsumer`` is a thin face over this class (see ``sync.py``): every poll
hands over whole decoded fetch results, so the sync face crosses threads once per poll, never
once per record.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import re
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from typing import Any

from kafka_core.client.metadata import OffsetAndMetadata, TopicPartition, as_topic_partition
from kafka_core.consumer.fetcher import Fetcher
from kafka_core.consumer.group import GroupMembership
from kafka_core.consumer.manual import ManualAssignment
from kafka_core.consumer.message import ConsumedMessage
from kafka_core.consumer.offsets import ConsumerOffsets
from kafka_core.consumer.options import check_consumer_options
from kafka_core.consumer.outage import OutageTracker
from kafka_core.consumer.policies import IsolationLevel, OffsetReset, parse_choice
from kafka_core.consumer.subscription import SubscriptionState
from kafka_core.errors import (
    KafkaClosedError,
    KafkaConfigError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
)
from kafka_core.metrics.registry import ConsumerMetrics

log = logging.getLogger(__name__)

# The accepted strings, kept for callers that listed them.
OFFSET_RESETS = tuple(m.value for m in OffsetReset)
ISOLATION_LEVELS = {m.name.lower(): m.value for m in IsolationLevel}
# Fetch requests in flight per broker, each on its own connection (see Fetcher).
FETCH_CONCURRENCY = 3


def _partitions_arg(partitions: Any) -> list[TopicPartition]:
    if isinstance(partitions, Mapping):
        return [TopicPartition(t, int(p)) for t, ps in partitions.items() for p in ps]
    return [as_topic_partition(x) for x in partitions]


class KafkaConsumer(ConsumerOffsets):
    """Consume records from Kafka topics (asyncio).

    Assignment: ``group_id=None`` with ``topics`` reads every partition of them (no group, no
    commits); ``group_id`` with ``partitions`` ({"t": [0, 1]}) is a static assignment whose offsets
    live in the group; ``group_id`` with ``topics`` or a regex ``pattern`` joins the group.
    Positions start at the committed offset, else per ``auto_offset_reset``. ``poll`` hands over
    whole decoded fetch results (``max_records`` / ``max_poll_records`` cap them); auto-commit
    commits, at the next poll or on close/revocation, only what was handed over (at-least-once).
    Rebalance callbacks ``on_assign(set)``, ``on_revoke(set)``, ``on_lost(set)`` may be sync or
    async; the group protocol waits for them. On the sync face they run in the application's
    thread, inside poll() (or iteration, run, close), as in the Java client, so they may call
    commit, committed, seek... A join that outlasts poll's timeout goes on in the background:
    poll returns empty at its timeout. Only cooperative assignors
    (``assignors=("cooperative-sticky",)``) select the incremental protocol of KIP-429.
    ``fetch_concurrency`` Fetch requests go to each broker at once, each on its own connection,
    with the partitions dealt among them: a broker serves one connection's requests in turn.
    A group member checks every ``metadata_max_age_ms`` whether its subscription changed (new
    topics matching ``pattern``, more partitions) and rejoins if so.
    Other keyword arguments (or ``client=``, an existing KafkaClient) configure the connection.

    Outages: the consumer never stops by itself. Whatever fails (connecting, leader lookups,
    fetches, joining) is retried in the background with backoff, for as long as it lives, and
    consumption resumes where it was once the cluster answers. ``poll`` always returns or raises
    within its ``timeout_ms`` (connecting and joining go on behind it), and never hides an outage:
    until a first broker has answered, a poll that ends without one raises KafkaConnectionError
    with the cause (a wrong address fails at the first poll); later, a partition or the group
    failing for longer than ``request_timeout_ms`` makes poll raise KafkaConnectionError naming
    them and the last error, once per ``request_timeout_ms`` while it lasts (a warning is logged
    when it starts and ends). These errors are retriable: keep polling.
    """

    def __init__(
        self,
        *topics_args: str,
        bootstrap_servers: str | Iterable[str] | None = None,
        topics: Iterable[str] | None = None,
        pattern: str | re.Pattern[str] | None = None,
        group_id: str | None = None,
        partitions: Mapping[str, Iterable[int]] | Iterable[tuple[str, int]] | None = None,
        auto_offset_reset: str | OffsetReset = "latest",
        enable_auto_commit: bool = True,
        auto_commit_interval_ms: int = 5_000,
        isolation_level: str | IsolationLevel = "read_uncommitted",
        session_timeout_ms: int = 45_000,
        heartbeat_interval_ms: int = 3_000,
        max_poll_interval_ms: int = 300_000,
        group_instance_id: str | None = None,
        assignors: Iterable[Any] = ("range", "cooperative-sticky"),
        fetch_max_wait_ms: int = 500,
        fetch_min_bytes: int = 1,
        fetch_max_bytes: int = 52_428_800,
        max_partition_fetch_bytes: int = 1_048_576,
        fetch_concurrency: int = FETCH_CONCURRENCY,
        max_poll_records: int | None = None,
        check_crcs: bool = True,
        coordinator_ready_timeout_ms: int = 30_000,
        metadata_max_age_ms: int = 5_000,
        on_assign: Callable[..., Any] | None = None,
        on_revoke: Callable[..., Any] | None = None,
        on_lost: Callable[..., Any] | None = None,
        client: Any = None,
        **client_options: Any,
    ) -> None:
        topic_list = list(topics_args) + list(topics or [])
        check_consumer_options(locals())  # each option on its own, before anything else
        reset = parse_choice("auto_offset_reset", auto_offset_reset, OffsetReset)
        isolation = parse_choice("isolation_level", isolation_level, IsolationLevel)
        if partitions is not None and (topic_list or pattern is not None):
            raise KafkaConfigError("give either partitions (static assignment) or topics/pattern, not both")
        if partitions is None and not topic_list and pattern is None:
            raise KafkaConfigError("nothing to consume: give topics, pattern or partitions")
        if pattern is not None and group_id is None:
            raise KafkaConfigError("pattern subscriptions need a group_id")
        if group_id is not None and not group_id:
            raise KafkaConfigError("group_id must not be empty")
        if client is None:
            if bootstrap_servers is None:
                raise KafkaConfigError("bootstrap_servers (or client) is required")
            from kafka_core.client.cluster import KafkaClient

            client = KafkaClient(bootstrap_servers, **client_options)
            self._owns_client = True
            request_timeout_ms = client_options.get("request_timeout_ms", 30_000)
        else:
            if client_options or bootstrap_servers is not None:
                raise KafkaConfigError(
                    "client options and bootstrap_servers go to the client you pass, not here"
                )
            client = getattr(client, "async_object", client)  # a sync KafkaClient's async twin
            self._owns_client = False
            request_timeout_ms = client.request_timeout_ms
        self._client = client
        self.group_id = group_id
        self._topics = topic_list
        self._pattern = re.compile(pattern) if isinstance(pattern, str) else pattern
        self._static = _partitions_arg(partitions) if partitions is not None else None
        self.auto_offset_reset = reset
        self._auto_commit = enable_auto_commit and group_id is not None
        self._auto_commit_interval = auto_commit_interval_ms / 1000.0
        self._isolation = isolation
        self._max_poll_records = max_poll_records
        self._gate_timeout_ms = coordinator_ready_timeout_ms
        self._subs = SubscriptionState()
        self._committed_positions: dict[TopicPartition, int] = {}
        # Errors for the next poll to raise (a rebalance callback's, a failed commit on revoke...).
        self._pending_errors: list[BaseException] = []
        self._outage = OutageTracker(request_timeout_ms / 1000.0)
        # Before a first broker answered, poll reports each new failure (none from before us).
        self._reached = False
        self._reported_error: BaseException | None = getattr(client, "last_error", None)
        self._stats = ConsumerMetrics()  # per fetched partition, per poll, per rebalance
        self._fetcher = Fetcher(
            client,
            self._subs,
            auto_offset_reset=reset,
            isolation_level=isolation,
            fetch_max_wait_ms=fetch_max_wait_ms,
            fetch_min_bytes=fetch_min_bytes,
            fetch_max_bytes=fetch_max_bytes,
            max_partition_fetch_bytes=max_partition_fetch_bytes,
            check_crcs=check_crcs,
            fetch_concurrency=fetch_concurrency,
            request_timeout_ms=request_timeout_ms,
            outage=self._outage,
            metrics=self._stats,
        )
        self._group: GroupMembership | ManualAssignment
        if group_id is not None and self._static is None:
            self._group = GroupMembership(
                client,
                self._subs,
                _Listener(self, on_assign, on_revoke, on_lost),
                self._pending_errors.append,
                group_id,
                outage=self._outage,
                wake=self._fetcher.data_ready.set,
                topics=topic_list,
                pattern=self._pattern,
                session_timeout_ms=session_timeout_ms,
                heartbeat_interval_ms=heartbeat_interval_ms,
                max_poll_interval_ms=max_poll_interval_ms,
                group_instance_id=group_instance_id,
                assignors=assignors,
                coordinator_ready_timeout_ms=coordinator_ready_timeout_ms,
                metadata_max_age_ms=metadata_max_age_ms,
                metrics=self._stats,
            )
        else:
            self._group = ManualAssignment(
                client,
                self._subs,
                _Listener(self),  # the rebalance callbacks are for group assignments only
                group_id=group_id,
                topics=topic_list,
                partitions=self._static,
                coordinator_ready_timeout_ms=coordinator_ready_timeout_ms,
            )
        # Runs rebalance callbacks when set (the sync face: in the application's thread).
        self._callback_runner: Callable[[Callable[..., Any], set[TopicPartition]], Any] | None = None
        self._start_lock = asyncio.Lock()
        self._start_task: asyncio.Task[None] | None = None  # a start going on behind poll()
        self._commit_lock = asyncio.Lock()  # commits in order: an older one never lands last
        self._commit_task: asyncio.Task[None] | None = None  # an auto-commit behind poll()
        self._started = False
        self._closed = False
        self._stopping = False
        self._wakeup = asyncio.Event()  # stop(): a waiting poll returns early (once)
        self._next_auto_commit = 0.0

    # -- lifecycle ---------------------------------------------------------------------------

    async def __aenter__(self) -> KafkaConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self) -> None:
        """Connect, resolve the assignment and starting positions (poll() calls this lazily)."""
        if self._closed:
            raise KafkaClosedError("this consumer is closed")
        async with self._start_lock:
            if self._started:
                return
            loop = asyncio.get_running_loop()
            self._next_auto_commit = loop.time() + self._auto_commit_interval
            await self._group.start()
            self._fetcher.start()
            self._started = True

    async def _init_positions(self, tps: Iterable[TopicPartition]) -> None:
        """Committed offset when the group has one, else the auto_offset_reset policy."""
        # A seek before the first poll wins over committed offsets and the reset policy.
        tps = [tp for tp in tps if tp in self._subs and self._subs.state(tp).position is None]
        committed: dict[TopicPartition, OffsetAndMetadata] = {}
        if self.group_id is not None and tps:
            try:
                committed = await self._client.fetch_committed_offsets(
                    self.group_id, tps, require_stable=True, timeout_ms=self._gate_timeout_ms
                )
            except KafkaError as exc:
                raise KafkaTimeoutError(
                    f"committed offsets of group {self.group_id!r} not readable within "
                    f"{self._gate_timeout_ms} ms; not consuming: {exc}"
                ) from exc
        for tp in tps:
            st = self._subs.state(tp)
            om = committed.get(tp)
            if om is not None and om.offset >= 0:
                self._committed_positions[tp] = om.offset
                self._subs.seek(tp, om.offset)
            elif st.reset is None:
                self._subs.request_reset(tp, self.auto_offset_reset)
        self._fetcher.wake()

    async def close(self, timeout: float | None = None, *, commit: bool = True) -> None:
        """Commit what was handed over (auto-commit), leave the group, release connections.

        ``timeout`` (seconds) bounds the commit and the leave: past it, connections are released
        anyway and KafkaTimeoutError says what was cut short (records after the last commit are
        delivered again to the next owner; the group rebalances after the session timeout).
        """
        if self._closed:
            return
        self._closed = True
        self.stop()
        error: BaseException | None = None
        step = "the final commit"
        seen = getattr(self._client, "last_error", None)  # a newer one is what held the close up
        if self._start_task is not None:
            self._start_task.cancel()
            await asyncio.gather(self._start_task, return_exceptions=True)
        deadline = None if timeout is None else asyncio.get_running_loop().time() + max(timeout, 0)
        bound = asyncio.timeout_at(deadline)
        try:
            async with bound:
                if self._commit_task is not None:  # an auto-commit in flight: superseded below
                    await asyncio.gather(self._commit_task, return_exceptions=True)
                if self._started and commit and self._auto_commit:
                    try:
                        await self._commit_positions()
                    except KafkaError as exc:
                        error = exc
                step = "leaving the group"
                await self._group.close()
        except TimeoutError:
            if not bound.expired():
                raise
            cause = getattr(self._client, "last_error", None)
            why = f"; last error: {cause}" if cause is not None and cause is not seen else ""
            error = KafkaTimeoutError(f"close did not finish within {timeout}s: {step} was cut short{why}")
        finally:
            await self._fetcher.close()
            if self._owns_client:
                await self._client.close()
        if error is not None:
            raise error

    async def _ensure_started(self) -> None:
        if not self._started:
            await self.start()

    # -- polling -----------------------------------------------------------------------------

    async def _start_within(self, deadline: float) -> bool:
        """Start (connect, resolve the assignment) as a task; False if it outlasts ``deadline``."""
        loop = asyncio.get_running_loop()
        task = self._start_task
        if task is None:
            task = self._start_task = loop.create_task(self.start(), name="kafka-core-consumer-start")
        if not task.done():
            await _wait_until(task, deadline - loop.time(), self._wakeup)
            if not task.done():
                return False
        self._start_task = None
        task.result()  # its error (the next poll starts again)
        return True

    async def _before_poll(self, deadline: float) -> bool:
        """False while the start goes on; else raises what is pending, runs the auto-commit."""
        if self._closed:
            raise KafkaClosedError("this consumer is closed")
        if not self._started and not await self._start_within(deadline):
            return False
        if self._pending_errors:
            raise self._pending_errors.pop(0)
        self._group.note_poll()
        if self._group.joining:
            return True  # no auto-commit mid-rebalance: the revocation commits what it must
        loop = asyncio.get_running_loop()
        if self._auto_commit and self._commit_task is None and loop.time() >= self._next_auto_commit:
            todo = self._uncommitted()  # now: what was handed over before this poll, no more
            if todo:
                self._commit_task = loop.create_task(self._commit(todo), name="kafka-core-auto-commit")
        task = self._commit_task
        if task is not None:
            # A commit slower than the poll (an outage) goes on behind it; its error comes later.
            await _wait_until(task, deadline - loop.time(), self._wakeup)
            if task.done():
                self._commit_task = None
                task.result()
        return True

    def _nothing(self, columns: bool) -> Any:
        """An empty poll's answer, unless the consumer is cut off: then why, as an error."""
        if not self._reached:
            if self._client.cached_metadata().brokers:
                self._reached = True
            else:
                err = getattr(self._client, "last_error", None)
                if (
                    isinstance(err, KafkaConnectionError | KafkaTimeoutError)
                    and err is not self._reported_error
                ):
                    self._reported_error = err
                    raise KafkaConnectionError(f"no broker reachable yet (still trying): {err}") from err
        err = self._outage.due()
        if err is not None:
            raise err
        return None if columns else []

    def _raise_fetch_errors(self) -> None:
        err = self._fetcher.take_error()
        if err is not None:
            raise err

    async def _poll(self, timeout_ms: float, max_records: int | None, columns: bool) -> Any:
        max_records = max_records if max_records is not None else self._max_poll_records
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(timeout_ms, 0) / 1000.0
        if not await self._before_poll(deadline):
            self._wakeup.clear()
            return self._nothing(columns)
        while True:
            # A join (its callbacks included) may outlast the timeout: it goes on behind poll.
            if not await self._group.wait_active(deadline - loop.time(), self._wakeup):
                self._wakeup.clear()
                return self._nothing(columns)
            if self._pending_errors:
                raise self._pending_errors.pop(0)
            self._raise_fetch_errors()
            out = self._fetcher.drain(max_records, columns, self._pending_errors)
            if out:
                return out
            remaining = deadline - loop.time()
            if remaining <= 0 or self._wakeup.is_set():
                self._wakeup.clear()
                return self._nothing(columns)
            self._fetcher.data_ready.clear()
            try:
                await asyncio.wait_for(self._fetcher.data_ready.wait(), remaining)
            except TimeoutError:
                return self._nothing(columns)

    async def poll(self, timeout_ms: float = 1_000, max_records: int | None = None) -> list[ConsumedMessage]:
        """Records handed over now (empty after ``timeout_ms`` without data)."""
        return await self._poll(timeout_ms, max_records, False)  # type: ignore[no-any-return]

    async def poll_columns(self, timeout_ms: float = 1_000, max_records: int | None = None) -> Any:
        """Like poll, as one ``pyarrow.RecordBatch`` (no Python object per record), or None."""
        return await self._poll(timeout_ms, max_records, True)

    async def __aiter__(self) -> AsyncIterator[ConsumedMessage]:
        self._stopping = False
        while not self._stopping:
            batch = await self.poll(1_000)
            handed = 0
            try:
                for msg in batch:
                    if self._stopping:
                        break
                    handed += 1
                    yield msg
            finally:
                # stop() or a break out of the loop: the rest of the batch comes again later.
                if handed < len(batch):
                    self._rewind(batch[handed:])

    async def run(self, handler: Callable[[ConsumedMessage], Any]) -> None:
        """Poll and call ``handler`` per message (awaited when it returns an awaitable) until stop()."""
        self._stopping = False
        while not self._stopping:
            batch = await self.poll(1_000)
            for i, msg in enumerate(batch):
                if self._stopping:
                    self._rewind(batch[i:])
                    return
                result = handler(msg)
                if inspect.isawaitable(result):
                    await result

    def stop(self) -> None:
        """Make run()/iteration return after the current message; a waiting poll returns early."""
        self._stopping = True
        self._wakeup.set()
        self._fetcher.data_ready.set()

    def _rewind(self, unhandled: list[ConsumedMessage]) -> None:
        """Positions back to the first message not given to the application (nothing skipped)."""
        first: dict[TopicPartition, int] = {}
        for m in unhandled:
            tp = TopicPartition(m.topic, m.partition)
            if m.offset < first.get(tp, m.offset + 1):
                first[tp] = m.offset
        for tp, offset in first.items():
            if tp in self._subs:
                self.seek(tp, offset)

    # -- assignment and flow control ------------------------------------------------------------

    def assignment(self) -> set[TopicPartition]:
        return self._subs.assigned()

    def pause(self, partitions: Iterable[Any]) -> None:
        self._subs.pause(as_topic_partition(x) for x in partitions)

    def resume(self, partitions: Iterable[Any]) -> None:
        self._subs.resume(as_topic_partition(x) for x in partitions)
        self._fetcher.wake()
        self._fetcher.data_ready.set()

    def paused(self) -> set[TopicPartition]:
        return self._subs.paused()

    def subscription(self) -> list[str]:
        return list(self._topics)

    def metrics(self) -> dict[str, Any]:
        """Plain-dict snapshot: the client's network counters plus ``"consumer"`` (records, bytes,
        lag per partition, rebalances); keys in docs/metrics.md."""
        snap: dict[str, Any] = self._client.metrics()
        snap["consumer"] = self._stats.snapshot(self._subs.items())
        snap["consumer"]["group_id"] = self.group_id
        return snap


class _Listener:
    """The consumer's side of a rebalance (a RebalanceListener for its membership): commit what
    goes, position what comes, and run the application's callbacks, in its thread on the sync face
    (the runner it installs), the join waiting for them."""

    def __init__(
        self,
        consumer: KafkaConsumer,
        on_assign: Callable[..., Any] | None = None,
        on_revoke: Callable[..., Any] | None = None,
        on_lost: Callable[..., Any] | None = None,
    ) -> None:
        self._consumer = consumer
        self._on_assign = on_assign
        self._on_revoke = on_revoke
        self._on_lost = on_lost if on_lost is not None else on_revoke

    async def on_partitions_revoked(self, partitions: set[TopicPartition]) -> None:
        c = self._consumer
        if c._auto_commit and not c._closed:  # on close, the consumer's own final commit did it
            try:
                await c._commit_positions(partitions)
            except KafkaError as exc:
                # Not data loss (those records come again to the next owner), but never silent.
                log.warning("commit on revoke failed for %s: %r", sorted(partitions), exc)
                c._pending_errors.append(exc)
        await self._call(self._on_revoke, partitions)
        self._forget(partitions)

    async def on_partitions_lost(self, partitions: set[TopicPartition]) -> None:
        await self._call(self._on_lost, partitions)  # not committed: no longer ours to commit
        self._forget(partitions)

    async def on_partitions_assigned(self, partitions: set[TopicPartition]) -> None:
        await self._consumer._init_positions(sorted(partitions))
        await self._call(self._on_assign, partitions)

    def _forget(self, partitions: set[TopicPartition]) -> None:
        c = self._consumer
        c._fetcher.drop(partitions)
        for tp in partitions:
            c._committed_positions.pop(tp, None)

    async def _call(self, cb: Callable[..., Any] | None, tps: set[TopicPartition]) -> None:
        """A callback's error is the application's: raised at its next poll, the join goes on."""
        if cb is None:
            return
        try:
            runner = self._consumer._callback_runner
            if runner is not None:
                await runner(cb, tps)
            else:
                result = cb(tps)
                if inspect.isawaitable(result):
                    await result
        except Exception as exc:
            log.error("rebalance callback %r failed: %r", cb, exc)
            self._consumer._pending_errors.append(exc)


async def _wait_until(task: asyncio.Future[Any], timeout_s: float, interrupt: asyncio.Event) -> None:
    """Wait for ``task`` at most ``timeout_s``, or until ``interrupt`` (stop()) is set."""
    if timeout_s <= 0 or interrupt.is_set():
        return
    waiter = asyncio.get_running_loop().create_task(interrupt.wait())
    try:
        await asyncio.wait({task, waiter}, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
