"""Every ```python example in the README and the user guides runs, as written, against the test broker.

The guides use ``127.0.0.1:9092`` as the broker address, as the README does; each example runs in a
fresh interpreter with that address replaced by the test broker's, so an example that stops
working fails here. The Spark guides write ``broker1:9092`` and use ``spark``, ``df`` and ``rdd``
as given: once the topics they name exist ("orders" with a few records), a guide's examples run
one after the other in one interpreter, after a prelude that starts a local[2] SparkSession and
makes a two-row DataFrame, each in a namespace of its own. An example that needs
Apache Kafka (a KIP-848 group) is preceded by ``<!-- kafka-only: why -->``: a strict expected
failure on Tansu. One that cannot run here (it needs a TLS or SASL listener the test broker
lacks) is preceded by ``<!-- no-test: why -->``, the reason required; the guides run elsewhere
are in RUN_ELSEWHERE. test_every_python_block_is_run fails on any other block.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GUIDES = [
    "README.md",
    "docs/producer.md",
    "docs/consumer.md",
    "docs/columnar.md",
    "docs/security.md",
    "docs/logging.md",
    "docs/tuning.md",
    "docs/migrating.md",
    "docs/admin.md",
    "docs/transport.md",
    "docs/metrics.md",
    "docs/observability.md",
    "docs/cli.md",
    "docs/transactions.md",
    "docs/groups.md",
    "docs/spark.md",
    "docs/spark-cluster.md",
    "docs/codec.md",
    "docs/protocol.md",
]
SPARK_GUIDES = {"docs/spark.md", "docs/spark-cluster.md"}
# Guides whose examples another test runs, against the broker they need.
RUN_ELSEWHERE = {
    "docs/share-groups.md": "tests/integration/test_share_consumer_kafka.py",  # share groups: Kafka 4.1+
    "docs/schema-registry.md": "tests/integration/test_schema_registry_docs.py",  # with the registry fixture
}
PLACEHOLDER = "127.0.0.1:9092"
SPARK_PLACEHOLDERS = ("broker1:9092,broker2:9092", "broker1:9092")
# The topics the Spark guide's examples read and write.
SPARK_TOPICS = ("orders", "orders-upper", "events")
_BLOCK = re.compile(
    r"(?:<!-- (no-test|kafka-only)(?::[ \t]*([^\n]*?))? -->[ \t]*\n)?```python\n(.*?)```", re.S
)

SPARK_PRELUDE = """\
import os, sys

os.environ["PYSPARK_PYTHON"] = sys.executable
from pyspark.sql import SparkSession

spark = (
    SparkSession.builder.master("local[2]")
    .appName("doc-example")
    .config("spark.ui.enabled", "false")
    .config("spark.ui.showConsoleProgress", "false")
    .config("spark.sql.shuffle.partitions", "2")
    .getOrCreate()
)
spark.sparkContext.setLogLevel("ERROR")
df = spark.createDataFrame([("k1", "v1"), ("k2", "v2")], "key string, value string")
rdd = df.rdd
# --- the example
"""
# spark.md's example of ending a crashed job's transaction by hand: the ids it names are a
# prepared transaction's, made for it (with the producer id and epoch put in its place).
PREPARED_EXAMPLE = 'PreparedTransaction("orders-upper-job-3", 4711, 2)'


class Block:
    """A python block of a markdown text: its code, first line, and the comment before it."""

    def __init__(self, text: str, match: re.Match[str]) -> None:
        self.code = match.group(3)
        self.line = text.count("\n", 0, match.start(3))
        self.mark = match.group(1)
        self.reason = (match.group(2) or "").strip()


def blocks(text: str) -> list[Block]:
    return [Block(text, m) for m in _BLOCK.finditer(text)]


def examples(text: str) -> list[str]:
    """The runnable python blocks of a markdown text, in order."""
    return [b.code for b in blocks(text) if b.mark != "no-test"]


def _cases() -> list[pytest.param]:  # type: ignore[valid-type]
    cases = []
    for guide in GUIDES:
        path = ROOT / guide
        if not path.exists() or guide in SPARK_GUIDES:
            continue
        runnable = [b for b in blocks(path.read_text()) if b.mark != "no-test"]
        for i, block in enumerate(runnable):
            marks = []
            if block.mark == "kafka-only":
                marks = [
                    pytest.mark.tansu_deviation(block.reason),
                    pytest.mark.seaweed_deviation(block.reason, strict=False),
                ]
            cases.append(pytest.param(guide, block.code, id=f"{Path(guide).stem}-{i + 1}", marks=marks))
    return cases


def test_examples_are_found() -> None:
    text = (
        "a\n```python\nprint(1)\n```\n<!-- no-test -->\n```python\nwhile True: pass\n```\n```bash\nls\n```\n"
        "<!-- no-test: needs a TLS listener -->\n```python\nconnect()\n```\n<!-- a note -->\n```python\nprint(2)\n```\n"
        "<!-- kafka-only: KIP-848 -->\n```python\nprint(3)\n```\n"
    )
    assert examples(text) == ["print(1)\n", "print(2)\n", "print(3)\n"]
    assert [(b.mark, b.reason, b.line) for b in blocks(text)] == [
        (None, "", 2),
        ("no-test", "", 6),
        ("no-test", "needs a TLS listener", 13),
        (None, "", 17),
        ("kafka-only", "KIP-848", 21),
    ]


def uncovered(files: dict[str, str]) -> list[str]:
    """Every python block of ``files`` (path: text) that no test runs, and every exclusion
    without its reason."""
    missing = []
    for name, text in sorted(files.items()):
        elsewhere = RUN_ELSEWHERE.get(name)
        if elsewhere is not None and Path(name).name in (ROOT / elsewhere).read_text():
            continue
        for block in blocks(text):
            where = f"{name}:{block.line}"
            if name not in GUIDES:
                missing.append(f"{where}: {name} is neither in GUIDES nor in RUN_ELSEWHERE")
            elif block.mark is not None and not block.reason:
                missing.append(
                    f"{where}: <!-- {block.mark} --> without its reason (<!-- {block.mark}: why -->)"
                )
    return missing


def test_every_python_block_is_run() -> None:
    """README.md and every guide under docs/: each python block runs here or in the test named
    for its guide, or says why it cannot run (``<!-- no-test: why -->``)."""
    files = {
        str(p.relative_to(ROOT)): p.read_text() for p in [ROOT / "README.md", *(ROOT / "docs").rglob("*.md")]
    }
    assert uncovered(files) == []
    # and the check can fail: a guide no test knows, an exclusion without a reason
    assert uncovered({"docs/new.md": "```python\nprint(1)\n```\n"}) == [
        "docs/new.md:1: docs/new.md is neither in GUIDES nor in RUN_ELSEWHERE"
    ]
    assert uncovered({"README.md": "x\n<!-- no-test -->\n```python\nprint(1)\n```\n"}) == [
        "README.md:3: <!-- no-test --> without its reason (<!-- no-test: why -->)"
    ]


def _prepare_for_example(bootstrap_servers: str) -> str:
    """A transaction prepared under the id the example names; its PreparedTransaction. It stays
    open for the broker's longest timeout: the guide's examples before it take minutes on a
    loaded machine, and the default minute would see it aborted first."""
    from kafka_core import KafkaProducer

    with KafkaProducer(
        bootstrap_servers=bootstrap_servers,
        transactional_id="orders-upper-job-3",
        transaction_timeout_ms=900_000,
    ) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send("orders-upper", b"from a task whose job died")
        prepared = producer.prepare_transaction()
    return f'PreparedTransaction("orders-upper-job-3", {prepared.producer_id}, {prepared.producer_epoch})'


def spark_script(codes: list[str], bootstrap_servers: str) -> str:
    """A Spark guide's examples as they run here: after the prelude, each in its own namespace
    with ``spark``, ``df`` and ``rdd`` (one session for all: a JVM start and the first Python
    workers cost most of a minute on a loaded 2-core machine), the test broker's address in
    them; the exit status names the examples that raised."""
    runs = []
    for code in codes:
        for placeholder in SPARK_PLACEHOLDERS:
            code = code.replace(placeholder, bootstrap_servers)
        if PREPARED_EXAMPLE in code:
            code = code.replace(PREPARED_EXAMPLE, _prepare_for_example(bootstrap_servers))
        runs.append(code)
    return SPARK_PRELUDE + SPARK_RUNNER.format(codes=repr(runs))


SPARK_RUNNER = """\
import traceback

failed = []
for number, code in enumerate({codes}, 1):
    try:
        exec(compile(code, f"<example {{number}}>", "exec"), {{"__name__": "__main__", "spark": spark, "df": df, "rdd": rdd}})
        print(f"example {{number}}: ok", flush=True)
    except Exception:
        print(f"example {{number}} failed:", file=sys.stderr, flush=True)
        traceback.print_exc()
        failed.append(number)
spark.stop()
sys.exit(f"examples that failed: {{failed}}" if failed else 0)
"""


def _spark_topics(bootstrap_servers: str) -> None:
    """The topics the Spark guide names, "orders" with a few records in it."""
    from kafka_core import KafkaAdmin, KafkaProducer, NewTopic

    with KafkaAdmin(bootstrap_servers=bootstrap_servers) as admin:
        admin.create_topics([NewTopic(t, 2) for t in SPARK_TOPICS])  # an existing topic is fine too
    with KafkaProducer(bootstrap_servers=bootstrap_servers) as producer:
        for i in range(3):
            producer.send("orders", b"order %d" % i, key=b"customer-%d" % i)


@pytest.fixture(scope="module")
def guide_topics(bootstrap_servers: str) -> None:
    """The topics the guides read, "orders" with records in it, on this worker's broker: an
    example that reads "orders" must not depend on another example having run first on the
    same xdist worker (each worker has a broker of its own; one did not, and waited forever)."""
    _spark_topics(bootstrap_servers)


@pytest.mark.timeout(180)
@pytest.mark.parametrize(("guide", "code"), _cases())
def test_guide_example_runs(
    guide: str, code: str, bootstrap_servers: str, guide_topics: None, tmp_path: Path
) -> None:
    script = tmp_path / "example.py"
    script.write_text(code.replace(PLACEHOLDER, bootstrap_servers))
    env = {**os.environ, "KAFKA_BOOTSTRAP_SERVERS": bootstrap_servers}
    proc = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=150
    )
    assert proc.returncode == 0, f"{guide} example failed:\n{code}\n--- stderr ---\n{proc.stderr[-4000:]}"


@pytest.mark.timeout(900)
@pytest.mark.parametrize("guide", sorted(SPARK_GUIDES))
def test_spark_guide_examples_run(guide: str, bootstrap_servers: str, tmp_path: Path) -> None:
    codes = examples((ROOT / guide).read_text())
    assert codes
    _spark_topics(bootstrap_servers)
    script = tmp_path / "examples.py"
    script.write_text(spark_script(codes, bootstrap_servers))
    proc = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=840
    )
    assert proc.stdout.count(": ok\n") == len(codes) and proc.returncode == 0, (
        f"{guide}: {proc.stdout}\n--- stderr ---\n{proc.stderr[-6000:]}"
    )
