"""How long the consumer has been cut off from the cluster, so that poll can say so.

The fetcher and the group membership retry forever in the background; without this, an outage
would look like an idle topic (poll returning [] with no reason given). Each failing thing (a
partition that cannot be fetched, the group that cannot be joined) has its own streak, ended by
its next success.

Poll raises only when the consumer is cut off: a streak has outlasted ``bound_s`` (the client's
``request_timeout_ms``, the user's bound) and no broker has answered anything for as long. A
partition or the group failing while the cluster answers (metadata, other partitions' fetches,
a retriable error code such as NOT_LEADER or COORDINATOR_NOT_AVAILABLE) is a failover in
progress: Apache Kafka fences a SIGKILLed leader only after ``broker.session.timeout.ms`` (9 s by
default) and then elects another, so a failover routinely takes about as long as a short
``request_timeout_ms``. As Java's consumer, which never raises on a leader change, poll then
goes on returning what the other partitions give, and a warning is logged once per ``bound_s``
while it lasts (and when it ends). Once cut off, poll raises KafkaConnectionError naming the
cause, then again every ``bound_s`` while it lasts.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Hashable, Iterable

from kafka_core.errors import KafkaConnectionError, KafkaProtocolError

log = logging.getLogger("kafka_core.consumer")


class OutageTracker:
    def __init__(self, bound_s: float) -> None:
        self.bound_s = bound_s
        self._streaks: dict[Hashable, tuple[float, BaseException]] = {}  # key -> (since, last cause)
        self._last_report = 0.0
        self._last_answer = float("-inf")  # when a broker last answered anything (monotonic)

    def answered(self) -> None:
        """A broker answered (metadata, a fetch, an error code): the cluster is there, so what
        still fails is waiting for a failover, not cut off."""
        self._last_answer = time.monotonic()

    def failing(self, key: Hashable) -> bool:
        return key in self._streaks

    def failed(self, key: Hashable, cause: BaseException, since: float | None = None) -> None:
        """``since`` (monotonic): when the failed attempt began. A request that timed out had no
        answer from the moment it was sent, so a stall counts from then, not from the timeout.
        A cause that is a broker's error code (directly or as the last error of a lookup that
        gave up) was an answer: the cluster is there."""
        if _is_answer(cause):
            self.answered()
        if not self._streaks:
            log.warning("consumer: %s failed, retrying in the background: %s", _name(key), cause)
        began = time.monotonic() if since is None else since
        self._streaks[key] = (self._streaks.get(key, (began, cause))[0], cause)

    def failed_all(self, keys: Iterable[Hashable], cause: BaseException, since: float | None = None) -> None:
        for key in keys:
            self.failed(key, cause, since)

    def ok(self, key: Hashable) -> None:
        self.answered()
        streak = self._streaks.pop(key, None)
        if streak is not None and not self._streaks:
            log.warning("consumer: %s: working again after %.1fs", _name(key), time.monotonic() - streak[0])

    def ok_all(self, keys: Iterable[Hashable]) -> None:
        self.answered()
        for key in keys:
            self.ok(key)

    def forget(self, keep: Callable[[Hashable], bool]) -> None:
        """Drop the streaks of things no longer wanted (e.g. revoked partitions)."""
        for key in [k for k in self._streaks if not keep(k)]:
            del self._streaks[key]

    def due(self) -> KafkaConnectionError | None:
        """The error poll should raise now, if a streak outlasted the bound while nothing
        answered for as long (once per bound); a streak outlasting it while the cluster answers
        is logged instead, as often."""
        now = time.monotonic()
        if not self._streaks or now - self._last_report < self.bound_s:
            return None
        late = sorted(
            (
                (since, key, cause)
                for key, (since, cause) in self._streaks.items()
                if now - since >= self.bound_s
            ),
            key=lambda x: x[0],
        )
        if not late:
            return None
        self._last_report = now
        since, _, cause = late[0]
        names = ", ".join(_name(k) for _, k, _ in late[:5]) + (
            f" and {len(late) - 5} more" if len(late) > 5 else ""
        )
        quiet = now - self._last_answer
        if quiet < self.bound_s:
            log.warning(
                "consumer: %s failing for %.1fs while the cluster answers (%.1fs ago): waiting for a "
                "new leader or coordinator, still retrying; last error: %s",
                names,
                now - since,
                max(quiet, 0.0),
                cause,
            )
            return None
        err = KafkaConnectionError(
            f"consumer cut off for {min(now - since, quiet):.1f}s (longer than request_timeout_ms="
            f"{self.bound_s * 1000:.0f}): {names} failing; last error: {cause}; still retrying"
        )
        err.__cause__ = cause
        return err


def _is_answer(cause: BaseException) -> bool:
    """A broker's error code, or a lookup that gave up after one (its last error)."""
    return isinstance(cause, KafkaProtocolError) or isinstance(cause.__cause__, KafkaProtocolError)


def _name(key: Hashable) -> str:
    topic, partition = getattr(key, "topic", None), getattr(key, "partition", None)
    if topic is not None:
        return f"fetching {topic}-{partition}"
    return str(key)
