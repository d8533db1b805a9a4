"""Named cluster operations (coordinators, offsets, producer ids, topics) with their retry rules.

A mixin over the connection/metadata core in ``cluster.py``: each operation builds the request for
the negotiated version, interprets per-partition errors, and raises retriable ones so that
``_retry`` re-resolves leaders or coordinators and tries again until the deadline.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from kafka_core.client.metadata import (
    BrokerMeta,
    EpochEndOffset,
    ListedOffset,
    NewTopic,
    OffsetAndMetadata,
    ProducerIdAndEpoch,
    TopicPartition,
    as_topic_partition,
)
from kafka_core.client.requests import (
    create_topics_request,
    offset_commit_request,
    offset_for_leader_epoch_request,
    offsets_by_partition,
)
from kafka_core.errors import KafkaProtocolError
from kafka_core.protocol import ApiKey
from kafka_core.protocol.errors import COORDINATOR_MOVED_CODES, STALE_METADATA_CODES, ErrorCode, error_for
from kafka_core.protocol.messages import (
    DeleteTopicsRequest,
    FindCoordinatorRequest,
    InitProducerIdRequest,
    ListOffsetsRequest,
    OffsetFetchRequest,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from kafka_core.client.metadata import ClusterMeta, TopicMeta
    from kafka_core.network.connection import BrokerConnection

T = TypeVar("T")


class _Core(Protocol):
    """What the operations need from the cluster core (cluster.KafkaClient), for type checking."""

    _coordinators: dict[tuple[int, str], BrokerMeta]
    _nodes: dict[int, Any]
    _request_timeout_ms: float

    def _check_open(self) -> None: ...
    def cached_metadata(self) -> ClusterMeta: ...
    async def _ensure_started(self) -> None: ...
    async def _any_node(self) -> int: ...
    def _register_broker(self, broker: BrokerMeta) -> None: ...
    async def _retry(
        self, what: str, attempt: Callable[[], Awaitable[T]], timeout_ms: float | None = None
    ) -> T: ...
    async def connection(self, node_id: int) -> BrokerConnection: ...
    async def send(
        self,
        node_id: int,
        request_body: Any,
        version: int | None = None,
        *,
        timeout_ms: float | None = None,
        max_version: int | None = None,
    ) -> Any: ...
    async def leader_for(self, topic: str, partition: int, *, timeout_ms: float | None = None) -> int: ...
    async def metadata(
        self, topics: list[str] | None = None, *, allow_auto_topic_creation: bool | None = None
    ) -> ClusterMeta: ...
    async def await_topic_ready(
        self, topic: str, min_partitions: int = 1, *, timeout_ms: float | None = None
    ) -> TopicMeta: ...
    def invalidate_metadata(self, topic: str | None = None) -> None: ...
    def note_error(
        self, error_code: int, topic: str | None = None, *, coordinator_key: str | None = None
    ) -> bool: ...
    async def find_coordinator(
        self, key: str, key_type: int = 0, *, refresh: bool = False, timeout_ms: float | None = None
    ) -> BrokerMeta: ...
    def _coordinator_failed(self, key_type: int, key: str, code: int, message: str) -> KafkaProtocolError: ...
    async def _controller_node(self) -> int: ...


# Versions 10+ of OffsetCommit/OffsetFetch address topics by id only; names are simpler and enough.
OFFSETS_MAX_VERSION = 9


@functools.cache
def _nested(cls: type, name: str) -> type:
    """Find a nested struct class by its JSON type name, however deep the generator nested it."""
    stack = [cls]
    while stack:
        current = stack.pop()
        found = current.__dict__.get(name)
        if isinstance(found, type):
            return found
        stack.extend(v for v in current.__dict__.values() if isinstance(v, type) and v is not current)
    raise AttributeError(f"{cls.__name__} has no nested struct {name}")


def _leader_epoch(meta: Mapping[str, TopicMeta], tp: TopicPartition) -> int:
    """The partition's leader epoch in cached metadata (-1: unknown)."""
    t = meta.get(tp.topic)
    p = t.partition(tp.partition) if t is not None else None
    return p.leader_epoch if p is not None else -1


class ClientOperations:
    """Mixin: the operations producers, consumers and admin code build on."""

    # -- coordinators ----------------------------------------------------------------------

    async def find_coordinator(
        self: _Core,
        key: str,
        key_type: int = 0,
        *,
        refresh: bool = False,
        timeout_ms: float | None = None,
    ) -> BrokerMeta:
        """The group (key_type 0) or transaction (1) coordinator for ``key``, cached until invalidated."""
        self._check_open()
        cached = self._coordinators.get((key_type, key))
        if cached is not None and not refresh:
            return cached

        async def attempt() -> BrokerMeta:
            node_id = await self._any_node()
            conn = await self.connection(node_id)
            version = conn.choose_version(ApiKey.FIND_COORDINATOR)
            if version >= 4:
                body = FindCoordinatorRequest(key_type=key_type, coordinator_keys=[key])
            else:
                body = FindCoordinatorRequest(key=key, key_type=key_type)
            resp = await self.send(node_id, body, version)
            if version >= 4:
                if not resp.coordinators:
                    raise error_for(15, f"empty FindCoordinator answer for {key!r}")
                c = resp.coordinators[0]
                code, message, nid, host, port = c.error_code, c.error_message, c.node_id, c.host, c.port
            else:
                code, message = resp.error_code, getattr(resp, "error_message", None)
                nid, host, port = resp.node_id, resp.host, resp.port
            if code:
                raise error_for(code, message or f"coordinator for {key!r}")
            broker = BrokerMeta(nid, host, port)
            self._register_broker(broker)
            self._coordinators[(key_type, key)] = broker
            return broker

        return await self._retry(f"finding the coordinator for {key!r}", attempt, timeout_ms)

    def _coordinator_failed(
        self: _Core, key_type: int, key: str, code: int, message: str
    ) -> KafkaProtocolError:
        if code in COORDINATOR_MOVED_CODES:  # load-in-progress: same coordinator, just retry later
            self._coordinators.pop((key_type, key), None)
        return error_for(code, message)

    # -- offsets ---------------------------------------------------------------------------

    async def list_offsets(
        self: _Core,
        timestamps: Mapping[TopicPartition | tuple[str, int], int],
        *,
        isolation_level: int = 0,
        timeout_ms: float | None = None,
    ) -> dict[TopicPartition, ListedOffset]:
        """Offsets for timestamps per partition (-2 earliest, -1 latest), asked of each leader."""
        self._check_open()
        remaining = {as_topic_partition(k): int(v) for k, v in timestamps.items()}
        result: dict[TopicPartition, ListedOffset] = {}
        topic_cls = _nested(ListOffsetsRequest, "ListOffsetsTopic")
        part_cls = _nested(ListOffsetsRequest, "ListOffsetsPartition")

        async def attempt() -> None:
            by_leader: dict[int, list[TopicPartition]] = defaultdict(list)
            for tp in remaining:
                by_leader[await self.leader_for(tp.topic, tp.partition, timeout_ms=timeout_ms)].append(tp)
            retry_error: KafkaProtocolError | None = None
            for node_id, tps in by_leader.items():
                topics: dict[str, list[Any]] = defaultdict(list)
                for tp in tps:
                    topics[tp.topic].append(part_cls(partition_index=tp.partition, timestamp=remaining[tp]))
                body = ListOffsetsRequest(
                    replica_id=-1,
                    isolation_level=isolation_level,
                    topics=[topic_cls(name=t, partitions=ps) for t, ps in topics.items()],
                    timeout_ms=int(self._request_timeout_ms),
                )
                resp = await self.send(node_id, body)
                for t in resp.topics:
                    for p in t.partitions:
                        tp = TopicPartition(t.name, p.partition_index)
                        if p.error_code:
                            err = error_for(p.error_code, f"ListOffsets {tp.topic}-{tp.partition}")
                            if not self.note_error(p.error_code, tp.topic):
                                raise err
                            retry_error = err
                            continue
                        result[tp] = ListedOffset(p.offset, p.timestamp, getattr(p, "leader_epoch", -1))
                        remaining.pop(tp, None)
            if remaining:
                raise retry_error or error_for(
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no answer for {sorted(remaining)}"
                )

        await self._retry("list_offsets", attempt, timeout_ms)
        return result

    async def offsets_for_leader_epochs(
        self: _Core,
        epochs: Mapping[TopicPartition | tuple[str, int], int],
        *,
        timeout_ms: float | None = None,
    ) -> dict[TopicPartition, EpochEndOffset]:
        """Where each partition's log ends for a leader epoch, asked of its leader (KIP-320).

        Each attempt sends the leader epoch of the cached metadata as the current one, so a
        FENCED_LEADER_EPOCH (our metadata is old) refreshes it and retries with the new one, and
        UNKNOWN_LEADER_EPOCH (the broker's is) retries after a backoff, within ``timeout_ms``. A
        non-retriable partition error comes back in its answer's ``error_code``. Raises
        KafkaUnsupportedVersionError when a leader does not offer the API in v2+.
        """
        self._check_open()
        remaining = {as_topic_partition(k): int(v) for k, v in epochs.items()}
        result: dict[TopicPartition, EpochEndOffset] = {}

        async def attempt() -> None:
            by_leader: dict[int, list[TopicPartition]] = defaultdict(list)
            for tp in remaining:
                by_leader[await self.leader_for(tp.topic, tp.partition, timeout_ms=timeout_ms)].append(tp)
            retry_error: KafkaProtocolError | None = None
            meta = {t.name: t for t in self.cached_metadata().topics}
            for node_id, tps in by_leader.items():
                asked = {tp: (_leader_epoch(meta, tp), remaining[tp]) for tp in tps}
                resp = await self.send(node_id, offset_for_leader_epoch_request(asked))
                for t in resp.topics:
                    for p in t.partitions:
                        tp = TopicPartition(t.topic, p.partition)
                        if tp not in asked or tp not in remaining:
                            continue
                        if p.error_code:
                            err = error_for(p.error_code, f"OffsetForLeaderEpoch {tp.topic}-{tp.partition}")
                            if self.note_error(p.error_code, tp.topic):
                                retry_error = err
                                continue
                            result[tp] = EpochEndOffset(error_code=p.error_code)
                        else:
                            result[tp] = EpochEndOffset(p.leader_epoch, p.end_offset)
                        del remaining[tp]
            if remaining:
                raise retry_error or error_for(
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    f"no OffsetForLeaderEpoch answer for {sorted(remaining)}",
                )

        await self._retry("offsets_for_leader_epochs", attempt, timeout_ms)
        return result

    async def commit_offsets(
        self: _Core,
        group_id: str,
        offsets: Mapping[TopicPartition | tuple[str, int], int | OffsetAndMetadata],
        *,
        generation_id: int = -1,
        member_id: str = "",
        group_instance_id: str | None = None,
        timeout_ms: float | None = None,
    ) -> None:
        """Commit group offsets (the next offset to consume) via the group coordinator."""
        self._check_open()
        body = offset_commit_request(
            group_id,
            offsets_by_partition(offsets),
            generation_id=generation_id,
            member_id=member_id,
            group_instance_id=group_instance_id,
        )

        stale: set[str] = set()  # topics whose metadata (leader epochs) the answer says is stale
        fenced: set[tuple[str, int]] = set()  # partitions answered FENCED_LEADER_EPOCH once

        async def attempt() -> None:
            if stale:
                # Retriable metadata errors (e.g. FENCED/UNKNOWN_LEADER_EPOCH about the
                # committed_leader_epoch, KIP-320), as in Java: refresh, then commit again.
                meta = await self.metadata(sorted(stale), allow_auto_topic_creation=False)
                stale.clear()
                gone = sorted(
                    t.name for t in meta.topics if t.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                )
                if gone:
                    # Deleted (with the group's offsets of it): no retry can commit there.
                    raise KafkaProtocolError(
                        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION.name,
                        False,
                        f"OffsetCommit {group_id!r}: topic(s) {', '.join(map(repr, gone))} no longer "
                        "exist (deleted); not committed",
                    )
            coord = await self.find_coordinator(group_id, 0, timeout_ms=timeout_ms)
            resp = await self.send(coord.node_id, body, max_version=OFFSETS_MAX_VERSION)
            failure: KafkaProtocolError | None = None
            for t in resp.topics:
                for p in t.partitions:
                    code, where = p.error_code, f"OffsetCommit {group_id!r} {t.name}-{p.partition_index}"
                    if not code:
                        continue
                    if code == ErrorCode.FENCED_LEADER_EPOCH and (t.name, p.partition_index) in fenced:
                        # Refused again after the refresh: the epoch sent is the committed
                        # record's, which no refresh changes, so no retry can store it (Apache
                        # Kafka stores it as given; a broker that fences it never will).
                        raise KafkaProtocolError(
                            code,
                            ErrorCode(code).name,
                            False,
                            f"{where}: committed_leader_epoch older than the partition leader's, "
                            "refused again after a metadata refresh; not committed",
                        )
                    if code == ErrorCode.FENCED_LEADER_EPOCH:
                        fenced.add((t.name, p.partition_index))
                    if code in STALE_METADATA_CODES:
                        stale.add(t.name)
                        self.note_error(code, t.name)
                    if failure is None:
                        failure = self._coordinator_failed(0, group_id, code, where)
            if failure is not None:
                raise failure

        await self._retry(f"committing offsets for group {group_id!r}", attempt, timeout_ms)

    async def fetch_committed_offsets(
        self: _Core,
        group_id: str,
        partitions: Iterable[TopicPartition | tuple[str, int]] | None = None,
        *,
        require_stable: bool = False,
        timeout_ms: float | None = None,
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """Committed offsets of ``group_id`` (all its partitions when ``partitions`` is None).

        Partitions without a committed offset are left out of the result.
        """
        self._check_open()
        wanted: dict[str, list[int]] | None = None
        if partitions is not None:
            wanted = defaultdict(list)
            for key in partitions:
                tp = as_topic_partition(key)
                wanted[tp.topic].append(tp.partition)

        async def attempt() -> dict[TopicPartition, OffsetAndMetadata]:
            coord = await self.find_coordinator(group_id, 0, timeout_ms=timeout_ms)
            conn = await self.connection(coord.node_id)
            version = conn.choose_version(ApiKey.OFFSET_FETCH, max_version=OFFSETS_MAX_VERSION)
            # Before v7 there is no stable read: fall back to a plain one, as Java's consumer does.
            stable = require_stable and version >= 7
            if version >= 8:
                tcls = _nested(OffsetFetchRequest, "OffsetFetchRequestTopics")
                gcls = _nested(OffsetFetchRequest, "OffsetFetchRequestGroup")
                topics = (
                    None
                    if wanted is None
                    else [tcls(name=t, partition_indexes=ps) for t, ps in wanted.items()]
                )
                body = OffsetFetchRequest(
                    groups=[gcls(group_id=group_id, topics=topics)], require_stable=stable
                )
            else:
                tcls = _nested(OffsetFetchRequest, "OffsetFetchRequestTopic")
                topics = (
                    None
                    if wanted is None
                    else [tcls(name=t, partition_indexes=ps) for t, ps in wanted.items()]
                )
                body = OffsetFetchRequest(group_id=group_id, topics=topics, require_stable=stable)
            resp = await self.send(coord.node_id, body, version)
            if version >= 8:
                group = next((g for g in resp.groups if g.group_id == group_id), None)
                if group is None:
                    raise error_for(15, f"OffsetFetch answer lacks group {group_id!r}")
                top_error, topics_resp = group.error_code, group.topics
            else:
                top_error, topics_resp = getattr(resp, "error_code", 0), resp.topics
            if top_error:
                raise self._coordinator_failed(0, group_id, top_error, f"OffsetFetch {group_id!r}")
            out: dict[TopicPartition, OffsetAndMetadata] = {}
            for t in topics_resp:
                for p in t.partitions:
                    if p.error_code:
                        raise self._coordinator_failed(
                            0,
                            group_id,
                            p.error_code,
                            f"OffsetFetch {group_id!r} {t.name}-{p.partition_index}",
                        )
                    if p.committed_offset >= 0:
                        out[TopicPartition(t.name, p.partition_index)] = OffsetAndMetadata(
                            p.committed_offset, p.metadata, getattr(p, "committed_leader_epoch", -1)
                        )
            return out

        return await self._retry(f"fetching committed offsets for group {group_id!r}", attempt, timeout_ms)

    # -- producer ids ----------------------------------------------------------------------

    async def init_producer_id(
        self: _Core,
        transactional_id: str | None = None,
        transaction_timeout_ms: int = 60_000,
        *,
        producer_id: int = -1,
        producer_epoch: int = -1,
        timeout_ms: float | None = None,
    ) -> ProducerIdAndEpoch:
        """A producer id and epoch: from the transaction coordinator when transactional, else any broker."""
        self._check_open()
        body = InitProducerIdRequest(
            transactional_id=transactional_id,
            transaction_timeout_ms=transaction_timeout_ms,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
        )

        async def attempt() -> ProducerIdAndEpoch:
            if transactional_id is not None:
                node_id = (await self.find_coordinator(transactional_id, 1, timeout_ms=timeout_ms)).node_id
            else:
                node_id = await self._any_node()
            resp = await self.send(node_id, body)
            if resp.error_code:
                if transactional_id is not None:
                    raise self._coordinator_failed(1, transactional_id, resp.error_code, "InitProducerId")
                raise error_for(resp.error_code, "InitProducerId")
            return ProducerIdAndEpoch(resp.producer_id, resp.producer_epoch)

        return await self._retry("init_producer_id", attempt, timeout_ms)

    # -- topics ----------------------------------------------------------------------------

    async def _controller_node(self: _Core) -> int:
        controller = self.cached_metadata().controller_id
        if controller >= 0 and controller in self._nodes:
            return controller
        return await self._any_node()

    # -- public building blocks for admin code ----------------------------------------------

    async def controller_node(self: _Core, *, refresh: bool = False) -> int:
        """Node id of the controller (where topic admin requests go), any broker if none is known.

        ``refresh`` asks a broker first (after ErrorCode.NOT_CONTROLLER the cached id is wrong)."""
        self._check_open()
        await self._ensure_started()
        if refresh or self.cached_metadata().controller_id < 0:
            await self.metadata([], allow_auto_topic_creation=False)
        return await self._controller_node()

    async def any_node(self: _Core) -> int:
        """A broker to send a request any broker can answer (the least loaded connected one)."""
        self._check_open()
        return await self._any_node()

    async def api_version(self: _Core, node_id: int, api_key: int, *, max_version: int | None = None) -> int:
        """The version this client would use for ``api_key`` with ``node_id``.

        Raises KafkaUnsupportedVersionError naming the API when that broker does not offer it."""
        conn = await self.connection(node_id)
        return conn.choose_version(api_key, max_version=max_version)

    async def retry(
        self: _Core, what: str, attempt: Callable[[], Awaitable[T]], timeout_ms: float | None = None
    ) -> T:
        """Run ``attempt`` until it succeeds, raises a non-retriable error or ``timeout_ms`` passes
        (default ``api_timeout_ms``); the timeout error names ``what`` and the last cause."""
        return await self._retry(what, attempt, timeout_ms)

    async def create_topics(
        self: _Core,
        topics: Iterable[NewTopic | str],
        *,
        timeout_ms: float = 30_000,
        validate_only: bool = False,
        ignore_existing: bool = True,
    ) -> list[str]:
        """Create topics; returns the names created. Raises the first per-topic error.

        Topics that already exist are skipped silently when ``ignore_existing``.
        """
        self._check_open()
        await self._ensure_started()
        new = [t if isinstance(t, NewTopic) else NewTopic(t) for t in topics]
        body = create_topics_request(new, timeout_ms=timeout_ms, validate_only=validate_only)

        async def attempt() -> list[str]:
            resp = await self.send(await self._controller_node(), body)
            created: list[str] = []
            for r in resp.topics:
                if r.error_code == ErrorCode.NOT_CONTROLLER:
                    self.invalidate_metadata()
                    await self.metadata([])
                    raise error_for(ErrorCode.NOT_CONTROLLER, "CreateTopics")
                if r.error_code == ErrorCode.TOPIC_ALREADY_EXISTS and ignore_existing:
                    continue
                if r.error_code:
                    raise error_for(
                        r.error_code, f"creating topic {r.name!r}: {r.error_message or ''}".rstrip(": ")
                    )
                created.append(r.name)
            return created

        created = await self._retry("create_topics", attempt, timeout_ms)
        for name in created:
            self.invalidate_metadata(name)
        return created

    async def delete_topics(self: _Core, names: Iterable[str], *, timeout_ms: float = 30_000) -> None:
        """Delete topics by name; unknown topics raise ErrorCode.UNKNOWN_TOPIC_OR_PARTITION."""
        self._check_open()
        await self._ensure_started()
        names = list(names)
        node_id = await self._controller_node()
        conn = await self.connection(node_id)
        version = conn.choose_version(ApiKey.DELETE_TOPICS)
        if version >= 6:
            state_cls = _nested(DeleteTopicsRequest, "DeleteTopicState")
            body = DeleteTopicsRequest(topics=[state_cls(name=n) for n in names], timeout_ms=int(timeout_ms))
        else:
            body = DeleteTopicsRequest(topic_names=names, timeout_ms=int(timeout_ms))
        resp = await self.send(node_id, body, version)
        for name in names:
            self.invalidate_metadata(name)
        for r in resp.responses:
            if r.error_code:
                raise error_for(r.error_code, f"deleting topic {r.name!r}")
