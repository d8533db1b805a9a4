#!/usr/bin/env bash
# The differential suite (tests/spark_diff): every case through Spark's own Kafka connector
# (format "kafka", the JVM jar) and format "kafka_core", compared. The connector runs only in the
# pyspark of its own version, so the suite runs in a venv under ~/.cache/kafka_core/spark-connector/
# (made on first use, pinned to that pyspark, this checkout importable); the jars come from Maven
# Central into the same cache.
# Against KAFKA_BOOTSTRAP_SERVERS when set, else an embedded Apache Kafka. Extra arguments go to
# pytest (e.g. `-x`, or tests/spark_diff/test_diff_batch.py -k timestamp).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || bash ci/bootstrap.sh
began=$(date +%s)
# prints the pinned venv's python on stdout (the jars and the venv on stderr)
PY=$(.venv/bin/python -m kafka_core.devtools.brokers.spark_connector)
echo "==> spark_diff: $("$PY" -c 'import pyspark, kafka_core.codec as c; print(f"pyspark {pyspark.__version__}, codec {c.IMPLEMENTATION}")') ready in $(( $(date +%s) - began )) s"
export PYSPARK_PYTHON="$PY"
# Options alone (as ci/test.sh passes its own) run the whole suite; a path under tests/ picks.
picked=0
for arg in "$@"; do case "$arg" in tests/*) picked=1 ;; esac; done
[ "$picked" -eq 1 ] || set -- tests/spark_diff "$@"
status=0
"$PY" -m pytest "$@" || status=$?
echo "==> spark_diff: $(( $(date +%s) - began )) s in all"
exit "$status"
