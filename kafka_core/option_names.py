"""Other clients' names for kafka_core's options, and the error for an option a class does not take.

Users bring keyword arguments from kafka-python, aiokafka and confluent-kafka (and Java-style
``linger.ms`` names). A class refuses an unknown one naming itself, the option and the name it
means here, instead of a TypeError from an internal class. The Java-style names come from
``kafka_core.config``'s table (the one ``from_config`` reads); kafka-python's and aiokafka's are
mostly those names with ``_`` for ``.``, so only the names that differ otherwise are listed here.
"""

from __future__ import annotations

import difflib
import functools
import inspect
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kafka_core.config import java_keyword, refused_reason
from kafka_core.errors import KafkaUnknownOptionError

__all__ = ["FOREIGN_KEYWORDS", "NO_EQUIVALENT", "accepted_keywords", "reject_unknown", "unknown_option_error"]

# Another client's keyword (kafka-python, aiokafka, confluent-kafka's Python names) -> ours, where
# it is not the Java-style name with "_" for "." (those come from kafka_core.config).
FOREIGN_KEYWORDS: dict[str, str] = {
    "sasl_plain_username": "sasl_username",  # kafka-python, aiokafka
    "sasl_plain_password": "sasl_password",  # kafka-python, aiokafka
    "partition_assignment_strategy": "assignors",  # kafka-python, aiokafka
}

# Other clients' options with no counterpart here, and why.
NO_EQUIVALENT: dict[str, str] = {
    "api_version": "kafka_core negotiates every API's version with ApiVersions (api_version_caps holds one back)",
    "loop": "an asyncio class uses the running loop",
    "consumer_timeout_ms": "give poll(timeout_ms=...) instead",
    "send_buffer_bytes": "socket buffers are left to the OS",
    "receive_buffer_bytes": "socket buffers are left to the OS",
    "error_cb": "errors are raised by the call that meets them",
    "stats_cb": "use metrics()",
}


@functools.cache
def _parameters(function: Callable[..., Any]) -> frozenset[str]:
    return frozenset(
        name
        for name, p in inspect.signature(function).parameters.items()
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and name != "self"
    )


def accepted_keywords(*functions: Callable[..., Any]) -> frozenset[str]:
    """The keyword names the given constructors take between them."""
    out: frozenset[str] = frozenset()
    for function in functions:
        out |= _parameters(function)
    return out


def _advice(called: str, name: str, accepted: frozenset[str]) -> str:
    """What ``name`` means here, for the message about it."""
    if name in NO_EQUIVALENT:
        return f"kafka_core has no such option: {NO_EQUIVALENT[name]}"
    reason = refused_reason(name) or refused_reason(name.replace("_", "."))
    if reason is not None:  # the same reason as a config dict's name gets
        return f"kafka_core has no such option: {reason}"
    role = None
    target = FOREIGN_KEYWORDS.get(name)
    if target is None:
        found = java_keyword(name) or java_keyword(name.replace("_", "."))
        if found is not None:
            target, role = found
    if target is not None:
        via = f" (Java-style names go through {called}.from_config({{...}}))" if "." in name else ""
        # A class with prefixed options (the transport's producer_acks) takes it under its prefix.
        for candidate in (target, f"producer_{target}", f"consumer_{target}"):
            if candidate in accepted:
                return f"kafka_core calls it {candidate!r}{via}"
        what = f"a {role} option" if role and role != "client" else "an option"
        named = "" if target == name else f"kafka_core calls it {target!r}, "
        return f"{named}{what} {called} does not take{via}"
    close = difflib.get_close_matches(name, sorted(accepted), n=1, cutoff=0.6)
    if close:
        return f"did you mean {close[0]!r}?"
    return f"see help({called}) for its options"


def unknown_option_error(
    called: str, names: Iterable[str], accepted: frozenset[str]
) -> KafkaUnknownOptionError:
    """The error for options ``called`` does not take, one clause per name."""
    clauses = [f"{name!r}: {_advice(called, name, accepted)}" for name in names]
    plural = "s" if len(clauses) > 1 else ""
    return KafkaUnknownOptionError(f"{called}() got unknown option{plural} " + "; ".join(clauses))


def reject_unknown(called: str, given: Mapping[str, Any] | Iterable[str], accepted: frozenset[str]) -> None:
    """Raise :class:`KafkaUnknownOptionError` (a TypeError) if ``given`` names an option not in
    ``accepted``; ``called`` is the class the user called, as they spelled it."""
    unknown = [name for name in given if name not in accepted]
    if unknown:
        raise unknown_option_error(called, unknown, accepted)
