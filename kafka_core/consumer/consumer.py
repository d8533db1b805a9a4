"""The asyncio KafkaConsumer: static or group assignment, fetch pipeline, offsets.

The face holds its parts, each owning its state, and delegates: the Poller (``polling.py``:
poll, iteration, run, stop), ConsumerOffsets (``offsets.py``: positions and commits), the
Lifecycle (``lifecycle.py``: the one start), the Fetcher (``fetch/``) and the membership
(``group/`` for the two group protocols, ``manual.py`` without a group).

The sync ``kafka_core.KafkaConsumer`` is a thin face over this class (see ``sync.py``): every poll
hands over whole decoded fetch results, so the sync face crosses threads once per poll, never
once per record.
"""

from __future__ import annotations

import asyncio
import logging
import re
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from typing import Any, Self, cast

from kafka_core.client.metadata import ListedOffset, OffsetAndMetadata, TopicPartition, as_topic_partition
from kafka_core.config import keywords_from_config, role_keywords, takes_config
from kafka_core.consumer.columns import ColumnDecoder, decode_columns, first_offsets
from kafka_core.consumer.fetch.fetcher import Fetcher
from kafka_core.consumer.group.classic import GroupMembership
from kafka_core.consumer.group.kip848 import ConsumerGroupMembership
from kafka_core.consumer.group.rebalance import CallbackRunner, ConsumerGroupMetadata, ConsumerRebalance
from kafka_core.consumer.lifecycle import Lifecycle
from kafka_core.consumer.manual import ManualAssignment
from kafka_core.consumer.message import ConsumedMessage, Deserializer
from kafka_core.consumer.offsets import ConsumerOffsets
from kafka_core.consumer.options import check_assignment, check_consumer_options, partitions_arg
from kafka_core.consumer.policies import GroupProtocol, IsolationLevel, OffsetReset, parse_choice
from kafka_core.consumer.polling import Poller
from kafka_core.consumer.subscription import SubscriptionState
from kafka_core.consumer_base.options import (
    DEFAULT_BOOTSTRAP,
    check_known_options,
    deserializers,
    resolve_client,
)
from kafka_core.consumer_base.outage import OutageTracker
from kafka_core.errors import (
    KafkaError,
    KafkaTimeoutError,
)
from kafka_core.metrics.registry import ConsumerMetrics
from kafka_core.telemetry import pusher_for, wait_instance_id

log = logging.getLogger(__name__)

# The accepted strings, kept for callers that listed them.
OFFSET_RESETS = tuple(m.value for m in OffsetReset)
ISOLATION_LEVELS = {m.name.lower(): m.value for m in IsolationLevel}
# Fetch requests in flight per broker, each on its own connection (see Fetcher).
FETCH_CONCURRENCY = 3


class KafkaConsumer:
    """Consume records from Kafka topics (asyncio). Use ``async with`` or ``await close()``.

    The blocking ``kafka_core.KafkaConsumer`` takes the same options, documented here once.

    What to consume (one of the three):

    - ``topics`` (or positional topic names): with ``group_id=None``, every partition of them,
      no group and no commits; with a ``group_id``, joins that group for them. A topic that does
      not exist yet is asked for at the retry backoff (up to ``retry_backoff_max_ms``, 1 s) and
      taken in once it is created; the consumer does not auto-create it unless
      ``allow_auto_create_topics=True``.
    - ``pattern``: a regex (string or compiled) of topic names to join the group for; new topics
      that match are picked up (every ``metadata_max_age_ms``). Needs a ``group_id``.
    - ``partitions``: ``{"t": [0, 1]}`` or ``[("t", 0), ...]``, a static assignment (with a
      ``group_id``, its offsets live in that group, without joining it).

    Options:

    - ``bootstrap_servers``: ``"host:port"``, a comma list or a sequence of them.
    - A dict of Java-style names first, as confluent-kafka takes (``KafkaConsumer({"bootstrap.servers":
      ..., "group.id": "g"}, topics=["t"])``): translated as ``from_config`` does, keyword
      arguments beside it winning over the same option in the dict.
    - ``group_id``: the consumer group (committed offsets, group assignment); None: no group.
    - ``group_instance_id``: static membership (KIP-345): a restart within
      ``session_timeout_ms`` gets its partitions back without a rebalance.
    - ``group_protocol``: ``"classic"`` (default: JoinGroup/SyncGroup, the assignment made by
      the group leader's ``assignors``) or ``"consumer"`` (KIP-848, Kafka 4: the broker assigns,
      through ConsumerGroupHeartbeat; partitions move incrementally, only those that move are
      revoked, through the same callbacks). With ``"consumer"`` the broker's
      ``group.consumer.*`` settings replace ``session_timeout_ms``, ``heartbeat_interval_ms``
      and ``assignors``: setting any of them raises KafkaConfigError. A broker without the API
      makes start/poll raise KafkaUnsupportedVersionError saying to use ``"classic"``. A
      ``pattern`` is sent to the broker, which matches it with RE2/J syntax against whole topic
      names (no lookarounds or backreferences; a pattern it cannot parse raises
      INVALID_REGULAR_EXPRESSION from poll); a broker offering only ConsumerGroupHeartbeat v0
      gets the topic names matched here with Python's ``re.fullmatch`` instead.
    - ``group_remote_assignor``: with ``group_protocol="consumer"``, the broker's assignor to
      use (``"uniform"``, ``"range"``); None: the broker's default.
    - ``client_rack``: this consumer's rack (Java's ``client.rack``), sent in every Fetch: a
      cluster whose brokers set ``replica.selector.class`` names a replica in that rack to read
      from (follower fetching, KIP-392; docs/consumer.md), and to the broker's assignor with
      ``group_protocol="consumer"`` (rack-aware assignment).
    - ``auto_offset_reset``: where a partition without a committed offset starts, or one whose
      offset is out of range or past a log truncation (KIP-320): ``"earliest"``, ``"latest"``
      (a truncation resumes at the first diverging offset) or ``"none"`` (poll raises
      OFFSET_OUT_OF_RANGE, or KafkaLogTruncationError naming the lost range); an
      ``OffsetReset`` member too.
    - ``enable_auto_commit`` / ``auto_commit_interval_ms``: commit, at most this often, at the next
      poll and on close and revocation, only what poll handed over (at-least-once).
    - ``isolation_level``: ``"read_uncommitted"`` or ``"read_committed"`` (transactions: only
      committed records, up to the last stable offset); an ``IsolationLevel`` member too.
    - ``session_timeout_ms`` / ``heartbeat_interval_ms``: the broker drops a member it has not
      heard from for the first (default 45000); heartbeats go every second (default 3000; on
      their own task). Classic protocol only.
    - ``max_poll_interval_ms``: a member that does not poll for this long leaves the group (its
      partitions go to others) and rejoins at its next poll; also the join's rebalance timeout.
    - ``assignors``: names (``"range"``, ``"roundrobin"``, ``"cooperative-sticky"``) or assignor
      objects, preferred first (default ``("range", "cooperative-sticky")``); only cooperative
      ones select the incremental protocol (KIP-429). Classic protocol only.
    - ``on_assign(set)``, ``on_revoke(set)``, ``on_lost(set)``: rebalance callbacks, sync or async;
      the join waits for them (a revocation's commit and callback complete before the rejoin).
      ``on_lost`` (partitions taken without a revocation) defaults to ``on_revoke``. On the sync
      face they run in the application's thread, inside poll() (or iteration, run, close), as
      in the Java client, so they may call commit, committed, seek...
    - ``coordinator_ready_timeout_ms``: at the first start, how long the group coordinator and
      committed offsets may take before start/poll gives up (nothing consumed or committed).
    - ``metadata_max_age_ms``: how often the topics consumed are checked for changes (new
      topics matching ``pattern``, more partitions, a deleted or recreated topic), and the
      assignment follows (the group leader rebalances). A subscribed topic that does not exist
      is asked for more often: at the retry backoff.
    - ``fetch_max_wait_ms`` / ``fetch_min_bytes``: a Fetch waits this long for this much data.
    - ``fetch_max_bytes`` / ``max_partition_fetch_bytes``: the most a Fetch answer holds, in all
      and per partition (a larger first batch still comes whole).
    - ``fetch_concurrency``: Fetch requests in flight per broker, each on its own connection with
      the partitions dealt among them (a broker serves one connection's requests in turn);
      caught-up partitions wait on one of them, so an idle consumer long-polls once per broker.
    - ``max_poll_records``: the most records one poll hands over (None: whole fetch results).
    - ``check_crcs``: verify each batch's CRC (a corrupt batch raises KafkaCodecError naming
      topic, partition and offset when poll reaches it; ``seek`` past it to skip it).
    - ``key_deserializer`` / ``value_deserializer``: ``fn(bytes) -> object`` applied by poll (and
      iteration, run) to a key / value that is not None. One that raises makes poll raise
      KafkaDeserializationError naming topic, partition and offset, the records from it on not
      handed over (it raises again until a ``seek`` past it). ``poll_columns`` returns the raw
      bytes and applies neither.
    - ``client``: a ``kafka_core.aio.KafkaClient`` (or the sync one) to share; None builds one.
    - ``**client_options``: the rest go to that client (``client_id``, ``request_timeout_ms``,
      ``security_protocol``, ``ssl_*``, ``sasl_*``... see ``kafka_core.aio.KafkaClient``).

    ``poll`` hands over whole decoded fetch results; ``poll_columns`` one ``pyarrow.RecordBatch``.
    A join that outlasts poll's timeout goes on in the background: poll returns empty at its
    timeout.

    Outages: the consumer never stops by itself. Whatever fails (connecting, leader lookups,
    fetches, joining) is retried in the background with backoff, for as long as it lives, and
    consumption resumes where it was once the cluster answers. ``poll`` always returns or raises
    within its ``timeout_ms`` (connecting and joining go on behind it), and never hides an outage:
    until a first broker has answered, a poll that ends without one raises KafkaConnectionError
    with the cause (a wrong address fails at the first poll); later, a partition or the group
    failing for longer than ``request_timeout_ms`` while no broker answered for as long (cut off
    from the cluster) makes poll raise KafkaConnectionError naming them and the last error, once
    per ``request_timeout_ms`` while it lasts. While the cluster answers, a partition or group
    failing is a failover (a lost leader is fenced after ``broker.session.timeout.ms``): as Java's
    consumer, poll does not raise, and a warning is logged when it starts, every
    ``request_timeout_ms`` while it lasts, and when it ends. These errors are retriable: keep
    polling. Not outages, raised by
    poll at once: a refused login or TLS handshake (KafkaAuthenticationError, from every poll,
    never tried again), and a subscribed topic refused TOPIC_AUTHORIZATION_FAILED (named).
    """

    @takes_config(role_keywords("consumer"))
    def __init__(
        self,
        *topics_args: str | Mapping[str, Any],
        bootstrap_servers: str | Iterable[str] = DEFAULT_BOOTSTRAP,
        topics: Iterable[str] | None = None,
        pattern: str | re.Pattern[str] | None = None,
        group_id: str | None = None,
        partitions: Mapping[str, Iterable[int]] | Iterable[tuple[str, int]] | None = None,
        auto_offset_reset: str | OffsetReset = "latest",
        enable_auto_commit: bool = True,
        auto_commit_interval_ms: int = 5_000,
        isolation_level: str | IsolationLevel = "read_uncommitted",
        session_timeout_ms: int | None = None,
        heartbeat_interval_ms: int | None = None,
        max_poll_interval_ms: int = 300_000,
        group_instance_id: str | None = None,
        assignors: Iterable[Any] | None = None,
        group_protocol: str | GroupProtocol = "classic",
        group_remote_assignor: str | None = None,
        client_rack: str | None = None,
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
        key_deserializer: Deserializer | None = None,
        value_deserializer: Deserializer | None = None,
        client: Any = None,
        **client_options: Any,
    ) -> None:
        check_known_options(type(self).__name__, client_options, KafkaConsumer.__init__)
        # takes_config took a config dict out: topic names are left
        topic_list = list(cast("tuple[str, ...]", topics_args)) + list(topics or [])
        group_opts = check_consumer_options(locals())  # each option on its own, before anything else
        reset = parse_choice("auto_offset_reset", auto_offset_reset, OffsetReset)
        isolation = parse_choice("isolation_level", isolation_level, IsolationLevel)
        check_assignment(topic_list, pattern, partitions, group_id)
        client, self._owns_client, request_timeout_ms = resolve_client(
            bootstrap_servers, client, client_options
        )
        self._client = client
        self.group_id = group_id
        self._topics = topic_list
        compiled = re.compile(pattern) if isinstance(pattern, str) else pattern
        static = partitions_arg(partitions) if partitions is not None else None
        self.auto_offset_reset = reset
        self._subs = SubscriptionState()
        # Errors for the next poll to raise: the parts below report into it, the Poller raises.
        pending: list[BaseException] = []
        outage = OutageTracker(request_timeout_ms / 1000.0)
        self._stats = ConsumerMetrics()  # per fetched partition, per poll, per rebalance
        self._fetcher = fetcher = Fetcher(
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
            outage=outage,
            metrics=self._stats,
            client_rack=client_rack,
            metadata_max_age_ms=metadata_max_age_ms,
        )
        grouped = group_id is not None and static is None
        # The membership needs the rebalance listener, whose steps are the offsets', which need
        # the membership (commits carry its generation): the steps find ``offsets`` once it is
        # made below, before any rebalance can run (the first comes at start()).
        offsets: ConsumerOffsets
        self._rebalance = ConsumerRebalance(
            commit=lambda tps: offsets.commit_revoked(tps),
            position=lambda tps: offsets.init_positions(tps),
            forget=lambda tps: offsets.forget(tps),
            report=pending.append,
            # The rebalance callbacks are for group assignments only.
            on_assign=on_assign if grouped else None,
            on_revoke=on_revoke if grouped else None,
            on_lost=on_lost if grouped else None,
        )
        self._group: GroupMembership | ConsumerGroupMembership | ManualAssignment
        if group_id is not None and static is None and group_opts.protocol == GroupProtocol.CONSUMER:
            self._group = ConsumerGroupMembership(
                client,
                self._subs,
                self._rebalance,
                group_id,
                outage=outage,
                wake=fetcher.data_ready.set,
                topics=topic_list,
                pattern=compiled,
                max_poll_interval_ms=max_poll_interval_ms,
                group_instance_id=group_instance_id,
                remote_assignor=group_remote_assignor,
                rack_id=client_rack,
                coordinator_ready_timeout_ms=coordinator_ready_timeout_ms,
                metadata_max_age_ms=metadata_max_age_ms,
                metrics=self._stats,
            )
        elif group_id is not None and static is None:
            self._group = GroupMembership(
                client,
                self._subs,
                self._rebalance,
                pending.append,
                group_id,
                outage=outage,
                wake=fetcher.data_ready.set,
                topics=topic_list,
                pattern=compiled,
                session_timeout_ms=group_opts.session_timeout_ms,
                heartbeat_interval_ms=group_opts.heartbeat_interval_ms,
                max_poll_interval_ms=max_poll_interval_ms,
                group_instance_id=group_instance_id,
                assignors=group_opts.assignors,
                coordinator_ready_timeout_ms=coordinator_ready_timeout_ms,
                metadata_max_age_ms=metadata_max_age_ms,
                metrics=self._stats,
            )
        else:
            self._group = ManualAssignment(
                client,
                self._subs,
                self._rebalance,
                group_id=group_id,
                topics=topic_list,
                partitions=static,
                coordinator_ready_timeout_ms=coordinator_ready_timeout_ms,
                metadata_max_age_ms=metadata_max_age_ms,
                wake=fetcher.data_ready.set,
            )
        self._offsets = offsets = ConsumerOffsets(
            client,
            self._subs,
            fetcher,
            self._group,
            group_id=group_id,
            auto_offset_reset=reset,
            isolation_level=isolation,
            auto_commit=enable_auto_commit and group_id is not None,
            auto_commit_interval_s=auto_commit_interval_ms / 1000.0,
            coordinator_ready_timeout_ms=coordinator_ready_timeout_ms,
            report=pending.append,
        )
        self._telemetry = pusher_for(  # KIP-714, started with the consumer
            client,
            "consumer",
            self.metrics,
            lambda: {
                "group_id": group_id or "",
                "group_instance_id": group_instance_id or "",
                "client_rack": client_rack or "",
            },
        )
        self._lifecycle = Lifecycle(
            self._group, fetcher, offsets, self._telemetry.start if self._telemetry is not None else None
        )
        self._poller = Poller(
            client,
            self._subs,
            self._lifecycle,
            self._group,
            fetcher,
            offsets,
            outage,
            pending,
            max_poll_records=max_poll_records,
            deserializers=deserializers(key_deserializer, value_deserializer),
            stats=self._stats,
        )

    @classmethod
    def from_config(cls, config: Mapping[str, Any], **overrides: Any) -> Self:
        """A consumer from Java-style names (``{"bootstrap.servers": ..., "group.id": "g"}``), with
        ``overrides`` (keyword names, e.g. ``topics=``, ``value_deserializer=``) on top; unknown
        names raise KafkaConfigError naming each of them."""
        return cls(**keywords_from_config(config, "consumer", overrides))

    # -- lifecycle ---------------------------------------------------------------------------

    async def __aenter__(self) -> KafkaConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self) -> None:
        """Connect, resolve the assignment and starting positions (poll() calls this lazily)."""
        await self._lifecycle.start()

    async def close(self, timeout: float | None = None, *, commit: bool = True) -> None:
        """Commit what was handed over (auto-commit), leave the group, release connections.

        ``timeout`` (seconds) bounds the commit and the leave: past it, connections are released
        anyway and KafkaTimeoutError says what was cut short (records after the last commit are
        delivered again to the next owner; the group rebalances after the session timeout).
        """
        lifecycle = self._lifecycle
        if lifecycle.closed:
            return
        lifecycle.closed = True
        self._offsets.closing()
        self.stop()
        error: BaseException | None = None
        step = "the final commit"
        seen = getattr(self._client, "last_error", None)  # a newer one is what held the close up
        await self._poller.cancel_start()
        deadline = None if timeout is None else asyncio.get_running_loop().time() + max(timeout, 0)
        bound = asyncio.timeout_at(deadline)
        try:
            async with bound:
                await self._poller.settle_commit()  # an auto-commit in flight: superseded below
                if lifecycle.started and commit and self._offsets.auto_commit:
                    try:
                        await self._offsets.commit_positions()
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
            left = None if deadline is None else deadline - asyncio.get_running_loop().time()
            await self._fetcher.close(left)  # its fetch sessions' closes within the user's time
            if self._telemetry is not None:  # the last push, flagged terminating
                left = None if deadline is None else deadline - asyncio.get_running_loop().time()
                await self._telemetry.close(left)
            if self._owns_client:
                await self._client.close()
        if error is not None:
            raise error

    # -- polling (the Poller) ---------------------------------------------------------------

    async def poll(self, timeout_ms: float = 1_000, max_records: int | None = None) -> list[ConsumedMessage]:
        """Records handed over now (empty after ``timeout_ms`` without data)."""
        return await self._poller.poll(timeout_ms, max_records)

    async def poll_columns(
        self,
        timeout_ms: float = 1_000,
        max_records: int | None = None,
        *,
        key_decoder: ColumnDecoder | None = None,
        value_decoder: ColumnDecoder | None = None,
    ) -> Any:
        """Like poll, as one ``pyarrow.RecordBatch`` (no Python object per record), or None.

        ``key_decoder``/``value_decoder`` turn those columns into typed ones in a worker thread
        (a registry lookup blocks; the event loop must not); one that raises leaves the
        positions back at the batch's first records (see consumer.columns)."""
        batch = await self._poller.poll_columns(timeout_ms, max_records)
        if batch is None or (key_decoder is None and value_decoder is None):
            return batch
        try:
            return await asyncio.to_thread(decode_columns, batch, key_decoder, value_decoder)
        except BaseException:
            for (topic, partition), offset in first_offsets(batch).items():
                self.seek(TopicPartition(topic, partition), offset)
            raise

    def __aiter__(self) -> AsyncIterator[ConsumedMessage]:
        return self._poller.messages()

    async def run(self, handler: Callable[[ConsumedMessage], Any]) -> None:
        """Poll and call ``handler`` per message (awaited when it returns an awaitable) until stop()."""
        await self._poller.run(handler)

    def stop(self) -> None:
        """Make run()/iteration return after the current message; a waiting poll returns early."""
        self._poller.stop()

    # -- offsets (ConsumerOffsets) -----------------------------------------------------------

    async def commit(self, offsets: Any = None) -> None:
        """Commit positions (None: every assigned partition), a {tp: offset} map, or messages.

        Offsets are of the next record to consume. A message (or list of them) commits past it.
        """
        await self._lifecycle.ensure_started()
        await self._offsets.commit(offsets)

    async def committed(self, partitions: Iterable[Any] | None = None) -> dict[TopicPartition, int | None]:
        """The group's committed offsets (None where nothing is committed).

        A stable read (KIP-447), as Java's consumer makes: offsets a transaction committed are
        waited for until its markers are written (UNSTABLE_OFFSET_COMMIT, retried), not reported
        as the older ones (or none) that a plain read gives in the meantime."""
        return await self._offsets.committed(partitions)

    def seek(self, tp: Any, offset: int | OffsetAndMetadata) -> None:
        """Consume ``tp`` from ``offset`` next (also the way past a corrupt batch).

        An ``OffsetAndMetadata`` with a ``leader_epoch`` (e.g. from ``committed``-style storage
        of your own) has the position validated against the leader's log first (KIP-320): a
        truncated log resets per ``auto_offset_reset``, or with "none" makes poll raise
        KafkaLogTruncationError.
        """
        self._offsets.seek(tp, offset)

    def seek_to_beginning(self, partitions: Iterable[Any] | None = None) -> None:
        self._offsets.reset(partitions, OffsetReset.EARLIEST)

    def seek_to_end(self, partitions: Iterable[Any] | None = None) -> None:
        self._offsets.reset(partitions, OffsetReset.LATEST)

    async def position(self, tp: Any) -> int | None:
        """The offset of the next record poll() will hand over for ``tp`` (once it is known)."""
        await self._lifecycle.ensure_started()
        return self._offsets.position(tp)

    async def offsets_for_times(
        self, timestamps: Mapping[Any, int]
    ) -> dict[TopicPartition, ListedOffset | None]:
        """Earliest offset whose timestamp is >= the given one, per partition (None: no such record)."""
        return await self._offsets.offsets_for_times(timestamps)

    async def beginning_offsets(self, partitions: Iterable[Any]) -> dict[TopicPartition, int]:
        return await self._offsets.beginning_offsets(partitions)

    async def end_offsets(self, partitions: Iterable[Any]) -> dict[TopicPartition, int]:
        return await self._offsets.end_offsets(partitions)

    async def lag(self) -> dict[TopicPartition, int | None]:
        """Records between each position and the log end (None while the position is unknown)."""
        await self._lifecycle.ensure_started()
        return await self._offsets.lag()

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

    def fetch_until(self, partition: Any, offset: int | None) -> None:
        """Fetch ``partition`` only below ``offset`` (None: no bound). For a reader of a known
        offset range: nothing past its end is fetched ahead, and no Fetch is left waiting at the
        broker once the range is buffered, to hold up the next one. Records already buffered
        past it are still handed over; a seek drops them."""
        self._subs.fetch_until(as_topic_partition(partition), offset)
        self._fetcher.wake()

    def set_callback_runner(self, runner: CallbackRunner | None) -> None:
        """Have ``runner(callback, partitions)`` run the rebalance callbacks (the sync face runs
        them in the application's thread, inside its poll); None: on the event loop."""
        self._rebalance.runner = runner

    @property
    def closed(self) -> bool:
        """True once close() began."""
        return self._lifecycle.closed

    def group_metadata(self) -> ConsumerGroupMetadata:
        """The group, generation and member id this consumer has now (generation -1 when it is
        not a member: no group, a static assignment, or between leaving and rejoining)."""
        return self._group.metadata()

    def subscription(self) -> list[str]:
        return list(self._topics)

    async def client_instance_id(self, timeout: float) -> uuid.UUID:
        """The KIP-714 client instance id the broker assigned this consumer, as Java's
        ``clientInstanceId(Duration)``, waiting at most ``timeout`` seconds for it.

        KafkaConfigError when ``enable_metrics_push`` is off, KafkaUnsupportedVersionError when
        the brokers do not support KIP-714, KafkaTimeoutError saying what is awaited."""
        return await wait_instance_id(self._telemetry, timeout)

    def metrics(self) -> dict[str, Any]:
        """Plain-dict snapshot: the client's network counters plus ``"consumer"`` (records, bytes,
        lag per partition, rebalances); keys in docs/metrics.md."""
        snap: dict[str, Any] = self._client.metrics()
        snap["consumer"] = self._stats.snapshot(self._subs.items())
        snap["consumer"]["group_id"] = self.group_id
        return snap
