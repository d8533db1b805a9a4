#!/usr/bin/env bash
# The whole test suite: lint, mypy (configured in pyproject.toml), the unit suite twice (Cython
# codec, then the pure-Python twin), the integration and interop suites against Apache Kafka (the
# reference broker, from its Maven Central jars; the replication tests on three nodes of it), the
# compatibility subset against the other servers we support, the differential suite beside Spark's
# own Kafka connector, and the bench self-check.
# With KAFKA_BOOTSTRAP_SERVERS set, the broker suites run against that cluster only. Extra
# arguments go to every pytest run.
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/bootstrap.sh
export PATH="$PWD/.venv/bin:$PATH"
export KAFKA_CORE_REQUIRE_EXTENSION=1
KAFKA_NEWEST=$(python -c 'from kafka_core.devbroker import KAFKA_VERSION; print(KAFKA_VERSION)')
KAFKA_OLDEST=$(python -c 'from kafka_core.devbroker import OLDEST_KAFKA_VERSION; print(OLDEST_KAFKA_VERSION)')
stage() { echo "==> $* ($(date -u +%H:%M:%S))"; }
# Background work (the gateway's build and subset) does not outlive a run that stopped early.
trap 'jobs -p | xargs -r kill 2>/dev/null || true' EXIT

# The SeaweedFS gateway is a Go program of ours built on first use (minutes, nice'd): it builds in
# the background from here, beside the unit and integration suites, for the last broker stage.
mkdir -p build
SEAWEEDFS_BUILD_LOG=build/seaweedfs-build.log
if [ -z "${KAFKA_BOOTSTRAP_SERVERS:-}" ]; then
  python -c 'from kafka_core.devbroker import seaweedfs_gateway_binary; print(seaweedfs_gateway_binary())' \
    >build/seaweedfs-bin.txt 2>"$SEAWEEDFS_BUILD_LOG" &
  SEAWEEDFS_BUILD_PID=$!
fi

stage "ruff"
ruff check .
ruff format --check .

stage "mypy"
mypy

# Before the unit suite: its protocol drift check reads the share-group definitions from the
# newest Kafka's kafka-clients jar (tools/protocol_gen/newer.py).
stage "Apache Kafka $KAFKA_NEWEST and $KAFKA_OLDEST from Maven Central"
python - "$KAFKA_NEWEST" "$KAFKA_OLDEST" <<'PY'
import sys, time
from kafka_core.devbroker import kafka_classpath
for version in sys.argv[1:]:
    began = time.monotonic()
    print(f"    {version}: {kafka_classpath(version)} ({time.monotonic() - began:.1f} s)")
PY

# The unit suite needs no broker: it runs on every core (pytest-xdist).
stage "unit suite, Cython codec"
python -m pytest tests/unit -n auto -p no:cacheprovider "$@"

stage "unit suite, pure-Python codec"
KAFKA_CORE_REQUIRE_EXTENSION= KAFKA_CORE_PURE_PYTHON=1 python -m pytest tests/unit -n auto -p no:cacheprovider "$@"

if [ -n "${KAFKA_BOOTSTRAP_SERVERS:-}" ]; then
  stage "integration and interop suites against $KAFKA_BOOTSTRAP_SERVERS"
  python -m pytest tests/integration tests/interop -p no:cacheprovider "$@"
else
  stage "integration and interop suites against Apache Kafka $KAFKA_NEWEST"
  mkdir -p build/compat
  KAFKA_CORE_TEST_BROKER=kafka KAFKA_CORE_COMPAT_REPORT=build/compat/kafka-newest.json \
    python -m pytest tests/integration tests/interop -p no:cacheprovider "$@"

  # The gateway's subset spends most of its 16 minutes waiting out timeouts of what the gateway
  # lacks: it runs beside the Tansu and Kafka 3.9 subsets and the Spark stages, its output shown
  # (and its result judged) at the end.
  stage "SeaweedFS Kafka gateway: waiting for its build, then its compatibility subset in the background"
  if ! wait "$SEAWEEDFS_BUILD_PID"; then
    echo "the SeaweedFS gateway could not be built; its build log:" >&2
    tail -n 60 "$SEAWEEDFS_BUILD_LOG" >&2
    exit 1
  fi
  SEAWEEDFS_GATEWAY_BIN=$(tail -n 1 build/seaweedfs-bin.txt)
  export SEAWEEDFS_GATEWAY_BIN
  echo "    gateway: $SEAWEEDFS_GATEWAY_BIN"
  KAFKA_CORE_TEST_BROKER=seaweedfs KAFKA_CORE_COMPAT_REPORT=build/compat/seaweedfs.json \
    python -m pytest tests/integration -m compat -p no:cacheprovider "$@" >build/seaweedfs-compat.log 2>&1 &
  SEAWEEDFS_TESTS_PID=$!

  stage "compatibility subset against Tansu"
  KAFKA_CORE_TEST_BROKER=tansu KAFKA_CORE_COMPAT_REPORT=build/compat/tansu.json \
    python -m pytest tests/integration -m compat -p no:cacheprovider "$@"

  stage "compatibility subset against Apache Kafka $KAFKA_OLDEST"
  KAFKA_CORE_TEST_BROKER=kafka KAFKA_CORE_KAFKA_VERSION="$KAFKA_OLDEST" KAFKA_CORE_COMPAT_REPORT=build/compat/kafka-oldest.json \
    python -m pytest tests/integration -m compat -p no:cacheprovider "$@"

fi

# Spark's own connector runs only on the pyspark of its version: its own venv (ci/spark_diff.sh).
stage "differential suite: format kafka (Spark's connector) against format kafka_core"
bash ci/spark_diff.sh -p no:cacheprovider "$@"

stage "benchmark harness self-check (correctness only, no timings)"
python -m pytest bench/test_harness.py bench/test_codec_bench.py --benchmark-disable -p no:cacheprovider "$@"

if [ -n "${SEAWEEDFS_TESTS_PID:-}" ]; then
  stage "compatibility subset against the SeaweedFS Kafka gateway (waiting for it)"
  seaweedfs_status=0
  wait "$SEAWEEDFS_TESTS_PID" || seaweedfs_status=$?
  cat build/seaweedfs-compat.log
  if [ "$seaweedfs_status" -ne 0 ]; then
    echo "the compatibility subset against the SeaweedFS gateway failed (exit $seaweedfs_status)" >&2
    exit "$seaweedfs_status"
  fi
  python tools/compat_table.py build/compat/*.json
fi
stage "done"
