"""What every embedded broker kind shares: the start error, free ports, child-process care, and
the lifecycle (restart, context manager) written once over each kind's start, stop and kill."""

from __future__ import annotations

import abc
import contextlib
import os
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Self

__all__ = [
    "QUICK_JVM_OPTIONS",
    "BrokerStartError",
    "EmbeddedBroker",
    "NodeExit",
    "OneProcessBroker",
    "PortInUseError",
    "admin_create_topic",
    "die_with_parent",
    "free_port",
    "free_ports",
    "kill_process",
    "port_open",
    "read_tail",
    "require_free_port",
    "stop_process",
]


# A short-lived or lightly used JVM (a tool, a test's broker, the OIDC provider): C1 only and the
# serial collector. C2's compiler threads would spend most of its CPU on its start-up path.
QUICK_JVM_OPTIONS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")


class BrokerStartError(RuntimeError):
    """The embedded broker could not be found or did not come up."""


class PortInUseError(BrokerStartError):
    """The port a broker was told to listen on is taken: the caller's choice, so entry points
    answer it as a usage error (exit 2), naming the port."""

    def __init__(self, host: str, port: int) -> None:
        super().__init__(f"port {port} on {host} is in use (another broker?)")
        self.host = host
        self.port = port


def require_free_port(port: int, host: str = "127.0.0.1") -> None:
    """Raise :class:`PortInUseError` when something listens on ``host:port`` already.

    Checked before a broker starts because a broker that cannot bind fails late and noisily
    (Tansu panics after the port answered, the other process's port). Bound as servers bind
    (``SO_REUSEADDR``), so a port whose old connections linger in TIME_WAIT counts as free, as it
    does for the broker."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            raise PortInUseError(host, port) from None


def free_port(host: str = "127.0.0.1") -> int:
    return free_ports(1, host)[0]


# Where listener ports are picked from when the kernel's ephemeral range leaves room below it.
LISTENER_PORTS_FLOOR = 10_000
_EPHEMERAL_DEFAULT = (32_768, 60_999)  # Linux's ip_local_port_range


def ephemeral_ports() -> tuple[int, int]:
    """The range the kernel takes outgoing connections' local ports (and bind(0)'s) from."""
    try:
        low, high = (int(x) for x in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    except (OSError, ValueError):
        return _EPHEMERAL_DEFAULT
    return low, high


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """Ports free when picked, and distinct from each other.

    They are picked below the kernel's ephemeral range when it leaves room there: a port in that
    range can be handed to any outgoing connection (or bind(0)) on the machine while a broker's
    node is down, and the node then cannot listen on it again when it restarts (CI: a restarted
    Kafka node's 'Address already in use', while four test workers opened connections). Below
    the range only an explicit bind takes a port. The sockets stay bound until all are picked, so
    one process never gets two listeners on the same port."""
    import random

    low, _high = ephemeral_ports()
    pool = range(LISTENER_PORTS_FLOOR, low) if low - LISTENER_PORTS_FLOOR >= 1_000 else None
    with contextlib.ExitStack() as held:
        ports: list[int] = []
        misses = 0
        while len(ports) < count:
            sock = held.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            if pool is None or misses > 200:
                sock.bind((host, 0))
            else:
                try:
                    sock.bind((host, random.choice(pool)))  # a port held here already fails too
                except OSError:
                    misses += 1
                    continue
            ports.append(int(sock.getsockname()[1]))
        return ports


def die_with_parent() -> None:
    """Linux: have the kernel stop the broker if the process that started it dies (even by a crash).

    The broker also gets a session of its own, so a terminal's Ctrl-C reaches only the process
    that owns it, which stops it in order (a chaos run then still settles its books)."""
    try:
        import ctypes
        import signal

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    with contextlib.suppress(OSError):
        os.setsid()


def port_open(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.2):
            return True
    except OSError:
        return False


def stop_process(proc: subprocess.Popen[bytes] | None, timeout: float) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout)


def kill_process(proc: subprocess.Popen[bytes] | None, timeout: float = 30.0) -> None:
    """SIGKILL: no graceful shutdown, responses in flight are lost."""
    if proc is not None and proc.poll() is None:
        proc.kill()
        proc.wait(timeout)


def read_tail(path: Path, limit: int = 4000) -> str:
    try:
        return path.read_bytes()[-limit:].decode(errors="replace")
    except OSError:
        return ""


def admin_create_topic(
    bootstrap: str,
    name: str,
    partitions: int,
    replication_factor: int,
    configs: dict[str, str] | None = None,
    timeout: float = 60.0,
) -> None:
    """Create a topic through kafka_core's admin; one that already exists is fine."""
    from kafka_core import KafkaAdmin
    from kafka_core.client.metadata import NewTopic
    from kafka_core.protocol import ErrorCode

    with KafkaAdmin(bootstrap_servers=bootstrap) as admin:
        results = admin.create_topics(
            [NewTopic(name, partitions, replication_factor, dict(configs or {}))], timeout_ms=timeout * 1000
        )
    error = results[name].error
    if error is not None and getattr(error, "code", None) != ErrorCode.TOPIC_ALREADY_EXISTS:
        raise error


@dataclass(frozen=True)
class NodeExit:
    """A broker process that ended without being asked to: which node, how, and its last words."""

    node_id: int
    exit_code: int | None
    log_tail: str


class EmbeddedBroker(abc.ABC):
    """A broker this process started: each kind says how to start, stop, crash and clean up."""

    def exits(self) -> list[NodeExit]:
        """The nodes whose process ended by itself (not through stop or kill), for supervision."""
        return []

    def running_nodes(self) -> list[int]:
        """The ids of the nodes whose process is running."""
        return []

    @abc.abstractmethod
    def start(self) -> Self: ...

    @abc.abstractmethod
    def stop(self, timeout: float = 10.0) -> None: ...

    @abc.abstractmethod
    def kill(self) -> None: ...

    @abc.abstractmethod
    def close(self) -> None: ...

    def restart(self, pause: float = 0.0, *, crash: bool = False) -> None:
        """Stop (or crash, :meth:`kill`) and start again on the same ports."""
        if crash:
            self.kill()
        else:
            self.stop()
        if pause > 0:
            time.sleep(pause)
        self.start()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


class OneProcessBroker(EmbeddedBroker):
    """A broker that is one child process (Tansu, the SeaweedFS gateway): its state is the process."""

    _proc: subprocess.Popen[bytes] | None = None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None and self.running else None

    def kill(self) -> None:
        """Crash it (SIGKILL): no graceful shutdown, responses in flight are lost."""
        proc, self._proc = self._proc, None
        kill_process(proc, 10)

    def log_tail(self, limit: int = 4000) -> str:
        return ""

    def exits(self) -> list[NodeExit]:
        proc = self._proc
        if proc is None or proc.poll() is None:
            return []
        return [NodeExit(0, proc.returncode, self.log_tail(2000))]

    def running_nodes(self) -> list[int]:
        return [0] if self.running else []
