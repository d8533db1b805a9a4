"""Options both consumers take alike: the client they run over, numbers in range, deserializers.

A bad value must fail at construction with a message about that option; left to the broker it
shows up as a member that silently never joins, or as an error about some other option.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from kafka_core.errors import KafkaConfigError
from kafka_core.option_names import accepted_keywords, reject_unknown

INT32_MAX = 2**31 - 1
DEFAULT_BOOTSTRAP = "localhost:9092"  # as the producer, admin and client


def check_int(name: str, value: Any, low: int, high: int = INT32_MAX) -> int:
    """``value`` as an int in [low, high] (wire fields are int32), else KafkaConfigError."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise KafkaConfigError(f"{name} must be an integer, not {value!r}")
    if not low <= value <= high:
        raise KafkaConfigError(f"{name} must be between {low} and {high}, not {value!r}")
    return value


def check_number(name: str, value: Any, low: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        raise KafkaConfigError(f"{name} must be a number, not {value!r}")
    if value < low:
        raise KafkaConfigError(f"{name} must be at least {low}, not {value!r}")
    return float(value)


def check_known_options(called: str, options: dict[str, Any], own: Callable[..., Any]) -> None:
    """Refuse, naming ``called``, an option that is neither the consumer's (``own``) nor its
    client's, before anything else can fail about another option."""
    from kafka_core.client.cluster import KafkaClient

    reject_unknown(called, options, accepted_keywords(own, KafkaClient.__init__))


def resolve_client(
    bootstrap_servers: str | Iterable[str], client: Any, options: dict[str, Any]
) -> tuple[Any, bool, float]:
    """(async client, whether the consumer owns it, its request timeout in ms).

    Connection options configure a client the consumer makes; a client passed in (sync or
    asyncio) is its owner's, configured by them. A consumer's client does not auto-create the
    topics it asks about unless told to (``allow_auto_create_topics=True``), as librdkafka's:
    a subscription to a topic not created yet waits for it, rather than creating it with the
    broker's default partition count under the application that is about to create it.
    """
    if client is None:
        from kafka_core.client.cluster import KafkaClient

        options = {"allow_auto_create_topics": False, **options}
        return KafkaClient(bootstrap_servers, **options), True, options.get("request_timeout_ms", 30_000)
    if options or bootstrap_servers != DEFAULT_BOOTSTRAP:
        raise KafkaConfigError("client options and bootstrap_servers go to the client you pass, not here")
    client = getattr(client, "async_object", client)  # a sync KafkaClient's async twin
    return client, False, client.request_timeout_ms


def deserializers(key_fn: Any, value_fn: Any) -> tuple[Any, Any] | None:
    """The (key, value) deserializers poll applies, or None when there are none (raw bytes)."""
    for name, fn in (("key_deserializer", key_fn), ("value_deserializer", value_fn)):
        if fn is not None and not callable(fn):
            raise KafkaConfigError(f"{name} must be a callable (bytes -> object) or None, not {fn!r}")
    return None if key_fn is None and value_fn is None else (key_fn, value_fn)
