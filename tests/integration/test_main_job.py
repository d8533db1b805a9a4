"""The README's promises, run for real: the main job (the Spark pipeline, kafka_core.devtools.pipeline),
the small produce/consume demo (examples/demo.py) and the quick-start code."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from prerequisites import unavailable

ROOT = Path(__file__).resolve().parents[2]
PIPELINE = [sys.executable, "-m", "kafka_core.devtools.pipeline"]
HAVE_SPARK = all(importlib.util.find_spec(m) is not None for m in ("pyspark", "pyarrow")) and bool(
    os.environ.get("JAVA_HOME") or shutil.which("java")
)


def _need_spark() -> None:
    """A failure without pyspark, pyarrow and Java (a skip only under KAFKA_CORE_ALLOW_SKIP=1)."""
    if not HAVE_SPARK:
        unavailable(
            "pyspark, pyarrow and Java 17 (the Spark pipeline)", "pip install '.[spark]', install Java"
        )


def _python_blocks() -> list[str]:
    text = (ROOT / "README.md").read_text()
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


@pytest.mark.timeout(660)
def test_pipeline_passes_end_to_end(bootstrap_servers: str) -> None:
    _need_spark()
    proc = subprocess.run(
        [*PIPELINE, "--events", "20000", "--bootstrap-servers", bootstrap_servers],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        check=False,
    )
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr[-5000:]
    assert "PASS" in out and "FAIL" not in out, out
    assert "batch read == generated: 20,000 events, each exactly once" in out, out
    assert "stream == batch read: 20,000 events, each exactly once" in out, out
    streaming = re.search(r"streaming +[\d,]+ rows/s .*, (\d+) micro-batches", out)
    assert streaming is not None and int(streaming.group(1)) >= 2, out
    # phase lines and figures only: no JVM start-up chatter, no pandas FutureWarning (issue 39)
    for noise in ("Setting default log level", "incubator modules", "FutureWarning"):
        assert noise not in out + proc.stderr, proc.stderr


@pytest.mark.timeout(1500)
def test_compare_runs_both_formats_side_by_side_on_apache_kafka(real_kafka: Any, tmp_path: Path) -> None:
    """--compare (issue 41): kafka_core and Spark's own connector (its jar from Maven Central; its
    newest release on the running Spark when there is none for it) on the same broker and generated
    data, each leg checked against the generated records and against the other, then the phases
    side by side with ratios."""
    _need_spark()
    proc = subprocess.run(
        [
            *PIPELINE,
            "--compare",
            "--rounds",
            "1",
            "--events",
            "20000",
            "--bootstrap-servers",
            real_kafka.bootstrap,
            "--json",
            str(tmp_path / "job.json"),
        ],
        capture_output=True,
        text=True,
        timeout=1440,  # the first run makes the connector's venv and fetches its jars
        cwd=ROOT,
        check=False,
    )
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr[-5000:]
    assert "PASS" in out and "FAIL" not in out, out
    assert re.search(r"Spark's connector: spark-sql-kafka-0-10 \d+\.\d+\.\d+ \(", out), out
    for fmt in ("kafka_core", "kafka"):
        assert f"[{fmt}] batch read == generated: 20,000 events, each exactly once" in out, out
        assert f"[{fmt}] stream == batch read: 20,000 events, each exactly once" in out, out
    assert "both formats, every round: same records and same figures" in out, out
    for phase in ("write", "batch read + fingerprint", "streaming micro-batches", "whole job"):
        assert re.search(rf"^  {re.escape(phase)} +[\d.,]+k +[\d.,]+k +\d+\.\d\dx$", out, re.M), out
    # --json: what bench.bench_main_job keeps in results.json
    figures = json.loads((tmp_path / "job.json").read_text())
    assert figures["passed"] is True and figures["events"] == 20000 and figures["rounds"] == 1
    assert figures["connector"].startswith("spark-sql-kafka-0-10 ")
    for fmt in ("kafka_core", "kafka"):
        assert all(len(times) == 1 and times[0] > 0 for times in figures["seconds"][fmt].values()), figures
    printed = float(re.search(r"^  whole job .* (\d+\.\d\d)x$", out, re.M).group(1))  # type: ignore[union-attr]
    assert round(figures["ratios"]["whole job"], 2) == printed


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(["--events", "0"], "--events: must be positive", id="events"),
        pytest.param(["--partitions", "-2"], "--partitions: must be positive", id="partitions"),
        pytest.param(["--master", "local[0]"], "bad --master", id="master"),
        pytest.param(["--bootstrap-servers", "localhost"], "bad --bootstrap-servers", id="bootstrap"),
        pytest.param(["--topic", "no/slashes"], "bad --topic", id="topic"),
        pytest.param(["--master", "yarn"], "needs HADOOP_CONF_DIR or YARN_CONF_DIR", id="yarn-unconfigured"),
        pytest.param(["--master", "k8s://https://127.0.0.1:1"], "is not reachable", id="k8s-unreachable"),
    ],
)
def test_pipeline_refuses_bad_arguments_before_spark(args: list[str], message: str) -> None:
    _refused_before_spark(args, message)


def test_a_spark_that_does_not_start_is_one_line_and_exit_2(bootstrap_servers: str) -> None:
    """Spark's JVM refusing to start (here: a heap size it cannot parse) is the JVM's reason in
    one line, not PySpark's JAVA_GATEWAY_EXITED with Java's stack trace."""
    _need_spark()
    env = {**os.environ, "SPARK_SUBMIT_OPTS": "-Xmx1bogus"}
    proc = subprocess.run(
        [*PIPELINE, "--events", "10", "--bootstrap-servers", bootstrap_servers],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=ROOT,
        env=env,
        check=False,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(
        "python -m kafka_core.devtools.pipeline: error: Spark (local[2]) did not start: "
    ), lines[0]
    assert "-Xmx1bogus" in lines[0], lines[0]  # the JVM's own reason
    assert "JAVA_GATEWAY_EXITED" not in proc.stderr and "Traceback" not in proc.stderr


def test_pipeline_refuses_an_unreachable_broker_before_spark() -> None:
    _need_spark()  # Spark's set-up is checked first
    _refused_before_spark(["--bootstrap-servers", "127.0.0.1:1"], "is not reachable")


def _refused_before_spark(args: list[str], message: str) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("HADOOP_CONF_DIR", "YARN_CONF_DIR")}
    proc = subprocess.run(
        [*PIPELINE, *args], capture_output=True, text=True, timeout=60, cwd=ROOT, env=env, check=False
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], proc.stderr
    assert lines[0].startswith("python -m kafka_core.devtools.pipeline: error: "), proc.stderr
    # Nothing started, not even the first phase line; a started Spark would have logged to stderr
    # (its JVM's first lines), which holds the one error line only. No timing: under load the
    # refusal alone took 15 s once.
    assert proc.stdout == "", proc.stdout


def test_demo_round_trips_every_record(bootstrap_servers: str) -> None:
    env = {**os.environ, "KAFKA_BOOTSTRAP_SERVERS": bootstrap_servers}
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "demo.py"), "--count", "20000"],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "every record came back intact" in proc.stdout
    assert re.search(r"consumed 20,000 \(distinct 20,000\)", proc.stdout), proc.stdout


def test_readme_quick_start_runs(bootstrap_servers: str, new_topic) -> None:
    blocks = _python_blocks()
    assert len(blocks) >= 3, "README lost its quick-start examples"
    topic = new_topic(partitions=3)
    for block in blocks:
        code = block.replace("127.0.0.1:9092", bootstrap_servers).replace('"orders"', repr(topic))
        proc = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
        )
        assert proc.returncode == 0, f"README block failed:\n{block}\n{proc.stdout}{proc.stderr}"
        if "KafkaConsumer(" in block:
            assert "hello" in proc.stdout, f"README consumer printed no record:\n{block}\n{proc.stdout}"
