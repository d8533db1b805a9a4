"""Where the client's brokers are: the bootstrap list, and per broker node its connections.

A node has one connection by default (lane 0) and, for callers that want requests served side by
side, further lanes: a broker handles one connection's requests one at a time, in order.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass, field

from kafka_core.client.metadata import BrokerMeta
from kafka_core.errors import KafkaConfigError
from kafka_core.network.backoff import Backoff
from kafka_core.network.connection import BrokerConnection

__all__ = ["Node", "parse_bootstrap"]


def parse_bootstrap(servers: str | Iterable[str]) -> list[tuple[str, int]]:
    """``"h1:9092,h2"`` or a list of ``host[:port]`` (IPv6 as ``[::1]:9092``) into (host, port) pairs."""
    items = servers.split(",") if isinstance(servers, str) else list(servers)
    out: list[tuple[str, int]] = []
    for raw in items:
        item = raw.strip()
        if not item:
            continue
        scheme, sep, rest = item.partition("://")
        if sep:
            # "http://host:9092" would be read as the host "http" on port "//host:9092", or as
            # host "http://host:9092" on 9092: fail now, not at max_block_ms (Kafka speaks no URL)
            raise KafkaConfigError(
                f"bootstrap server {item!r} has a URL scheme ({scheme}://): give host:port, e.g. "
                f"{rest.rstrip('/')!r}; TLS and SASL are chosen by security_protocol"
            )
        host, port = item, 9092
        if item.startswith("["):
            end = item.find("]")
            if end < 0:
                raise KafkaConfigError(f"bad bootstrap server {item!r}")
            host, rest = item[1:end], item[end + 1 :]
            if rest.startswith(":"):
                port = _port(rest[1:], item)
        elif item.count(":") == 1:
            host, port_s = item.split(":")
            port = _port(port_s, item)
        out.append((host, port))
    if not out:
        raise KafkaConfigError("bootstrap_servers is empty")
    return out


def _port(text: str, item: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise KafkaConfigError(f"bad port in bootstrap server {item!r}") from None
    if not 0 < port < 65536:
        raise KafkaConfigError(f"port out of range in bootstrap server {item!r}")
    return port


@dataclass
class Node:
    broker: BrokerMeta
    backoff: Backoff
    conn: BrokerConnection | None = None  # lane 0: everything by default
    lanes: dict[int, BrokerConnection] = field(default_factory=dict)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)  # guards connecting (any lane)
    next_attempt: float = 0.0
    # Connect attempts that failed, and the last one's error: a request that queued for the
    # lock while an attempt was under way fails with that attempt (see ClusterClient.connection).
    failed_attempts: int = 0
    last_failure: BaseException | None = None

    def lane(self, lane: int) -> BrokerConnection | None:
        return self.conn if lane == 0 else self.lanes.get(lane)

    def set_lane(self, lane: int, conn: BrokerConnection | None) -> None:
        if lane == 0:
            self.conn = conn
        elif conn is None:
            self.lanes.pop(lane, None)
        else:
            self.lanes[lane] = conn

    def all_conns(self) -> list[BrokerConnection]:
        return [c for c in (self.conn, *self.lanes.values()) if c is not None]
