"""The process-wide token cache: one fetch for many connections, refresh at 75-80% of the
lifetime, the current token kept while the endpoint fails, retries with backoff."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from fakes.timing import aio

from kafka_core.auth import OAuthBearerToken, OidcTokenProvider, TokenCache, shared_token_cache
from kafka_core.errors import KafkaAuthenticationError, KafkaConnectionError

pytestmark = pytest.mark.timeout(60)

T0 = time.time()
LIFETIME = 100.0


class Clock:
    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return T0 + self.offset


class Provider:
    """Counts calls; fails while ``down``; each token lives LIFETIME from the clock's now."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.calls = 0
        self.down = False
        self.gate = threading.Event()
        self.gate.set()

    def __call__(self) -> OAuthBearerToken:
        self.gate.wait(10)
        self.calls += 1
        if self.down:
            raise KafkaConnectionError("token endpoint down")
        now = self.clock()
        return OAuthBearerToken(f"t{self.calls}", now + LIFETIME, principal="svc", issued_at=now)


@aio
async def test_many_connections_at_once_fetch_one_token() -> None:
    clock = Clock()
    provider = Provider(clock)
    provider.gate.clear()
    cache = TokenCache(provider, clock=clock, refresh_ahead=False)
    waiters = [asyncio.create_task(cache.token()) for _ in range(20)]
    await asyncio.sleep(0.05)
    provider.gate.set()
    tokens = await asyncio.gather(*waiters)
    assert {t.value for t in tokens} == {"t1"} and provider.calls == 1


@aio
async def test_the_token_is_refreshed_between_75_and_80_percent_of_its_lifetime() -> None:
    clock = Clock()
    provider = Provider(clock)
    cache = TokenCache(provider, clock=clock, refresh_ahead=False)
    assert (await cache.token()).value == "t1"
    clock.offset = 0.74 * LIFETIME
    assert (await cache.token()).value == "t1" and provider.calls == 1
    clock.offset = 0.801 * LIFETIME
    assert (await cache.token()).value == "t2" and provider.calls == 2


@aio
async def test_a_failing_endpoint_keeps_the_valid_token_and_retries_with_backoff() -> None:
    clock = Clock()
    provider = Provider(clock)
    cache = TokenCache(provider, clock=clock, backoff_s=2.0, backoff_max_s=8.0, refresh_ahead=False)
    await cache.token()
    provider.down = True
    clock.offset = 0.9 * LIFETIME
    assert (await cache.token()).value == "t1"  # refresh failed: the current token, still valid
    calls = provider.calls
    assert (await cache.token()).value == "t1" and provider.calls == calls  # backing off: no call
    clock.offset += 3.0  # past the first backoff (2 s +-20%)
    assert (await cache.token()).value == "t1" and provider.calls == calls + 1
    provider.down = False
    clock.offset += 10.0
    assert (await cache.token()).value.startswith("t") and (await cache.token()).value != "t1"


@aio
async def test_with_no_valid_token_the_endpoints_error_is_raised_and_not_hammered() -> None:
    clock = Clock()
    provider = Provider(clock)
    provider.down = True
    cache = TokenCache(provider, clock=clock, backoff_s=5.0, refresh_ahead=False)
    with pytest.raises(KafkaConnectionError, match="down"):
        await cache.token()
    with pytest.raises(KafkaConnectionError, match="down"):
        await cache.token()
    assert provider.calls == 1  # the second caller got the error without a call (backoff)


@aio
async def test_a_provider_raising_anything_is_an_authentication_error() -> None:
    def broken() -> OAuthBearerToken:
        raise ValueError("no such client")

    with pytest.raises(KafkaAuthenticationError, match="ValueError: no such client"):
        await TokenCache(broken).token()


def test_clients_with_the_same_oidc_settings_share_one_cache() -> None:
    a = OidcTokenProvider("https://idp.invalid/token", "client", "secret-1", scope="kafka")
    b = OidcTokenProvider("https://idp.invalid/token", "client", "secret-1", scope="kafka")
    c = OidcTokenProvider("https://idp.invalid/token", "client", "secret-2", scope="kafka")
    assert shared_token_cache(a) is shared_token_cache(b)
    assert shared_token_cache(a) is not shared_token_cache(c)

    def mine() -> OAuthBearerToken:
        raise AssertionError("not called")

    assert shared_token_cache(mine) is shared_token_cache(mine)
    cache = shared_token_cache(mine)
    assert shared_token_cache(cache) is cache  # a TokenSource is used as it is
    assert "secret-1" not in repr(a) and "secret-1" not in repr(vars(a))


@aio
async def test_a_token_in_use_is_renewed_ahead_of_time_by_itself() -> None:
    """No caller needs to wait for the endpoint at the refresh point: a timer renews the token
    there (real clock, a 2 s token), and stops once nobody asks for the token any more."""
    calls: list[float] = []

    def provider() -> OAuthBearerToken:
        now = time.time()
        calls.append(now)
        return OAuthBearerToken(f"t{len(calls)}", now + 2.0, issued_at=now)

    cache = TokenCache(provider)
    first = await cache.token()
    await asyncio.sleep(1.7)  # past 75-80% of 2 s
    assert len(calls) == 2 and 1.4 <= calls[1] - calls[0] <= 1.7
    assert (await cache.token()).value == "t2" and first.value == "t1"
    await asyncio.sleep(3.5)  # used once since: one more renewal, then none
    assert len(calls) == 3
