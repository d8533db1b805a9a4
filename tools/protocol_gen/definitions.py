"""The generator's input: Apache Kafka's own message definitions, from its ``kafka-clients`` jar.

Kafka ships its JSON definitions inside ``kafka-clients`` (``common/message/*.json``), which is on
Maven Central; the dev broker already fetches that jar with Maven (``kafka_classpath``). So the
package is generated from one Kafka release, the newest the suites run
(``kafka_core.devbroker.KAFKA_VERSION``), and the drift check needs nothing outside the
repository but Maven Central. One release, not a union of several: each API key is defined once,
and the client's protocol is exactly what that Kafka's Java client speaks (the APIs Kafka 4.0
removed, such as LeaderAndIsr, have no classes). Bumping ``KAFKA_VERSION`` therefore fails the
drift check until the package is regenerated and the client reviewed against the new versions.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

# Where the definitions are in the jar (Kafka's clients/src/main/resources/common/message/).
JAR_FOLDER = "common/message/"


def kafka_version() -> str:
    """The Kafka release the package is generated from: the newest the suites run."""
    from kafka_core.devbroker import KAFKA_VERSION

    return KAFKA_VERSION


def clients_jar(version: str | None = None) -> Path:
    """Kafka ``version``'s kafka-clients jar (default :func:`kafka_version`), fetched from Maven
    Central into the dev broker's cache when absent. Raises the broker's ``BrokerStartError``
    (no Maven or Java, no network) or ``FileNotFoundError``."""
    from kafka_core.devbroker import kafka_classpath

    version = version or kafka_version()
    jar = kafka_classpath(version) / f"kafka-clients-{version}.jar"
    if not jar.is_file():
        raise FileNotFoundError(f"{jar} is not among Apache Kafka {version}'s jars")
    return jar


def extract(jar: Path, dest: Path) -> Path:
    """``dest`` filled with the jar's ``common/message/*.json``; ``ValueError`` if it has none."""
    dest.mkdir(parents=True, exist_ok=True)
    taken = 0
    with zipfile.ZipFile(jar) as archive:
        for name in archive.namelist():
            base = name[len(JAR_FOLDER) :]
            if name.startswith(JAR_FOLDER) and "/" not in base and base.endswith(".json"):
                (dest / base).write_bytes(archive.read(name))
                taken += 1
    if not taken:
        raise ValueError(f"{jar.name} holds no {JAR_FOLDER}*.json definitions")
    return dest
