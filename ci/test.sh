#!/usr/bin/env bash
# The whole test suite: lint, mypy (configured in pyproject.toml), the unit suite twice (Cython
# codec, then the pure-Python twin), and the integration and interop suites against a real broker
# (embedded Tansu unless KAFKA_BOOTSTRAP_SERVERS names another cluster). Extra arguments go to
# every pytest run.
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/bootstrap.sh
export PATH="$PWD/.venv/bin:$PATH"

echo "==> ruff"
ruff check .
ruff format --check .

echo "==> mypy"
mypy

echo "==> unit suite, Cython codec"
KAFKA_CORE_REQUIRE_EXTENSION=1 python -m pytest tests/unit -p no:cacheprovider "$@"

echo "==> unit suite, pure-Python codec"
KAFKA_CORE_PURE_PYTHON=1 python -m pytest tests/unit -p no:cacheprovider "$@"

echo "==> integration and interop suites against a real broker"
KAFKA_CORE_REQUIRE_EXTENSION=1 python -m pytest tests/integration tests/interop -p no:cacheprovider "$@"

echo "==> benchmark harness self-check (correctness only, no timings)"
KAFKA_CORE_REQUIRE_EXTENSION=1 python -m pytest bench/test_harness.py bench/test_codec_bench.py --benchmark-disable -p no:cacheprovider "$@"
