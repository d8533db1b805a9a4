"""Incremental fetch sessions (KIP-227), one per fetch connection: what the broker's session
holds, and what the next Fetch must say to bring it up to date.

A full Fetch (epoch 0) names every partition the consumer wants and opens a session; the broker
answers with its id. Each later Fetch carries that id and the next epoch and names only the
partitions whose fetch state changed since the last request (a new fetch offset after records
came, a seek, new leader epochs, a partition added) and the partitions to forget (paused,
revoked, moved to another leader, waiting for data to be taken). The broker fetches all of the
session's partitions and answers only those with records, an error or a changed high watermark,
so an idle consumer's Fetch and its answer are empty whatever it holds.

Sans-IO: the fetcher says what it wants (:meth:`FetchSession.want`, :meth:`FetchSession.drop`),
takes the next request's contents (:meth:`FetchSession.next_request`) and reports the outcome
(:meth:`FetchSession.answered`, :meth:`FetchSession.failed`). Any failure falls back to a full
Fetch (and a new session), so no answer can be lost to a session the broker no longer has. A
broker that answers a full Fetch with session id 0 (no sessions, or its cache is full) is asked
in full every time, as Java's ``FetchSessionHandler`` does.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

from kafka_core.client.metadata import TopicPartition
from kafka_core.protocol.errors import ErrorCode

log = logging.getLogger("kafka_core.consumer.fetcher")

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0  # with id 0: open a session; with an id: close it and open a new one
FINAL_EPOCH = -1  # a sessionless Fetch (or the close of a session)
_MAX_EPOCH = 2**31 - 1

# Answers that mean the broker has no (usable) session for us: start over with a full Fetch.
SESSION_ERRORS = frozenset(
    {
        ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
        ErrorCode.INVALID_FETCH_SESSION_EPOCH,
        ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR,
    }
)


class PartitionData(NamedTuple):
    """What a Fetch says about one partition, and the position version it was asked under.

    ``version`` never goes on the wire: an answer is matched to the position it was asked for,
    and a seek (a new version, even to the same offset) sends the partition again.
    """

    fetch_offset: int
    current_leader_epoch: int
    last_fetched_epoch: int
    max_bytes: int
    version: int


@dataclass
class SessionRequest:
    """The contents of the next Fetch of a session."""

    session_id: int
    epoch: int
    partitions: dict[TopicPartition, PartitionData]  # to name in the request
    forgotten: list[TopicPartition]
    full: bool
    by_id: bool


@dataclass
class FetchSession:
    """One connection's fetch session (the broker keeps one per session id)."""

    node: int
    session_id: int = INVALID_SESSION_ID
    epoch: int = INITIAL_EPOCH
    # What the consumer wants fetched now, and what the broker's session holds (as of the last
    # request sent: an answer is read against it).
    _wanted: dict[TopicPartition, PartitionData] = field(default_factory=dict)
    _sent: dict[TopicPartition, PartitionData] = field(default_factory=dict)
    # Partitions whose wanted state changed since the last request (added, changed, dropped).
    _touched: set[TopicPartition] = field(default_factory=set)
    _by_id: bool | None = None  # how the session names topics (a change needs a new session)
    _ids: dict[str, uuid.UUID] = field(default_factory=dict)  # topic ids the session was told
    _names: dict[uuid.UUID, str] = field(default_factory=dict)
    # Full requests, incremental requests, and partitions named (counters for tests and stats).
    full_requests: int = 0
    incremental_requests: int = 0
    partitions_sent: int = 0

    # -- what the consumer wants ---------------------------------------------------------

    def want(self, tp: TopicPartition, data: PartitionData) -> None:
        """Fetch ``tp`` with ``data`` (sent in the next request only if it changed)."""
        if self._wanted.get(tp) != data:
            self._wanted[tp] = data
            self._touched.add(tp)

    def drop(self, tp: TopicPartition) -> None:
        """Stop fetching ``tp`` (the next incremental request forgets it)."""
        if self._wanted.pop(tp, None) is not None:
            self._touched.add(tp)

    def __contains__(self, tp: object) -> bool:
        return tp in self._wanted

    def __len__(self) -> int:
        return len(self._wanted)

    def wanted(self) -> Iterable[TopicPartition]:
        return self._wanted.keys()

    def pending(self) -> Iterable[TopicPartition]:
        """Partitions wanted whose state changed since the last request."""
        return [tp for tp in self._touched if tp in self._wanted]

    def sent(self, tp: TopicPartition) -> PartitionData | None:
        """What the last request left the broker's session holding for ``tp`` (None: not in it)."""
        return self._sent.get(tp)

    @property
    def full(self) -> bool:
        """The next request is a full one (no session yet, or starting over)."""
        return self.epoch == INITIAL_EPOCH or self.session_id == INVALID_SESSION_ID

    # -- requests and answers --------------------------------------------------------------

    def next_request(self, by_id: bool, sessions: bool = True) -> SessionRequest:
        """The next Fetch's partitions; the session's view moves on as if the broker took it.

        ``by_id``: the request names topics by id (v13+); a session opened the other way is
        closed and opened again (the broker would answer FETCH_SESSION_TOPIC_ID_ERROR).
        ``sessions`` False (Fetch before v7): a sessionless full request.
        """
        if not sessions:
            self.session_id, self.epoch = INVALID_SESSION_ID, INITIAL_EPOCH
        elif self._by_id is not None and self._by_id != by_id:
            self.restart()
        self._by_id = by_id
        if self.full:
            partitions = dict(self._wanted)
            forgotten: list[TopicPartition] = []
            self._sent = dict(partitions)
            self._ids.clear()
            self._names.clear()
            self.full_requests += 1
        else:
            partitions = {}
            forgotten = []
            wanted, sent = self._wanted, self._sent
            for tp in self._touched:
                data = wanted.get(tp)
                if data is None:
                    if sent.pop(tp, None) is not None:
                        forgotten.append(tp)
                elif sent.get(tp) != data:
                    partitions[tp] = sent[tp] = data
            self.incremental_requests += 1
        self._touched.clear()
        self.partitions_sent += len(partitions)
        epoch = self.epoch if sessions else FINAL_EPOCH
        return SessionRequest(self.session_id, epoch, partitions, forgotten, self.full, by_id)

    def note_topic_ids(self, ids: dict[str, uuid.UUID]) -> None:
        """Topic ids named in a request: answers (v13+) name topics by id only."""
        for name, tid in ids.items():
            self._ids[name] = tid
            self._names[tid] = name

    def topic_id(self, name: str) -> uuid.UUID | None:
        return self._ids.get(name)

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        return self._names.get(topic_id)

    def answered(self, request: SessionRequest, error_code: int, session_id: int) -> bool:
        """The broker's answer to ``request``: False if it failed as a whole (then the next
        request is a full one)."""
        if error_code:
            if error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND:
                log.debug("fetch session %d on node %d not found: full fetch", self.session_id, self.node)
                self.session_id, self.epoch = INVALID_SESSION_ID, INITIAL_EPOCH
            else:
                self.restart()
            return False
        if request.full:
            if session_id == INVALID_SESSION_ID:
                # No session (not offered, or the broker's cache is full): full fetches.
                self.session_id, self.epoch = INVALID_SESSION_ID, INITIAL_EPOCH
            else:
                self.session_id, self.epoch = session_id, 1
        elif session_id == INVALID_SESSION_ID:
            log.debug("fetch session %d on node %d closed by the broker", self.session_id, self.node)
            self.session_id, self.epoch = INVALID_SESSION_ID, INITIAL_EPOCH
        else:
            self.epoch = 1 if self.epoch >= _MAX_EPOCH else self.epoch + 1
        return True

    def close_request(self) -> SessionRequest | None:
        """The Fetch that closes the broker's session (FINAL_EPOCH, naming no partition), so that
        the broker frees its cache slot at once instead of evicting it later; None without a
        session. The session is forgotten here: used again, it opens a new one in full."""
        if self.session_id == INVALID_SESSION_ID:
            return None
        plan = SessionRequest(self.session_id, FINAL_EPOCH, {}, [], True, bool(self._by_id))
        self.session_id, self.epoch = INVALID_SESSION_ID, INITIAL_EPOCH
        return plan

    def failed(self) -> None:
        """The request got no answer (connection lost, timeout): its effect on the broker's
        session is unknown, so the next request is a full one."""
        self.restart()

    def restart(self) -> None:
        """Close the session (if any) and open a new one with the next request, in full."""
        self.epoch = INITIAL_EPOCH
