"""A Spark Connect server on loopback, from the pip-installed pyspark's ``sbin/start-connect-server.sh``
(kept in the foreground with SPARK_NO_DAEMONIZE, in its own process group), for tests.

Its Python workers (where the data source runs) use this interpreter and import kafka_core from
this checkout. Start waits, with a deadline, until a remote session answers a query; any failure
raises :class:`SparkClusterError` with the tail of the server's log. Stop kills the process group.

    with SparkConnectServer() as server:
        spark = SparkSession.builder.remote(server.url).getOrCreate()
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from quick_jvm import write_spark_defaults
from spark_cluster import HOST, SparkClusterError, log_tail, spark_home, warm_spark_workers

from kafka_core.devtools.brokers import free_port

__all__ = ["SparkConnectServer", "remote_session"]

ROOT = Path(__file__).resolve().parents[1]
# What pyspark sets in os.environ once a remote session is made: left set, every later
# SparkSession.builder.getOrCreate() of the process (other test modules' local sessions) would
# ask for a Connect URL.
_CONNECT_ENV = ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE", "SPARK_LOCAL_REMOTE")


@contextlib.contextmanager
def remote_session(url: str) -> Iterator[Any]:
    """A new Spark Connect session to ``url``; stopped, and pyspark's Connect mode left, on exit."""
    from pyspark.sql import SparkSession

    saved = {name: os.environ.get(name) for name in _CONNECT_ENV}
    try:
        session = SparkSession.builder.remote(url).create()
        try:
            yield session
        finally:
            session.stop()
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


class SparkConnectServer:
    def __init__(self, master: str = "local[2]", start_timeout: float = 180.0) -> None:
        self.master = master
        self.start_timeout = start_timeout
        self.port = free_port(HOST)
        self.dir = Path(tempfile.mkdtemp(prefix="kc-connect-"))
        self.log = self.dir / "server.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"sc://{HOST}:{self.port}"

    def start(self) -> SparkConnectServer:
        warm_spark_workers()  # the server's Python workers run here, with this user's cache
        home = spark_home()
        conf_dir = self.dir / "conf"
        write_spark_defaults(conf_dir)  # the suite's JVM options only (tests/quick_jvm.py)
        env = {
            **os.environ,
            "SPARK_HOME": str(home),
            "SPARK_CONF_DIR": str(conf_dir),
            "SPARK_LOG_DIR": str(self.dir),
            "SPARK_PID_DIR": str(self.dir),
            "SPARK_NO_DAEMONIZE": "1",
            "SPARK_LOCAL_IP": HOST,
            "PYSPARK_PYTHON": sys.executable,
            "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p),
        }
        command = [
            str(home / "sbin" / "start-connect-server.sh"),
            "--master",
            self.master,
            "--conf",
            f"spark.connect.grpc.binding.address={HOST}",
            "--conf",
            f"spark.connect.grpc.binding.port={self.port}",
            "--conf",
            "spark.ui.enabled=false",
            "--conf",
            "spark.sql.shuffle.partitions=2",
            "--conf",
            f"spark.local.dir={self.dir}",
        ]
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                command, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.start_timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise SparkClusterError(
                    f"the Spark Connect server exited ({self.proc.returncode}):\n{log_tail(self.log)}"
                )
            try:
                with remote_session(self.url) as session:
                    session.range(1).collect()
                return
            except Exception as exc:  # not listening yet
                last = exc
                time.sleep(1.0)
        raise SparkClusterError(
            f"no Spark Connect server at {self.url} within {self.start_timeout:.0f} s ({last}):\n{log_tail(self.log)}"
        )

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(20)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> SparkConnectServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
