"""Delivery deadlines: every record is settled by ``delivery_timeout_ms``, wherever it waits.

Parked for metadata, open, sealed, parked for a retry, or in flight: at its deadline a batch
fails with a KafkaTimeoutError that says where it was and the last error seen for its
partition. A batch in flight cannot be recalled: its records fail at the deadline (the outcome
is unknown, the message says so) and the batch stays in flight until its request ends, when
the sender settles its sequence numbers (see ``Sender.hole``). Runs on the loop, also while the
producer is still trying to reach a broker.
"""

from __future__ import annotations

from typing import Protocol

from kafka_core.errors import KafkaTimeoutError
from kafka_core.producer.accumulator import Accumulator, PartitionQueue, ProducerBatch

__all__ = ["Settler", "expire"]


class Settler(Protocol):
    """What expiry needs of the sender (passed in, so this module does not import it)."""

    def cause_for_topic(self, topic: str) -> BaseException | None: ...
    def hole(self, q: PartitionQueue, b: ProducerBatch) -> None: ...
    def fail(self, b: ProducerBatch, exc: BaseException) -> None: ...
    def record_failed(self, exc: BaseException) -> None: ...


def expire(acc: Accumulator, sender: Settler, now: float) -> float | None:
    """Fail what is past its deadline; returns the next deadline of anything still waiting."""
    timeout = acc.delivery_timeout
    next_at: float | None = None
    for topic, since in acc.parked_topics():
        if since + timeout > now:
            if next_at is None or since + timeout < next_at:
                next_at = since + timeout
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
    taken_out, queued_next = acc.take_expired(now)
    if queued_next is not None and (next_at is None or queued_next < next_at):
        next_at = queued_next
    failed: list[tuple[ProducerBatch, BaseException]] = []
    for q, b, where in taken_out:
        failed.append((b, _timeout(acc, sender, q, b, where)))
        if where not in ("queued", "in flight"):
            sender.hole(q, b)  # numbered and never acknowledged: its sequence numbers are lost
    for b, exc in failed:
        if b.expired:
            b.result.set_error(exc)  # its memory goes back when its request ends
            sender.record_failed(exc)
        else:
            sender.fail(b, exc)
    return next_at


def _timeout(
    acc: Accumulator, sender: Settler, q: PartitionQueue, b: ProducerBatch, where: str
) -> KafkaTimeoutError:
    cause = q.last_error or sender.cause_for_topic(q.topic)
    if where == "in flight":
        where = "in flight (outcome unknown: the records may have been written)"
    return KafkaTimeoutError(
        f"{b.topic}[{b.partition}]: delivery_timeout_ms ({acc.delivery_timeout * 1000:.0f} ms) "
        f"expired for {b.count} record(s) {where}" + (f"; last error: {cause}" if cause else "")
    )
