"""Delivery deadlines: every record is settled by ``delivery_timeout_ms``, wherever it waits.

Parked for metadata, open, sealed, parked for a retry, or in flight: at its deadline a batch
fails with a KafkaTimeoutError that says where it was and the last error seen for its
partition. A batch in flight cannot be recalled: its records fail at the deadline (the outcome
is unknown, the message says so) and the batch stays in flight until its request ends, when
the sender settles its sequence numbers (see ``Sender.hole``). Runs on the loop, also while the
producer is still trying to reach a broker.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafka_core.errors import KafkaTimeoutError
from kafka_core.producer.accumulator import PartitionQueue, ProducerBatch

if TYPE_CHECKING:
    from kafka_core.producer.sender import Sender

__all__ = ["expire"]


def expire(sender: Sender, now: float) -> float | None:
    """Fail what is past its deadline; returns the next deadline of anything still waiting."""
    acc = sender.acc
    timeout = acc.delivery_timeout
    failed: list[tuple[ProducerBatch, BaseException]] = []
    next_at: float | None = None

    def track(deadline: float) -> None:
        nonlocal next_at
        if next_at is None or deadline < next_at:
            next_at = deadline

    for topic, since in acc.parked_topics():
        if since + timeout > now:
            track(since + timeout)
            continue
        taken = acc.expire_parked(topic)
        if taken is not None:
            cause = sender.cause_for_topic(topic)
            expired = KafkaTimeoutError(
                f"topic {topic!r}: delivery_timeout_ms ({timeout * 1000:.0f} ms) expired while "
                "waiting for its metadata" + (f"; last error: {cause}" if cause else "")
            )
            taken[0].set_error(expired)
            sender.record_failed(expired)
    with acc.lock:
        for t in acc.topics.values():
            for q in t.queues or ():
                b = q.open
                if b is not None and b.count:
                    if b.deadline <= now:
                        dropped = acc.drop_open(t, q)
                        if dropped is not None:
                            failed.append((dropped, _timeout(sender, q, dropped, "queued")))
                    else:
                        track(b.deadline)
                for b in q.in_flight:
                    if b.expired:
                        continue
                    if b.deadline <= now:
                        b.expired = True
                        failed.append((b, _timeout(sender, q, b, "in flight")))
                    else:
                        track(b.deadline)
                if q.retry:
                    keep = []
                    for b in q.retry:
                        if b.deadline <= now:
                            failed.append((b, _timeout(sender, q, b, "waiting to be retried")))
                            sender.hole(q, b)
                        else:
                            keep.append(b)
                            track(b.deadline)
                    q.retry[:] = keep
                while q.sealed and q.sealed[0].deadline <= now:
                    b = q.sealed.popleft()
                    where = "waiting to be retried" if b.attempts else "waiting behind in-flight requests"
                    if not q.in_flight and not b.attempts:
                        where = "waiting to be sent"
                    failed.append((b, _timeout(sender, q, b, where)))
                    sender.hole(q, b)
                if q.sealed:
                    track(min(q.sealed[0].deadline, q.sealed[-1].deadline))
    for b, exc in failed:
        if b.expired:
            b.result.set_error(exc)  # its memory goes back when its request ends
            sender.record_failed(exc)
        else:
            sender.fail(b, exc)
    return next_at


def _timeout(sender: Sender, q: PartitionQueue, b: ProducerBatch, where: str) -> KafkaTimeoutError:
    cause = q.last_error or sender.cause_for_topic(q.topic)
    if where == "in flight":
        where = "in flight (outcome unknown: the records may have been written)"
    return KafkaTimeoutError(
        f"{b.topic}[{b.partition}]: delivery_timeout_ms ({sender.acc.delivery_timeout * 1000:.0f} ms) "
        f"expired for {b.count} record(s) {where}" + (f"; last error: {cause}" if cause else "")
    )
