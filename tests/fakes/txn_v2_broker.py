"""ProduceBroker as an Apache Kafka 4 cluster with ``transaction.version`` 2 finalized (KIP-890
part 2), for the transactions v2 unit tests.

On top of ProduceBroker's coordinator: ApiVersions lists the feature; a transactional Produce at
v12+ adds its partitions to the transaction itself (after checking the producer's epoch against
the coordinator's: an older one is answered PRODUCER_FENCED, as Kafka's verification does);
TxnOffsetCommit at v5 adds the group itself; EndTxn at v5 bumps the epoch (a new producer id
with epoch 0 once the epoch is exhausted, ``max_epoch``), writes the markers under the bumped
epoch (a later Produce of the old epoch is INVALID_PRODUCER_EPOCH on those partitions), answers
the id and epoch, and answers a retry of an ended transaction (the previous epoch) NONE with
them. An abort with nothing open is taken (the epoch is bumped), a commit is INVALID_TXN_STATE.
``lose_end_txn``: that many EndTxn answers are lost after the coordinator acted on them.
``versions_used`` lists (api name, the highest version the client allowed) per request.
"""

from __future__ import annotations

import struct
from types import SimpleNamespace
from typing import Any

from fakes.produce_broker import ProduceBroker
from kafka_core.errors import KafkaConnectionError
from kafka_core.protocol import ApiKey
from kafka_core.protocol.errors import ErrorCode

__all__ = ["TxnV2Broker"]


class TxnV2Broker(ProduceBroker):
    """See the module docstring."""

    def __init__(self, partitions: int = 1, *, max_epoch: int = 32767, **kw: Any) -> None:
        super().__init__(partitions, **kw)
        self.finalized = {"transaction.version": 2, "metadata.version": 27}
        self.versions.update(
            {
                ApiKey.PRODUCE: 12,
                ApiKey.END_TXN: 5,
                ApiKey.TXN_OFFSET_COMMIT: 5,
                ApiKey.INIT_PRODUCER_ID: 5,
            }
        )
        self.max_epoch = max_epoch
        self.lose_end_txn = 0
        self.versions_used: list[tuple[str, int]] = []
        self.previous: dict[str, tuple[int, int, bool]] = {}  # txn id -> id, epoch and result ended

    async def api_version(self, node_id: int, api_key: int, *, max_version: int | None = None) -> int:
        version = self.versions.get(api_key, 1)
        return version if max_version is None else min(version, max_version)

    async def send(self, node: int, body: Any, version: int | None = None, **kw: Any) -> Any:
        top = int(kw.get("max_version") or 99)
        api = body.API_KEY
        if api != ApiKey.API_VERSIONS:
            self.versions_used.append((ApiKey(api).name, min(top, self.versions.get(api, top))))
        if api == ApiKey.PRODUCE and body.transactional_id is not None and top >= 12:
            refused = self._implicit_add(body)
            if refused is not None:
                return refused
        if api == ApiKey.END_TXN and top >= 5:
            return await self._end_txn_v2(body)
        return await super().send(node, body, version, **kw)

    def _implicit_add(self, body: Any) -> Any:
        """Produce v12: the partitions join the transaction (None), or every one is refused."""
        txn_id = body.transactional_id
        parts = []
        code = 0
        for td in body.topic_data:
            for pd in td.partition_data:
                pid, epoch = struct.unpack_from(">qh", bytes(pd.records), 43)
                code = code or self._fenced(txn_id, pid, epoch)
                parts.append((td.name, pd.index))
        if not code:
            self.in_txn.setdefault(txn_id, set()).update(parts)
            return None
        self.requests.append({})
        self.answers.append({p: code for _, p in parts})
        self.calls.append(("Produce", (txn_id, sorted(p for _, p in parts))))
        by_topic: dict[str, list[Any]] = {}
        for name, p in parts:
            by_topic.setdefault(name, []).append(
                SimpleNamespace(
                    index=p, error_code=code, base_offset=-1, log_append_time_ms=-1, error_message=None
                )
            )
        return SimpleNamespace(
            responses=[SimpleNamespace(name=k, partition_responses=v) for k, v in by_topic.items()]
        )

    async def _end_txn_v2(self, body: Any) -> Any:
        txn_id, pid, epoch = body.transactional_id, body.producer_id, body.producer_epoch
        committed = bool(body.committed)
        prev = self.previous.get(txn_id)
        if prev is not None and (pid, epoch) == prev[:2] and prev[2] is committed:
            self.calls.append(("EndTxn", committed))  # a retry of the one that ended it
            cur = self.txn_ids[txn_id]
            return self._answer_end(0, cur, self.epochs[cur])
        open_ = txn_id in self.in_txn or txn_id in self.pending_offsets
        if not open_ and self._fenced(txn_id, pid, epoch) == 0:
            # Nothing open: Kafka 4 takes an abort (bumping the epoch), refuses a commit.
            if committed:
                self.calls.append(("EndTxn", committed))
                return self._answer_end(ErrorCode.INVALID_TXN_STATE, -1, -1)
            self.in_txn[txn_id] = set()
        parts = set(self.in_txn.get(txn_id, set()))
        resp = await self._transactional(body)
        if resp.error_code:
            return self._answer_end(resp.error_code, -1, -1)
        self.previous[txn_id] = (pid, epoch, committed)
        if epoch + 1 >= self.max_epoch - 1:  # exhausted: a new producer id
            new_pid = self.next_pid
            self.next_pid += 1
            self.txn_ids[txn_id], self.epochs[new_pid] = new_pid, 0
            pid, epoch = new_pid, 0
        else:
            epoch = self.epochs[pid] = epoch + 1
        for _, p in parts:  # the markers carry the bumped epoch: the old one is fenced there
            self.state[(body.producer_id, p)] = (body.producer_epoch + 1, -1, [])
        if self.lose_end_txn > 0:
            self.lose_end_txn -= 1
            raise KafkaConnectionError("injected: EndTxn answer lost")
        return self._answer_end(0, pid, epoch)

    @staticmethod
    def _answer_end(code: int, pid: int, epoch: int) -> Any:
        return SimpleNamespace(error_code=code, producer_id=pid, producer_epoch=epoch)

    def used(self, api: str) -> list[int]:
        """The versions the client allowed for ``api``'s requests, in order."""
        return [v for name, v in self.versions_used if name == api]
