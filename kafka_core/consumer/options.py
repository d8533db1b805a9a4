"""Consumer option checks: each option on its own, named with its bad value.

A bad value must fail at construction with a message about that option; left to the broker it
shows up as a member that silently never joins, or as an error about some other option.
"""

from __future__ import annotations

from typing import Any

from kafka_core.errors import KafkaConfigError

INT32_MAX = 2**31 - 1


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


def check_consumer_options(opts: dict[str, Any]) -> None:
    """Validate the consumer's numeric and flag options (the group ones even without a group).

    ``opts``: the constructor's arguments by name (its ``locals()``).
    """
    session = check_int("session_timeout_ms", opts["session_timeout_ms"], 1)
    heartbeat = opts["heartbeat_interval_ms"]
    check_int("heartbeat_interval_ms", heartbeat, 1)
    if heartbeat >= session:
        raise KafkaConfigError(
            f"heartbeat_interval_ms must be lower than session_timeout_ms ({session}), not {heartbeat!r}"
        )
    check_int("max_poll_interval_ms", opts["max_poll_interval_ms"], 1)
    check_number("auto_commit_interval_ms", opts["auto_commit_interval_ms"], 0)
    check_int("fetch_max_wait_ms", opts["fetch_max_wait_ms"], 0)
    check_int("fetch_min_bytes", opts["fetch_min_bytes"], 0)
    check_int("fetch_max_bytes", opts["fetch_max_bytes"], 1)
    check_int("max_partition_fetch_bytes", opts["max_partition_fetch_bytes"], 1)
    check_int("fetch_concurrency", opts["fetch_concurrency"], 1)
    check_number("coordinator_ready_timeout_ms", opts["coordinator_ready_timeout_ms"], 1)
    check_number("metadata_max_age_ms", opts["metadata_max_age_ms"], 0)
    if opts["max_poll_records"] is not None:
        check_int("max_poll_records", opts["max_poll_records"], 1)
    for flag in ("enable_auto_commit", "check_crcs"):
        if not isinstance(opts[flag], bool):
            raise KafkaConfigError(f"{flag} must be True or False, not {opts[flag]!r}")
