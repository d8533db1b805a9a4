"""Producer option checks: each option on its own, the error naming it and its bad value.

A bad option caught here fails the constructor at once; caught later it would surface as a
hang or a confusing error far from its cause (a negative timeout, a zero batch size).
"""

from __future__ import annotations

import math
from typing import Any

from kafka_core.errors import KafkaConfigError

__all__ = ["COMPRESSIONS", "check_options", "check_transactional", "parse_acks"]

COMPRESSIONS = ("none", "gzip", "snappy", "lz4", "zstd")


def parse_acks(value: Any) -> int:
    if value in ("all", -1, "-1") and not isinstance(value, bool):
        return -1
    if value in (0, 1, "0", "1") and not isinstance(value, bool):
        return int(value)
    raise KafkaConfigError(f"acks must be 0, 1, -1 or 'all', not {value!r}")


def _number(name: str, value: Any, *, minimum: float, strict: bool = False, integer: bool = False) -> float:
    kinds = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds):
        kind = "an int" if integer else "a number"
        raise KafkaConfigError(f"{name} must be {kind}, not {value!r}")
    if math.isnan(value) or value < minimum or (strict and value == minimum):
        bound = f"> {minimum:g}" if strict else f">= {minimum:g}"
        raise KafkaConfigError(f"{name} must be {bound}, not {value!r}")
    return float(value)


def check_options(
    *,
    acks: int,
    linger_ms: Any,
    batch_size: Any,
    compression: Any,
    idempotent: Any,
    max_in_flight: Any,
    delivery_timeout_ms: Any,
    max_request_size: Any = 1_048_576,
    produce_concurrency: Any = 1,
    retry_backoff_ms: Any,
    request_timeout_ms: Any,
    buffer_memory: Any,
    max_block_ms: Any,
) -> None:
    """Raise KafkaConfigError for the first bad option (``acks`` already parsed)."""
    if compression not in COMPRESSIONS:
        raise KafkaConfigError(f"compression must be one of {COMPRESSIONS}, not {compression!r}")
    _number("batch_size", batch_size, minimum=0, strict=True, integer=True)
    _number("buffer_memory", buffer_memory, minimum=0, strict=True, integer=True)
    _number("max_in_flight", max_in_flight, minimum=1, integer=True)
    _number("max_request_size", max_request_size, minimum=0, strict=True, integer=True)
    _number("produce_concurrency", produce_concurrency, minimum=1, integer=True)
    linger = _number("linger_ms", linger_ms, minimum=0)
    request = _number("request_timeout_ms", request_timeout_ms, minimum=0, strict=True)
    delivery = _number("delivery_timeout_ms", delivery_timeout_ms, minimum=0, strict=True)
    _number("retry_backoff_ms", retry_backoff_ms, minimum=0)
    _number("max_block_ms", max_block_ms, minimum=0)
    if math.isinf(linger) or math.isinf(request):
        raise KafkaConfigError(
            f"linger_ms and request_timeout_ms must be finite, not {linger_ms!r}/{request_timeout_ms!r}"
        )
    if delivery < linger + request:
        # As the Java client: a record must be allowed one full request after its linger.
        raise KafkaConfigError(
            f"delivery_timeout_ms must be >= linger_ms + request_timeout_ms ({linger + request:g}), "
            f"not {delivery_timeout_ms!r}"
        )
    if idempotent not in (None, True, False):
        raise KafkaConfigError(f"idempotent must be True, False or None, not {idempotent!r}")
    if idempotent and acks != -1:
        raise KafkaConfigError(f"idempotent=True needs acks='all' (-1), not acks={acks!r}")
    if idempotent and max_in_flight > 5:
        raise KafkaConfigError(f"max_in_flight must be <= 5 with idempotent=True, not {max_in_flight!r}")


def check_transactional(
    transactional_id: Any, transaction_timeout_ms: Any, *, acks: int, idempotent: Any
) -> None:
    """A transactional id needs idempotence and acks='all' (as the Java client)."""
    if not isinstance(transactional_id, str) or not transactional_id:
        raise KafkaConfigError(f"transactional_id must be a non-empty str, not {transactional_id!r}")
    if idempotent is False:
        raise KafkaConfigError(
            f"transactional_id={transactional_id!r} needs idempotence: idempotent=False cannot be used with it"
        )
    if acks != -1:
        raise KafkaConfigError(
            f"transactional_id={transactional_id!r} needs acks='all' (-1), not acks={acks!r}"
        )
    _number("transaction_timeout_ms", transaction_timeout_ms, minimum=0, strict=True, integer=True)


# The Java names of the transaction options (read here until kafka_core.config knows them).
