"""register(spark) and the Python its workers run: switched or explained (no Spark session)."""

from __future__ import annotations

import logging
import os
import stat
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from prerequisites import unavailable

from kafka_core.spark import register
from kafka_core.spark.workers import probe_python


class FakeSession:
    """What register() touches of a SparkSession: the context's worker Python and master, and
    the data source registry."""

    def __init__(self, python_exec: str, master: str = "local[2]") -> None:
        self.sparkContext = SimpleNamespace(pythonExec=python_exec, master=master)
        self.registered: list[Any] = []
        self.dataSource = SimpleNamespace(register=self.registered.append)


def _script(path: Path, body: str) -> str:
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


@pytest.fixture
def bare_python(tmp_path: Path) -> str:
    """A real interpreter of the driver's version that cannot import kafka_core: the base
    installation under the virtualenv, isolated from the working directory and PYTHONPATH."""
    base = Path(sys.base_prefix, "bin", f"python{sys.version_info[0]}.{sys.version_info[1]}")
    if not base.exists() or Path(sys.base_prefix) == Path(sys.prefix):
        unavailable(
            "a virtualenv over a base Python (as ci/bootstrap.sh makes)", f"sys.prefix is {sys.prefix}"
        )
    return _script(tmp_path / "python3", f'exec "{base}" -I "$@"')


@pytest.fixture
def no_pyspark_python(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)


def test_local_session_without_pyspark_python_is_switched_to_the_driver(
    bare_python: str, no_pyspark_python: None, caplog: pytest.LogCaptureFixture
) -> None:
    spark = FakeSession(bare_python)
    with caplog.at_level(logging.WARNING, "kafka_core.spark"):
        register(spark)
    assert spark.sparkContext.pythonExec == sys.executable
    assert len(spark.registered) == 1
    (record,) = [r for r in caplog.records if r.name == "kafka_core.spark"]
    message = record.getMessage()
    assert bare_python in message and sys.executable in message
    assert "cannot import kafka_core" in message and "PYSPARK_PYTHON" in message


def test_a_chosen_pyspark_python_is_kept_and_explained(
    bare_python: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("PYSPARK_PYTHON", bare_python)
    spark = FakeSession(bare_python)
    with caplog.at_level(logging.WARNING, "kafka_core.spark"):
        register(spark)
    assert spark.sparkContext.pythonExec == bare_python
    assert len(spark.registered) == 1
    (record,) = [r for r in caplog.records if r.name == "kafka_core.spark"]
    message = record.getMessage()
    assert bare_python in message and sys.executable in message
    assert "DATA_SOURCE_NOT_FOUND" in message and "No module named 'kafka_core'" in message
    assert f"PYSPARK_PYTHON={sys.executable}" in message


def test_a_cluster_session_is_explained_not_changed(
    bare_python: str, no_pyspark_python: None, caplog: pytest.LogCaptureFixture
) -> None:
    spark = FakeSession(bare_python, master="spark://10.0.0.1:7077")
    with caplog.at_level(logging.WARNING, "kafka_core.spark"):
        register(spark)
    assert spark.sparkContext.pythonExec == bare_python
    assert any("spark.pyspark.python" in r.getMessage() for r in caplog.records)


def test_a_worker_python_on_no_path_is_reported(
    no_pyspark_python: None, caplog: pytest.LogCaptureFixture
) -> None:
    spark = FakeSession("no-such-python-for-kafka-core", master="yarn")
    with caplog.at_level(logging.WARNING, "kafka_core.spark"):
        register(spark)
    assert any("is not found (on PATH" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("same", [True, False])
def test_a_worker_python_that_imports_kafka_core_is_left_alone(
    same: bool, tmp_path: Path, no_pyspark_python: None, caplog: pytest.LogCaptureFixture
) -> None:
    # the driver's own interpreter, or another path to it (an activated venv's python3)
    python = sys.executable if same else _script(tmp_path / "python3", f'exec "{sys.executable}" "$@"')
    spark = FakeSession(python)
    with caplog.at_level(logging.WARNING, "kafka_core.spark"):
        register(spark)
    assert spark.sparkContext.pythonExec == python
    assert not [r for r in caplog.records if r.name == "kafka_core.spark"]
    assert len(spark.registered) == 1


def test_probe_names_what_is_missing_and_the_version(bare_python: str, tmp_path: Path) -> None:
    answer = probe_python(bare_python)
    assert answer.path == os.path.abspath(bare_python)
    assert answer.version == f"{sys.version_info[0]}.{sys.version_info[1]}"
    assert "kafka_core" in answer.missing and not answer.usable
    other = _script(tmp_path / "py399", 'echo \'{"version": "3.99", "missing": []}\'')
    assert "is Python 3.99" in probe_python(other).problem()
