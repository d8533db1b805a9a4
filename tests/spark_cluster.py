"""A Spark standalone cluster on loopback, started from the pip-installed pyspark, for tests.

One master and one worker, each its own ``bin/spark-class`` process in its own process group,
with every file (logs, the worker's work dir, local dirs, an empty conf dir) under one temporary
directory. Start waits, with a deadline, until the master's web UI reports the worker alive with
all of its cores; any failure raises :class:`SparkClusterError` carrying the tails of the logs.
Stop kills both process groups (the worker's holds its executors and their Python workers).

    with SparkStandaloneCluster() as cluster:
        spark = SparkSession.builder.master(cluster.master_url).getOrCreate()

``python tests/spark_cluster.py`` starts one and waits for Ctrl-C (for poking at it by hand).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from quick_jvm import write_spark_defaults

from kafka_core.devtools.brokers import free_ports

__all__ = [
    "SparkClusterError",
    "SparkStandaloneCluster",
    "local_session",
    "log_tail",
    "spark_home",
    "warm_spark_workers",
]

HOST = "127.0.0.1"


@functools.cache
def warm_spark_workers() -> None:
    """PySpark's zip compiled into the data source workers' bytecode cache, once per process, as
    a pip install compiles an installed package. CI sets PYTHONDONTWRITEBYTECODE, so the workers
    never fill it themselves, and each compiled PySpark afresh at every start: under load that
    took Spark's streaming source runner past the fixed 10 s Spark gives it to connect back
    ("Python worker failed to connect back", twice in CI at a load of 16 on 2 cores)."""
    from kafka_core.spark.zip_bytecode import compile_archives

    compile_archives()


@contextlib.contextmanager
def local_session(master: str, app_name: str) -> Any:
    """A local Spark session for a test module (quiet: no UI, no progress bar, errors only),
    its Python workers on this interpreter; stopped on exit."""
    from pyspark.sql import SparkSession

    warm_spark_workers()

    os.environ["PYSPARK_PYTHON"] = sys.executable
    session = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    except BaseException:
        _discard_jvm(session)
        raise
    session.stop()


def _discard_jvm(session: Any) -> None:
    """After a failure, the next session gets a new JVM: a py4j call interrupted half-way (pytest's
    timeout did that once) leaves the gateway's stream out of step, and every later session of
    the same pytest worker then failed on garbled answers (KeyError: 'c' in py4j's decoder)."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    with contextlib.suppress(BaseException):
        session.stop()
    if gateway is None:
        return
    with contextlib.suppress(BaseException):
        gateway.shutdown()
    proc = getattr(gateway, "proc", None)
    if proc is not None:
        with contextlib.suppress(BaseException):
            proc.kill()
            proc.wait(30)
    SparkContext._gateway = None
    SparkContext._jvm = None


class SparkClusterError(RuntimeError):
    """The cluster could not be started (the message carries the log tails)."""


def spark_home() -> Path:
    """The pyspark package directory: a pip-installed pyspark is a complete SPARK_HOME."""
    import pyspark

    home = Path(pyspark.__file__).resolve().parent
    if not (home / "bin" / "spark-class").is_file() or not (home / "jars").is_dir():
        raise SparkClusterError(f"{home} is not a usable SPARK_HOME (no bin/spark-class or jars/)")
    return home


def log_tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        return f"    (no log at {path}: {exc})"
    tail = text.splitlines()[-lines:]
    return "\n".join("    " + line for line in tail) or "    (empty)"


def _die_with_parent_session() -> None:
    """In the child: a new session (so a process group to kill), and SIGTERM if the parent dies."""
    os.setsid()
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG (Linux)
    except (OSError, AttributeError):
        pass


class SparkStandaloneCluster:
    """A master and one worker on 127.0.0.1; see the module docstring."""

    def __init__(
        self,
        *,
        cores: int = 2,
        memory: str = "2g",
        python: str = sys.executable,
        daemon_memory: str = "512m",
        # Two JVMs starting on a loaded machine: in the CI run of 2026-12-03 09:17 the worker, spawned
        # 55 s after the master (whose web UI took that long), had not registered 35 s later.
        start_timeout: float = 180.0,
        keep_dir: bool = False,
    ) -> None:
        self.cores = cores
        self.memory = memory
        self.python = python
        self.daemon_memory = daemon_memory
        self.start_timeout = start_timeout
        self.keep_dir = keep_dir
        self.home = spark_home()
        self.master_port, self.master_webui_port, self.worker_port, self.worker_webui_port = free_ports(
            4, HOST
        )
        self.dir = Path(tempfile.mkdtemp(prefix="kafka-core-spark-cluster-"))
        self.work_dir = self.dir / "work"
        self.master_log = self.dir / "master.log"
        self.worker_log = self.dir / "worker.log"
        self._procs: dict[str, subprocess.Popen[bytes]] = {}

    # -- addresses ---------------------------------------------------------------------------------

    @property
    def master_url(self) -> str:
        return f"spark://{HOST}:{self.master_port}"

    @property
    def webui_url(self) -> str:
        return f"http://{HOST}:{self.master_webui_port}"

    @property
    def env(self) -> dict[str, str]:
        """The environment the daemons run with (executors inherit it from the worker)."""
        env = dict(os.environ)
        for name in ("SPARK_MASTER_HOST", "SPARK_MASTER_PORT", "SPARK_WORKER_DIR", "PYSPARK_DRIVER_PYTHON"):
            env.pop(name, None)
        conf_dir = self.dir / "conf"
        write_spark_defaults(conf_dir)  # the suite's JVM options only (tests/quick_jvm.py)
        env.update(
            SPARK_HOME=str(self.home),
            SPARK_CONF_DIR=str(conf_dir),  # no spark-env.sh or spark-defaults.conf from elsewhere
            SPARK_LOCAL_IP=HOST,
            SPARK_PUBLIC_DNS=HOST,
            SPARK_LOCAL_DIRS=str(self.dir / "local"),
            SPARK_DAEMON_MEMORY=self.daemon_memory,
            # No REST submission server: it would listen on the fixed port 6066.
            SPARK_MASTER_OPTS="-Dspark.master.rest.enabled=false",
            PYSPARK_PYTHON=self.python,
        )
        return env

    # -- life cycle --------------------------------------------------------------------------------

    def start(self) -> SparkStandaloneCluster:
        warm_spark_workers()  # the executors' workers run here, with this user's cache
        atexit.register(self.stop)
        try:
            self._start()
        except BaseException:
            self.stop(keep_dir=True)
            raise
        return self

    def _start(self) -> None:
        deadline = time.monotonic() + self.start_timeout
        spark_class = str(self.home / "bin" / "spark-class")
        self._spawn(
            "master",
            [
                spark_class,
                "org.apache.spark.deploy.master.Master",
                "--host",
                HOST,
                "--port",
                str(self.master_port),
                "--webui-port",
                str(self.master_webui_port),
            ],
            self.master_log,
        )
        self._wait(deadline, "the master's web UI to answer", lambda: self.state() is not None)
        self.work_dir.mkdir()
        self._spawn(
            "worker",
            [
                spark_class,
                "org.apache.spark.deploy.worker.Worker",
                self.master_url,
                "--host",
                HOST,
                "--port",
                str(self.worker_port),
                "--webui-port",
                str(self.worker_webui_port),
                "--cores",
                str(self.cores),
                "--memory",
                self.memory,
                "--work-dir",
                str(self.work_dir),
            ],
            self.worker_log,
        )
        self._wait(deadline, "the worker to register with the master", self._worker_ready)

    def _spawn(self, name: str, argv: list[str], log: Path) -> None:
        with log.open("wb") as out:
            self._procs[name] = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=self.env,
                cwd=self.dir,
                preexec_fn=_die_with_parent_session,
            )

    def _wait(self, deadline: float, what: str, ready: Any) -> None:
        while True:
            for name, proc in self._procs.items():
                if proc.poll() is not None:
                    raise SparkClusterError(
                        f"Spark {name} exited with code {proc.returncode} while waiting for {what}\n"
                        + self.logs()
                    )
            if ready():
                return
            if time.monotonic() > deadline:
                raise SparkClusterError(
                    f"timed out after {self.start_timeout:.0f} s waiting for {what}\n" + self.logs()
                )
            time.sleep(0.25)

    def _worker_ready(self) -> bool:
        state = self.state()
        if not state or state.get("aliveworkers", 0) < 1:
            return False
        return any(
            w.get("state") == "ALIVE" and w.get("cores", 0) >= self.cores for w in state.get("workers", [])
        )

    def state(self) -> dict[str, Any] | None:
        """The master's ``/json/`` document, or None when the web UI does not answer."""
        try:
            with urllib.request.urlopen(f"{self.webui_url}/json/", timeout=2) as resp:
                return json.loads(resp.read())  # type: ignore[no-any-return]
        except (OSError, ValueError, urllib.error.URLError):
            return None

    def executor_logs(self) -> list[Path]:
        """Every executor's stdout and stderr file under the worker's work dir."""
        if not self.work_dir.is_dir():
            return []
        return sorted(p for p in self.work_dir.glob("app-*/*/std*") if p.is_file())

    def logs(self, lines: int = 40) -> str:
        """The tails of the master, worker and executor logs, for error messages."""
        parts = [f"  cluster dir: {self.dir}"]
        for path in [self.master_log, self.worker_log, *self.executor_logs()]:
            parts.append(f"  --- {path.relative_to(self.dir)} (last {lines} lines) ---")
            parts.append(log_tail(path, lines))
        return "\n".join(parts)

    def stop(self, keep_dir: bool | None = None) -> None:
        # The worker first: its process group also holds the executors and their Python workers.
        for name in ("worker", "master"):
            proc = self._procs.pop(name, None)
            if proc is None:
                continue
            for sig, wait in ((signal.SIGTERM, 15.0), (signal.SIGKILL, 5.0)):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, sig)
                try:
                    proc.wait(wait)
                    break
                except subprocess.TimeoutExpired:
                    continue
            # Anything left in the group (an executor that outlived its worker) goes too.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        keep = self.keep_dir if keep_dir is None else keep_dir
        if not keep:
            shutil.rmtree(self.dir, ignore_errors=True)
        atexit.unregister(self.stop)

    def __enter__(self) -> SparkStandaloneCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


if __name__ == "__main__":
    started = time.monotonic()
    with SparkStandaloneCluster(keep_dir=True) as cluster:
        print(f"{cluster.master_url} up in {time.monotonic() - started:.1f} s; web UI {cluster.webui_url}")
        print(f"logs in {cluster.dir}; Ctrl-C stops it")
        with contextlib.suppress(KeyboardInterrupt):
            signal.pause()
