"""An in-memory one-node cluster as the producer's client sees it: the one fake the producer's
unit tests drive (sender, deadlines, idempotence), instead of a copy per test file.

It keeps per-partition logs with Kafka's idempotence rules (sequence checks, the last five
batches deduplicated, epoch fencing), and misbehaves on demand: a Produce request can be slow
(``delay``), time out written or not (``write_late``), be answered with an undecodable body
(``garble``), lose its connection before or after (``faults``), or be too large
(``max_records`` / ``max_bytes``: MESSAGE_TOO_LARGE).

``kafka_sequences=True`` takes Apache Kafka's rule for a producer a partition has no state for:
any first sequence is accepted (the default answers UNKNOWN_PRODUCER_ID unless it is 0).
``leads_late=True`` answers each partition's first batch NOT_LEADER_OR_FOLLOWER once, as a Kafka
broker named leader of a new partition a moment before its replica manager leads it; with
``kafka_sequences`` a later batch already in flight is then taken as the producer's first.

It is also its own transaction coordinator (KIP-98): one producer id per transactional id (a new
InitProducerId fences the older epoch), AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit and
EndTxn, with error codes (``txn_errors``) and delays (``txn_delay``) on demand per API. ``calls``
lists the transactional requests and Produce requests in the order they arrived, and
``unadded`` any transactional Produce to a partition not added to the transaction first.
"""

from __future__ import annotations

import asyncio
import struct
import threading
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from kafka_core.client.metadata import BrokerMeta, ClusterMeta, PartitionMeta, TopicMeta
from kafka_core.codec import decode_record_batches
from kafka_core.errors import KafkaCodecError, KafkaConnectionError, KafkaTimeoutError
from kafka_core.protocol import ApiKey
from kafka_core.protocol.errors import ErrorCode, error_for

__all__ = ["Fault", "ProduceBroker"]

# faults(request number, where, partition) -> None, "disconnect" (where="before"),
# "lose-response" (where="after") or an error code as a str (where="partition").
Fault = Callable[[int, str, int], str | None]


class ProduceBroker:
    """See the module docstring. ``requests[n]`` is partition -> record count of Produce ``n``;
    ``answers[n]`` is partition -> the error code it got; ``lanes[n]`` the connection it came on."""

    def __init__(
        self,
        partitions: int = 1,
        *,
        delay: Callable[[int], float] = lambda n: 0.0,
        garble: Callable[[int], bool] = lambda n: False,
        write_late: bool = True,
        faults: Fault | None = None,
        max_records: int | None = None,
        max_bytes: int | None = None,
        kafka_sequences: bool = False,
        leads_late: bool = False,
    ) -> None:
        self.partitions = partitions
        self.delay = delay
        self.garble = garble
        self.write_late = write_late
        self.faults: Fault = faults or (lambda n, where, p: None)
        self.max_records = max_records
        self.max_bytes = max_bytes
        self.kafka_sequences = kafka_sequences
        self.leads_late = leads_late
        self.led: set[int] = set()  # partitions whose leadership has taken effect (leads_late)
        self.logs: dict[int, list[bytes | None]] = {p: [] for p in range(partitions)}
        self.state: dict[tuple[int, int], tuple[int, int, list[tuple[int, int]]]] = {}
        self.requests: list[dict[int, int]] = []
        self.lanes: list[int] = []  # the connection (lane) each Produce request came on
        self.answers: list[dict[int, int]] = []
        self.next_pid = 1000
        self.epochs: dict[int, int] = {}
        self.init_calls: list[tuple[int, int]] = []
        self.last_error: BaseException | None = None
        # The transaction coordinator's side.
        self.versions: dict[int, int] = {
            ApiKey.INIT_PRODUCER_ID: 4,
            ApiKey.PRODUCE: 9,
            ApiKey.TXN_OFFSET_COMMIT: 3,
        }
        self.finalized: dict[str, int] = {}  # ApiVersions' finalized features (none: transactions v1)
        self.txn_errors: dict[int, list[int]] = {}  # api key -> codes for its next requests
        self.txn_delay: dict[int, float] = {}  # api key -> seconds before it answers
        self.calls: list[tuple[str, Any]] = []
        self.lookups: list[tuple[str, int, bool]] = []  # find_coordinator(key, key_type, refresh)
        self.txn_ids: dict[str, int] = {}  # transactional id -> producer id
        self.in_txn: dict[str, set[tuple[str, int]]] = {}  # partitions of the ongoing transaction
        self.pending_offsets: dict[str, dict[tuple[str, str, int], int]] = {}
        self.committed_offsets: dict[tuple[str, str, int], int] = {}
        self.ended: list[tuple[bool, list[tuple[str, int]]]] = []  # (committed, partitions)
        self.completed: dict[str, bool] = {}  # transactional id -> how its last transaction ended
        self.unadded: list[tuple[str, int]] = []
        self.metadata_asked: list[str] = []  # topics in metadata requests, in order
        self.metadata_hold: dict[str, threading.Event] = {}  # topic -> answer once it is set

    # -- the KafkaClient surface the producer uses ----------------------------------------------

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        return None

    def metrics(self) -> dict[str, Any]:
        return {}

    async def negotiated_versions(self) -> dict[int, dict[Any, int]]:
        return {0: dict(self.versions)}

    async def api_version(self, node_id: int, api_key: int, *, max_version: int | None = None) -> int:
        return self.versions.get(api_key, 1)

    async def find_coordinator(
        self, key: str, key_type: int = 0, *, refresh: bool = False, timeout_ms: float | None = None
    ) -> BrokerMeta:
        self.lookups.append((key, key_type, refresh))
        await asyncio.sleep(0)
        return BrokerMeta(0, "fake", 0)

    async def metadata(self, topics: list[str]) -> ClusterMeta:
        self.metadata_asked.extend(topics)
        for t in topics:
            hold = self.metadata_hold.get(t)
            while hold is not None and not hold.is_set():
                await asyncio.sleep(0.005)
        parts = [PartitionMeta(partition=p, leader=0) for p in range(self.partitions)]
        return ClusterMeta(brokers=[], topics=[TopicMeta(name=t, partitions=parts) for t in topics])

    async def init_producer_id(
        self,
        txn_id: str | None = None,
        _timeout: int = 60_000,
        *,
        producer_id: int = -1,
        producer_epoch: int = -1,
        timeout_ms: float | None = None,
    ) -> tuple[int, int]:
        self.init_calls.append((producer_id, producer_epoch))
        if txn_id is not None:
            return await self._init_transactional(txn_id, producer_id, producer_epoch)
        if producer_id >= 0 and self.epochs.get(producer_id) == producer_epoch:
            self.epochs[producer_id] = producer_epoch + 1
            return (producer_id, producer_epoch + 1)
        pid = self.next_pid
        self.next_pid += 1
        self.epochs[pid] = 0
        return (pid, 0)

    async def _init_transactional(
        self, txn_id: str, producer_id: int, producer_epoch: int
    ) -> tuple[int, int]:
        code = await self._txn_step(ApiKey.INIT_PRODUCER_ID)
        if code:
            raise error_for(code, "InitProducerId")
        pid = self.txn_ids.get(txn_id)
        if pid is not None and producer_id >= 0 and (producer_id, producer_epoch) != (pid, self.epochs[pid]):
            raise error_for(ErrorCode.PRODUCER_FENCED, "InitProducerId")
        if pid is None:
            pid = self.txn_ids[txn_id] = self.next_pid
            self.next_pid += 1
            self.epochs[pid] = 0
        else:  # the older epoch is fenced; its open transaction is aborted
            self.epochs[pid] += 1
            if self.in_txn.pop(txn_id, None):
                self.ended.append((False, []))
            self.pending_offsets.pop(txn_id, None)
        self.calls.append(("InitProducerId", (pid, self.epochs[pid])))
        return (pid, self.epochs[pid])

    async def _txn_step(self, api: int) -> int:
        """Delay and injected error code of the next request of ``api``."""
        await asyncio.sleep(self.txn_delay.get(api, 0.0) or 0.001)
        codes = self.txn_errors.get(api)
        return codes.pop(0) if codes else 0

    def _fenced(self, txn_id: str, pid: int, epoch: int) -> int:
        if self.txn_ids.get(txn_id) != pid:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        return ErrorCode.PRODUCER_FENCED if epoch != self.epochs[pid] else 0

    async def _transactional(self, body: Any) -> Any:
        api = body.API_KEY
        if api == ApiKey.API_VERSIONS:
            features = [SimpleNamespace(name=k, max_version_level=v) for k, v in self.finalized.items()]
            return SimpleNamespace(error_code=0, finalized_features=features)
        code = await self._txn_step(api)
        if api == ApiKey.ADD_PARTITIONS_TO_TXN:
            txn_id = body.v3_and_below_transactional_id
            parts = [(t.name, p) for t in body.v3_and_below_topics for p in t.partitions]
            self.calls.append(("AddPartitionsToTxn", parts))
            code = code or self._fenced(
                txn_id, body.v3_and_below_producer_id, body.v3_and_below_producer_epoch
            )
            if not code:
                self.in_txn.setdefault(txn_id, set()).update(parts)
            return SimpleNamespace(
                error_code=0,
                results_by_topic_v3_and_below=[
                    SimpleNamespace(
                        name=t.name,
                        results_by_partition=[
                            SimpleNamespace(partition_index=p, partition_error_code=code)
                            for p in t.partitions
                        ],
                    )
                    for t in body.v3_and_below_topics
                ],
            )
        if api == ApiKey.ADD_OFFSETS_TO_TXN:
            self.calls.append(("AddOffsetsToTxn", body.group_id))
            code = code or self._fenced(body.transactional_id, body.producer_id, body.producer_epoch)
            if not code:
                self.in_txn.setdefault(body.transactional_id, set())
            return SimpleNamespace(error_code=code)
        if api == ApiKey.TXN_OFFSET_COMMIT:
            offsets = {
                (t.name, p.partition_index): p.committed_offset for t in body.topics for p in t.partitions
            }
            group = (
                body.group_id,
                body.generation_id_or_member_epoch,
                body.member_id,
                body.group_instance_id,
            )
            self.calls.append(("TxnOffsetCommit", (group, offsets)))
            code = code or self._fenced(body.transactional_id, body.producer_id, body.producer_epoch)
            if not code:
                pending = self.pending_offsets.setdefault(body.transactional_id, {})
                pending.update({(body.group_id, t, p): o for (t, p), o in offsets.items()})
            return SimpleNamespace(
                topics=[
                    SimpleNamespace(
                        name=t.name,
                        partitions=[
                            SimpleNamespace(partition_index=p.partition_index, error_code=code)
                            for p in t.partitions
                        ],
                    )
                    for t in body.topics
                ]
            )
        assert api == ApiKey.END_TXN, api
        self.calls.append(("EndTxn", body.committed))
        txn_id = body.transactional_id
        code = code or self._fenced(txn_id, body.producer_id, body.producer_epoch)
        if not code and txn_id not in self.in_txn and txn_id not in self.pending_offsets:
            # Kafka: nothing open; a repeat of how the last one ended is answered NONE (a retry).
            if self.completed.get(txn_id) is not bool(body.committed):
                code = ErrorCode.INVALID_TXN_STATE
            return SimpleNamespace(error_code=code)
        if not code:
            self.completed[txn_id] = bool(body.committed)
            parts = self.in_txn.pop(body.transactional_id, set())
            offsets = self.pending_offsets.pop(body.transactional_id, {})
            if body.committed:
                self.committed_offsets.update(offsets)
            self.ended.append((body.committed, sorted(parts)))
        return SimpleNamespace(error_code=code)

    async def send(self, node: int, body: Any, version: int | None = None, **kw: Any) -> Any:
        if body.API_KEY != ApiKey.PRODUCE:
            return await self._transactional(body)
        n = len(self.requests)
        counts: dict[int, int] = {}
        batches = []
        for td in body.topic_data:
            for pd in td.partition_data:
                data = bytes(pd.records)
                pid, epoch, seq, count = struct.unpack_from(">qhii", data, 43)
                counts[pd.index] = count
                if body.transactional_id is not None:
                    if not struct.unpack_from(">h", data, 21)[0] & 0x10:
                        raise AssertionError(
                            "a transactional producer sent a batch not flagged transactional"
                        )
                    if (td.name, pd.index) not in self.in_txn.get(body.transactional_id, ()):
                        self.unadded.append((td.name, pd.index))
                batches.append((td.name, pd.index, data, pid, epoch, seq, count))
        self.requests.append(counts)
        self.lanes.append(kw.get("lane", 0))
        self.answers.append({})
        self.calls.append(("Produce", (body.transactional_id, sorted(counts))))
        if self.faults(n, "before", -1) == "disconnect":
            await asyncio.sleep(0.001)
            raise KafkaConnectionError("injected: connection lost before the request")
        delay = self.delay(n)
        timeout = body.timeout_ms / 1000.0
        if delay > timeout:
            await asyncio.sleep(timeout)
            if self.write_late:
                for _name, p, data, pid, epoch, seq, count in batches:
                    self.answers[n][p] = self._answer(n, p, data, pid, epoch, seq, count)[0]
            raise KafkaTimeoutError(f"request {n} timed out after {body.timeout_ms} ms")
        if delay:
            await asyncio.sleep(delay)
        # Without a delay the records are appended as the request arrives, before any await:
        # requests in flight together reach the log in the order they were sent.
        by_topic: dict[str, list[Any]] = {}
        for name, p, data, pid, epoch, seq, count in batches:
            code, base = self._answer(n, p, data, pid, epoch, seq, count)
            self.answers[n][p] = code
            by_topic.setdefault(name, []).append(
                SimpleNamespace(
                    index=p, error_code=code, base_offset=base, log_append_time_ms=-1, error_message=None
                )
            )
        if not delay:
            await asyncio.sleep(0.001)  # the answer still comes back later, as over a network
        if self.garble(n):
            raise KafkaCodecError(f"garbled PRODUCE v9 response from fake:0: request {n}")
        if self.faults(n, "after", -1) == "lose-response":
            raise KafkaConnectionError("injected: connection lost before the response")
        if body.acks == 0:
            return None
        return SimpleNamespace(
            responses=[SimpleNamespace(name=k, partition_responses=v) for k, v in by_topic.items()]
        )

    def _answer(
        self, n: int, p: int, data: bytes, pid: int, epoch: int, seq: int, count: int
    ) -> tuple[int, int]:
        injected = self.faults(n, "partition", p)
        if (self.max_records is not None and count > self.max_records) or (
            self.max_bytes is not None and len(data) > self.max_bytes
        ):
            injected = str(int(ErrorCode.MESSAGE_TOO_LARGE))
        if injected and injected.isdigit():
            return int(injected), -1
        if self.leads_late and p not in self.led:
            self.led.add(p)
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, -1
        return self.append(p, data, pid, epoch, seq, count)

    def append(self, p: int, data: bytes, pid: int, epoch: int, seq: int, count: int) -> tuple[int, int]:
        """Kafka's idempotence checks, then the batch's records onto partition ``p``'s log:
        (error code, base offset). A test may wrap it to change the broker's mind mid-run."""
        if pid >= 0:
            cur = self.state.get((pid, p))
            if cur is None:
                if seq != 0 and not self.kafka_sequences:
                    return ErrorCode.UNKNOWN_PRODUCER_ID, -1
            else:
                cur_epoch, last_seq, recent = cur
                if epoch < cur_epoch:
                    return ErrorCode.INVALID_PRODUCER_EPOCH, -1
                if epoch == cur_epoch:
                    for base_seq, offset in recent:
                        if base_seq == seq:
                            return 0, offset  # a duplicate of a recent batch: its first offset
                    if seq != last_seq + 1:
                        return ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, -1
                elif seq != 0:
                    return ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, -1
        base = len(self.logs[p])
        self.logs[p].extend(r.value for r in decode_record_batches(data))
        if pid >= 0:
            prev = self.state.get((pid, p))
            recent = [*([] if prev is None or prev[0] != epoch else prev[2])[-4:], (seq, base)]
            self.state[(pid, p)] = (epoch, seq + count - 1, recent)
        return 0, base

    def forget_producers(self) -> None:
        """The broker lost every producer's state (e.g. it expired): UNKNOWN_PRODUCER_ID next."""
        self.state.clear()
