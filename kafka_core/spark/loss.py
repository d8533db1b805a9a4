"""The one message a query's data loss gets: where, which offsets, the likely cause, what to do.

``failOnDataLoss`` stops a query when offsets it planned to read are gone from Kafka. Spark's
connector then says only that "some data may have been lost"; a user has to find out which
partition, which offsets, and why. Every place that detects loss (batch planning, the streaming
reader on the driver, a task on an executor) builds its message here, so each names the topic,
the partition, the lost offsets, the likely cause and the option that lets the query go on.
Pure string building: no Spark, no broker.
"""

from __future__ import annotations

__all__ = [
    "added_late",
    "backwards",
    "gone",
    "log_end_before",
    "loss_message",
    "lost_offsets",
    "recreated",
    "retention",
]


def lost_offsets(start: int, end: int | None) -> str:
    """Offsets ``start`` up to ``end`` (exclusive), said with inclusive bounds; ``None``: open."""
    if end is None:
        return f"offsets from {start} on"
    if end - start <= 1:
        return f"offset {start}"
    return f"offsets {start} to {end - 1} ({end - start} offsets)"


def retention(log_start: int) -> str:
    """The wanted offset is below the log start offset."""
    return (
        f"the partition's log start offset moved past them (it is now {log_start}): the records aged out "
        "by retention (retention.ms / retention.bytes) or were deleted with DeleteRecords "
        "(kafka-delete-records.sh) before the query read them"
    )


def recreated(old_id: str, new_id: str) -> str:
    """The topic id changed between two looks at the topic."""
    return (
        f"the topic was deleted and recreated (its topic id changed from {old_id} to {new_id}): the old "
        "topic's records are gone and the new topic's offsets start again"
    )


def backwards(before: int, now: int) -> str:
    """A partition's end (or the planned start) is before where the query already was."""
    return (
        f"the partition's offsets went backwards from {before} to {now}: the topic was deleted and "
        "recreated, or its log was truncated (an unclean leader election)"
    )


def added_late(first: int) -> str:
    """A partition added mid-query whose first offset is above 0 (Spark's connector calls it loss too)."""
    return (
        f"the partition was added while the query ran and its first offset is {first}, not 0: its first "
        "records were deleted (DeleteRecords) or aged out before the query saw the partition"
    )


def gone() -> str:
    """A partition the query was reading no longer exists."""
    return "the partition is gone: its topic was deleted (or deleted and recreated with fewer partitions)"


def log_end_before(log_end: int, planned_end: int) -> str:
    """A task found the log ending before the end it was planned to read to."""
    return (
        f"the log now ends at {log_end}, before the planned end {planned_end}: the topic was deleted and "
        "recreated, or its log was truncated (an unclean leader election)"
    )


def loss_message(topic: str, partition: int, lost: str, cause: str, *, fail: bool) -> str:
    """One message: ``topic``-``partition``, the ``lost`` offsets (see :func:`lost_offsets`), the
    likely ``cause``, and what ``failOnDataLoss`` does about it."""
    head = f"Kafka data loss in topic {topic!r} partition {partition} ({topic}-{partition}): {lost} cannot be read"
    if fail:
        tail = (
            "The query stops because the source option 'failOnDataLoss' is true (the default). If losing "
            "these records is acceptable, set 'failOnDataLoss' to 'false': the loss is then logged as a "
            "warning and the query goes on with the records that are still there."
        )
    else:
        tail = "failOnDataLoss=false: the query goes on with the records that are still there."
    return f"{head}. Likely cause: {cause}. {tail}"
