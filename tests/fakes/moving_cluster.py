"""A small Kafka cluster on loopback sockets whose partition leaders move on demand, for the real
client (producer, consumer, KafkaClient) to ride out: leader hints (KIP-951) and rebootstrap
(KIP-899, KIP-1102).

Every node answers ApiVersions, Metadata, InitProducerId, Produce, ListOffsets and Fetch from
one shared state: per partition a leader, a leader epoch and a log of the record batches written.
``move(partition, node)`` moves a leader (a new epoch). What Metadata says can be held back
(``freeze_metadata``): it goes on naming the leaders as they were, so a client that follows a
move must have learnt it from a Produce or Fetch answer's hint, which the nodes send
(``current_leader``, ``node_endpoints``) unless ``hints=False``. ``black_hole()`` makes every
node take connections and requests and answer nothing (a decommissioned broker left running, a
dead proxy); ``decommission()`` makes them answer ApiVersions only (connections come up, nothing is served);
``rebootstrap_required`` makes Metadata v13+ answer REBOOTSTRAP_REQUIRED. ``nodes``
may bind another loopback address than 127.0.0.1 (``host``), for tests that move a DNS name.
"""

from __future__ import annotations

import asyncio
import functools
import struct
from collections import Counter
from typing import Any

from kafka_core.protocol import ApiKey, Response, decode_request, encode_response
from kafka_core.protocol.errors import ErrorCode
from kafka_core.protocol.messages import (
    ApiVersionsResponse,
    FetchResponse,
    InitProducerIdResponse,
    ListOffsetsResponse,
    MetadataResponse,
    ProduceResponse,
)

__all__ = ["MovingCluster"]

_VERSIONS = {
    ApiKey.API_VERSIONS: (0, 3),
    ApiKey.METADATA: (1, 13),
    ApiKey.PRODUCE: (3, 11),
    ApiKey.FETCH: (4, 12),
    ApiKey.LIST_OFFSETS: (1, 7),
    ApiKey.INIT_PRODUCER_ID: (0, 4),
}


def _frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


class MovingCluster:
    """See the module docstring. ``async with MovingCluster(...)`` starts every node."""

    def __init__(
        self,
        nodes: int = 2,
        *,
        topic: str = "moving",
        partitions: int = 1,
        hints: bool = True,
        host: str = "127.0.0.1",
        port: int = 0,
        first_node: int = 1,
    ) -> None:
        self.topic = topic
        self.host = host
        self.hints = hints
        self.node_ids = list(range(first_node, first_node + nodes))
        self.ports: dict[int, int] = dict.fromkeys(self.node_ids, port)
        self.leaders = {p: self.node_ids[p % nodes] for p in range(partitions)}
        self.epochs = dict.fromkeys(range(partitions), 1)
        self.logs: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(partitions)}
        self.ends = dict.fromkeys(range(partitions), 0)
        self.requests: Counter[tuple[int, int]] = Counter()  # (node, api key) -> requests taken
        self.written: list[tuple[int, int, int]] = []  # (node, partition, records) per batch taken
        self.frozen: tuple[dict[int, int], dict[int, int]] | None = None
        self.listed_nodes: list[int] | None = None  # Metadata names only these (None: all)
        self.silent = False
        self.metadata_only_lost = False
        self.rebootstrap_required = False
        self._servers: list[asyncio.base_events.Server] = []
        self._handlers: set[asyncio.Task[None]] = set()

    async def __aenter__(self) -> MovingCluster:
        for node in self.node_ids:
            server = await asyncio.start_server(
                functools.partial(self._serve, node), self.host, self.ports[node], reuse_address=True
            )
            self._servers.append(server)
            self.ports[node] = server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        for server in self._servers:
            server.close()
        await asyncio.sleep(0)
        for task in list(self._handlers):
            task.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.ports[self.node_ids[0]]}"

    # -- what the tests do ---------------------------------------------------------------

    def move(self, partition: int, node: int) -> None:
        """``node`` leads ``partition`` from now on, under a new leader epoch."""
        self.leaders[partition] = node
        self.epochs[partition] += 1

    def freeze_metadata(self) -> None:
        """Metadata goes on naming the leaders (and epochs) of now, whatever moves after."""
        self.frozen = (dict(self.leaders), dict(self.epochs))

    def black_hole(self) -> None:
        """Every node takes connections and requests, and answers nothing more."""
        self.silent = True

    def decommission(self) -> None:
        """Every node goes on taking connections (ApiVersions answered) but answers nothing
        else: a broker left running after its cluster moved on, as KIP-1102 has it."""
        self.metadata_only_lost = True

    def records(self, partition: int) -> list[bytes | None]:
        """The record values written to ``partition``, in log order."""
        from kafka_core.codec import decode_record_batches

        out: list[bytes | None] = []
        for _, batch in self.logs[partition]:
            out.extend(None if r.value is None else bytes(r.value) for r in decode_record_batches(batch))
        return out

    # -- serving -------------------------------------------------------------------------

    async def _serve(self, node: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            while True:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                req = decode_request(await reader.readexactly(size))
                h = req.header
                self.requests[(node, h.api_key)] += 1
                if self.silent or (self.metadata_only_lost and h.api_key != ApiKey.API_VERSIONS):
                    continue
                body = self._answer(node, h.api_key, h.api_version, req.body)
                if body is None:
                    continue
                if h.api_key == ApiKey.FETCH and not any(
                    p.records for t in body.responses for p in t.partitions
                ):
                    # Nothing to read: wait as a broker does (briefly), not answer in a busy loop.
                    await asyncio.sleep(min(req.body.max_wait_ms, 100) / 1000)
                writer.write(
                    _frame(encode_response(Response(h.api_key, h.api_version, h.correlation_id, body)))
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()
            self._handlers.discard(task)

    def _answer(self, node: int, api: int, version: int, body: Any) -> Any:
        if api == ApiKey.API_VERSIONS:
            keys = [
                ApiVersionsResponse.ApiVersion(api_key=k, min_version=lo, max_version=hi)
                for k, (lo, hi) in _VERSIONS.items()
            ]
            return ApiVersionsResponse(api_keys=keys)
        if api == ApiKey.METADATA:
            return self._metadata(version, body)
        if api == ApiKey.INIT_PRODUCER_ID:
            return InitProducerIdResponse(producer_id=1000, producer_epoch=0)
        if api == ApiKey.PRODUCE:
            return self._produce(node, body)
        if api == ApiKey.LIST_OFFSETS:
            return self._list_offsets(node, body)
        if api == ApiKey.FETCH:
            return self._fetch(node, body)
        return None

    def _broker(self, node: int) -> MetadataResponse.MetadataResponseBroker:
        return MetadataResponse.MetadataResponseBroker(node_id=node, host=self.host, port=self.ports[node])

    def _metadata(self, version: int, body: Any) -> MetadataResponse:
        if self.rebootstrap_required and version >= 13:
            return MetadataResponse(error_code=ErrorCode.REBOOTSTRAP_REQUIRED)
        leaders, epochs = self.frozen if self.frozen is not None else (self.leaders, self.epochs)
        listed = self.listed_nodes if self.listed_nodes is not None else self.node_ids
        wanted = None if body.topics is None else {t.name for t in body.topics}
        topics = []
        if wanted is None or self.topic in wanted:
            topics.append(
                MetadataResponse.MetadataResponseTopic(
                    name=self.topic,
                    partitions=[
                        MetadataResponse.MetadataResponsePartition(
                            partition_index=p,
                            leader_id=leaders[p],
                            leader_epoch=epochs[p],
                            replica_nodes=list(self.node_ids),
                            isr_nodes=list(self.node_ids),
                        )
                        for p in sorted(leaders)
                    ],
                )
            )
        topics.extend(
            MetadataResponse.MetadataResponseTopic(name=name, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            for name in sorted((wanted or set()) - {self.topic})
        )
        return MetadataResponse(
            brokers=[self._broker(n) for n in listed],
            controller_id=listed[0],
            cluster_id="moving",
            topics=topics,
        )

    def _refusal(self, node: int, partition: int) -> tuple[int, int, int] | None:
        """(error, leader, epoch) when ``node`` does not lead ``partition``, else None."""
        leader = self.leaders[partition]
        if leader == node:
            return None
        return ErrorCode.NOT_LEADER_OR_FOLLOWER, leader, self.epochs[partition]

    def _refused(self, node: int, partition: int, leader_cls: Any, named: set[int]) -> tuple[int, Any] | None:
        """(error, current_leader) when ``node`` does not lead ``partition``, else None; with hints
        on, current_leader names the leader (added to ``named``, for the answer's endpoints)."""
        refused = self._refusal(node, partition)
        if refused is None:
            return None
        code, leader, epoch = refused
        if not self.hints:
            return code, leader_cls()
        named.add(leader)
        return code, leader_cls(leader_id=leader, leader_epoch=epoch)

    def _endpoints(self, cls: Any, leaders: set[int]) -> list[Any]:
        if not self.hints:
            return []
        return [cls(node_id=n, host=self.host, port=self.ports[n]) for n in sorted(leaders)]

    def _produce(self, node: int, body: Any) -> ProduceResponse:
        topics = []
        named: set[int] = set()
        for t in body.topic_data:
            parts = []
            for pd in t.partition_data:
                p = pd.index
                refused = self._refused(node, p, ProduceResponse.LeaderIdAndEpoch, named)
                if refused is not None:
                    code, current = refused
                    parts.append(
                        ProduceResponse.PartitionProduceResponse(
                            index=p, error_code=code, current_leader=current
                        )
                    )
                    continue
                data = bytearray(bytes(pd.records))
                base = self.ends[p]
                count = struct.unpack_from(">i", data, 57)[0]
                struct.pack_into(">q", data, 0, base)
                self.logs[p].append((base, bytes(data)))
                self.ends[p] = base + count
                self.written.append((node, p, count))
                parts.append(ProduceResponse.PartitionProduceResponse(index=p, base_offset=base))
            topics.append(ProduceResponse.TopicProduceResponse(name=t.name, partition_responses=parts))
        return ProduceResponse(
            responses=topics, node_endpoints=self._endpoints(ProduceResponse.NodeEndpoint, named)
        )

    def _list_offsets(self, node: int, body: Any) -> ListOffsetsResponse:
        topics = []
        for t in body.topics:
            parts = []
            for lp in t.partitions:
                p = lp.partition_index
                if self._refusal(node, p) is not None:
                    parts.append(
                        ListOffsetsResponse.ListOffsetsPartitionResponse(
                            partition_index=p, error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER
                        )
                    )
                    continue
                offset = 0 if lp.timestamp == -2 else self.ends[p]
                parts.append(
                    ListOffsetsResponse.ListOffsetsPartitionResponse(
                        partition_index=p, offset=offset, leader_epoch=self.epochs[p]
                    )
                )
            topics.append(ListOffsetsResponse.ListOffsetsTopicResponse(name=t.name, partitions=parts))
        return ListOffsetsResponse(topics=topics)

    def _fetch(self, node: int, body: Any) -> FetchResponse:
        topics = []
        named: set[int] = set()  # this fake's Fetch answers carry no endpoints
        for t in body.topics:
            parts = []
            for fp in t.partitions:
                p = fp.partition
                refused = self._refused(node, p, FetchResponse.LeaderIdAndEpoch, named)
                if refused is not None:
                    code, current = refused
                    parts.append(
                        FetchResponse.PartitionData(
                            partition_index=p, error_code=code, current_leader=current
                        )
                    )
                    continue
                data = b"".join(
                    batch
                    for base, batch in self.logs[p]
                    if base + struct.unpack_from(">i", batch, 57)[0] > fp.fetch_offset
                )
                parts.append(
                    FetchResponse.PartitionData(
                        partition_index=p,
                        high_watermark=self.ends[p],
                        last_stable_offset=self.ends[p],
                        log_start_offset=0,
                        records=data,
                    )
                )
            topics.append(FetchResponse.FetchableTopicResponse(topic=t.topic, partitions=parts))
        return FetchResponse(responses=topics)
