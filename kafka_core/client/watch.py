"""Topics a component waits on: "tell me when these topics appear, change or go".

A subscription may name a topic that does not exist yet, or a pattern nothing matches yet.
Java's and librdkafka's clients keep asking for such a topic's metadata at the retry backoff
(growing to ``retry_backoff_max_ms``), not at the next periodic refresh minutes later, and the
group leader rebalances when it appears. This module is that, once per client: components
register a :class:`TopicInterest` (named topics, or a pattern) with a callback; one task asks
the cluster what they need, as often as they need it, and calls back when what they see changes
(a topic appears or goes, is recreated under another id, or gains partitions).

Cadence: a named topic the cluster does not have (yet) is asked about at the retry backoff,
growing to its max (default 100 ms to 1 s); once everything wanted is known, each interest is
refreshed every ``refresh_s`` of its own (a consumer's ``metadata_max_age_ms``, 5 s by
default). A pattern is refreshed at ``refresh_s`` (a full Metadata request each time, too
costly for the fast cadence on a large cluster). A topic still missing is logged at WARNING
when first seen missing and then at most every ``WARN_EVERY_S``, never once per request.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable

from kafka_core.client.metadata import ClusterMeta, TopicMeta
from kafka_core.client.waiting import wait_event
from kafka_core.errors import KafkaClosedError, KafkaError
from kafka_core.network.backoff import Backoff
from kafka_core.protocol.errors import ErrorCode

log = logging.getLogger("kafka_core.client.watch")

__all__ = ["TopicInterest", "TopicView", "TopicWatcher", "topic_view"]

# What an interest sees of one topic that exists: (partition count, topic id).
TopicState = tuple[int, uuid.UUID | None]
TopicView = dict[str, TopicState]
# A topic missing for longer is warned about again (then again after as long), never per request.
WARN_EVERY_S = 60.0
# Answers that mean "not there (yet)": asked again at the fast cadence. Any other error (e.g.
# TOPIC_AUTHORIZATION_FAILED) is its owner's to report, and is asked again at the slow one.
ABSENT_CODES = frozenset({ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.LEADER_NOT_AVAILABLE})


def _state(t: TopicMeta) -> TopicState | None:
    if t.error_code or not t.partitions:
        return None
    return (len(t.partitions), t.topic_id)


def topic_view(topics: Iterable[TopicMeta], names: Iterable[str] | None = None) -> TopicView:
    """The view of a metadata answer's ``topics`` (restricted to ``names``): existing ones only."""
    wanted = None if names is None else set(names)
    out: TopicView = {}
    for t in topics:
        if wanted is not None and t.name not in wanted:
            continue
        state = _state(t)
        if state is not None:
            out[t.name] = state
    return out


def _next_refresh(refresh_s: float, view: TopicView | None) -> float:
    return 0.0 if view is None else asyncio.get_running_loop().time() + refresh_s


class TopicInterest:
    """One component's standing question. ``view`` is what it last saw; ``on_change(view)`` is
    called (on the event loop, never re-entrantly) when the cluster shows something else.

    Named topics (``topics``), or ``pattern``: every non-internal topic whose whole name matches
    (``search=True``: matching anywhere in the name, as Spark's ``subscribePattern``)."""

    def __init__(
        self,
        watcher: TopicWatcher,
        on_change: Callable[[TopicView], None],
        *,
        topics: Iterable[str] = (),
        pattern: re.Pattern[str] | None = None,
        search: bool = False,
        refresh_s: float,
        view: TopicView | None = None,
    ) -> None:
        self._watcher = watcher
        self._on_change = on_change
        self.topics: frozenset[str] = frozenset(topics)
        self.pattern = pattern
        self._search = search
        self.refresh_s = max(float(refresh_s), 0.0)
        self.view: TopicView = dict(view or {})
        # Named topics answered with another error than "absent" (e.g. not authorized): their
        # owner reports those; they are asked about again at ``refresh_s`` only.
        self.refused: set[str] = set()
        # Loop time of the next slow refresh: at once, unless the owner's view is fresh.
        self.next_at = _next_refresh(self.refresh_s, view)
        self.closed = False

    # -- what its owner calls -------------------------------------------------------------------

    def set_topics(self, topics: Iterable[str], view: TopicView | None = None) -> None:
        """Watch these names from now on, with ``view`` what the owner knows of them already
        (e.g. the metadata an assignment was made from); None keeps what was seen."""
        self.topics = frozenset(topics)
        if view is not None:
            self.view = dict(view)
        self.view = {n: s for n, s in self.view.items() if self.pattern is not None or n in self.topics}
        self.next_at = _next_refresh(self.refresh_s, view)
        self._watcher.nudge()

    def close(self) -> None:
        """No more callbacks; the watcher stops asking for what only this interest wanted."""
        if not self.closed:
            self.closed = True
            self._watcher.remove(self)

    # -- what the watcher calls -----------------------------------------------------------------

    def missing(self) -> set[str]:
        """Names wanted and not in the cluster (yet). A pattern has none: what it may match
        is not known before it does (it is refreshed at ``refresh_s``, each time a full
        Metadata request, so not at the fast cadence)."""
        if self.pattern is not None:
            return set()
        return {n for n in self.topics if n not in self.view and n not in self.refused}

    def matches(self, t: TopicMeta) -> bool:
        assert self.pattern is not None
        if t.is_internal:
            return False
        found = self.pattern.search(t.name) if self._search else self.pattern.fullmatch(t.name)
        return found is not None

    def take(self, meta: ClusterMeta, asked: set[str] | None) -> None:
        """Take in an answer (``asked``: the names a partial request asked about; None: a full
        one) and call back if the view changed."""
        if self.closed:
            return
        if self.pattern is not None:
            if asked is not None:
                return  # only a full answer says which topics match
            new = {t.name: s for t in meta.topics if self.matches(t) and (s := _state(t)) is not None}
        else:
            new = dict(self.view)
            for name in self.topics if asked is None else self.topics & asked:
                t = meta.topic(name)
                state = None if t is None else _state(t)
                if t is not None and t.error_code and t.error_code not in ABSENT_CODES:
                    self.refused.add(name)
                else:
                    self.refused.discard(name)
                if state is None:
                    new.pop(name, None)
                else:
                    new[name] = state
        if new != self.view:
            self.view = new
            try:
                self._on_change(dict(new))
            except Exception:  # a bug in the owner: logged, the watcher goes on for the others
                log.exception("topic watch callback failed")


class TopicWatcher:
    """The one task per client asking about the topics its interests wait on. ``metadata(names,
    auto_create)`` is the client's metadata call (None: every topic); ``retry_backoff_ms`` its
    fast cadence."""

    def __init__(
        self,
        metadata: Callable[[list[str] | None], Awaitable[ClusterMeta]],
        retry_backoff_ms: tuple[float, float],
    ) -> None:
        self._metadata = metadata
        self._backoff_ms = retry_backoff_ms
        self._interests: list[TopicInterest] = []
        self._task: asyncio.Task[None] | None = None
        self._wake: asyncio.Event | None = None
        self._missing_since: dict[str, float] = {}  # name -> when first seen missing (monotonic)
        self._warned_at: dict[str, float] = {}
        self.requests = 0  # Metadata requests made for interests (tests and metrics read it)

    def watch(
        self,
        on_change: Callable[[TopicView], None],
        *,
        topics: Iterable[str] = (),
        pattern: re.Pattern[str] | None = None,
        search: bool = False,
        refresh_s: float,
        view: TopicView | None = None,
    ) -> TopicInterest:
        interest = TopicInterest(
            self, on_change, topics=topics, pattern=pattern, search=search, refresh_s=refresh_s, view=view
        )
        self._interests.append(interest)
        self._ensure_task()
        self.nudge()
        return interest

    def remove(self, interest: TopicInterest) -> None:
        if interest in self._interests:
            self._interests.remove(interest)
        self.nudge()

    def nudge(self) -> None:
        """Something changed (a new interest, other names): look again now."""
        if self._wake is not None:
            self._wake.set()

    def close(self) -> None:
        for interest in list(self._interests):
            interest.closed = True
        self._interests.clear()
        if self._task is not None and not self._task.done():
            self._task.cancel()
        self._task = None

    def _ensure_task(self) -> None:
        if self._task is None or self._task.done():
            loop = asyncio.get_running_loop()
            self._wake = asyncio.Event()
            self._task = loop.create_task(self._run(), name="kafka-core-topic-watch")

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        backoff = Backoff(*self._backoff_ms)
        wake = self._wake
        assert wake is not None
        while self._interests:
            wake.clear()
            interests = list(self._interests)
            due = [i for i in interests if i.next_at <= loop.time()]
            full = any(i.pattern is not None for i in due)
            asked = {n for i in interests for n in i.missing()} | {n for i in due for n in i.topics}
            failed = False
            if full or asked:
                try:
                    meta = await self._ask(None if full else sorted(asked))
                except asyncio.CancelledError:
                    raise
                except KafkaClosedError:
                    return
                except KafkaError as exc:
                    log.debug("metadata for watched topics failed: %r; asking again", exc)
                    failed = True
                else:
                    for i in interests:
                        i.take(meta, None if full else asked)
                    self._note_missing()
            if not failed:
                for i in due:
                    i.next_at = loop.time() + i.refresh_s
            if failed or any(i.missing() for i in self._interests):
                delay = backoff.next_s()
            else:
                backoff.reset()
                nexts = [i.next_at for i in self._interests]
                delay = max(min(nexts) - loop.time(), 0.0) if nexts else 0.0
            if self._interests:
                await wait_event(wake, delay)

    async def _ask(self, names: list[str] | None) -> ClusterMeta:
        self.requests += 1
        return await self._metadata(names)

    def _note_missing(self) -> None:
        """WARNING when a wanted topic is first missing, then at most every WARN_EVERY_S; INFO
        when it appears. Never one line per request (no storm at the fast cadence)."""
        now = time.monotonic()
        missing = {n for i in self._interests if not i.closed for n in i.missing()}
        for name in sorted(missing):
            since = self._missing_since.setdefault(name, now)
            last = self._warned_at.get(name)
            if last is None or now - last >= WARN_EVERY_S:
                self._warned_at[name] = now
                log.warning(
                    "topic %r does not exist (yet)%s: waiting for it, asking again every %.1f s at most",
                    name,
                    "" if last is None else f" after {now - since:.0f} s",
                    self._backoff_ms[1] / 1000.0,
                )
        for name in [n for n in self._missing_since if n not in missing]:
            since = self._missing_since.pop(name)
            self._warned_at.pop(name, None)
            if any(name in i.view for i in self._interests):  # not merely no longer wanted
                log.info("topic %r is there now (waited %.1f s)", name, now - since)
