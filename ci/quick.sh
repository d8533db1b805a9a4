#!/usr/bin/env bash
# The quick loop while working on kafka_core, under 10 minutes on two cores: ruff, the unit suite
# (Cython codec) and the core integration subset (the compatibility subset: produce, consume,
# classic and KIP-848 groups, admin, transactions) on the embedded Tansu broker. `bash ci/test.sh`
# is the whole suite, what CI runs. Extra arguments go to both pytest runs (e.g. -x).
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/bootstrap.sh
export PATH="$PWD/.venv/bin:$PATH"
began=$SECONDS
stage() { echo "==> $* ($(date -u +%H:%M:%S), $((SECONDS - began)) s in)"; }

stage "ruff"
ruff check .
ruff format --check .

stage "unit suite, Cython codec"
python -m pytest tests/unit -n auto -p no:cacheprovider "$@"

# A Tansu per xdist worker; the modules go to the workers whole (tests/xdist_scheduling.py).
stage "core integration subset on Tansu"
KAFKA_CORE_TEST_BROKER=tansu python -m pytest tests/integration -m compat -n 2 --dist loadgroup -p no:cacheprovider "$@"

stage "done in $((SECONDS - began)) s"
