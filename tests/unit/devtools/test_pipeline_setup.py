"""The main job's checks before Spark starts (a master Spark could not use is refused with its
cause) and the one line it makes of a Spark JVM that did not start (issue 39: ``--master yarn``
without ``HADOOP_CONF_DIR`` printed Java's stack trace and PySpark's JAVA_GATEWAY_EXITED, exit 1)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from kafka_core.devtools.pipeline.job import SetupError, check_master, jvm_cause

YARN_TRACE = """\
Exception in thread "main" org.apache.spark.SparkException: When running with master 'yarn' either HADOOP_CONF_DIR or YARN_CONF_DIR must be set in the environment.
\tat org.apache.spark.deploy.SparkSubmitArguments.error(SparkSubmitArguments.scala:650)
\tat org.apache.spark.deploy.SparkSubmitArguments.validateSubmitArguments(SparkSubmitArguments.scala:281)
\tat org.apache.spark.deploy.SparkSubmit.main(SparkSubmit.scala)
""".splitlines()


def test_yarn_without_its_configuration_is_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("HADOOP_CONF_DIR", raising=False)
    monkeypatch.delenv("YARN_CONF_DIR", raising=False)
    with pytest.raises(SetupError, match="HADOOP_CONF_DIR or YARN_CONF_DIR"):
        check_master("yarn")
    monkeypatch.setenv("HADOOP_CONF_DIR", str(tmp_path / "missing"))
    with pytest.raises(SetupError, match="HADOOP_CONF_DIR or YARN_CONF_DIR"):
        check_master("yarn")
    monkeypatch.setenv("YARN_CONF_DIR", str(tmp_path))
    check_master("yarn")


def test_kubernetes_api_server_must_answer() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, not listening: refuses connections
        with pytest.raises(SetupError, match=r"Kubernetes API server .* is not reachable"):
            check_master(f"k8s://https://127.0.0.1:{port}")
        with pytest.raises(SetupError, match=r"Kubernetes API server .* is not reachable"):
            check_master(f"k8s://127.0.0.1:{port}")
    with pytest.raises(SetupError, match="bad --master"):
        check_master("k8s://https://:99999")


def test_a_listening_kubernetes_api_server_passes() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        check_master(f"k8s://https://127.0.0.1:{sock.getsockname()[1]}")


def test_a_jvm_exception_is_its_message_without_the_stack() -> None:
    assert jvm_cause(["WARNING: Using incubator modules: jdk.incubator.vector", *YARN_TRACE]) == (
        "When running with master 'yarn' either HADOOP_CONF_DIR or YARN_CONF_DIR must be set "
        "in the environment. (SparkException)"
    )


def test_a_jvm_refusal_without_an_exception_is_its_first_lines() -> None:
    lines = [
        "Invalid maximum heap size: -Xmx1bogus",
        "Error: Could not create the Java Virtual Machine.",
        "Error: A fatal exception has occurred. Program will exit.",
        "something else",
    ]
    assert jvm_cause(lines) == " / ".join(lines[:3])
    assert jvm_cause([]) == "its JVM exited without a word on stderr"
