"""Broker address, client options and the checks every command makes before it starts work.

A bad address or a missing topic must be one clear line within ``--connect-timeout``: the
clients themselves retry for a minute (they are built to ride out outages), so the command asks
one cheap Metadata question first, with the CLI's own short deadline.
"""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING, Any

from kafka_core.cli.output import EXIT_NOT_FOUND, EXIT_UNREACHABLE, EXIT_USAGE, CliError
from kafka_core.errors import KafkaConnectionError, KafkaTimeoutError

if TYPE_CHECKING:
    from kafka_core.client.metadata import ClusterMeta

__all__ = [
    "DEFAULT_BOOTSTRAP",
    "bootstrap_servers",
    "client_options",
    "cluster_metadata",
    "open_admin",
    "parse_pairs",
    "topic_partitions",
    "unreachable",
]

DEFAULT_BOOTSTRAP = "localhost:9092"


def bootstrap_servers(args: argparse.Namespace) -> str:
    """``--bootstrap-servers``, else ``$KAFKA_BOOTSTRAP_SERVERS``, else localhost:9092."""
    given = getattr(args, "bootstrap_servers", None) or os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "")
    return given.strip() or DEFAULT_BOOTSTRAP


def parse_pairs(items: list[str] | None, what: str) -> list[tuple[str, str]]:
    """``["k=v", ...]`` (``--header``, ``--config``, ``-X``) as pairs, in order; a bad one is a usage error."""
    out: list[tuple[str, str]] = []
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise CliError(f"{what} must look like KEY=VALUE, not {item!r}", EXIT_USAGE)
        out.append((key, value))
    return out


def _option_value(text: str) -> Any:
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def client_options(args: argparse.Namespace) -> dict[str, Any]:
    """Options for every client the command builds: ``-X key=value`` (our keyword names, or Java's
    dotted names) plus the CLI's deadlines."""
    pairs = parse_pairs(getattr(args, "option", None), "-X")
    options: dict[str, Any] = {k: _option_value(v) for k, v in pairs if "." not in k}
    # Java's names (-X sasl.oauthbearer.token.endpoint.url=...), as from_config takes them.
    java = {k: v for k, v in pairs if "." in k}
    if java:
        from kafka_core.config import translate
        from kafka_core.errors import KafkaConfigError

        try:
            options.update(translate(java, "client"))
        except KafkaConfigError as exc:
            raise CliError(f"-X: {exc}", EXIT_USAGE) from None
    timeout_ms = float(args.connect_timeout) * 1000
    options.setdefault("connect_timeout_ms", min(timeout_ms, 10_000))
    # A topic that is not there is reported, never created behind the user's back.
    options.setdefault("allow_auto_create_topics", False)
    return options


def unreachable(servers: str, exc: BaseException) -> CliError:
    """The one line for a broker that did not answer (exit 3); one that answered but refused the
    connection's TLS or SASL set-up is named as such (the address was right)."""
    from kafka_core.cli.output import one_line
    from kafka_core.errors import KafkaAuthenticationError

    if isinstance(exc, KafkaAuthenticationError):
        return CliError(f"the broker at {servers} refused the connection: {one_line(exc)}", EXIT_UNREACHABLE)
    return CliError(
        f"cannot reach a Kafka broker at {servers} (set --bootstrap-servers or "
        f"KAFKA_BOOTSTRAP_SERVERS): {one_line(exc)}",
        EXIT_UNREACHABLE,
    )


def cluster_metadata(args: argparse.Namespace, topics: list[str] | None = None) -> ClusterMeta:
    """One Metadata answer within ``--connect-timeout``, else the one-line unreachable error (exit 3)."""
    from kafka_core.sync_client import KafkaClient

    servers = bootstrap_servers(args)
    options = client_options(args)
    options["api_timeout_ms"] = float(args.connect_timeout) * 1000
    client = KafkaClient(servers, **options)
    try:
        return client.metadata([] if topics is None else topics, allow_auto_topic_creation=False)
    except (KafkaConnectionError, KafkaTimeoutError) as exc:
        raise unreachable(servers, exc) from None
    finally:
        client.close()


def topic_partitions(args: argparse.Namespace, topic: str) -> list[int]:
    """The topic's partition ids, asked within ``--connect-timeout``; missing topic: exit 4."""
    from kafka_core.protocol.errors import ErrorCode, error_for

    meta = cluster_metadata(args, [topic])
    found = meta.topic(topic)
    if found is None or found.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        raise CliError(
            f"topic {topic!r} does not exist (create it: kafka-core topics create {topic} --partitions N)",
            EXIT_NOT_FOUND,
        )
    if found.error_code:
        raise error_for(found.error_code, f"topic {topic!r}")
    return sorted(p.partition for p in found.partitions)


def open_admin(args: argparse.Namespace) -> Any:
    """A ``kafka_core.KafkaAdmin`` for a broker known to answer (checked within --connect-timeout)."""
    from kafka_core import KafkaAdmin

    cluster_metadata(args)
    return KafkaAdmin(bootstrap_servers=bootstrap_servers(args), **client_options(args))
