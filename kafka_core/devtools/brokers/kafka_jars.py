"""Apache Kafka's server classpath, fetched from Maven Central with Maven into a cache outside the
repository (jars are never committed). The first call downloads (tens of MB); later ones read
the cache. Maven keeps its own copy in ``~/.m2`` as well, so a cleared cache is refilled offline.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from importlib import resources
from pathlib import Path

from kafka_core.devtools.brokers.common import BrokerStartError

__all__ = [
    "KAFKA_VERSION",
    "OLDEST_KAFKA_VERSION",
    "cache_root",
    "kafka_classpath",
    "maven_copy_dependencies",
]

# The newest 4.x that runs here, and the oldest line we support (3.9: the last with ZooKeeper mode
# beside KRaft; we only run KRaft).
KAFKA_VERSION = "4.4.0"
OLDEST_KAFKA_VERSION = "3.9.2"
_DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies"
_DONE = ".complete"


def cache_root() -> Path:
    """``$KAFKA_CORE_CACHE`` or ``$XDG_CACHE_HOME/kafka_core`` (``~/.cache/kafka_core``)."""
    explicit = os.environ.get("KAFKA_CORE_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kafka_core"


def kafka_classpath(version: str = KAFKA_VERSION, *, timeout: float = 900.0) -> Path:
    """The folder holding Kafka ``version``'s server jars and their runtime dependencies.

    Raises :class:`BrokerStartError` naming what to install when Maven or Java is missing, and
    Maven's own complaint when resolution fails (no network, a version Maven Central lacks).
    """
    return maven_copy_dependencies(
        "kafka-server.pom.xml",
        cache_root() / "kafka" / version / "libs",
        properties={"kafka.version": version},
        expect="kafka_2.13-*.jar",
        what=f"Apache Kafka {version} (org.apache.kafka:kafka_2.13)",
        timeout=timeout,
    )


def maven_copy_dependencies(
    pom_name: str,
    target: Path,
    *,
    properties: dict[str, str],
    expect: str,
    what: str,
    timeout: float = 900.0,
) -> Path:
    """``target``, filled once with the runtime jars of our package-data pom ``pom_name`` (Maven's
    copy-dependencies, ``properties`` as ``-D``); a jar matching ``expect`` must be among them.

    Shared by every jar set the project fetches (the broker's, Spark's connector). Concurrent
    callers are safe: each resolves into its own staging folder and the first rename wins.
    Raises :class:`BrokerStartError` naming what to install, or Maven's own complaint.
    """
    if (target / _DONE).is_file():
        return target
    for tool, hint in (
        ("java", "a Java 17+ runtime (e.g. apt install openjdk-17-jre-headless)"),
        ("mvn", "Apache Maven (e.g. apt install maven)"),
    ):
        if shutil.which(tool) is None:
            raise BrokerStartError(f"{what} from Maven Central needs `{tool}` on PATH: install {hint}")
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="libs-", dir=target.parent))
    pom = staging / "pom.xml"
    pom.write_text(resources.files("kafka_core.devtools.brokers").joinpath(pom_name).read_text())
    command = [
        "mvn",
        "-B",
        "-q",
        "-f",
        str(pom),
        *(f"-D{key}={value}" for key, value in properties.items()),
        _DEPENDENCY_PLUGIN,
        "-DincludeScope=runtime",
        f"-DoutputDirectory={staging / 'jars'}",
    ]
    try:
        result = subprocess.run(command, capture_output=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise BrokerStartError(f"Maven did not resolve {what} within {timeout:.0f} s") from exc
    if result.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        output = (result.stdout + result.stderr).decode(errors="replace")
        errors = [line for line in output.splitlines() if "ERROR" in line][:6]
        raise BrokerStartError(
            f"Maven could not resolve {what} from Maven Central; is the network up? "
            f"{' | '.join(errors) or output[-1500:]}"
        )
    jars = staging / "jars"
    if not any(jars.glob(expect)):
        shutil.rmtree(staging, ignore_errors=True)
        raise BrokerStartError(f"Maven resolved {what} but left no {expect} in {jars}")
    (jars / _DONE).write_text(" ".join(f"{k}={v}" for k, v in properties.items()))
    if target.exists():  # another process finished first
        shutil.rmtree(staging, ignore_errors=True)
        return target
    try:
        jars.rename(target)
    except OSError:
        if not (target / _DONE).is_file():
            raise
    shutil.rmtree(staging, ignore_errors=True)
    return target
