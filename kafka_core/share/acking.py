"""Sending acknowledgements (ShareAcknowledge) without waiting behind a long-polling ShareFetch.

Requests on one share session carry consecutive epochs, so the consumer sends them one at a time
(``NodeSession.lock``), and a broker serves one connection's requests in order. A ShareFetch
with nothing to return waits at the broker up to ``fetch_max_wait_ms``; a commit or close queued
behind it waited as long, past the time the application gave it, its acknowledgements late.

The broker moves a session's epoch on when it *takes* a request, before a ShareFetch starts
waiting. So while a ShareFetch at epoch N is in flight (on its own connection, ``FETCH_LANE``),
acknowledgements go at once, on another connection, at epoch N+1 (then N+2, ...): a *side*
ShareAcknowledge. The fetch's task waits for side requests to end before it lets the session go,
and moves the epoch past them. Should a side request reach the broker before the ShareFetch (or
be refused as a whole for any reason), nothing was applied: the acknowledgements wait for the
session as before, within the caller's timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from kafka_core.client.metadata import TopicPartition
from kafka_core.errors import KafkaUnsupportedVersionError
from kafka_core.protocol.messages import ShareAcknowledgeRequest
from kafka_core.share.acks import AckBook
from kafka_core.share.fetch import AckResults, NodeSession, ShareRequests, by_leader
from kafka_core.share.records import Acks

RENEW_VERSION = 2  # ShareAcknowledge v2 brought RENEW (KIP-1222, Apache Kafka 4.2)


class _Flight:
    """A ShareFetch in flight on a session: the epoch it went with, side requests taken since."""

    __slots__ = ("epoch", "taken", "refused", "lock")

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch
        self.taken = 0
        self.refused = False
        self.lock = asyncio.Lock()


class AckSender:
    """Sends the consumer's ShareAcknowledge requests, beside an in-flight ShareFetch when one
    holds the session; tracks what a send waits for, so a timeout can name it."""

    def __init__(
        self,
        client: Any,
        requests: ShareRequests,
        book: AckBook,
        session: Callable[[int], NodeSession],
        sessions: Callable[[], list[int]],
    ) -> None:
        self._client = client
        self._requests = requests
        self._book = book
        self._session = session
        self._sessions = sessions
        self._flights: dict[int, _Flight] = {}
        self.waiting: dict[int, str] = {}  # node -> what its acknowledgements wait for
        self.side_requests = 0

    @contextlib.asynccontextmanager
    async def fetching(self, sess: NodeSession) -> AsyncIterator[None]:
        """Around a ShareFetch on ``sess`` (its lock held): side requests may go meanwhile."""
        flight = self._flights[sess.node_id] = _Flight(sess.epoch)
        try:
            yield
        finally:
            async with flight.lock:  # a side request in flight ends first
                if self._flights.get(sess.node_id) is flight:
                    del self._flights[sess.node_id]
                if sess.epoch != 0:  # the fetch kept the session: past the side requests' epochs
                    for _ in range(flight.taken):
                        sess.advance()

    def fetch_wait(self, node: int) -> str:
        return (
            f"a ShareFetch in flight to broker {node} on the same share session (the broker holds "
            f"it up to fetch_max_wait_ms={self._requests.max_wait_ms} when it has nothing to return)"
        )

    def describe_wait(self) -> str:
        """What sends still wait for (for a timeout's message), or ''."""
        return "; ".join(f"acknowledgements for broker {n} waited for {w}" for n, w in self.waiting.items())

    async def send(
        self, pending: dict[TopicPartition, Acks], *, close: bool = False, renew: bool = False
    ) -> AckResults:
        """ShareAcknowledge to each leader for ``pending``; ``close`` also closes every share
        session (only once no ShareFetch is in flight); ``renew``: they are RENEWs."""
        by_node, results = await by_leader(self._client, pending)
        nodes = set(by_node) | (set(self._sessions()) if close else set())
        parts = await asyncio.gather(*(self._one(n, by_node.get(n, {}), close, renew) for n in nodes))
        for part in parts:
            results.update(part)
        return results

    async def _one(self, node: int, acks: dict[TopicPartition, Acks], close: bool, renew: bool) -> AckResults:
        if renew:
            refused = await self._renew_refused(node, acks)
            if refused is not None:
                return refused
        if acks and not close:
            out = await self._side(node, acks, renew)
            if out is not None:
                return out
        sess = self._session(node)
        sent = False
        try:
            if sess.lock.locked():
                self.waiting[node] = self.fetch_wait(node) if node in self._flights else "another request"
            async with sess.lock:
                self.waiting.pop(node, None)
                sent = True
                started = asyncio.get_running_loop().time()
                out = await self._requests.acknowledge(sess, acks, close=close, renew=renew)
                if acks:
                    self._book.ack_latency(asyncio.get_running_loop().time() - started)
                return out
        except asyncio.CancelledError:
            if not sent and acks:  # never went out: pending again, not lost
                (self._book.restore_renewals if renew else self._book.restore)(acks)
            raise

    async def _side(self, node: int, acks: dict[TopicPartition, Acks], renew: bool) -> AckResults | None:
        """A ShareAcknowledge beside the ShareFetch in flight on ``node``'s session, or None
        (no fetch in flight, or the broker refused it as a whole: nothing applied)."""
        flight = self._flights.get(node)
        if flight is None or flight.epoch == 0 or flight.refused:
            return None
        async with flight.lock:
            if self._flights.get(node) is not flight or flight.refused:
                return None
            probe = NodeSession(node)  # the session as the broker has it once it took the fetch
            probe.epoch = flight.epoch
            for _ in range(flight.taken + 1):
                probe.advance()
            started = asyncio.get_running_loop().time()
            out = await self._requests.acknowledge(probe, acks, renew=renew)
            if probe.epoch == 0:  # refused as a whole: the fetch not taken yet, or worse
                flight.refused = True
                return None
            flight.taken += 1
            self.side_requests += 1
            self._book.ack_latency(asyncio.get_running_loop().time() - started)
            return out

    async def _renew_refused(self, node: int, acks: dict[TopicPartition, Acks]) -> AckResults | None:
        """RENEW needs ShareAcknowledge v2: a broker without it gets a clear per-partition error."""
        try:
            version = await self._client.api_version(node, ShareAcknowledgeRequest.API_KEY)
        except KafkaUnsupportedVersionError as exc:
            err: BaseException = exc
        else:
            if version >= RENEW_VERSION:
                return None
            err = KafkaUnsupportedVersionError(
                f"broker {node} cannot renew acquisition locks (AcknowledgeType.RENEW, KIP-1222): it "
                f"speaks ShareAcknowledge up to v{version}, RENEW needs v{RENEW_VERSION} "
                "(Apache Kafka 4.2 or newer)"
            )
        return {tp: (offsets.keys(), err) for tp, offsets in acks.items()}
