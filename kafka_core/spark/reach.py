"""Fail fast when no bootstrap address can be a broker: every one refuses or does not resolve.

The client's bootstrap retries until ``default.api.timeout.ms`` (60 s), which is right for a
broker that is slow or restarting, and a minute of silence for a wrong host or port. Before the
driver opens its client, :func:`check_bootstrap` tries a plain TCP connection to each address,
again and again for a couple of seconds: if every attempt was refused or failed to resolve, no
broker is there and planning fails at once, naming the addresses. An address that accepts, or
times out (a slow network, a host that drops packets), or refuses at first and then accepts
(a restart), leaves the client its full timeout.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Sequence

from kafka_core.errors import KafkaConnectionError

__all__ = ["check_bootstrap"]


def _attempt(host: str, port: int, timeout: float) -> str | None:
    """Why ``host:port`` is certainly not a listening broker now, or None when it may be one."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return None
    except ConnectionRefusedError:
        return "connection refused"
    except socket.gaierror as exc:
        return f"name does not resolve ({exc.strerror or exc})"
    except OSError:  # a timeout, an unreachable network: not certain, the client keeps trying
        return None


def check_bootstrap(
    servers: Sequence[tuple[str, int]],
    *,
    window_s: float = 2.5,
    connect_timeout_s: float = 1.0,
    pause_s: float = 0.25,
    option: str = "kafka.bootstrap.servers",
) -> None:
    """Raise :class:`KafkaConnectionError` naming every address when all of them refused the
    connection or failed to resolve, in every round over ``window_s`` seconds."""
    deadline = time.monotonic() + window_s
    while True:
        reasons: dict[str, str] = {}
        for host, port in servers:
            reason = _attempt(host, port, connect_timeout_s)
            if reason is None:
                return
            reasons[f"[{host}]:{port}" if ":" in host else f"{host}:{port}"] = reason
        if time.monotonic() >= deadline:
            break
        time.sleep(pause_s)
    detail = "; ".join(f"{addr}: {why}" for addr, why in reasons.items())
    raise KafkaConnectionError(
        f"no Kafka broker at {option} {','.join(reasons)}: every address refused the connection or "
        f"did not resolve for {window_s:g} s ({detail}). Check the host names and ports, and that "
        "the broker is running and listening on them."
    )
