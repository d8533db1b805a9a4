"""Definitions newer than the shared folder's, taken from the kafka-clients jar of the Kafka we test.

The shared folder (``../shared/kafka-protocol/messages``) holds Kafka 4.0's share-group messages,
whose v0 Kafka 4.1 removed: Kafka 4.4 answers only ShareGroupHeartbeat v1 and ShareFetch v1-2, so
a client generated from the folder alone cannot join a share group. The share-group files
(``*Share*.json``) are therefore read from the ``kafka-clients`` jar of the newest Kafka the suites
run (``kafka_core.devbroker.KAFKA_VERSION``, fetched from Maven Central like the broker), and every
other file from the folder. The drift check does the same, so the committed package is exactly
what these two sources generate.
"""

from __future__ import annotations

import fnmatch
import shutil
import zipfile
from pathlib import Path

# The files whose newer definitions win, and where in the jar they are.
NEWER_GLOB = "*Share*.json"
JAR_FOLDER = "common/message/"


def newer_jar() -> Path:
    """The kafka-clients jar of the newest Kafka the suites run (fetched into the cache if absent)."""
    from kafka_core.devbroker import KAFKA_VERSION, kafka_classpath

    jar = kafka_classpath(KAFKA_VERSION) / f"kafka-clients-{KAFKA_VERSION}.jar"
    if not jar.is_file():
        raise FileNotFoundError(f"{jar} is not among Apache Kafka {KAFKA_VERSION}'s jars")
    return jar


def merge(messages_dir: Path, jar: Path, dest: Path) -> Path:
    """``dest`` filled with the folder's definitions, the jar's share-group files replacing theirs."""
    dest.mkdir(parents=True, exist_ok=True)
    for path in messages_dir.iterdir():
        if path.is_file():
            shutil.copyfile(path, dest / path.name)
    taken = 0
    with zipfile.ZipFile(jar) as archive:
        for name in archive.namelist():
            base = name[len(JAR_FOLDER) :]
            if name.startswith(JAR_FOLDER) and "/" not in base and fnmatch.fnmatch(base, NEWER_GLOB):
                (dest / base).write_bytes(archive.read(name))
                taken += 1
    if not taken:
        raise ValueError(f"{jar.name} holds no {JAR_FOLDER}{NEWER_GLOB} definitions")
    return dest
