#!/usr/bin/env bash
# The main job: set up what it needs (ci/bootstrap.sh --demo: Python, a C compiler, Java and git
# on the machine; no root, no Kerberos), then run the Spark pipeline (kafka_core.devtools.pipeline):
# order events generated in Spark, written to Kafka, read back in batch and as a stream, verified
# end to end, with figures. Uses KAFKA_BOOTSTRAP_SERVERS or an embedded broker. Extra arguments go
# to the pipeline (bash ci/demo.sh --events 200000; --help lists them). examples/demo.py is the
# small produce/consume demo without Spark.
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/bootstrap.sh --demo
exec .venv/bin/python -m kafka_core.devtools.pipeline "$@"
