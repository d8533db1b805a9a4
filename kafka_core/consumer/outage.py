"""How long the consumer has been cut off from the cluster, so that poll can say so.

The fetcher and the group membership retry forever in the background; without this, an outage
would look like an idle topic (poll returning [] with no reason given). Each failing thing (a
partition that cannot be fetched, the group that cannot be joined) has its own streak, ended by
its next success. Once a streak outlasts ``bound_s`` (the client's request_timeout_ms), poll
raises KafkaConnectionError naming the cause, then again every ``bound_s`` while it lasts.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Hashable, Iterable

from kafka_core.errors import KafkaConnectionError

log = logging.getLogger("kafka_core.consumer")


class OutageTracker:
    def __init__(self, bound_s: float) -> None:
        self.bound_s = bound_s
        self._streaks: dict[Hashable, tuple[float, BaseException]] = {}  # key -> (since, last cause)
        self._last_report = 0.0

    def failed(self, key: Hashable, cause: BaseException, since: float | None = None) -> None:
        """``since`` (monotonic): when the failed attempt began. A request that timed out had no
        answer from the moment it was sent, so a stall counts from then, not from the timeout."""
        if not self._streaks:
            log.warning("consumer: %s failed, retrying in the background: %s", _name(key), cause)
        began = time.monotonic() if since is None else since
        self._streaks[key] = (self._streaks.get(key, (began, cause))[0], cause)

    def failed_all(self, keys: Iterable[Hashable], cause: BaseException, since: float | None = None) -> None:
        for key in keys:
            self.failed(key, cause, since)

    def ok(self, key: Hashable) -> None:
        streak = self._streaks.pop(key, None)
        if streak is not None and not self._streaks:
            log.warning("consumer: %s: working again after %.1fs", _name(key), time.monotonic() - streak[0])

    def ok_all(self, keys: Iterable[Hashable]) -> None:
        for key in keys:
            self.ok(key)

    def forget(self, keep: Callable[[Hashable], bool]) -> None:
        """Drop the streaks of things no longer wanted (e.g. revoked partitions)."""
        for key in [k for k in self._streaks if not keep(k)]:
            del self._streaks[key]

    def due(self) -> KafkaConnectionError | None:
        """The error poll should raise now, if a streak outlasted the bound (once per bound)."""
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
        err = KafkaConnectionError(
            f"consumer cut off for {now - since:.1f}s (longer than request_timeout_ms="
            f"{self.bound_s * 1000:.0f}): {names} failing; last error: {cause}; still retrying"
        )
        err.__cause__ = cause
        return err


def _name(key: Hashable) -> str:
    topic, partition = getattr(key, "topic", None), getattr(key, "partition", None)
    if topic is not None:
        return f"fetching {topic}-{partition}"
    return str(key)
