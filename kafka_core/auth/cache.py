"""One token per provider per process, refreshed before it expires and never fetched per connection.

Every client in the process (each sync client runs its own event loop on its own thread) asks the
same :class:`TokenCache` for its token, so the cache is guarded by a thread lock and hands out
``concurrent.futures`` futures that any loop can await. The refresh is due at 75% of the token's
lifetime plus up to 5% jitter (Java's ``sasl.login.refresh.window.*`` are 80% and 5%; ours ends
where a connection's re-authentication window begins), so that many processes started together
do not all call the endpoint at once. A failed refresh keeps the current token
while it is valid and tries again with a growing backoff: an identity provider that is down for a
while does not take working connections with it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import random
import threading
import time
import weakref
from collections.abc import Callable, Hashable
from typing import Any

from kafka_core.errors import KafkaAuthenticationError, KafkaError
from kafka_core.network.sasl.oauthbearer import OAuthBearerToken, as_token, is_async_provider, obtain_token

__all__ = ["TokenCache", "shared_token_cache"]

log = logging.getLogger("kafka_core.auth")

# Due at 75-80% of the lifetime: before a connection re-authenticates (at 85-95% of a session that
# began no earlier than the token), so that it carries the renewed token.
REFRESH_WINDOW = 0.75
REFRESH_JITTER = 0.05
# A token with less than this left is not handed out: the broker would refuse it on arrival.
MIN_REMAINING_S = 1.0
BACKOFF_S = 0.5
BACKOFF_MAX_S = 30.0
# How long a caller waits for a due refresh before it makes do with the current (valid) token.
REFRESH_WAIT_S = 5.0


class TokenCache:
    """Wraps a token provider (anything :func:`obtain_token` takes) with caching and refresh."""

    def __init__(
        self,
        provider: Any,
        *,
        refresh_window: float = REFRESH_WINDOW,
        refresh_jitter: float = REFRESH_JITTER,
        backoff_s: float = BACKOFF_S,
        backoff_max_s: float = BACKOFF_MAX_S,
        refresh_wait_s: float = REFRESH_WAIT_S,
        refresh_ahead: bool = True,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.provider = provider
        self._window = (refresh_window, refresh_jitter)
        self._backoff = (backoff_s, backoff_max_s)
        self._refresh_wait = refresh_wait_s
        self._refresh_ahead_on = refresh_ahead
        self._clock = clock
        # Guards every field below: callers come from many threads' event loops.
        self._lock = threading.Lock()
        self._token: OAuthBearerToken | None = None
        self._refresh_at = 0.0
        self._inflight: concurrent.futures.Future[OAuthBearerToken] | None = None
        self._failures = 0
        self._next_attempt = 0.0
        self._last_error: KafkaError | None = None
        self.fetches = 0  # how often the provider was called (tests and metrics read it)
        self._used = False  # asked for since the last fetch: worth refreshing ahead of time
        self._timer: threading.Timer | None = None

    def __repr__(self) -> str:
        token = self._token
        state = f"expires in {token.remaining(self._clock()):.0f}s" if token else "empty"
        return f"<TokenCache {state} fetches={self.fetches}>"

    async def token(self) -> OAuthBearerToken:
        """A token with more than a second left: the cached one, or a fresh one when a refresh is
        due (the cached one if that refresh fails or takes longer than ``refresh_wait_s``)."""
        now = self._clock()
        with self._lock:
            self._used = True
            current = self._token
            if current is not None and self._timer is None and self._inflight is None:
                self._schedule_refresh()  # in use again: renew it ahead of time
            usable = current is not None and current.remaining(now) > MIN_REMAINING_S
            if usable and now < self._refresh_at:
                assert current is not None
                return current
            if not usable and self._last_error is not None and now < self._next_attempt:
                raise self._last_error  # backing off, with nothing valid to give
            future = self._inflight if self._inflight is not None else self._start_fetch(now)
        waiting = asyncio.wrap_future(future)
        if not usable:
            return await waiting
        assert current is not None
        try:
            async with asyncio.timeout(self._refresh_wait):
                return await asyncio.shield(waiting)
        except (TimeoutError, KafkaError):
            if current.remaining(self._clock()) > MIN_REMAINING_S:
                return current
            raise

    def _start_fetch(self, now: float) -> concurrent.futures.Future[OAuthBearerToken]:
        """Begin one fetch (lock held). A sync provider (the built-in ones) runs on the module's
        worker threads, tied to no event loop, so a client closing its loop cannot orphan it; an
        async one runs as a task on the caller's loop, which other loops await through the future."""
        future: concurrent.futures.Future[OAuthBearerToken] = concurrent.futures.Future()
        self._inflight = future
        self.fetches += 1
        if is_async_provider(self.provider):
            task = asyncio.get_running_loop().create_task(self._fetch_async(future))
            _TASKS.add(task)
            task.add_done_callback(_TASKS.discard)
        else:
            _worker().submit(self._fetch_sync, future)
        return future

    def _fetch_sync(self, future: concurrent.futures.Future[OAuthBearerToken]) -> None:
        try:
            token = as_token(self.provider())
        except KafkaError as exc:
            self._failed(future, exc)
        except Exception as exc:
            self._failed(
                future,
                KafkaAuthenticationError(
                    f"the OAUTHBEARER token provider failed: {type(exc).__name__}: {exc}"
                ),
            )
        else:
            self._succeeded(future, token)

    async def _fetch_async(self, future: concurrent.futures.Future[OAuthBearerToken]) -> None:
        try:
            token = await obtain_token(self.provider)
        except BaseException as exc:
            error = exc if isinstance(exc, KafkaError) else KafkaAuthenticationError(f"token fetch: {exc!r}")
            self._failed(future, error)
            if not isinstance(exc, Exception):
                raise
            return
        self._succeeded(future, token)

    def _failed(self, future: concurrent.futures.Future[OAuthBearerToken], error: KafkaError) -> None:
        with self._lock:
            self._inflight = None
            self._failures += 1
            failures = self._failures
            base, top = self._backoff
            delay = min(top, base * 2 ** (failures - 1)) * random.uniform(0.8, 1.2)
            self._next_attempt = self._clock() + delay
            self._last_error = error
            if self._token is not None and self._token.remaining(self._clock()) > 0:
                self._refresh_at = self._next_attempt
                self._schedule_refresh(retry=True)  # keep trying while the token in hand lasts
        log.warning("OAuth token fetch failed (attempt %d, next in %.1fs): %s", failures, delay, error)
        future.set_exception(error)

    def _succeeded(
        self, future: concurrent.futures.Future[OAuthBearerToken], token: OAuthBearerToken
    ) -> None:
        low, jitter = self._window
        with self._lock:
            self._inflight = None
            self._failures = 0
            self._last_error = None
            self._token = token
            self._refresh_at = token.issued_at + token.lifetime * (low + random.uniform(0, jitter))
            self._schedule_refresh()
        log.debug("OAuth token for %s valid for %.0fs", token.principal or "?", token.remaining())
        future.set_result(token)

    def _schedule_refresh(self, *, retry: bool = False) -> None:
        """(Lock held.) A sync provider's token is renewed at its refresh point by a timer, so
        that a connection re-authenticating just after it finds the new token ready instead of
        waiting for the endpoint. Only while the token is in use: a cache whose clients are gone
        stops calling the endpoint after one more refresh at most."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._refresh_ahead_on or is_async_provider(self.provider) or not (self._used or retry):
            return
        if not retry:
            self._used = False
        delay = max(0.0, self._refresh_at - self._clock())
        timer = threading.Timer(delay, self._refresh_ahead)
        timer.daemon = True
        self._timer = timer
        timer.start()

    def _refresh_ahead(self) -> None:
        with self._lock:
            self._timer = None
            if self._inflight is not None or self._clock() < self._refresh_at:
                return
            future: concurrent.futures.Future[OAuthBearerToken] = concurrent.futures.Future()
            self._inflight = future
            self.fetches += 1
        self._fetch_sync(future)


_TASKS: set[asyncio.Task[None]] = set()
_WORKER: concurrent.futures.ThreadPoolExecutor | None = None
_WORKER_LOCK = threading.Lock()  # guards _WORKER


def _worker() -> concurrent.futures.ThreadPoolExecutor:
    global _WORKER
    with _WORKER_LOCK:
        if _WORKER is None:
            _WORKER = concurrent.futures.ThreadPoolExecutor(2, thread_name_prefix="kafka-core-token")
        return _WORKER


_BY_KEY: dict[Hashable, TokenCache] = {}
_BY_PROVIDER: weakref.WeakKeyDictionary[Any, TokenCache] = weakref.WeakKeyDictionary()
_REGISTRY_LOCK = threading.Lock()  # guards _BY_KEY and _BY_PROVIDER


def shared_token_cache(provider: Any) -> Any:
    """The process's cache for ``provider``: keyed by its ``cache_key`` (the built-in providers
    name their settings, so two clients with the same OIDC settings share one token), else by the
    provider object itself. A provider that caches for itself (has ``token()``) is returned as is."""
    if hasattr(provider, "token") and callable(provider.token):
        return provider
    key = getattr(provider, "cache_key", None)
    with _REGISTRY_LOCK:
        if key is not None:
            cache = _BY_KEY.get(key)
            if cache is None:
                cache = _BY_KEY[key] = TokenCache(provider)
            return cache
        try:
            cache = _BY_PROVIDER.get(provider)
            if cache is None:
                cache = _BY_PROVIDER[provider] = TokenCache(provider)
        except TypeError:  # neither hashable nor weakly referenceable: one cache per client
            cache = TokenCache(provider)
        return cache
