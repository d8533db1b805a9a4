"""Transport options: the handler error policy, and which options go to producer or consumer.

Checked at construction, each on its own with its bad value named, so a typo does not show up
later as a subscription that silently never commits.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kafka_core.errors import KafkaConfigError, KafkaError

__all__ = ["ErrorPolicy", "HandlerError", "share_consumer_options", "split_options"]

POLICIES = ("retry", "skip", "stop")
FALLBACKS = ("skip", "stop")
# Consumer options the transport decides itself: a subscription commits handled records only.
RESERVED_CONSUMER = (
    "topics",
    "pattern",
    "group_id",
    "partitions",
    "enable_auto_commit",
    "client",
    "bootstrap_servers",
)
RESERVED_PRODUCER = ("client", "bootstrap_servers")
# The ``consumer_<name>`` options a queue-mode (share group) subscription's consumer takes; the
# others (offset reset, sessions, isolation...) are the consumer group's and do not apply.
SHARE_CONSUMER_OPTIONS = (
    "max_poll_records",
    "fetch_max_wait_ms",
    "fetch_min_bytes",
    "fetch_max_bytes",
    "client_rack",
    "client_id",
)


class HandlerError(KafkaError):
    """A handler raised on a record: the record, the attempt, and what the policy did about it.

    ``action`` is "retry" (it will be called again), "skip" (committed past it) or "stop" (the
    subscription stopped; the record and those after it are not committed); in queue mode
    (``share=True``) "release" (delivered again, to any member) or "reject" (never again), and
    ``attempt`` is the record's delivery count. The handler's own exception is ``cause`` (and
    ``__cause__``).
    """

    def __init__(self, message: Any, cause: BaseException, attempt: int, action: str) -> None:
        self.message = message
        self.cause = cause
        self.attempt = attempt
        self.action = action
        where = f"{message.topic}[{message.partition}]@{message.offset}"
        super().__init__(f"handler failed on {where} (attempt {attempt}, {action}): {cause!r}")
        self.__cause__ = cause


@dataclass(frozen=True, slots=True)
class ErrorPolicy:
    """What a subscription does when its handler raises.

    ``retry``: call it again after a backoff (``retry_backoff_ms`` doubling up to
    ``retry_backoff_max_ms``), at most ``retry_attempts`` more times, then ``retry_fallback``
    ("skip" or "stop"). ``skip``: commit past the record. ``stop``: stop the subscription.
    """

    policy: str = "retry"
    retry_attempts: int = 3
    retry_backoff_ms: float = 100.0
    retry_backoff_max_ms: float = 5_000.0
    retry_fallback: str = "stop"

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise KafkaConfigError(f"error_policy must be one of {POLICIES}, not {self.policy!r}")
        if self.retry_fallback not in FALLBACKS:
            raise KafkaConfigError(f"retry_fallback must be one of {FALLBACKS}, not {self.retry_fallback!r}")
        if isinstance(self.retry_attempts, bool) or not isinstance(self.retry_attempts, int):
            raise KafkaConfigError(f"retry_attempts must be an integer, not {self.retry_attempts!r}")
        if self.retry_attempts < 0:
            raise KafkaConfigError(f"retry_attempts must be at least 0, not {self.retry_attempts!r}")
        for name in ("retry_backoff_ms", "retry_backoff_max_ms"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
                raise KafkaConfigError(f"{name} must be a number >= 0, not {value!r}")

    def action_after(self, attempt: int) -> str:
        """The action after failed attempt number ``attempt`` (1-based)."""
        if self.policy != "retry":
            return self.policy
        return "retry" if attempt <= self.retry_attempts else self.retry_fallback


def split_options(options: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``producer_x`` -> producer option ``x``, ``consumer_x`` -> consumer option ``x``; anything
    else (connection options: ``request_timeout_ms``, TLS, SASL...) goes to both."""
    producer: dict[str, Any] = {}
    consumer: dict[str, Any] = {}
    shared: dict[str, Any] = {}
    for name, value in options.items():
        if name.startswith("producer_"):
            producer[name[len("producer_") :]] = value
        elif name.startswith("consumer_"):
            consumer[name[len("consumer_") :]] = value
        else:
            shared[name] = value
    for name in RESERVED_PRODUCER:
        if name in producer or name in shared:
            raise KafkaConfigError(f"{name} is set by the transport itself, not an option")
    for name in RESERVED_CONSUMER:
        if name in consumer:
            raise KafkaConfigError(
                f"consumer_{name} is set by the transport itself (subscribe() and handled-only commits)"
            )
    return {**shared, **producer}, {**shared, **consumer}


def share_consumer_options(options: dict[str, Any]) -> dict[str, Any]:
    """The options of a queue-mode subscription's share consumer: the connection options (those
    without a prefix) and the ``consumer_<name>`` options a share consumer has."""
    out: dict[str, Any] = {}
    for name, value in options.items():
        if name.startswith("producer_"):
            continue
        if name.startswith("consumer_"):
            name = name[len("consumer_") :]
            if name not in SHARE_CONSUMER_OPTIONS:
                continue
        out[name] = value
    return out
