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
while it lasts (and when it ends). A broker's answer no failover explains (a group whose join
rounds keep ending without an assignment) is raised past ``bound_s`` as before. Once cut off,
poll raises KafkaConnectionError naming the cause, then again every ``bound_s`` while it lasts.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Hashable, Iterable

from kafka_core.errors import KafkaConnectionError, KafkaProtocolError
from kafka_core.protocol.errors import COORDINATOR_CODES, STALE_METADATA_CODES, ErrorCode

log = logging.getLogger("kafka_core.consumer")

# A broker's answers that a failover explains: the leader or coordinator moved, is being elected
# or loading, or a replica is still out of the ISR. Any other answer (a group wedged in
# REBALANCE_IN_PROGRESS round after round...) is no failover: reported past the bound as ever.
FAILOVER_CODES = (
    STALE_METADATA_CODES
    | COORDINATOR_CODES
    | {ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.REQUEST_TIMED_OUT}
)


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
        if _answer_code(cause) is not None:
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
        quiet = now - self._last_answer
        if quiet < self.bound_s:
            waiting = [s for s in late if _failover(s[2])]
            if waiting:
                log.warning(
                    "consumer: %s failing for %.1fs while the cluster answers (%.1fs ago): waiting for "
                    "a new leader or coordinator, still retrying; last error: %s",
                    _names(waiting),
                    now - waiting[0][0],
                    max(quiet, 0.0),
                    waiting[0][2],
                )
            late = [s for s in late if not _failover(s[2])]
            if not late:
                return None
        since, _, cause = late[0]
        bound = f"longer than request_timeout_ms={self.bound_s * 1000:.0f}"
        if quiet >= self.bound_s:
            what = f"consumer cut off for {min(now - since, quiet):.1f}s ({bound}): {_names(late)} failing"
        else:
            what = (
                f"consumer: {_names(late)} failing for {now - since:.1f}s ({bound}) while the cluster answers"
            )
        err = KafkaConnectionError(f"{what}; last error: {cause}; still retrying")
        err.__cause__ = cause
        return err


def _answer_code(cause: BaseException) -> int | None:
    """The broker's error code ``cause`` is, or a lookup gave up after (its last error)."""
    for err in (cause, cause.__cause__):
        if isinstance(err, KafkaProtocolError):
            return err.code
    return None


def _failover(cause: BaseException) -> bool:
    """No answer from one broker (the lost leader), or an answer a failover explains."""
    code = _answer_code(cause)
    return code is None or code in FAILOVER_CODES


def _names(late: list[tuple[float, Hashable, BaseException]]) -> str:
    more = f" and {len(late) - 5} more" if len(late) > 5 else ""
    return ", ".join(_name(k) for _, k, _ in late[:5]) + more


def _name(key: Hashable) -> str:
    topic, partition = getattr(key, "topic", None), getattr(key, "partition", None)
    if topic is not None:
        return f"fetching {topic}-{partition}"
    return str(key)
