"""``KafkaShareConsumer.from_config``: Java's share consumer property names to keywords."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafka_core.config import translate
from kafka_core.errors import KafkaConfigError

# The share consumer's own names (Java's ShareConsumerConfig), beside the client's.
_SHARE = {
    "share.acknowledgement.mode": "share_acknowledgement_mode",
    "group.id": "group_id",
    "max.poll.records": "max_poll_records",
    "fetch.max.wait.ms": "fetch_max_wait_ms",
    "fetch.min.bytes": "fetch_min_bytes",
    "fetch.max.bytes": "fetch_max_bytes",
    "client.rack": "client_rack",
}
_INTS = {"max_poll_records", "fetch_max_wait_ms", "fetch_min_bytes", "fetch_max_bytes"}
# Consumer-group names that mean nothing to a share group: refused, naming why.
_NOT_FOR_SHARE = {
    "auto.offset.reset": "a share group's start is the group config share.auto.offset.reset",
    "enable.auto.commit": "share groups acknowledge records, they commit no offsets",
    "group.protocol": "share groups have one protocol",
    "isolation.level": "a share group's isolation is the group config share.isolation.level",
}


def share_keywords(config: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    rest: dict[str, Any] = {}
    for raw, value in config.items():
        name = raw.strip().lower()
        if name in _NOT_FOR_SHARE:
            raise KafkaConfigError(f"{raw} is not a share consumer option: {_NOT_FOR_SHARE[name]}")
        keyword = _SHARE.get(name)
        if keyword is None:
            rest[raw] = value
            continue
        if keyword in _INTS:
            try:
                value = int(value)
            except (TypeError, ValueError):
                raise KafkaConfigError(f"bad value for {raw}: {value!r} (an integer)") from None
        out[keyword] = value
    out.update(translate(rest, "client"))
    out.update(overrides)
    return out
