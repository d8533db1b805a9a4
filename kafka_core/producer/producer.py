"""The asyncio producer (``kafka_core.aio.KafkaProducer``): the one implementation of the logic.

The blocking ``kafka_core.KafkaProducer`` runs this object on a private loop thread and calls
its thread-safe accumulator directly for ``send``, so a record never hops threads on its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any, Self

from kafka_core.client import KafkaClient
from kafka_core.client.waiting import wait_event, within
from kafka_core.config import keywords_from_config, role_keywords, takes_config
from kafka_core.errors import (
    KafkaAuthenticationError,
    KafkaClosedError,
    KafkaConfigError,
    KafkaConnectionError,
    KafkaError,
    KafkaProtocolError,
    KafkaTimeoutError,
    KafkaUnsupportedVersionError,
)
from kafka_core.option_names import accepted_keywords, reject_unknown
from kafka_core.producer.accumulator import Accumulator, BufferFull
from kafka_core.producer.batching import Chunk
from kafka_core.producer.columns import ColumnEncoder, encode_columns
from kafka_core.producer.futures import BatchResult, RecordFuture, SendBatchFuture
from kafka_core.producer.idempotence import INIT_PRODUCER_ID_MIN_VERSION, IdempotenceState
from kafka_core.producer.options import check_options, check_transactional, parse_acks
from kafka_core.producer.partitioner import Partitioner, make_partitioner
from kafka_core.producer.sender import Sender
from kafka_core.producer.topics import TopicWaits, with_cause
from kafka_core.producer.transactions.face import TransactionalProducer
from kafka_core.producer.transactions.manager import TransactionManager
from kafka_core.protocol import ApiKey
from kafka_core.telemetry import pusher_for, wait_instance_id

log = logging.getLogger("kafka_core.producer")

__all__ = ["KafkaProducer"]


class KafkaProducer(TopicWaits, TransactionalProducer):
    """Asyncio Kafka producer. ``await send(...)`` returns a future of RecordMetadata at once
    (it only waits while ``buffer_memory`` is full). Use ``async with`` or ``await close()``.

    The blocking ``kafka_core.KafkaProducer`` takes the same options, documented here once:

    - ``bootstrap_servers``: ``"host:port"``, a comma list or a sequence of them; or, in its
      place, a dict of Java-style names as confluent-kafka takes (``{"bootstrap.servers": ...,
      "enable.idempotence": True}``, translated as ``from_config`` does), keyword arguments
      beside it winning over the same option in the dict.
    - ``acks``: ``0`` (no answer), ``1`` (the leader) or ``-1``/``"all"`` (every in-sync replica).
    - ``linger_ms``: how long a batch waits for more records before it may go (sooner when full).
    - ``batch_size``: the most bytes of records in one batch (a larger record goes alone).
    - ``compression``: ``"none"``, ``"gzip"``, ``"snappy"``, ``"lz4"`` or ``"zstd"``;
      ``compression_level`` the codec's level (None: its default).
    - ``idempotent``: None turns it on when the broker supports it and ``acks``/``max_in_flight``
      allow it (as the Java client); True requires it, False never.
    - ``partitioner``: ``"murmur2"`` (the Java client's, sticky for null keys), ``"round_robin"``,
      a callable ``(topic, key, num_partitions) -> partition`` or a ``Partitioner``.
    - ``max_in_flight``: Produce requests in flight per broker connection (at most 5 with
      idempotence).
    - ``max_request_size``: the most bytes of batches in one Produce request (a larger batch
      goes alone); a request takes a batch from every partition of its broker that has one.
    - ``produce_concurrency``: connections per broker that Produce requests travel on, the
      partitions dealt among them (each keeps its own, so its batches stay in order): a broker
      serves one connection's requests one at a time, so more lets it write several partitions
      at once. 1 sends everything on the client's one connection.
    - ``delivery_timeout_ms``: a record fails (KafkaTimeoutError naming the cause) if it is not
      delivered this long after ``send`` returned, retries included.
    - ``retry_backoff_ms``: the wait before a partition's failed batch is retried.
    - ``request_timeout_ms``: bounds every request the producer makes (metadata, InitProducerId,
      Produce); its own client waits no longer than that for any answer.
    - ``buffer_memory``: bytes of queued records; ``send`` waits while it is full.
    - ``max_block_ms``: the most ``send`` waits, for memory or a new topic's metadata, before
      KafkaTimeoutError; also bounds ``start``.
    - ``key_serializer`` / ``value_serializer``: ``fn(obj) -> bytes`` applied by ``send`` to a key
      / value that is not None, before anything is queued (an exception it raises comes out of
      ``send``). ``send_batch`` takes bytes (lists or Arrow arrays) and applies neither.
    - ``transactional_id``: makes the producer transactional (KIP-98; implies idempotence and
      acks='all'): ``init_transactions()`` once, then ``begin_transaction()``, ``send``...,
      ``send_offsets_to_transaction``, ``commit_transaction()`` or ``abort_transaction()``.
      ``transaction_timeout_ms``: how long the coordinator lets a transaction stay open.
    - ``client``: a ``kafka_core.aio.KafkaClient`` to share (on this loop); None builds one.
    - ``**client_options``: the rest go to that client (``client_id``, ``security_protocol``,
      ``ssl_*``, ``sasl_*``, ``connect_timeout_ms``... see ``kafka_core.aio.KafkaClient``).
    """

    @takes_config(role_keywords("producer"))
    def __init__(
        self,
        bootstrap_servers: str | Sequence[str] | Mapping[str, Any] = "localhost:9092",
        *,
        acks: int | str = -1,
        linger_ms: float = 5,
        batch_size: int = 1_048_576,
        compression: str = "none",
        compression_level: int | None = None,
        idempotent: bool | None = None,
        partitioner: str | Callable[[str, Any, int], int] | Partitioner = "murmur2",
        max_in_flight: int = 5,
        max_request_size: int = 1_048_576,
        produce_concurrency: int = 3,
        delivery_timeout_ms: float = 120_000,
        retry_backoff_ms: float = 100,
        request_timeout_ms: float = 30_000,
        buffer_memory: int = 64 << 20,
        max_block_ms: float = 60_000,
        key_serializer: Callable[[Any], bytes] | None = None,
        value_serializer: Callable[[Any], bytes] | None = None,
        transactional_id: str | None = None,
        transaction_timeout_ms: int = 60_000,
        client: KafkaClient | None = None,
        **client_options: Any,
    ) -> None:
        reject_unknown(
            type(self).__name__,
            client_options,
            accepted_keywords(KafkaProducer.__init__, KafkaClient.__init__),
        )
        for name, fn in (("key_serializer", key_serializer), ("value_serializer", value_serializer)):
            if fn is not None and not callable(fn):
                raise KafkaConfigError(f"{name} must be a callable or None, not {fn!r}")
        self._key_serializer = key_serializer
        self._value_serializer = value_serializer
        self._serializing = key_serializer is not None or value_serializer is not None
        self.acks = parse_acks(acks)
        if transactional_id is not None:
            check_transactional(
                transactional_id, transaction_timeout_ms, acks=self.acks, idempotent=idempotent
            )
            idempotent = True
        check_options(
            acks=self.acks,
            linger_ms=linger_ms,
            batch_size=batch_size,
            compression=compression,
            idempotent=idempotent,
            max_in_flight=max_in_flight,
            max_request_size=max_request_size,
            produce_concurrency=produce_concurrency,
            delivery_timeout_ms=delivery_timeout_ms,
            retry_backoff_ms=retry_backoff_ms,
            request_timeout_ms=request_timeout_ms,
            buffer_memory=buffer_memory,
            max_block_ms=max_block_ms,
        )
        # None: on when the broker supports it and the other options allow it (as the Java client).
        self._idempotent_wanted = idempotent
        if idempotent is None and (self.acks != -1 or max_in_flight > 5):
            self._idempotent_wanted = False
        self._own_client = client is None
        # request_timeout_ms bounds every request the producer makes (metadata, InitProducerId and
        # Produce alike), so its own client waits no longer than that for any answer.
        self.client = (
            client
            if client is not None
            else KafkaClient(bootstrap_servers, request_timeout_ms=request_timeout_ms, **client_options)
        )
        self._acc = Accumulator(
            batch_size=batch_size,
            buffer_memory=buffer_memory,
            max_block_ms=max_block_ms,
            linger_ms=linger_ms,
            delivery_timeout_ms=delivery_timeout_ms,
            partitioner=make_partitioner(partitioner),
            wakeup=self._wake,
        )
        self._acc.block = False
        self._max_block = max_block_ms / 1000.0
        self._space: asyncio.Event | None = None
        self._sender = Sender(
            self.client,
            self._acc,
            acks=self.acks,
            max_in_flight=max_in_flight,
            concurrency=produce_concurrency,
            max_request_size=max_request_size,
            retry_backoff_ms=retry_backoff_ms,
            request_timeout_ms=request_timeout_ms,
            compression=compression,
            compression_level=compression_level,
            idempotence=None,
        )
        servers = bootstrap_servers if isinstance(bootstrap_servers, str) else ",".join(bootstrap_servers)
        where = f" (bootstrap {servers})" if client is None else ""
        self._sender.waiting_for = f"no broker has answered yet{where}"
        self._acc.on_refused = self._sender.refused  # the blocking face makes it hop to the loop
        self._telemetry = pusher_for(  # KIP-714, started once connected
            self.client, "producer", self.metrics, lambda: {"transactional_id": transactional_id or ""}
        )
        self._txn: TransactionManager | None = None
        if transactional_id is not None:
            self._txn = self._sender.txn = TransactionManager.for_sender(
                self._sender, transactional_id, transaction_timeout_ms, request_timeout_ms, drain=self._drain
            )
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ready: asyncio.Event | None = None
        # Set once the client has bootstrapped (before idempotence is set up), or the start failed
        # for good: a topic's metadata can be asked for from then on.
        self._connected: asyncio.Event | None = None
        self._closed = False
        self._start_error: BaseException | None = None
        self._start_retry_error: BaseException | None = None  # why the start is still retrying
        with contextlib.suppress(RuntimeError):
            self._begin(asyncio.get_running_loop())

    @classmethod
    def from_config(cls, config: Mapping[str, Any], **overrides: Any) -> Self:
        """A producer from Java-style names (``{"bootstrap.servers": ..., "linger.ms": 5}``), with
        ``overrides`` (keyword names, e.g. ``value_serializer=``) on top; unknown names raise
        KafkaConfigError naming each of them."""
        return cls(**keywords_from_config(config, "producer", overrides))

    # -- lifecycle ---------------------------------------------------------------------------------

    def _begin(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._task is None:
            self._loop = loop
            self._ready = asyncio.Event()
            self._connected = asyncio.Event()
            self._task = loop.create_task(self._main())

    def _wake(self) -> None:
        self._sender.wake()

    def bind_blocking(
        self,
        run: Callable[[Coroutine[Any, Any, Any]], Any],
        loop: asyncio.AbstractEventLoop,
        loop_thread_id: int | None,
    ) -> Callable[..., RecordFuture]:
        """Serve a blocking face whose callers are in other threads than ``loop``'s: ``run``
        runs a coroutine on ``loop`` and waits for it. Returns the hot ``send``: the
        accumulator's own ``append``, with no frame of ours in between (it is the same record
        path as :meth:`send`, which only adds waiting on the loop instead of blocking)."""
        wake = self._sender.wake

        def wakeup() -> None:
            loop.call_soon_threadsafe(wake)

        refused = self._sender.refused

        def on_refused(topic: str, error: BaseException) -> None:
            loop.call_soon_threadsafe(refused, topic, error)

        self._acc.bind_blocking(
            lookup=lambda topic: run(self._lookup(topic)),
            wakeup=wakeup,
            loop_thread_id=loop_thread_id,
            on_refused=on_refused,
        )
        append = self._acc.append  # a transactional producer's state gates it (gate_sends)
        if not self._serializing:
            return append
        serialize = self._serialize

        def send(
            topic: str,
            value: Any,
            key: Any = None,
            partition: int | None = None,
            headers: Sequence[tuple[str, Any]] | None = None,
            timestamp_ms: int | None = None,
        ) -> RecordFuture:
            key, value = serialize(key, value)
            return append(topic, value, key, partition, headers, timestamp_ms)

        return send

    def _serialize(self, key: Any, value: Any) -> tuple[Any, Any]:
        """The configured serializers applied to what is not None (a None value is a tombstone)."""
        if key is not None and self._key_serializer is not None:
            key = self._key_serializer(key)
        if value is not None and self._value_serializer is not None:
            value = self._value_serializer(value)
        return key, value

    @property
    def ready(self) -> bool:
        """Whether a broker has answered (or starting failed for good: see :meth:`wait_ready`)."""
        return self._ready is not None and self._ready.is_set()

    @property
    def closed(self) -> bool:
        return self._closed

    async def start(self) -> None:
        """Connect and learn what the broker supports, waiting at most ``max_block_ms``: then
        KafkaTimeoutError with the cause (the producer keeps trying; ``send`` still queues)."""
        if self._closed:
            raise KafkaClosedError("the producer is closed")
        if not await self.wait_ready(self._max_block):
            raise KafkaTimeoutError(
                f"no broker reachable within max_block_ms ({self._max_block * 1000:.0f} ms)"
                + with_cause(self._start_cause())
            )

    def _start_cause(self) -> BaseException | None:
        """Why the producer has not reached a broker yet, as far as anyone knows."""
        return (
            getattr(self.client, "last_error", None)
            or self._start_retry_error
            or KafkaTimeoutError(self._sender.waiting_for)
        )

    async def wait_ready(self, timeout: float | None = None) -> bool:
        """Wait up to ``timeout`` s (default ``max_block_ms``) for the connection; False if not
        there yet (sending still works)."""
        if timeout is None:
            timeout = self._max_block
        self._begin(asyncio.get_running_loop())
        if not await wait_event(self._ready, timeout):  # type: ignore[arg-type]
            return False
        if self._start_error is not None:
            raise self._start_error
        return True

    async def __aenter__(self) -> KafkaProducer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _main(self) -> None:
        # The sender runs from the start, paused: deadlines are kept while no broker answers.
        sender = self._sender
        sender.paused = True
        run = asyncio.get_running_loop().create_task(sender.run())
        try:
            while True:
                try:
                    await self.client.start()
                    self._connected.set()  # type: ignore[union-attr]
                    if self._telemetry is not None:
                        self._telemetry.start()
                    if self._txn is None:  # a transactional id is set up by init_transactions()
                        await self._setup_idempotence()
                    break
                except KafkaError as exc:
                    if _fatal(exc):
                        self._fatal_start(exc)
                        return
                    self._start_retry_error = exc
                    log.warning("producer start: %s; retrying", exc)
                    await asyncio.sleep(sender.backoff)
            sender.paused = False
            self._ready.set()  # type: ignore[union-attr]
            sender.wake()
            await asyncio.shield(run)
        finally:
            run.cancel()

    def _fatal_start(self, exc: BaseException) -> None:
        """Starting cannot succeed: every record, queued or sent later, fails with ``exc``."""
        self._start_error = exc
        self._acc.closed_by = exc
        self._ready.set()  # type: ignore[union-attr]
        self._connected.set()  # type: ignore[union-attr]
        self._fail_everything(exc)

    async def _setup_idempotence(self) -> None:
        if self._idempotent_wanted is False:
            return
        versions = await self._reachable_versions()
        supported = bool(versions) and all(
            v.get(ApiKey.INIT_PRODUCER_ID, -1) >= INIT_PRODUCER_ID_MIN_VERSION for v in versions.values()
        )
        if not supported:
            if self._idempotent_wanted:
                raise KafkaUnsupportedVersionError(
                    "idempotent=True but the broker has no usable InitProducerId"
                )
            return
        state = IdempotenceState()
        try:
            await state.acquire(self.client)
        except KafkaProtocolError as exc:
            if self._idempotent_wanted or exc.retriable:
                raise
            log.warning("idempotence off: InitProducerId failed (%s)", exc)
            return
        self._sender.idem = state

    async def _reachable_versions(self) -> dict[int, dict[ApiKey, int]]:
        """The negotiated versions of every known broker, else of those that can be reached now:
        a node that is down (one of three just crashed, still in the metadata) must not hold the
        start back until the metadata forgets it; at least one broker must answer."""
        try:
            return await self.client.negotiated_versions()
        except KafkaAuthenticationError:
            raise
        except KafkaConnectionError as down:
            versions: dict[int, dict[ApiKey, int]] = {}
            for broker in self.client.cached_metadata().brokers:
                try:
                    versions.update(await self.client.negotiated_versions(broker.node_id))
                except KafkaAuthenticationError:
                    raise
                except KafkaConnectionError:
                    continue
            if not versions:
                raise down from None
            return versions

    async def client_instance_id(self, timeout: float) -> uuid.UUID:
        """The KIP-714 client instance id the broker assigned this producer, as Java's
        ``clientInstanceId(Duration)``, waiting at most ``timeout`` seconds for it.

        KafkaConfigError when ``enable_metrics_push`` is off, KafkaUnsupportedVersionError when
        the brokers do not support KIP-714, KafkaTimeoutError saying what is awaited."""
        return await wait_instance_id(self._telemetry, timeout)

    def metrics(self) -> dict[str, Any]:
        """Plain-dict snapshot: the client's network counters plus ``"producer"`` (records, bytes,
        batches, retries, buffer use), counted per batch; keys in docs/metrics.md."""
        snap = self.client.metrics()
        snap["producer"] = self._sender.metrics.snapshot()
        snap["producer"]["buffer_used_bytes"] = self._acc.mem.used
        snap["producer"]["buffer_limit_bytes"] = self._acc.buffer_memory
        if self._txn is not None:
            snap["producer"]["transactions"] = self._txn.metrics()
        return snap

    @property
    def idempotent(self) -> bool:
        return self._sender.idem is not None

    @property
    def producer_id_and_epoch(self) -> tuple[int, int]:
        idem = self._sender.idem
        return (idem.producer_id, idem.producer_epoch) if idem is not None else (-1, -1)

    # -- sending -----------------------------------------------------------------------------------

    async def send(
        self,
        topic: str,
        value: Any,
        key: Any = None,
        partition: int | None = None,
        headers: Sequence[tuple[str, Any]] | None = None,
        timestamp_ms: int | None = None,
    ) -> RecordFuture:
        """Queue one record; returns its future (await it, or ``.result()`` from another thread)."""
        return await self._send(topic, value, key, partition, headers, timestamp_ms)

    async def _send(
        self,
        topic: str,
        value: Any,
        key: Any,
        partition: int | None,
        headers: Sequence[tuple[str, Any]] | None,
        timestamp_ms: int | None,
    ) -> RecordFuture:
        if self._serializing:
            key, value = self._serialize(key, value)
        if self._task is None:
            self._begin(asyncio.get_running_loop())
        if type(topic) is str and not self._acc.partition_count(topic):
            failure = await self._lookup(topic)
            if failure is not None and not self._acc.partition_count(topic):
                return self._acc.refuse(topic, value, key, failure)
        try:
            return self._acc.append(topic, value, key, partition, headers, timestamp_ms)
        except BufferFull:
            pass
        deadline = time.monotonic() + self._max_block
        while True:
            await self._wait_for_space(deadline)
            try:
                return self._acc.append(topic, value, key, partition, headers, timestamp_ms)
            except BufferFull:
                continue

    async def _wait_for_space(self, deadline: float) -> None:
        if self._space is None:
            self._space = asyncio.Event()
            self._acc.space_event = self._space
        self._space.clear()
        left = deadline - time.monotonic()
        if left <= 0:
            raise KafkaTimeoutError("buffer_memory still full after max_block_ms")
        await wait_event(self._space, min(left, 0.05))

    async def send_batch(
        self,
        topic: str,
        values: Any,
        keys: Any = None,
        partition: int | None = None,
        headers: Any = None,
        timestamps: Any = None,
        *,
        key_encoder: ColumnEncoder | None = None,
        value_encoder: ColumnEncoder | None = None,
    ) -> SendBatchFuture:
        """Queue many records (lists or pyarrow binary arrays) straight for the columnar encoder.

        With ``value_encoder``/``key_encoder`` ``values``/``keys`` are Arrow tables or struct
        columns, encoded first in a worker thread (a registry call blocks; the loop must not)."""
        if key_encoder is not None or value_encoder is not None:
            values, keys = await asyncio.to_thread(
                encode_columns, topic, values, keys, key_encoder, value_encoder
            )
        if self._txn is not None:
            with self._txn.sending():
                return await self._send_batch(topic, values, keys, partition, headers, timestamps)
        return await self._send_batch(topic, values, keys, partition, headers, timestamps)

    async def _send_batch(
        self, topic: str, values: Any, keys: Any, partition: int | None, headers: Any, timestamps: Any
    ) -> SendBatchFuture:
        if self._task is None:
            self._begin(asyncio.get_running_loop())
        await self.wait_topic(topic)
        chunks = self._acc.plan_batch(topic, values, keys, partition, headers, timestamps)
        parts: list[tuple[BatchResult, Any]] = []
        deadline = time.monotonic() + self._max_block
        while True:
            try:
                self._queue_chunks(topic, chunks, parts)
                return SendBatchFuture(parts, len(values))
            except BufferFull:
                await self._wait_for_space(deadline)

    def queue_batch(
        self,
        topic: str,
        values: Any,
        keys: Any = None,
        partition: int | None = None,
        headers: Any = None,
        timestamps: Any = None,
    ) -> SendBatchFuture:
        """``send_batch`` for a topic whose partitions are known (:meth:`known_partitions`),
        without awaiting: for callers the accumulator may block (the blocking face, see
        :meth:`bind_blocking`); here it raises BufferFull when memory is full."""
        if self._txn is not None:
            with self._txn.sending():
                return self._queue_batch(topic, values, keys, partition, headers, timestamps)
        return self._queue_batch(topic, values, keys, partition, headers, timestamps)

    def _queue_batch(
        self, topic: str, values: Any, keys: Any, partition: int | None, headers: Any, timestamps: Any
    ) -> SendBatchFuture:
        chunks = self._acc.plan_batch(topic, values, keys, partition, headers, timestamps)
        parts: list[tuple[BatchResult, Any]] = []
        self._queue_chunks(topic, chunks, parts)
        return SendBatchFuture(parts, len(values))

    def _queue_chunks(self, topic: str, chunks: list[Chunk], parts: list[tuple[BatchResult, Any]]) -> None:
        """Append the chunks not in ``parts`` yet; on BufferFull ``parts`` says how far it got."""
        while len(parts) < len(chunks):  # one at a time: a BufferFull keeps what was appended
            chunk = chunks[len(parts)]
            parts.append((self._acc.append_chunk(topic, chunk), chunk.rows))

    # -- flush and close -----------------------------------------------------------------------------

    async def flush(self, timeout: float | None = None) -> None:
        """Send everything queued now, ignoring linger, and wait until each record is settled."""
        if self._task is None:
            self._begin(asyncio.get_running_loop())
        deadline = None if timeout is None else time.monotonic() + timeout
        self._acc.flushing += 1
        self._wake()
        try:
            pending = self._acc.unfinished()
            seen: set[int] = set()
            while pending:
                result = pending.pop()
                if id(result) in seen:
                    continue
                seen.add(id(result))
                if not result.done:
                    left = None if deadline is None else deadline - time.monotonic()
                    if left is not None and left <= 0:
                        raise self._flush_timeout(timeout, result)
                    try:
                        await within(result.aio_waiter(), left)
                    except TimeoutError:
                        raise self._flush_timeout(timeout, result) from None
                pending.extend(result.forwarded_to())
        finally:
            self._acc.flushing -= 1

    def _flush_timeout(self, timeout: float | None, result: BatchResult) -> KafkaTimeoutError:
        """Name a partition still waiting and what last kept it from being delivered."""
        cause = self._acc.last_error(result.topic, result.partition)
        where = f"{result.topic}[{result.partition}]" if result.partition >= 0 else repr(result.topic)
        return KafkaTimeoutError(
            f"flush did not finish within {timeout}s: records of {where} still waiting"
            + with_cause(cause or self._sender.cause_for_topic(result.topic))
        )

    async def close(self, timeout: float | None = None) -> int:
        """Deliver what is queued (up to ``timeout`` s), then stop. Returns how many records were
        abandoned (their futures fail with KafkaClosedError; a warning says how many)."""
        if self._closed:
            return 0
        flush_error: BaseException | None = None
        if self._txn is not None and self._txn.ongoing and self._task is not None:
            # As the Java client: an unfinished transaction is aborted, not committed by the flush
            # (within the same ``timeout`` as the flush that follows).
            started = time.monotonic()
            with contextlib.suppress(KafkaError):
                await self._txn.abort(self._max_block if timeout is None else timeout)
            if timeout is not None:
                timeout = max(0.0, timeout - (time.monotonic() - started))
        if self._task is not None and not self._task.done() and self._start_error is None:
            try:
                await self.flush(timeout)
            except KafkaError as exc:
                flush_error = exc
        self._closed = True
        if self._txn is not None:
            self._txn.close()
        abandoned = self._fail_everything(
            KafkaClosedError("the producer was closed before this record was delivered")
        )
        self._sender.begin_close()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        if self._telemetry is not None:  # the last push, flagged terminating
            await self._telemetry.close(timeout)
        if self._own_client:
            await self.client.close()
        if abandoned:
            log.warning("producer closed with %d undelivered records abandoned (%s)", abandoned, flush_error)
        return abandoned

    async def _drain(self) -> None:
        """Wait until every record queued is delivered or failed (the transaction's end)."""
        await self.flush(None)

    async def _close_on_finalize(self) -> int:
        """Close of a producer that was garbage-collected unclosed: do not hang the interpreter."""
        return await self.close(timeout=5.0)

    def _fail_everything(self, exc: BaseException) -> int:
        """Fail every unsettled record, queued or in flight; returns how many records."""
        count = 0
        for result, n in self._acc.abandon_all():
            if not result.done:
                count += n
                result.set_error(exc)
        return count + self._sender.fail_in_flight(exc)


def _fatal(exc: KafkaError) -> bool:
    """Retrying the start will not help (bad options, no common version, a refused login...)."""
    if isinstance(exc, KafkaConfigError | KafkaUnsupportedVersionError | KafkaClosedError):
        return True
    if isinstance(exc, KafkaAuthenticationError):
        # A refused login (or TLS handshake) is not retried: trying again every retry_backoff_ms
        # would hammer the broker with logins that fail the same way. Every record fails with it.
        return True
    return isinstance(exc, KafkaProtocolError) and not exc.retriable
