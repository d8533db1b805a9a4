"""The coordinators' side of transactions (KIP-98, KIP-447): the requests, their retries, and
what an error code means for the transaction (retry, abortable, fatal) as the Java client has it.

``TxnCoordinator`` sends until an answer is not retriable (re-finding the coordinator when it
moved, a short backoff for CONCURRENT_TRANSACTIONS) and raises the rest as KafkaTransactionError.
Versions are negotiated by the client, capped where a later version is not a client's to use:
AddPartitionsToTxn v4+ is the brokers' batched form (KIP-890). EndTxn v5 and TxnOffsetCommit v5
are transactions v2 (KIP-890 part 2, see version.py): used only when ``TxnCoordinator.v2`` says
so, EndTxn v5 then answering the producer id and epoch the next transaction uses. ``v2`` changes
only between transactions (``refresh_version``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from kafka_core.client.metadata import OffsetAndMetadata, TopicPartition
from kafka_core.errors import (
    KafkaCodecError,
    KafkaConnectionError,
    KafkaError,
    KafkaProducerFencedError,
    KafkaProtocolError,
    KafkaTimeoutError,
    KafkaTransactionError,
    KafkaUnsupportedVersionError,
)
from kafka_core.producer.idempotence import IdempotenceState
from kafka_core.producer.transactions.version import (
    END_TXN_V2_VERSION,
    TXN_OFFSET_COMMIT_V2_VERSION,
    VersionTracker,
)
from kafka_core.protocol import ApiKey
from kafka_core.protocol.errors import (
    COORDINATOR_CODES,
    PRODUCER_ID_CODES,
    REJOIN_CODES,
    RETRIABLE_CODES,
    ErrorCode,
    error_for,
)
from kafka_core.protocol.messages import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    TxnOffsetCommitRequest,
)

log = logging.getLogger("kafka_core.producer")

__all__ = [
    "BUMP_CODES",
    "FATAL_CODES",
    "FENCED_CODES",
    "PRODUCE_FATAL_CODES",
    "TxnCoordinator",
    "code_name",
    "retriable",
]

E = ErrorCode
# Another producer took the transactional id over: fatal, as KafkaProducerFencedError.
FENCED_CODES = frozenset({E.PRODUCER_FENCED, E.INVALID_PRODUCER_EPOCH})
# The producer cannot go on whatever the application does (the Java client's fatal errors).
FATAL_CODES = frozenset(
    {
        E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        E.CLUSTER_AUTHORIZATION_FAILED,
        E.INVALID_TXN_STATE,
        E.INVALID_TRANSACTION_TIMEOUT,
        E.UNSUPPORTED_VERSION,
        E.UNSUPPORTED_FOR_MESSAGE_FORMAT,
    }
)
# Of those, what is fatal when a Produce answers it (other Produce errors are abortable).
PRODUCE_FATAL_CODES = FENCED_CODES | {
    E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    E.CLUSTER_AUTHORIZATION_FAILED,
    E.UNSUPPORTED_VERSION,
}
# Abortable, and sequence numbers were lost: the epoch is bumped when the transaction is aborted.
BUMP_CODES = (PRODUCER_ID_CODES - FENCED_CODES) | {
    E.OUT_OF_ORDER_SEQUENCE_NUMBER,
    E.INVALID_PRODUCER_ID_MAPPING,
}
CONCURRENT_BACKOFF = 0.02  # CONCURRENT_TRANSACTIONS clears quickly (the Java client's 20 ms)
BUMP_MIN_VERSION = 3  # InitProducerId with the current id and epoch (KIP-360)
Group = tuple[str, int, str, str | None]  # group id, generation, member id, group instance id


def code_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return "UNKNOWN"


def retriable(code: int) -> bool:
    return code in RETRIABLE_CODES or code in COORDINATOR_CODES


ADD_PARTITIONS_MAX_VERSION = 3
ADD_OFFSETS_MAX_VERSION = 4
END_TXN_MAX_VERSION = 4
TXN_OFFSET_COMMIT_MAX_VERSION = 4
TXN_OFFSET_COMMIT_MEMBER_VERSION = 3  # generation, member id and instance id (KIP-447)


async def add_partitions(
    client: Any,
    node: int,
    ident: tuple[str, int, int],
    partitions: Iterable[tuple[str, int]],
    timeout_ms: float,
) -> dict[tuple[str, int], int]:
    """AddPartitionsToTxn for ``partitions``: the error code of each partition answered."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    txn_id, pid, epoch = ident
    body = AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=txn_id,
        v3_and_below_producer_id=pid,
        v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[
            AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=t, partitions=sorted(ps))
            for t, ps in by_topic.items()
        ],
    )
    resp = await client.send(node, body, max_version=ADD_PARTITIONS_MAX_VERSION, timeout_ms=timeout_ms)
    out: dict[tuple[str, int], int] = {}
    for topic in resp.results_by_topic_v3_and_below:
        for p in topic.results_by_partition:
            out[(topic.name, p.partition_index)] = p.partition_error_code
    return out


async def add_offsets(
    client: Any, node: int, ident: tuple[str, int, int], group_id: str, timeout_ms: float
) -> int:
    txn_id, pid, epoch = ident
    body = AddOffsetsToTxnRequest(
        transactional_id=txn_id, producer_id=pid, producer_epoch=epoch, group_id=group_id
    )
    resp = await client.send(node, body, max_version=ADD_OFFSETS_MAX_VERSION, timeout_ms=timeout_ms)
    return int(resp.error_code)


async def end_txn(
    client: Any, node: int, ident: tuple[str, int, int], commit: bool, timeout_ms: float, *, v2: bool = False
) -> tuple[int, int, int]:
    """EndTxn: the error code, and (v5, transactions v2) the producer id and epoch the coordinator
    bumped to (-1, -1 before v5)."""
    txn_id, pid, epoch = ident
    body = EndTxnRequest(transactional_id=txn_id, producer_id=pid, producer_epoch=epoch, committed=commit)
    top = END_TXN_V2_VERSION if v2 else END_TXN_MAX_VERSION
    resp = await client.send(node, body, max_version=top, timeout_ms=timeout_ms)
    return (
        int(resp.error_code),
        int(getattr(resp, "producer_id", -1)),
        int(getattr(resp, "producer_epoch", -1)),
    )


async def txn_offset_commit(
    client: Any,
    node: int,
    ident: tuple[str, int, int],
    group: Group,
    offsets: Mapping[TopicPartition, OffsetAndMetadata],
    timeout_ms: float,
    *,
    v2: bool = False,
) -> dict[TopicPartition, int]:
    """TxnOffsetCommit to the group coordinator; ``group`` is (group id, generation, member id,
    group instance id), sent from v3 on so that the coordinator fences a zombie member (KIP-447).
    A member's metadata the broker's version cannot carry raises KafkaUnsupportedVersionError
    (as the Java client) rather than committing unfenced. ``v2``: v5, which adds the group to the
    transaction itself (no AddOffsetsToTxn before it)."""
    txn_id, pid, epoch = ident
    group_id, generation, member_id, instance_id = group
    if generation >= 0 or member_id or instance_id is not None:
        version = await client.api_version(
            node, ApiKey.TXN_OFFSET_COMMIT, max_version=TXN_OFFSET_COMMIT_MAX_VERSION
        )
        if version < TXN_OFFSET_COMMIT_MEMBER_VERSION:
            raise KafkaUnsupportedVersionError(
                f"the group coordinator's TxnOffsetCommit v{version} cannot carry the consumer's group "
                f"metadata (KIP-447 needs v{TXN_OFFSET_COMMIT_MEMBER_VERSION}+, Kafka 2.5+): pass the "
                "group id alone to send_offsets_to_transaction"
            )
    by_topic: dict[str, list[TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition]] = {}
    for tp, om in offsets.items():
        by_topic.setdefault(tp.topic, []).append(
            TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition(
                partition_index=tp.partition,
                committed_offset=om.offset,
                committed_leader_epoch=om.leader_epoch,
                committed_metadata=om.metadata,
            )
        )
    body = TxnOffsetCommitRequest(
        transactional_id=txn_id,
        group_id=group_id,
        producer_id=pid,
        producer_epoch=epoch,
        generation_id_or_member_epoch=generation,  # Kafka 4.4 names it so: a KIP-848 member sends its epoch
        member_id=member_id,
        group_instance_id=instance_id,
        topics=[
            TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(name=t, partitions=ps)
            for t, ps in by_topic.items()
        ],
    )
    top = TXN_OFFSET_COMMIT_V2_VERSION if v2 else TXN_OFFSET_COMMIT_MAX_VERSION
    resp = await client.send(node, body, max_version=top, timeout_ms=timeout_ms)
    out: dict[TopicPartition, int] = {}
    for topic in resp.topics:
        for p in topic.partitions:
            out[TopicPartition(topic.name, p.partition_index)] = p.error_code
    return out


class TxnCoordinator:
    """The requests of one transactional id, each retried until its answer is not retriable."""

    def __init__(
        self,
        client: Any,
        transactional_id: str,
        idem: IdempotenceState,
        *,
        transaction_timeout_ms: int,
        request_timeout_ms: float,
        retry_backoff_ms: float,
    ) -> None:
        self.client = client
        self.transactional_id = transactional_id
        self.idem = idem
        self.transaction_timeout_ms = transaction_timeout_ms
        self.request_timeout_ms = request_timeout_ms
        self.backoff = retry_backoff_ms / 1000.0
        self.last_cause: BaseException | None = None  # why the last attempt is being retried
        self._refresh = False
        # Transactions v2 (KIP-890 part 2): None until known (init_transactions decides it, then
        # refresh_version between transactions; a coordinator made to end a prepared transaction
        # asks the broker at its first EndTxn).
        self.v2: bool | None = None
        self.tracker = VersionTracker()

    def ident(self) -> tuple[str, int, int]:
        return (self.transactional_id, self.idem.producer_id, self.idem.producer_epoch)

    def classify(self, code: int, what: str, hint: str = "") -> KafkaTransactionError:
        """The error ``code`` answered to ``what`` means for the transaction."""
        msg = (
            f"{what} for transactional id {self.transactional_id!r} failed: [Error {code}] {code_name(code)}"
        )
        if code in FENCED_CODES:
            return KafkaProducerFencedError(
                msg + ": a newer producer with this transactional id fenced this one; close it", code=code
            )
        if code in FATAL_CODES:
            return KafkaTransactionError(msg + "; the producer cannot go on: close it", fatal=True, code=code)
        return KafkaTransactionError(
            msg + (hint or "; abort_transaction() and start again"), abortable=True, code=code
        )

    async def pause(self, cause: BaseException) -> None:
        """Note why a request is retried and back off."""
        self.last_cause = cause
        concurrent = isinstance(cause, KafkaProtocolError) and cause.code == E.CONCURRENT_TRANSACTIONS
        log.debug("transaction %r: retrying after %s", self.transactional_id, cause)
        await asyncio.sleep(CONCURRENT_BACKOFF if concurrent else self.backoff)

    async def call(
        self,
        what: str,
        attempt: Callable[[int], Awaitable[Any]],
        *,
        whole: bool = True,
        stop: Callable[[], bool] | None = None,
    ) -> Any:
        """Send to the transaction coordinator until the answer is not retriable. With ``whole``
        the answer is one error code (0 returns, another raises it classified); else the
        answer is returned as it is (per-partition codes are the caller's). ``stop``: give up
        (returning None) before a new attempt when it says so."""
        while True:
            if stop is not None and stop():
                return None
            try:
                coord = await self.client.find_coordinator(
                    self.transactional_id, 1, refresh=self._refresh, timeout_ms=self.request_timeout_ms
                )
                self._refresh = False
                answer = await attempt(coord.node_id)
            except (KafkaConnectionError, KafkaTimeoutError, KafkaCodecError) as exc:
                self._refresh = True
                await self.pause(exc)
                continue
            except KafkaProtocolError as exc:
                if not exc.retriable:
                    raise self.classify(exc.code, what) from exc
                self._refresh = True
                await self.pause(exc)
                continue
            except KafkaUnsupportedVersionError as exc:
                raise KafkaTransactionError(f"{what}: {exc}", fatal=True) from exc
            if not whole or answer == 0:
                return answer
            if not retriable(answer):
                raise self.classify(answer, what)
            self.moved(answer)
            await self.pause(error_for(answer, what))

    def moved(self, code: int) -> None:
        """After ``code``, look the coordinator up again before the next attempt if it moved."""
        self._refresh = self._refresh or code in COORDINATOR_CODES

    async def add_partitions(
        self, wanted: list[tuple[str, int]], stop: Callable[[], bool]
    ) -> dict[tuple[str, int], int] | None:
        async def attempt(node: int) -> dict[tuple[str, int], int]:
            return await add_partitions(self.client, node, self.ident(), wanted, self.request_timeout_ms)

        answer: dict[tuple[str, int], int] | None = await self.call(
            "AddPartitionsToTxn", attempt, whole=False, stop=stop
        )
        return answer

    async def add_offsets(self, group_id: str) -> None:
        await self.call(
            "AddOffsetsToTxn",
            lambda node: add_offsets(self.client, node, self.ident(), group_id, self.request_timeout_ms),
        )

    async def detect_v2(self) -> bool:
        """Whether the cluster and the coordinator speak transactions v2 (see version.py)."""

        async def attempt(node: int) -> int:
            return await self.tracker.ask(self.client, node, self.request_timeout_ms)

        self.v2 = await self.call("ApiVersions", attempt, whole=False) == 2
        return self.v2

    async def refresh_version(self) -> bool:
        """Between two transactions (never inside one): the next one's protocol, the coordinator
        re-asked when the tracker says it is due (one attempt: a failure keeps the version and
        is retried at the next transaction's end). True on an upgrade from v1 to v2: the epoch
        must be bumped before the first v2 transaction, as the Java client does, so that nothing
        of the earlier v1 transactions counts as part of it."""
        if self.v2 is None or not self.tracker.due():
            return False
        try:
            coord = await self.client.find_coordinator(
                self.transactional_id, 1, timeout_ms=self.request_timeout_ms
            )
            version = await self.tracker.ask(self.client, coord.node_id, self.request_timeout_ms)
        except KafkaError as exc:
            log.debug("transaction %r: transaction.version not re-read (%s)", self.transactional_id, exc)
            return False
        was, self.v2 = self.v2, version == 2
        if self.v2 != was:
            log.info(
                "transactional producer %r: the cluster's transaction.version changed: transactions "
                "v%d from the next transaction (was v%d)",
                self.transactional_id,
                version,
                2 if was else 1,
            )
        return self.v2 and not was

    async def end_txn(self, commit: bool) -> tuple[int, int] | None:
        """End the transaction; with v2, the producer id and epoch the coordinator bumped to
        (a retried EndTxn that the coordinator already ended is answered them too)."""
        v2 = self.v2 if self.v2 is not None else await self.detect_v2()
        bumped: list[tuple[int, int]] = [(-1, -1)]

        async def attempt(node: int) -> int:
            code, pid, epoch = await end_txn(
                self.client, node, self.ident(), commit, self.request_timeout_ms, v2=v2
            )
            bumped[0] = (pid, epoch)
            return code

        await self.call("EndTxn(commit)" if commit else "EndTxn(abort)", attempt)
        return bumped[0] if v2 and bumped[0][0] >= 0 and bumped[0][1] >= 0 else None

    async def commit_offsets(self, offsets: dict[TopicPartition, OffsetAndMetadata], group: Group) -> None:
        """TxnOffsetCommit to the group coordinator until every partition is answered 0."""
        group_id = group[0]
        refresh = False
        while offsets:
            try:
                coord = await self.client.find_coordinator(
                    group_id, 0, refresh=refresh, timeout_ms=self.request_timeout_ms
                )
                codes = await txn_offset_commit(
                    self.client,
                    coord.node_id,
                    self.ident(),
                    group,
                    offsets,
                    self.request_timeout_ms,
                    v2=bool(self.v2),
                )
            except (KafkaConnectionError, KafkaTimeoutError, KafkaCodecError) as exc:
                refresh = True
                await self.pause(exc)
                continue
            except KafkaProtocolError as exc:
                if not exc.retriable:
                    raise self.classify(exc.code, "TxnOffsetCommit") from exc
                refresh = True
                await self.pause(exc)
                continue
            except KafkaUnsupportedVersionError as exc:  # the group is in the transaction: abort it
                raise KafkaTransactionError(f"TxnOffsetCommit: {exc}", abortable=True) from exc
            retry: BaseException | None = None
            for tp in list(offsets):
                code = codes.get(tp, E.UNKNOWN_TOPIC_OR_PARTITION)
                if code == 0:
                    del offsets[tp]
                elif retriable(code):
                    retry = error_for(code, f"TxnOffsetCommit {tp.topic}[{tp.partition}]")
                    refresh = refresh or code in COORDINATOR_CODES
                else:
                    hint = ""
                    if code in REJOIN_CODES:
                        hint = (
                            f"; the consumer's group membership ({group[1]}/{group[2]!r}) is stale "
                            "(it was rebalanced): abort_transaction() and consume again"
                        )
                    raise self.classify(code, f"TxnOffsetCommit for group {group_id!r} {tp}", hint)
            if retry is not None:
                await self.pause(retry)

    async def init_producer_id(self, *, bump: bool, cause: BaseException | None) -> tuple[int, int]:
        """InitProducerId for the transactional id: a first id, or the next epoch of ours (KIP-360;
        ``cause``: why, named if the broker cannot bump)."""
        idem = self.idem
        what = "InitProducerId (epoch bump)" if bump else "InitProducerId"
        while True:
            try:
                if bump:
                    coord = await self.client.find_coordinator(
                        self.transactional_id, 1, timeout_ms=self.request_timeout_ms
                    )
                    version = await self.client.api_version(coord.node_id, ApiKey.INIT_PRODUCER_ID)
                    if version < BUMP_MIN_VERSION:
                        raise KafkaTransactionError(
                            f"transaction {self.transactional_id!r} lost sequence numbers and the broker "
                            f"cannot bump the epoch (InitProducerId v{version}, v{BUMP_MIN_VERSION}+ "
                            f"needed; cause: {cause}): close the producer",
                            fatal=True,
                        )
                got = await self.client.init_producer_id(
                    self.transactional_id,
                    self.transaction_timeout_ms,
                    producer_id=idem.producer_id if bump else -1,
                    producer_epoch=idem.producer_epoch if bump else -1,
                    timeout_ms=self.request_timeout_ms,
                )
            except (KafkaConnectionError, KafkaTimeoutError, KafkaCodecError) as exc:
                await self.pause(exc)
                continue
            except KafkaProtocolError as exc:
                if exc.retriable:
                    await self.pause(exc)
                    continue
                if bump and exc.code in (E.INVALID_PRODUCER_ID_MAPPING, E.UNKNOWN_PRODUCER_ID):
                    # The coordinator no longer knows our id: ask afresh for the transactional id's.
                    log.info(
                        "transaction %r: epoch bump refused (%s); initialising afresh",
                        self.transactional_id,
                        exc,
                    )
                    bump = False
                    continue
                err = self.classify(exc.code, what)
                if not bump and not err.fatal:  # nothing to abort: the Java client's init errors are fatal
                    err = KafkaTransactionError(
                        str(err).split(";")[0] + "; the producer cannot go on: close it",
                        fatal=True,
                        code=err.code,
                    )
                raise err from exc
            except KafkaUnsupportedVersionError as exc:
                raise KafkaTransactionError(f"{what}: {exc}", fatal=True) from exc
            log.info(
                "transactional producer %r: producer id %s epoch %s (was %s/%s)",
                self.transactional_id,
                got[0],
                got[1],
                idem.producer_id,
                idem.producer_epoch,
            )
            return int(got[0]), int(got[1])
