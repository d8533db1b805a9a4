#!/usr/bin/env bash
# The main job: set everything up, then run the end-to-end produce/consume demo against the
# embedded broker (or KAFKA_BOOTSTRAP_SERVERS). Extra arguments go to examples/demo.py.
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/bootstrap.sh
exec .venv/bin/python examples/demo.py "$@"
