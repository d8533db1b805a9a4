"""Committing a streaming query's processed offsets to a consumer group, for lag monitoring.

Spark keeps a Kafka query's offsets in its checkpoint and never tells Kafka, so the tools people
watch lag with (``kafka-consumer-groups.sh --describe``, ``kafka-core groups``) see nothing
(SPARK-27549). With the source option ``commitOffsetsToGroup`` the driver commits, to that
group, the end offsets of each micro-batch Spark has finished. The checkpoint stays the truth:
the query never reads these offsets back, and a failed commit only logs a warning.

The commit is an OffsetCommit with generation -1 and no member id (the admin client's
``alter_group_offsets``): Kafka takes it for a group with no active members only, so the group
must be one that no consumer joins.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from kafka_core.client.metadata import OffsetAndMetadata, TopicPartition

__all__ = ["COMMIT_METADATA", "GroupCommitter"]

log = logging.getLogger("kafka_core.spark")

# The metadata string stored beside each offset: who committed it and that it is informational.
COMMIT_METADATA = "kafka_core spark streaming query (its checkpoint is the truth)"
# How long one commit may hold up the planning of the next micro-batch.
COMMIT_TIMEOUT_MS = 10_000

_MEMBER_ERRORS = ("UNKNOWN_MEMBER_ID", "ILLEGAL_GENERATION", "REBALANCE_IN_PROGRESS", "FENCED_MEMBER_EPOCH")


def _build_admin(client_options: Mapping[str, Any]) -> Any:
    from kafka_core.admin.sync import KafkaAdmin

    return KafkaAdmin(**client_options)


class GroupCommitter:
    """Commits offsets to ``group_id``; only partitions whose offset changed since the last
    successful commit are sent. Never raises: a failure is logged (once until the next success)
    and retried with the next call."""

    def __init__(
        self,
        group_id: str,
        client_options: Mapping[str, Any],
        *,
        timeout_ms: int = COMMIT_TIMEOUT_MS,
        admin_factory: Callable[[Mapping[str, Any]], Any] = _build_admin,
    ) -> None:
        self.group_id = group_id
        self._client_options = dict(client_options)
        self._timeout_ms = timeout_ms
        self._factory = admin_factory
        self._admin: Any = None
        self._committed: dict[TopicPartition, int] = {}
        self._last_warning: str | None = None

    @property
    def committed(self) -> dict[TopicPartition, int]:
        """What this query has committed so far (as Kafka acknowledged it)."""
        return dict(self._committed)

    def commit(self, offsets: Mapping[TopicPartition, int]) -> bool:
        """Commit ``offsets`` (the next offset to read, per partition); True when every changed
        partition was committed (or nothing had changed)."""
        wanted = {tp: off for tp, off in offsets.items() if off >= 0 and self._committed.get(tp) != off}
        if not wanted:
            return True
        try:
            if self._admin is None:
                self._admin = self._factory(self._client_options)
            results = self._admin.alter_group_offsets(
                self.group_id,
                {tp: OffsetAndMetadata(off, COMMIT_METADATA) for tp, off in wanted.items()},
                timeout_ms=self._timeout_ms,
            )
        except Exception as exc:  # the query must go on whatever the group does
            self._drop_admin()
            self._warn(f"{type(exc).__name__}: {exc}")
            return False
        failed: dict[TopicPartition, str] = {}
        for tp, off in wanted.items():
            res = results.get(tp)
            if res is not None and res.ok:
                self._committed[tp] = off
            else:
                failed[tp] = str(res.error) if res is not None else "no answer"
        if failed:
            detail = "; ".join(f"{tp.topic}-{tp.partition}: {why}" for tp, why in sorted(failed.items()))
            self._warn(detail)
            return False
        if self._last_warning is not None:
            log.info("committing offsets to consumer group %r works again", self.group_id)
            self._last_warning = None
        return True

    def _warn(self, detail: str) -> None:
        hint = ""
        if any(name in detail for name in _MEMBER_ERRORS):
            hint = (
                " The group has active members: Kafka takes these commits only for a group that no "
                "consumer has joined; give 'commitOffsetsToGroup' a group id of its own."
            )
        message = (
            f"could not commit the streaming query's offsets to consumer group {self.group_id!r} ({detail}).{hint}"
            " The query goes on (its offsets are in Spark's checkpoint); the commit is retried with "
            "the next micro-batch."
        )
        if message != self._last_warning:
            log.warning("%s", message)
            self._last_warning = message

    def _drop_admin(self) -> None:
        admin, self._admin = self._admin, None
        if admin is not None:
            try:
                admin.close()
            except Exception:  # closing a broken client must not hide why it broke
                log.debug("closing the group-commit admin client failed", exc_info=True)

    def close(self) -> None:
        self._drop_admin()
