"""The retry loop and the fan-out every admin call shares.

An attempt sends requests for the resources still pending and reports an outcome per resource:
a value, or an error. Non-retriable errors are final for that resource only; retriable ones
(NOT_CONTROLLER, NOT_COORDINATOR, LEADER_NOT_AVAILABLE, a dropped connection...) send that
resource round again with fresh metadata, until the call's deadline. So one bad topic never hides
the others, and the call returns within the time the caller gave it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Hashable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from kafka_core.admin.results import Result
from kafka_core.client import deadline as call_deadline
from kafka_core.errors import (
    KafkaAuthenticationError,
    KafkaClosedError,
    KafkaConnectionError,
    KafkaError,
    KafkaProtocolError,
    KafkaTimeoutError,
    KafkaUnsupportedVersionError,
)
from kafka_core.network.backoff import Backoff
from kafka_core.protocol.errors import ErrorCode, error_for

if TYPE_CHECKING:
    from kafka_core.client.cluster import KafkaClient

log = logging.getLogger("kafka_core.admin")

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")

# Retriable in Kafka's table, but final for an admin call: the resource is not there, and waiting
# will not make it so (Java's admin client fails these at once too); a response that does not
# decode (CORRUPT_MESSAGE from our decoder) will not decode the next time either.
FINAL_CODES = frozenset({ErrorCode.CORRUPT_MESSAGE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION})

Attempt = Callable[[list[K]], Awaitable[Mapping[K, Any]]]


def call_timeout(timeout_ms: float | None, default_ms: float) -> float:
    """A call's time: the caller's ``timeout_ms``, else the admin's ``api_timeout_ms``."""
    return default_ms if timeout_ms is None else timeout_ms


def is_final(error: BaseException, final_codes: frozenset[int] = FINAL_CODES) -> bool:
    """True when retrying cannot help this resource."""
    if isinstance(error, KafkaProtocolError):
        return not error.retriable or error.code in final_codes
    return not isinstance(error, (KafkaConnectionError, KafkaTimeoutError))


def gave_up(what: str, key: object, error: BaseException, timeout_s: float) -> KafkaError:
    """The error a resource keeps when the deadline passes: the last cause, code and name kept."""
    note = f"{what} {key}: still failing after {timeout_s:.1f}s"
    if isinstance(error, KafkaProtocolError):
        return KafkaProtocolError(
            error.code, error.name, error.retriable, f"{note}: {error.message or error.name}"
        )
    return KafkaTimeoutError(f"{note}; last error: {error}")


async def per_resource(
    what: str,
    keys: Iterable[K],
    attempt: Attempt[K],
    timeout_ms: float,
    *,
    backoff: tuple[float, float] = (100.0, 1000.0),
    final_codes: frozenset[int] = FINAL_CODES,
) -> dict[K, Result[Any]]:
    """Run ``attempt`` over the pending keys until each has a final outcome or time runs out.

    ``attempt`` returns ``{key: value-or-exception}``; a key it leaves out is retried. An
    exception raised by the whole attempt applies to every pending key, except a missing API
    (KafkaUnsupportedVersionError), authentication failure or a closed client, which are raised.
    """
    order = list(dict.fromkeys(keys))
    loop = asyncio.get_running_loop()
    timeout_s = timeout_ms / 1000.0
    delays = Backoff(*backoff)
    with call_deadline.scope(loop.time() + timeout_s) as deadline:
        return await _per_resource(what, order, attempt, timeout_s, deadline, delays, final_codes)


async def _per_resource(
    what: str,
    order: list[K],
    attempt: Attempt[K],
    timeout_s: float,
    deadline: float,
    delays: Backoff,
    final_codes: frozenset[int],
) -> dict[K, Result[Any]]:
    loop = asyncio.get_running_loop()
    pending = list(order)
    results: dict[K, Result[Any]] = {}
    last: dict[K, BaseException] = {}
    while pending:
        # in this task, so that a retry loop inside the attempt (the client's bootstrap) runs
        # under this deadline too and its cause reaches the caller
        bound = asyncio.timeout_at(deadline)
        try:
            async with bound:
                outcome: Mapping[K, Any] = await attempt(list(pending))
        except (KafkaUnsupportedVersionError, KafkaAuthenticationError, KafkaClosedError):
            raise
        except (KafkaError, TimeoutError) as exc:
            if bound.expired() and not isinstance(exc, KafkaError):
                exc = KafkaTimeoutError(f"{what}: no answer within the {timeout_s:.1f}s deadline")
            elif not isinstance(exc, KafkaError):
                raise
            # a loop inside that gave up hands on its cause
            outcome = dict.fromkeys(pending, call_deadline.root_cause(exc))
        still: list[K] = []
        for key in pending:
            value = outcome.get(key, _MISSING)
            if value is _MISSING:
                value = error_for(-1, f"{what}: the broker's answer did not mention {key}")
                value.retriable = True
            if isinstance(value, BaseException):
                if is_final(value, final_codes):
                    results[key] = Result(error=value if isinstance(value, KafkaError) else _wrap(value))
                else:
                    last[key] = value
                    still.append(key)
            else:
                results[key] = Result(value)
        pending = still
        if not pending:
            break
        delay = delays.next_s()
        if loop.time() + delay >= deadline:
            for key in pending:
                results[key] = Result(error=gave_up(what, key, last[key], timeout_s))
            break
        log.debug("%s: retrying %d resource(s) in %.3fs", what, len(pending), delay)
        await asyncio.sleep(delay)
    return {key: results[key] for key in order}


async def gather_outcomes(
    jobs: Mapping[Any, Awaitable[Mapping[K, Any]]], keys_of: Mapping[Any, list[K]]
) -> dict[K, Any]:
    """Run one request per destination side by side; a destination that fails outright gives
    its exception to each of its keys (the others still get their answers)."""
    dests = list(jobs)
    answers = await asyncio.gather(*(jobs[d] for d in dests), return_exceptions=True)
    out: dict[K, Any] = {}
    for dest, answer in zip(dests, answers, strict=True):
        if isinstance(answer, (KafkaUnsupportedVersionError, KafkaAuthenticationError, KafkaClosedError)):
            raise answer
        if isinstance(answer, asyncio.CancelledError):
            raise answer
        if isinstance(answer, BaseException):
            for key in keys_of[dest]:
                out[key] = answer
        else:
            out.update(answer)
    return out


async def per_coordinator(
    find_coordinator: Callable[[str], Awaitable[Any]],
    group_ids: list[str],
    keys_of_group: Callable[[str], list[K]],
    ask: Callable[[int, list[str]], Awaitable[Mapping[K, Any]]],
) -> dict[K, Any]:
    """Find each group's coordinator, then ask each coordinator once about its groups (a group
    whose coordinator cannot be found gets that error for each of its keys)."""
    found = await asyncio.gather(*(find_coordinator(g) for g in group_ids), return_exceptions=True)
    by_node: dict[int, list[str]] = {}
    out: dict[K, Any] = {}
    for gid, coord in zip(group_ids, found, strict=True):
        if isinstance(coord, BaseException):
            out.update(dict.fromkeys(keys_of_group(gid), coord))
        else:
            by_node.setdefault(coord.node_id, []).append(gid)
    keys_of = {n: [k for g in gs for k in keys_of_group(g)] for n, gs in by_node.items()}
    out.update(await gather_outcomes({n: ask(n, gs) for n, gs in by_node.items()}, keys_of))
    return out


async def fan_out(
    by_node: Mapping[int, list[K]], ask: Callable[[int, list[K]], Awaitable[Mapping[K, Any]]]
) -> dict[K, Any]:
    """``ask(node, keys)`` once per node, side by side, for the keys that node answers for."""
    return await gather_outcomes({n: ask(n, keys) for n, keys in by_node.items()}, by_node)


async def all_brokers(client: KafkaClient, what: str, timeout_ms: float) -> list[int]:
    """The ids of the cluster's brokers, for a call that asks each of them."""
    meta = await client.retry(f"{what}: finding brokers", lambda: client.metadata([]), timeout_ms)
    return sorted(b.node_id for b in meta.brokers)


async def per_broker(
    what: str, nodes: Iterable[int], ask: Callable[[int], Awaitable[Any]], timeout_ms: float
) -> dict[int, Result[Any]]:
    """Each broker asked for what only it knows (its listing, its log dirs), a broker whose answer
    is retriable asked again: ``ask(node)`` returns the broker's value or an exception."""

    async def one(node: int) -> dict[int, Any]:
        return {node: await ask(node)}

    async def attempt(pending: list[int]) -> dict[int, Any]:
        return await gather_outcomes({n: one(n) for n in pending}, {n: [n] for n in pending})

    return await per_resource(what, nodes, attempt, timeout_ms)


async def any_broker(
    client: KafkaClient,
    what: str,
    body: Any,
    read: Callable[[Any], T],
    timeout_ms: float | None,
    *,
    request: str | None = None,
) -> T:
    """One request any broker answers (a KRaft broker forwards what is the controller's), sent
    again while its error is retriable; an error in the answer is raised, named by ``request``
    (else ``what``) with the broker's message, and ``read(response)`` is the call's value."""

    async def attempt() -> T:
        node = await client.any_node()
        resp = await client.send(node, body)
        if resp.error_code:
            raise error_for(
                resp.error_code, (request or what) + detail_suffix(getattr(resp, "error_message", None))
            )
        return read(resp)

    return await client.retry(what, attempt, timeout_ms)


def detail_suffix(message: str | None) -> str:
    """A broker's error message as the tail of ours (nothing when it gave none)."""
    return f": {message}" if message else ""


def outcome(code: int, what: str, detail: str | None = None) -> KafkaError | None:
    """A resource's outcome from its error code: None for success, else the error named by
    ``what`` with the broker's message."""
    return error_for(code, what + detail_suffix(detail)) if code else None


def _wrap(exc: BaseException) -> KafkaError:
    return KafkaError(f"{type(exc).__name__}: {exc}")


class _Missing:
    pass


_MISSING: Any = _Missing()
