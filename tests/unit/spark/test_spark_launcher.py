"""The launcher register() gives the data source's Python workers: it runs ``-m pyspark.<module>``
as ``python -m`` would (with the zip bytecode cache), hands anything else to the interpreter,
and is swapped in for the data source only, the session's other functions keeping theirs."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kafka_core.spark.launcher import CONSOLE_SCRIPT, launcher_for, worker_launcher

pytest.importorskip("pyspark")

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}


def test_a_local_launcher_is_written_once_for_the_interpreter(cache_home: Path) -> None:
    first = launcher_for(sys.executable, local=True)
    assert first is not None and first.startswith(str(cache_home)) and first.endswith(CONSOLE_SCRIPT)
    stamp = os.stat(first).st_mtime_ns
    assert launcher_for(sys.executable, local=True) == first
    assert os.stat(first).st_mtime_ns == stamp
    assert os.access(first, os.X_OK)
    assert sys.executable in Path(first).read_text()


def test_the_launcher_runs_a_pyspark_module_as_python_m_does(cache_home: Path, tmp_path: Path) -> None:
    launcher = launcher_for(sys.executable, local=True)
    assert launcher is not None
    # pyspark.find_spark_home's __main__ prints SPARK_HOME; argv and the path are as under -m
    expected = subprocess.run(
        [sys.executable, "-m", "pyspark.find_spark_home"],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    done = subprocess.run(
        [launcher, "-m", "pyspark.find_spark_home"],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == expected.stdout and done.stdout.strip()
    other = subprocess.run(
        [launcher, "-c", "import sys; print(sys.argv[1:])", "a", "b"],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert other.returncode == 0, other.stderr
    assert other.stdout.strip() == "['a', 'b']"  # anything else goes to the interpreter unchanged


def test_a_failing_module_fails_the_launcher_as_it_fails_python(cache_home: Path) -> None:
    launcher = launcher_for(sys.executable, local=True)
    assert launcher is not None
    done = subprocess.run(
        [launcher, "-m", "pyspark.no_such_module"], env=_env(), capture_output=True, text=True, timeout=60
    )
    assert done.returncode != 0
    assert "pyspark.no_such_module" in done.stderr


def test_no_launcher_elsewhere_without_the_console_script(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    python = bin_dir / "python"
    python.symlink_to(sys.executable)
    assert launcher_for(str(python), local=False) is None
    script = bin_dir / CONSOLE_SCRIPT
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    assert launcher_for(str(python), local=False) == str(script)
    assert launcher_for(str(tmp_path / "missing-python"), local=True) is None


class _Context:
    def __init__(self, master: str, python: str) -> None:
        self.master = master
        self.pythonExec = python


class _Session:
    def __init__(self, master: str, python: str = sys.executable) -> None:
        self.sparkContext = _Context(master, python)


def test_the_launcher_is_the_data_sources_only(cache_home: Path) -> None:
    spark = _Session("local[2]")
    with worker_launcher(spark, None) as used:
        assert used is not None and spark.sparkContext.pythonExec == used
    assert spark.sparkContext.pythonExec == sys.executable
    with pytest.raises(RuntimeError), worker_launcher(spark, None):
        raise RuntimeError("registration failed")
    assert spark.sparkContext.pythonExec == sys.executable


@pytest.mark.parametrize(("master", "fast_start"), [("local[2]", False), ("spark://host:7077", None)])
def test_off_when_asked_or_on_a_cluster_by_default(
    cache_home: Path, master: str, fast_start: bool | None
) -> None:
    spark = _Session(master)
    with worker_launcher(spark, fast_start) as used:
        assert used is None and spark.sparkContext.pythonExec == sys.executable


def test_fast_start_on_a_cluster_without_the_script_says_so(
    cache_home: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    python = tmp_path / "python"
    python.symlink_to(sys.executable)
    spark = _Session("spark://host:7077", str(python))
    with caplog.at_level(logging.WARNING, logger="kafka_core.spark"), worker_launcher(spark, True) as used:
        assert used is None and spark.sparkContext.pythonExec == str(python)
    assert CONSOLE_SCRIPT in caplog.text and str(python) in caplog.text


def test_spark_connect_sessions_are_left_alone() -> None:
    class _Remote:
        @property
        def sparkContext(self) -> Any:
            raise RuntimeError("no SparkContext over Connect")

    with worker_launcher(_Remote(), True) as used:
        assert used is None


def test_an_unwritable_cache_means_no_launcher(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    assert launcher_for(sys.executable, local=True) is None


def test_a_worker_imports_none_of_the_drivers_helpers() -> None:
    """Every Python process Spark starts for the data source imports this module first."""
    probe = (
        "import sys; from kafka_core.spark.launcher import main; "
        "print(sorted(m for m in ('hashlib', 'shlex', 'shutil', 'tempfile') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "[]"


def test_a_task_module_that_does_not_import_leaves_the_daemon_running(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from kafka_core.spark import launcher

    monkeypatch.setattr(launcher, "TASK_MODULES", ("json", "kafka_core_no_such_module", "csv"))
    launcher.preload()  # the task imports it again and fails there, with the real cause
    assert "not preloaded: kafka_core_no_such_module (ModuleNotFoundError" in capsys.readouterr().err
