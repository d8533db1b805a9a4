"""The blocking producer (``kafka_core.KafkaProducer``): a thin face over the asyncio one.

``send`` runs in the caller's thread straight into the thread-safe accumulator (no hop to the
loop per record); flush, close and metadata waits run on the private loop thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from kafka_core._sync import LoopThread, SyncFace, sync_face
from kafka_core.errors import KafkaConfigError
from kafka_core.producer.columns import ColumnEncoder, encode_columns
from kafka_core.producer.futures import RecordFuture, SendBatchFuture
from kafka_core.producer.producer import KafkaProducer as AsyncKafkaProducer
from kafka_core.producer.transactions import prepared as _prepared
from kafka_core.producer.transactions.prepared import PreparedTransaction

__all__ = ["KafkaProducer", "complete_transaction", "fence_transactional_id"]


def complete_transaction(
    prepared: PreparedTransaction | Sequence[Any],
    *,
    commit: bool,
    bootstrap_servers: str | Sequence[str] = "localhost:9092",
    client: Any = None,
    timeout: float | None = None,
    **client_options: Any,
) -> None:
    """Blocking ``kafka_core.aio.complete_transaction``: commit or abort a prepared transaction
    from any process. ``client``: a blocking ``kafka_core.KafkaClient`` to use (left open)."""
    _blocking(
        "complete_transaction",
        lambda **kw: _prepared.complete_transaction(prepared, commit=commit, timeout=timeout, **kw),
        bootstrap_servers,
        client,
        client_options,
    )


def fence_transactional_id(
    transactional_id: str,
    *,
    transaction_timeout_ms: int = 60_000,
    bootstrap_servers: str | Sequence[str] = "localhost:9092",
    client: Any = None,
    timeout: float | None = None,
    **client_options: Any,
) -> tuple[int, int]:
    """Blocking ``kafka_core.aio.fence_transactional_id``: abort whatever transaction the id has
    open and fence any producer still holding it. ``client`` as in ``complete_transaction``."""
    result: tuple[int, int] = _blocking(
        "fence_transactional_id",
        lambda **kw: _prepared.fence_transactional_id(
            transactional_id, transaction_timeout_ms=transaction_timeout_ms, timeout=timeout, **kw
        ),
        bootstrap_servers,
        client,
        client_options,
    )
    return result


def _blocking(
    name: str,
    make: Callable[..., Coroutine[Any, Any, Any]],
    bootstrap_servers: str | Sequence[str],
    client: Any,
    client_options: dict[str, Any],
) -> Any:
    """Run ``make(...)``'s coroutine on ``client``'s loop, else on a loop thread of its own."""
    if client is not None:
        if not isinstance(client, SyncFace):
            raise KafkaConfigError(
                f"client= takes a blocking kafka_core.KafkaClient here (kafka_core.aio.{name} "
                "takes the asyncio one)"
            )
        coro = make(client=client.async_object, **client_options)
        return asyncio.run_coroutine_threadsafe(coro, client.loop).result()
    loop_thread = LoopThread(name=f"kafka-core-{name.replace('_', '-')}")
    try:
        return loop_thread.run(make(bootstrap_servers=bootstrap_servers, **client_options))
    finally:
        loop_thread.stop()


@sync_face(
    AsyncKafkaProducer,
    close_method="_close_on_finalize",
    exclude=("bind_blocking", "queue_batch"),  # the face's own plumbing, not its API
)
class KafkaProducer(SyncFace):
    """Blocking Kafka producer; same options as ``kafka_core.aio.KafkaProducer``.

    ``send(topic, value, key=None, partition=None, headers=None, timestamp_ms=None)`` returns a
    future of RecordMetadata at once; it blocks only while ``buffer_memory`` is full or for the
    first record of a topic while its partitions are looked up (up to ``max_block_ms`` in all).
    Use ``with KafkaProducer(...) as p:`` or call ``close()``.

    Construction does not wait for the broker (as the Java client and librdkafka): a bad address
    shows as ``send`` giving up on the metadata after ``max_block_ms`` and the records failing at
    ``delivery_timeout_ms``, each error naming the cause (e.g. the connection refused).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if isinstance(kwargs.get("client"), SyncFace):
            raise KafkaConfigError(
                "client= takes a kafka_core.aio.KafkaClient running on the producer's loop; "
                "pass the options instead and the producer builds its own client"
            )
        super().__init__(*args, **kwargs)
        loop_thread = self._loop_thread  # not self: the face must stay collectable
        # The hot path: the accumulator's ``append`` (accel.FastAppend), no wrapper frame in between (one
        # frame only when key/value serializers are set).
        self.send = self._async_obj.bind_blocking(  # type: ignore[method-assign]
            loop_thread.run, loop_thread.loop, loop_thread.thread_id
        )

    def send(
        self,
        topic: str,
        value: Any,
        key: Any = None,
        partition: int | None = None,
        headers: Sequence[tuple[str, Any]] | None = None,
        timestamp_ms: int | None = None,
    ) -> RecordFuture:
        """Queue one record and return a future of its RecordMetadata at once.

        ``key_serializer``/``value_serializer`` run here (their exceptions come out of ``send``).
        It blocks only while ``buffer_memory`` is full, or for a topic's first record while its
        partitions are looked up, up to ``max_block_ms`` in all (then KafkaTimeoutError)."""
        raise NotImplementedError  # never reached: __init__ binds the real one

    def send_batch(
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
        """Queue many records (lists or pyarrow binary arrays); one future for the whole call.

        With ``value_encoder``/``key_encoder`` (e.g.
        ``kafka_core.schema_registry.columnar.AvroColumnSerializer``)
        ``values``/``keys`` are Arrow tables or struct columns, encoded here first."""
        values, keys = encode_columns(topic, values, keys, key_encoder, value_encoder)
        core: AsyncKafkaProducer = self._async_obj
        if not core.known_partitions(topic):
            self._run(core.wait_topic(topic))
        return core.queue_batch(topic, values, keys, partition, headers, timestamps)

    def flush(self, timeout: float | None = None) -> None:
        """Send everything queued now and wait until each record is delivered or failed."""
        self._run(self._async_obj.flush(timeout))

    def close(self, timeout: float | None = None) -> int:  # type: ignore[override]
        """Deliver what is queued (up to ``timeout`` s), stop, and return how many records were abandoned."""
        if not self._loop_thread.alive:
            return 0
        abandoned = self._run(self._async_obj.close(timeout))
        self._finalizer()
        return abandoned

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def idempotent(self) -> bool:
        """Whether idempotence is on: known once a broker answered (waits up to ``max_block_ms``)."""
        self._wait_ready()
        return self._async_obj.idempotent

    @property
    def producer_id_and_epoch(self) -> tuple[int, int]:
        """(-1, -1) without idempotence or before a broker answered (waits up to ``max_block_ms``)."""
        self._wait_ready()
        return self._async_obj.producer_id_and_epoch

    @property
    def transaction_state(self) -> str:
        """The transaction state (see ``kafka_core.aio.KafkaProducer.transaction_state``)."""
        return self._async_obj.transaction_state

    def _wait_ready(self) -> None:
        core: AsyncKafkaProducer = self._async_obj
        if not core.ready and not core.closed and self._loop_thread.alive:
            self._run(core.wait_ready())
