"""One Apache Kafka node that takes KIP-714 client metrics pushes, for the tests and benchmarks.

Kafka answers PushTelemetry only when a metrics reporter receives client telemetry: the
receiver, ``TelemetryFileReporter.java`` beside this module (package data), is compiled with
``javac`` against the broker's own jars, once per Kafka version and source, into the user cache,
and loaded with ``metric.reporters``. It appends each push it takes to a file, one line each
(:meth:`TelemetryKafka.pushes` reads them back); KIP-714's subscriptions (``CLIENT_METRICS``
config resources) are set through the admin API (:meth:`TelemetryKafka.subscribe`). Needs a JDK
17+ (``javac``) beside what :class:`KafkaCluster` needs.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import shutil
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Self

from kafka_core import KafkaAdmin
from kafka_core.admin import ConfigResource, ConfigResourceType
from kafka_core.devtools.brokers.common import QUICK_JVM_OPTIONS, BrokerStartError
from kafka_core.devtools.brokers.kafka import KafkaCluster
from kafka_core.devtools.brokers.kafka_jars import KAFKA_VERSION, cache_root, kafka_classpath

__all__ = ["REPORTER_CLASS", "PushLine", "TelemetryKafka", "reporter_classes"]

REPORTER_CLASS = "TelemetryFileReporter"
_FILE_CONFIG = "kafka_core.telemetry.file"  # the broker config naming the reporter's file


@dataclass(frozen=True)
class PushLine:
    """One push as the broker's reporter wrote it; ``data`` is the OTLP ``MetricsData`` the
    broker handed its exporter (decompressed)."""

    instance_id: str  # as Kafka's Uuid.toString() writes it
    terminating: bool
    content_type: str
    client_id: str
    interval_ms: int
    data: bytes

    @classmethod
    def parse(cls, line: str) -> PushLine:
        instance, terminating, content_type, client_id, interval, data = line.split(" ")
        return cls(
            instance, terminating == "true", content_type, client_id, int(interval), base64.b64decode(data)
        )


def reporter_classes(version: str = KAFKA_VERSION, *, timeout: float = 300.0) -> Path:
    """The folder of the receiver's classes, compiled against Kafka ``version``'s jars (cached by
    version and source). Raises :class:`BrokerStartError` naming what is missing (``javac``,
    the jars), RuntimeError with javac's complaint when the source does not compile."""
    javac = shutil.which("javac")
    if javac is None:
        raise BrokerStartError(
            "javac (a JDK 17+, e.g. apt install openjdk-17-jdk-headless) compiles the broker's KIP-714 receiver"
        )
    source = resources.files(__package__).joinpath(f"{REPORTER_CLASS}.java").read_bytes()
    target = cache_root() / "telemetry-reporter" / f"{version}-{hashlib.sha256(source).hexdigest()[:16]}"
    if (target / f"{REPORTER_CLASS}.class").is_file():
        return target
    jars = kafka_classpath(version)
    target.parent.mkdir(parents=True, exist_ok=True)
    # Compiled in a staging folder and renamed: concurrent callers each compile, the first rename wins.
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".staging-") as staging:
        java = Path(staging) / f"{REPORTER_CLASS}.java"
        java.write_bytes(source)
        classes = Path(staging) / "classes"
        classes.mkdir()
        proc = subprocess.run(
            # a compiler run of seconds: QUICK_JVM_OPTIONS, given to javac's own JVM
            [
                javac,
                *(f"-J{option}" for option in QUICK_JVM_OPTIONS),
                "-cp",
                f"{jars}/*",
                "-d",
                str(classes),
                str(java),
            ],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if proc.returncode:
            raise RuntimeError(f"javac failed on {REPORTER_CLASS}.java: {proc.stderr.strip()[-2000:]}")
        with contextlib.suppress(OSError):  # another caller's rename won: the same classes
            classes.rename(target)
    return target


class TelemetryKafka:
    """A one-node :class:`KafkaCluster` whose receiver writes every push it takes to
    ``pushes_file``. :meth:`start` compiles the receiver (first use only) and starts the node;
    :meth:`close` stops it and removes its files."""

    def __init__(self, *, version: str = KAFKA_VERSION, overrides: Mapping[str, str] | None = None) -> None:
        self.version = version
        self._dir = Path(tempfile.mkdtemp(prefix="kafka-telemetry-"))
        self.pushes_file = self._dir / "pushes.txt"
        self._overrides = {"metric.reporters": REPORTER_CLASS, _FILE_CONFIG: str(self.pushes_file)}
        self._overrides.update(overrides or {})
        self.cluster: KafkaCluster | None = None

    @property
    def bootstrap(self) -> str:
        if self.cluster is None:
            raise RuntimeError("the telemetry broker is not started")
        return self.cluster.bootstrap

    def start(self) -> Self:
        """Compile the receiver and start the node. Raises :class:`BrokerStartError` when a
        prerequisite is missing or the node does not come up."""
        classes = reporter_classes(self.version)
        self.cluster = KafkaCluster(
            1, version=self.version, overrides=dict(self._overrides), extra_classpath=(classes,)
        )
        try:
            self.cluster.start()
        except BaseException:
            self.cluster.close()
            self.cluster = None
            raise
        return self

    def close(self) -> None:
        if self.cluster is not None:
            self.cluster.close()
            self.cluster = None
        shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def subscribe(self, subscriptions: Mapping[str, tuple[str, str]], interval_ms: int) -> None:
        """Set KIP-714 subscriptions, name -> (metrics, match): ``metrics`` a comma-separated list
        of name prefixes (``*`` for all), ``match`` a client selector (``client_id=REGEX``...);
        every one pushed each ``interval_ms``. Raises what the broker refused."""
        changes = {
            ConfigResource(ConfigResourceType.CLIENT_METRICS, name): {
                "metrics": metrics,
                "interval.ms": str(interval_ms),
                "match": match,
            }
            for name, (metrics, match) in subscriptions.items()
        }
        with KafkaAdmin(self.bootstrap) as admin:
            for result in admin.incremental_alter_configs(changes).values():
                result.result()

    def pushes(self, client_id: str | None = None) -> list[PushLine]:
        """The pushes taken so far, in order; only ``client_id``'s when given."""
        if not self.pushes_file.exists():
            return []
        text = self.pushes_file.read_text()
        text = text[: text.rfind("\n") + 1]  # not a line the broker is still writing
        lines = (PushLine.parse(line) for line in text.splitlines() if line)
        return [p for p in lines if client_id is None or p.client_id == client_id]

    def wait_pushes(self, client_id: str, count: int, timeout: float = 60.0) -> list[PushLine]:
        """``client_id``'s pushes once there are ``count`` at least; AssertionError after ``timeout`` s."""
        deadline = time.monotonic() + timeout
        while True:
            got = self.pushes(client_id)
            if len(got) >= count:
                return got
            if time.monotonic() >= deadline:
                raise AssertionError(
                    f"{count} pushes from {client_id} not received in {timeout}s: {len(got)}"
                )
            time.sleep(0.1)
