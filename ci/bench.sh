#!/usr/bin/env bash
# All benchmarks, ours beside the peers in the same run; writes bench/RESULTS.md.
# Extra arguments go to bench/run_all.py (e.g. --quick, --no-spark).
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/bootstrap.sh
exec .venv/bin/python -m bench.run_all "$@"
