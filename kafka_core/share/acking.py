"""Sending acknowledgements (ShareAcknowledge) and saying what a send waited for.

Requests on one share session carry consecutive epochs and go one at a time
(``NodeSession.lock``); a ShareAcknowledge cannot go beside a ShareFetch in flight on the same
session: Kafka checks the session's epoch again when it answers a ShareFetch, so a request taken
in between fails that ShareFetch (INVALID_SHARE_SESSION_EPOCH) and the records it acquired are
delivered again, their delivery count raised (tried on Kafka 4.4). Java's client waits too (no
acknowledgement to a node with a request in flight). What bounds the wait is the fetch itself:
the consumer's ShareFetch waits at the broker no longer than the poll that sent it (a prefetch,
sent while the application works, not at all), and it has a connection of its own
(``FETCH_LANE``), so heartbeats and acknowledgements are not queued behind it on the socket.
A send cut short by its caller's timeout puts what it had not sent back (not lost) and
``describe_wait`` names what it was waiting for.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import Any

from kafka_core.client.metadata import TopicPartition
from kafka_core.errors import KafkaUnsupportedVersionError
from kafka_core.protocol.messages import ShareAcknowledgeRequest
from kafka_core.share.acks import AckBook
from kafka_core.share.fetch import AckResults, NodeSession, ShareRequests, by_leader
from kafka_core.share.records import Acks

RENEW_VERSION = 2  # ShareAcknowledge v2 brought RENEW (KIP-1222, Apache Kafka 4.2)


class AckSender:
    """Sends the consumer's ShareAcknowledge requests; tracks what a send waits for, so that a
    timeout can name it."""

    def __init__(
        self,
        client: Any,
        requests: ShareRequests,
        book: AckBook,
        session: Callable[[int], NodeSession],
        sessions: Callable[[], list[int]],
        fetching: Callable[[int], bool],
    ) -> None:
        self._client = client
        self._requests = requests
        self._book = book
        self._session = session
        self._sessions = sessions
        self._fetching = fetching
        self.waiting: dict[int, str] = {}  # node -> what its acknowledgements wait for

    def fetch_wait(self, node: int) -> str:
        return (
            f"a ShareFetch in flight to broker {node} on the same share session (the broker holds "
            "it, when it has nothing to return, up to the time left to the poll that sent it, at "
            f"most fetch_max_wait_ms={self._requests.max_wait_ms})"
        )

    async def commit(self, pending: dict[TopicPartition, Acks]) -> AckResults:
        """``pending``, then the RENEWs in a ShareAcknowledge of their own (IsRenewAck)."""
        results = await self.send(pending)
        renewals = self._book.take_renewals()
        if renewals:
            renewed = await self.send(renewals, renew=True)
            self._book.renewal_sent(
                [tp for tp, (_, err) in renewed.items() if err is None], self._requests.lock_timeout_ms
            )
            for tp, (offsets, err) in renewed.items():
                if tp not in results or (err is not None and results[tp][1] is None):
                    results[tp] = (offsets, err)  # a refused RENEW is its partition's outcome
        return results

    def timeout_message(self, what: str, timeout: float | None, fetching: Iterable[int]) -> str:
        """``what`` ran out of ``timeout``: what it waited for, and what became of the rest."""
        cause = self.describe_wait()
        if not cause and fetching:
            cause = "waited for " + " and ".join(self.fetch_wait(n) for n in fetching)
        rest = (
            "acknowledgements not sent stay pending (sent with the next poll or commit)"
            if what == "commit_sync"
            else "records not acknowledged come back once their acquisition lock expires"
        )
        return f"{what} did not finish within {timeout}s" + (f": {cause}" if cause else "") + f"; {rest}"

    def describe_wait(self) -> str:
        """What sends still wait for (for a timeout's message), or ''."""
        return "; ".join(f"acknowledgements for broker {n} waited for {w}" for n, w in self.waiting.items())

    async def send(
        self, pending: dict[TopicPartition, Acks], *, close: bool = False, renew: bool = False
    ) -> AckResults:
        """ShareAcknowledge to each leader for ``pending``; ``close`` also closes every share
        session; ``renew``: they are RENEWs."""
        try:
            by_node, results = await by_leader(self._client, pending)
        except asyncio.CancelledError:  # timed out looking a leader up: nothing went out
            (self._book.restore_renewals if renew else self._book.restore)(pending)
            raise
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
        sess = self._session(node)
        sent = False
        try:
            if sess.lock.locked():
                self.waiting[node] = self.fetch_wait(node) if self._fetching(node) else "another request"
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
