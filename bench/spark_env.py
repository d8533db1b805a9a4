"""Where the Spark bench's children run: one interpreter and one set of jars for every method.

Spark's own Kafka connector (``format("kafka")``) is a JVM jar built against Spark's internals, so
it runs only in the pyspark of its own version (``kafka_core.devtools.brokers.spark_connector``: a venv
pinned to it, the jars from Maven Central). When the connector is among the methods, every child
(ours, the jar-free peers and the ceilings too) runs in that venv with the connector's jars in
``spark.jars``: the same pyspark, JVM class path and data for all. Also here: the broker's CPU, for
Tansu (found by its listener URL) and for a JVM broker such as Apache Kafka (found by its port).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bench.common import REPO_DIR, RESULT_PREFIX, RunResult, parse_child_output, version_of
from bench.proc_tree import listener_cpu
from bench.spark_methods import CONNECTOR_METHODS


@dataclass
class SparkEnv:
    """The interpreter the children run and the jars each child's session puts in spark.jars;
    ``problem`` says why the connector is not available (its rows then carry it as an error)."""

    python: str = sys.executable
    jars: list[str] = field(default_factory=list)
    problem: str = ""
    pyspark: str = ""


def spark_env(clients: Sequence[str], log: object = print) -> SparkEnv:
    """The pinned venv and the connector's jars when a connector method is asked for, else this
    interpreter. confluent-kafka (the peers and the bench's topic helpers) is installed into the
    pinned venv at this interpreter's version if it lacks it."""
    if not any(c in CONNECTOR_METHODS for c in clients):
        return SparkEnv(pyspark=version_of("pyspark"))
    try:
        from kafka_core.devtools.brokers.spark_connector import (
            SPARK_CONNECTOR_VERSION,
            connector_jars,
            connector_python,
        )

        jars = [str(j) for j in connector_jars(SPARK_CONNECTOR_VERSION)]
        python = str(connector_python(SPARK_CONNECTOR_VERSION))
        _ensure_confluent(python, log)
    except Exception as exc:  # no Maven, no network, no PyPI: the other methods still run
        return SparkEnv(problem=f"Spark's connector unavailable: {type(exc).__name__}: {exc}"[:400])
    return SparkEnv(python=python, jars=jars, pyspark=SPARK_CONNECTOR_VERSION)


def _ensure_confluent(python: str, log: object) -> None:
    check = subprocess.run([python, "-c", "import confluent_kafka"], capture_output=True, check=False)
    if check.returncode == 0:
        return
    wanted = f"confluent-kafka=={version_of('confluent-kafka')}"
    if callable(log):
        log(f"  spark: installing {wanted} into {python} (the peers and the topic helpers use it)")
    subprocess.run(
        [python, "-m", "pip", "install", "-q", "--disable-pip-version-check", wanted],
        check=True,
        capture_output=True,
        timeout=600,
    )


def run_children_in(
    env: SparkEnv, module: str, clients: Sequence[str], args: Sequence[str], timeout: float
) -> list[RunResult]:
    """``python -m module --child a,b,... args...`` in a fresh process of ``env``'s interpreter: one
    result per client, in order (a client the child did not report is an error row)."""
    if env.problem and all(c in CONNECTOR_METHODS for c in clients):
        return [RunResult(c, status="error", detail=env.problem) for c in clients]
    cmd = [env.python, "-m", module, "--child", ",".join(clients), *args]
    if env.jars:
        cmd += ["--jars", ",".join(env.jars)]
    child_env = dict(os.environ)
    child_env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_DIR), child_env.get("PYTHONPATH", "")]))
    stdout, stderr, code = "", "", -9
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=timeout, cwd=REPO_DIR, env=child_env, check=False
        )
        stdout, stderr, code = proc.stdout, proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as exc:
        stdout = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else exc.stdout or ""
        stderr = f"timed out after {timeout:.0f} s"
    found = {}
    for line in stdout.splitlines():
        if line.startswith(RESULT_PREFIX):
            result = RunResult.from_json(line[len(RESULT_PREFIX) :])
            found[result.client] = result
    out = []
    for client in clients:
        result = found.get(client) or parse_child_output(client, "", stderr, code)
        if client in CONNECTOR_METHODS and env.problem:
            result = RunResult(client, status="error", detail=env.problem)
        out.append(result)
    return out


def tree_cpu(root: int) -> dict[int, float]:
    """CPU seconds (own and reaped children's) of ``root`` and each live descendant, by pid. The
    difference of two of these (:func:`cpu_between`) counts every process alive at the end, so a
    Python worker that exits in between cannot make it negative (its last share goes uncounted)."""
    tick = os.sysconf("SC_CLK_TCK")
    table: dict[int, tuple[int, float]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            raw = (entry / "stat").read_text()
            fields = raw[raw.rindex(")") + 2 :].split()
            table[int(entry.name)] = (int(fields[1]), sum(int(x) for x in fields[11:15]) / tick)
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    out, stack = {}, [root]
    while stack:
        pid = stack.pop()
        if pid in table:
            out[pid] = table[pid][1]
        stack.extend(children.get(pid, ()))
    return out


def cpu_between(before: dict[int, float], after: dict[int, float]) -> float:
    return sum(max(0.0, cpu - before.get(pid, 0.0)) for pid, cpu in after.items())


def broker_cpu(bootstrap: str | None) -> float | None:
    """CPU seconds so far of the local broker at ``bootstrap``: Tansu by its listener URL, else the
    process listening on the port (Apache Kafka's JVM); None when it is not on this machine."""
    found = listener_cpu(bootstrap)
    if found is not None or not bootstrap:
        return found
    pid = _listening_pid(int(bootstrap.split(",")[0].rsplit(":", 1)[1]))
    if pid is None:
        return None
    tick = os.sysconf("SC_CLK_TCK")
    with contextlib.suppress(OSError, ValueError, IndexError):
        raw = Path(f"/proc/{pid}/stat").read_text()
        fields = raw[raw.rindex(")") + 2 :].split()
        return sum(int(x) for x in fields[11:13]) / tick
    return None


def _listening_pid(port: int) -> int | None:
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                parts = line.split()
                if parts[3] == "0A" and int(parts[1].rsplit(":", 1)[1], 16) == port:  # LISTEN
                    inodes.add(f"socket:[{parts[9]}]")
    if not inodes:
        return None
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            for fd in (entry / "fd").iterdir():
                with contextlib.suppress(OSError):
                    if os.readlink(fd) in inodes:
                        return int(entry.name)
    return None
