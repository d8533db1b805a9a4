"""Wire capture of Produce traffic, and what it says about a DUPLICATE_SEQUENCE_NUMBER answer.

The fault proxy feeds every client->broker and broker->client frame through a
:class:`ProduceCapture`, which keeps, per partition of every Produce request, the producer id,
epoch, base sequence, record count, a digest of the records and the chaos record numbers they
carry, and the broker's answer (error, base offset) or none when the connection died first.

:func:`explain_duplicate` settles who lost a batch that was answered DUPLICATE_SEQUENCE_NUMBER
yet is missing from the log: an earlier request with the same (producer id, epoch) and an
overlapping sequence range that carried *other* records means the producer reused a sequence
(our bug); the same records sent before, never acknowledged with an offset and absent from the
log mean the broker kept the sequence without the data (Tansu's).
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from kafka_core.codec import decode_record_batches
from kafka_core.devtools.chaos.values import parse_value
from kafka_core.errors import KafkaError
from kafka_core.protocol import decode_request, decode_response

__all__ = ["ProduceCapture", "ProduceWrite", "RequestLog", "RequestTiming", "explain_duplicate"]

_PRODUCE = 0
_BATCH_HEADER = 61  # a v2 record batch's header, up to and including the record count
_MAX_FRAME = 1 << 30
DUPLICATE_SEQUENCE_NUMBER = 46


@dataclass
class ProduceWrite:
    """One partition's batch in one Produce request, and the broker's answer to it."""

    order: int  # position in the capture: earlier requests have smaller numbers
    conn: int
    correlation_id: int
    sent_at: float
    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    count: int
    digest: str  # of the records section (everything after the batch header)
    numbers: list[int] = field(default_factory=list)  # chaos record numbers, -1 if not ours
    error: int | None = None  # None: never answered (the connection died first)
    base_offset: int | None = None
    answered_at: float | None = None

    def sequence_of(self, number: int) -> int | None:
        """The sequence number this write gave chaos record ``number``, if it carried it."""
        try:
            return self.base_sequence + self.numbers.index(number)
        except ValueError:
            return None

    def summary(self) -> dict[str, Any]:
        out = asdict(self)
        nums = out.pop("numbers")
        out["records"] = [nums[0], nums[-1]] if nums else []
        return out


class ProduceCapture:
    """Fed by the proxy's event loop; read from any thread once traffic has stopped (or during)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._writes: list[ProduceWrite] = []
        self._buffers: dict[int, bytearray] = {}  # conn -> unframed client bytes
        self._pending: dict[tuple[int, int], tuple[int, list[ProduceWrite]]] = {}
        self.marks: list[tuple[float, str]] = []  # e.g. when the broker was killed and started
        self.decode_errors = 0

    @property
    def writes(self) -> list[ProduceWrite]:
        with self._lock:
            return list(self._writes)

    def mark(self, label: str) -> None:
        with self._lock:
            self.marks.append((time.time(), label))

    def from_client(self, conn: int, data: bytes) -> None:
        """Bytes on their way to the broker: every complete Produce request is recorded."""
        buf = self._buffers.setdefault(conn, bytearray())
        buf += data
        while len(buf) >= 4:
            size = int.from_bytes(buf[:4], "big", signed=True)
            if size < 8 or size > _MAX_FRAME:
                buf.clear()  # not Kafka framing: nothing more to learn from this connection
                return
            if len(buf) < 4 + size:
                return
            frame = bytes(buf[4 : 4 + size])
            del buf[: 4 + size]
            if int.from_bytes(frame[:2], "big", signed=True) == _PRODUCE:
                self._request(conn, frame)

    def from_broker(self, conn: int, frame: bytes | bytearray) -> None:
        """One whole response frame (size prefix included): the answer to a recorded Produce."""
        corr = int.from_bytes(frame[4:8], "big", signed=True)
        with self._lock:
            entry = self._pending.pop((conn, corr), None)
        if entry is None:
            return
        version, writes = entry
        try:
            resp = decode_response(_PRODUCE, version, bytes(frame[4:])).body
        except (KafkaError, ValueError):
            self.decode_errors += 1
            return
        now = time.time()
        answers = {(t.name, p.index): p for t in resp.responses for p in t.partition_responses}
        with self._lock:
            for w in writes:
                pr = answers.get((w.topic, w.partition))
                if pr is not None:
                    w.error, w.base_offset, w.answered_at = pr.error_code, pr.base_offset, now

    def closed(self, conn: int) -> None:
        """The connection is gone: requests still pending stay unanswered."""
        self._buffers.pop(conn, None)
        with self._lock:
            for key in [k for k in self._pending if k[0] == conn]:
                del self._pending[key]

    def _request(self, conn: int, frame: bytes) -> None:
        try:
            req = decode_request(frame)
        except (KafkaError, ValueError):
            self.decode_errors += 1
            return
        now = time.time()
        writes: list[ProduceWrite] = []
        with self._lock:
            for topic in req.body.topic_data:
                for pd in topic.partition_data:
                    data = bytes(pd.records or b"")
                    if len(data) < _BATCH_HEADER:
                        continue
                    w = ProduceWrite(
                        order=len(self._writes),
                        conn=conn,
                        correlation_id=req.header.correlation_id,
                        sent_at=now,
                        topic=topic.name,
                        partition=pd.index,
                        producer_id=int.from_bytes(data[43:51], "big", signed=True),
                        producer_epoch=int.from_bytes(data[51:53], "big", signed=True),
                        base_sequence=int.from_bytes(data[53:57], "big", signed=True),
                        count=int.from_bytes(data[57:61], "big", signed=True),
                        digest=hashlib.blake2b(data[_BATCH_HEADER:], digest_size=12).hexdigest(),
                        numbers=_numbers(data),
                    )
                    self._writes.append(w)
                    writes.append(w)
            if writes and req.header.api_version >= 0 and req.body.acks != 0:
                self._pending[(conn, req.header.correlation_id)] = (req.header.api_version, writes)


@dataclass
class RequestTiming:
    """One request through the proxy, any API: when its header passed and when its answer did.

    ``answered_at`` None with ``closed_at`` set: the connection ended first (dropped by either
    side); both None: still in flight. A broker answers one connection's requests in order, one at
    a time, so a slow answer holds up every later request on the same ``conn``.
    """

    conn: int
    api_key: int
    api_version: int
    correlation_id: int
    sent_at: float
    answered_at: float | None = None
    closed_at: float | None = None
    answer: bytes | None = None  # the response (after its size prefix), for the APIs asked to keep

    def waited(self, now: float | None = None) -> float:
        """Seconds until the answer, the close, or ``now`` (still in flight)."""
        end = self.answered_at or self.closed_at or (time.time() if now is None else now)
        return end - self.sent_at


class RequestLog:
    """Every request and the time of its answer, by connection and correlation id (any API).

    Fed by the proxy's event loop (:meth:`sent`, :meth:`answered`, :meth:`closed`); read from
    any thread. Finds what the broker left waiting, e.g. around a SIGKILL of another node.
    """

    def __init__(self, keep: Iterable[int] = ()) -> None:
        """``keep``: API keys whose responses are kept whole (to read their error codes)."""
        self._lock = threading.Lock()
        self._all: list[RequestTiming] = []
        self._open: dict[tuple[int, int], RequestTiming] = {}
        self._keep = frozenset(keep)

    def sent(self, conn: int, api_key: int, api_version: int, correlation_id: int) -> None:
        t = RequestTiming(conn, api_key, api_version, correlation_id, time.time())
        with self._lock:
            self._all.append(t)
            self._open[(conn, correlation_id)] = t

    def answered(self, conn: int, correlation_id: int, frame: bytes | bytearray = b"") -> None:
        """The response to ``correlation_id`` arrived; ``frame`` is it whole, size prefix included."""
        with self._lock:
            t = self._open.pop((conn, correlation_id), None)
            if t is not None:
                t.answered_at = time.time()
                if t.api_key in self._keep and frame:
                    t.answer = bytes(frame[4:])

    def closed(self, conn: int) -> None:
        now = time.time()
        with self._lock:
            for key in [k for k in self._open if k[0] == conn]:
                self._open.pop(key).closed_at = now

    @property
    def requests(self) -> list[RequestTiming]:
        with self._lock:
            return list(self._all)

    def slow(self, seconds: float, now: float | None = None) -> list[RequestTiming]:
        """Requests that waited ``seconds`` or more for their answer (or are waiting still)."""
        return [t for t in self.requests if t.waited(now) >= seconds]

    def before_on_conn(self, t: RequestTiming) -> list[RequestTiming]:
        """Requests on ``t``'s connection sent before it and not yet answered when it was sent:
        what it queued behind (the broker reads a connection's next request only after answering
        the last)."""
        inf = float("inf")
        return [
            o
            for o in self.requests
            if o.conn == t.conn
            and o.sent_at < t.sent_at
            and (o.answered_at or o.closed_at or inf) > t.sent_at
        ]


def _numbers(data: bytes) -> list[int]:
    try:
        records = decode_record_batches(data)
    except (KafkaError, ValueError):
        return []
    return [-1 if (n := parse_value(r.value)) is None else n for r in records]


def _overlaps(a: ProduceWrite, b: ProduceWrite) -> bool:
    return a.base_sequence < b.base_sequence + b.count and b.base_sequence < a.base_sequence + a.count


def explain_duplicate(
    writes: list[ProduceWrite], topic: str, partition: int, records: list[int], in_log: set[int]
) -> dict[str, Any]:
    """Whose loss a batch is: ``records`` were answered DUPLICATE_SEQUENCE_NUMBER and are missing.

    Returns ``{"verdict": ..., "reason": ..., "writes": [...]}`` with verdict ``"client"`` (a
    sequence reused for other records), ``"broker"`` (the same records sent before, never given
    an offset, not in the log) or ``"unexplained"`` (the capture does not settle it).
    """
    wanted = set(records)
    mine = [w for w in writes if w.topic == topic and w.partition == partition and wanted & set(w.numbers)]
    dups = [w for w in mine if w.error == DUPLICATE_SEQUENCE_NUMBER]
    if not dups:
        return {
            "verdict": "unexplained",
            "reason": "no captured request of these records was answered DUPLICATE_SEQUENCE_NUMBER",
            "writes": [w.summary() for w in mine],
        }
    dup = dups[-1]
    same_id = [
        w
        for w in writes
        if w.topic == topic
        and w.partition == partition
        and (w.producer_id, w.producer_epoch) == (dup.producer_id, dup.producer_epoch)
        and w.order < dup.order
        and _overlaps(w, dup)
    ]
    shown = [w.summary() for w in [*same_id, dup]]
    for w in same_id:
        for number in dup.numbers:
            s = dup.sequence_of(number)
            if s is None or not w.base_sequence <= s < w.base_sequence + w.count:
                continue
            other = w.numbers[s - w.base_sequence] if w.numbers else None
            if other != number:
                return {
                    "verdict": "client",
                    "reason": f"sequence {s} (producer {dup.producer_id} epoch {dup.producer_epoch}) "
                    f"carried record {other} in request #{w.order} and record {number} in #{dup.order}",
                    "writes": shown,
                }
    if not same_id:
        return {
            "verdict": "unexplained",
            "reason": "no earlier request with this producer id, epoch and "
            "sequence was seen, yet the broker called it a duplicate",
            "writes": shown,
        }
    given = [w for w in same_id if w.error == 0]
    if given:
        return {
            "verdict": "unexplained",
            "reason": f"request #{given[0].order} with these records was "
            f"acknowledged at offset {given[0].base_offset}, yet they are not in the log",
            "writes": shown,
        }
    if wanted & in_log:
        return {"verdict": "unexplained", "reason": "some of these records are in the log", "writes": shown}
    end = dup.base_sequence + dup.count
    following = next(
        (
            w
            for w in writes
            if w.topic == topic
            and w.partition == partition
            and (w.producer_id, w.producer_epoch, w.base_sequence)
            == (dup.producer_id, dup.producer_epoch, end)
            and w.error == 0
        ),
        None,
    )
    return {
        "verdict": "broker",
        "reason": f"the same records with the same producer id, epoch and sequence were sent "
        f"{len(same_id)} time(s) before (request #{same_id[0].order}), never answered with an offset; "
        "the broker kept their sequence but neither their data nor their offsets",
        "writes": shown,
        # The broker then took the next sequence as in order: it believed this batch written.
        "next_sequence_accepted": following.summary() if following is not None else None,
    }
