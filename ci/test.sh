#!/usr/bin/env bash
# The whole test suite: lint, mypy (configured in pyproject.toml), the unit suite with the Cython
# codec, the integration and interop suites against Apache Kafka (the reference broker, from its Maven
# Central jars; the replication tests on three nodes of it), the compatibility subset against the
# other servers we support, the differential suite beside Spark's own Kafka connector, the bench
# self-check, and on CPython 3.13 the whole unit suite with the extension and the Tansu subset
# (ci/pythons.sh). The unit suite here (3.11) runs with the pure-Python twins: every unit test runs
# with each codec, the parity tests on 3.13.
# With KAFKA_BOOTSTRAP_SERVERS set, the broker suites run against that cluster only. Extra
# arguments go to every pytest run.
# Stages that mostly wait on brokers run beside the others (`background`), each to its own log
# under build/logs/, shown at the end; a failed one fails the run with its exit status. The run
# ends with a table of every stage's duration.
set -euo pipefail
cd "$(dirname "$0")/.."
RUN_BEGAN=$SECONDS
PYTEST_ARGS=("$@")
# pytest-xdist workers of the broker stages: each worker starts its own broker (a Kafka node is
# some 10 s and 0.5 GB; tests that need the three-node cluster go to one worker, --dist
# loadgroup). They mostly wait on brokers, so there are more workers than cores; but on two cores
# four integration workers beside two compatibility ones kept the machine at 99% for the whole
# stage, and whichever timing-bound test met the worst of it failed, a different one each run
# (three runs of 2026-12-02: Spark's Python workers missing Spark's fixed 10 s to connect back,
# broker restarts outlasting a 120 s delivery timeout). There, three and one.
CORES=$(nproc 2>/dev/null || echo 2)
# The unit suite waits too (its outage and deadline tests sleep through timeouts): on two cores,
# two workers kept them 60% busy (297 s), four 89% (232 s).
if [ "$CORES" -le 2 ]; then
  INTEGRATION_WORKERS=${KAFKA_CORE_INTEGRATION_WORKERS:-3}
  COMPAT_WORKERS=${KAFKA_CORE_COMPAT_WORKERS:-1}
  UNIT_WORKERS=${KAFKA_CORE_UNIT_WORKERS:-4}
else
  INTEGRATION_WORKERS=${KAFKA_CORE_INTEGRATION_WORKERS:-4}
  COMPAT_WORKERS=${KAFKA_CORE_COMPAT_WORKERS:-2}
  UNIT_WORKERS=${KAFKA_CORE_UNIT_WORKERS:-auto}
fi
mkdir -p build/logs
SUMMARY=()     # "stage|seconds|status|busy", in the order the stages ended
BACKGROUND=()  # "pid|stage|log" of the background stages not yet waited for
STAGE_NOW=""   # the foreground stage running, and when it began
STAGE_BEGAN=0
STAGE_TICKS="" # /proc/stat's "busy total" CPU ticks when it began

# CPU ticks of the whole machine since boot, "busy total" (busy excludes idle and iowait): how
# much of the cores a foreground stage left idle, whoever used the rest, tells whether more work
# could run beside it.
cpu_ticks() {
  [ -r /proc/stat ] || return 0
  awk '/^cpu / { total = 0; for (i = 2; i <= NF; i++) total += $i; print total - $5 - $6, total; exit }' /proc/stat
}
# busy_since "BUSY TOTAL": the machine's CPU use since then, as a percentage of all its cores
busy_since() {
  local then_busy then_total now_busy now_total
  read -r then_busy then_total <<<"$1"
  read -r now_busy now_total <<<"$(cpu_ticks)"
  if [ -z "${then_total:-}" ] || [ -z "${now_total:-}" ] || [ "$now_total" -le "$then_total" ]; then
    echo "-"
    return
  fi
  echo "$((100 * (now_busy - then_busy) / (now_total - then_total)))%"
}
RUN_TICKS=$(cpu_ticks)

summary() {
  [ "${#SUMMARY[@]}" -gt 0 ] || return 0
  echo "==> stages (wall-clock seconds; a background stage overlaps the stages after its start;"
  echo "    cpu: the machine's cores in use during a foreground stage, by it and the background ones)"
  local row name seconds status busy
  for row in "${SUMMARY[@]}"; do
    IFS='|' read -r name seconds status busy <<<"$row"
    printf '    %-72s %6s  %-4s %s\n' "$name" "$seconds" "${busy:--}" "$status"
  done
  printf '    %-72s %6s  %-4s\n' "the whole run" "$((SECONDS - RUN_BEGAN))" "$(busy_since "$RUN_TICKS")"
}

on_exit() {
  local status=$?
  if [ -n "$STAGE_NOW" ]; then
    SUMMARY+=("$STAGE_NOW|$((SECONDS - STAGE_BEGAN))|$([ "$status" -ne 0 ] && echo "FAILED (exit $status)" || echo stopped)|$(busy_since "$STAGE_TICKS")")
  fi
  # Background stages do not outlive a run that stopped early.
  local entry pid name log seconds bg_status
  for entry in "${BACKGROUND[@]}"; do
    IFS='|' read -r pid name log <<<"$entry"
    if read -r seconds bg_status 2>/dev/null <"$log.status"; then
      SUMMARY+=("$name (background)|$seconds|$([ "$bg_status" -eq 0 ] && echo ok || echo "FAILED (exit $bg_status)")")
    else
      kill "$pid" 2>/dev/null || true
      SUMMARY+=("$name (background)|-|stopped")
    fi
  done
  summary
}
trap on_exit EXIT

# stage NAME COMMAND...: COMMAND in the foreground, timed; a failure ends the run (set -e).
stage() {
  STAGE_NOW=$1
  STAGE_BEGAN=$SECONDS
  STAGE_TICKS=$(cpu_ticks)
  shift
  echo "==> $STAGE_NOW ($(date -u +%H:%M:%S))"
  "$@"
  SUMMARY+=("$STAGE_NOW|$((SECONDS - STAGE_BEGAN))|ok|$(busy_since "$STAGE_TICKS")")
  STAGE_NOW=""
}

# A process and every process under it (a shell function's subshell does not pass SIGTERM on).
kill_tree() {
  local child
  for child in $(pgrep -P "$1" || true); do kill_tree "$child"; done
  kill "$1" 2>/dev/null || true
}

# background LOG NAME COMMAND...: COMMAND beside the stages that follow, its output to
# build/logs/LOG.log; wait_background shows it and judges its exit status.
background() {
  local log="build/logs/$1.log" name=$2
  shift 2
  echo "==> $name: in the background, to $log ($(date -u +%H:%M:%S))"
  rm -f "$log.status"
  (
    began=$SECONDS
    status=0
    # a job of its own, so that `set -e` holds inside a shell function given as COMMAND
    "$@" >"$log" 2>&1 &
    child=$!
    trap 'kill_tree "$child"' TERM
    wait "$child" || status=$?
    echo "$((SECONDS - began)) $status" >"$log.status"
    exit "$status"
  ) &
  BACKGROUND+=("$!|$name|$log")
}

# Waits for every background stage, prints each one's log and fails the run if one failed.
wait_background() {
  local entry pid name log seconds status failed=0
  for entry in "${BACKGROUND[@]}"; do
    IFS='|' read -r pid name log <<<"$entry"
    wait "$pid" || true
    read -r seconds status <"$log.status" || { seconds=-; status=1; }
    echo "==> $name: its log ($log)"
    cat "$log"
    if [ "$status" -eq 0 ]; then
      SUMMARY+=("$name (background)|$seconds|ok")
    else
      SUMMARY+=("$name (background)|$seconds|FAILED (exit $status)")
      echo "$name failed (exit $status): its log is above and in $log" >&2
      failed=$status
    fi
  done
  BACKGROUND=()
  return "$failed"
}

stage "set-up (ci/bootstrap.sh)" bash ci/bootstrap.sh
export PATH="$PWD/.venv/bin:$PATH"
export KAFKA_CORE_REQUIRE_EXTENSION=1
KAFKA_NEWEST=$(python -c 'from kafka_core.devbroker import KAFKA_VERSION; print(KAFKA_VERSION)')
KAFKA_OLDEST=$(python -c 'from kafka_core.devbroker import OLDEST_KAFKA_VERSION; print(OLDEST_KAFKA_VERSION)')

# pytest with the run's extra arguments
run_pytest() { python -m pytest -p no:cacheprovider "$@" "${PYTEST_ARGS[@]}"; }

# compat_subset REPORT SERVER [KAFKA_VERSION]: the compatibility subset on one embedded server.
compat_subset() {
  KAFKA_CORE_TEST_BROKER=$2 KAFKA_CORE_KAFKA_VERSION=${3:-} KAFKA_CORE_COMPAT_REPORT=build/compat/$1.json \
    run_pytest tests/integration -m compat -n "$COMPAT_WORKERS" --dist loadgroup
}

# The SeaweedFS gateway is a Go program of ours built on first use (minutes, nice'd): it builds
# beside the lint and unit stages, then its compatibility subset runs.
seaweedfs_subset() {
  SEAWEEDFS_GATEWAY_BIN=$(nice python -c 'from kafka_core.devbroker import seaweedfs_gateway_binary; print(seaweedfs_gateway_binary())' | tail -n 1)
  export SEAWEEDFS_GATEWAY_BIN
  echo "gateway: $SEAWEEDFS_GATEWAY_BIN"
  compat_subset seaweedfs seaweedfs
}

lint() {
  ruff check .
  ruff format --check .
}

# Before the unit suite: its protocol drift check reads Kafka's message definitions from the
# newest Kafka's kafka-clients jar (tools/protocol_gen/definitions.py). Then one node of each
# version starts and stops: it leaves the class-data-sharing archive every later node of the
# suites maps (kafka_core/devtools/brokers/jvm_archive.py); left to the suites, the first node
# to make it would be a session broker, stopping only at the end of the integration stage.
fetch_kafka() {
  KAFKA_CORE_DEV_JVM=quick python - "$KAFKA_NEWEST" "$KAFKA_OLDEST" <<'PY'
import sys, time
from kafka_core.devbroker import KafkaCluster, kafka_classpath
for version in sys.argv[1:]:
    began = time.monotonic()
    print(f"    {version}: {kafka_classpath(version)} ({time.monotonic() - began:.1f} s)")
    began = time.monotonic()
    with KafkaCluster(version=version) as cluster:
        pass
    print(f"    {version}: a node started in {cluster.start_seconds} s, stopped ({time.monotonic() - began:.1f} s in all)")
PY
}

mkdir -p build/compat
if [ -z "${KAFKA_BOOTSTRAP_SERVERS:-}" ]; then
  background seaweedfs "SeaweedFS Kafka gateway: its build, then the compatibility subset" seaweedfs_subset
fi

# CPython 3.13 (ci/pythons.sh): its venv and the extension are set up now (nice'd:
# mostly downloads and unpacking); its unit runs (CPU-bound) once the integration stage has
# ended, beside the Spark differential suite. Beside the integration stage they slowed it: at equal
# priority a Spark planner's Python worker once took longer than the 10 s Spark gives it to connect
# back; at nice 19 (the run of 2026-12-03 07:35) they got almost no CPU there (the stage keeps both
# cores busy, Spark's tests in it took up to twice as long, and starved, a deadline test failed and a
# property test hung). On the newest, the compatibility
# subset against Tansu (in place of a Tansu subset on 3.11) runs beside the integration stage
# instead, after the Kafka 3.9 subset (it mostly waits on the broker). A missing interpreter fails
# both.
rm -f build/logs/integration.done build/logs/pythons-setup.done build/logs/pythons-newest.ready
pythons_after_integration() {
  local status=0
  KAFKA_CORE_PYTHONS_SETUP_ONLY=1 KAFKA_CORE_PYTHONS_NEWEST_READY=build/logs/pythons-newest.ready \
    nice bash ci/pythons.sh || status=$?
  echo "$status" >build/logs/pythons-setup.done
  [ "$status" -eq 0 ] || return "$status"
  while [ ! -e build/logs/integration.done ]; do sleep 5; done
  KAFKA_CORE_PYTHONS_JOBS=${KAFKA_CORE_PYTHONS_JOBS:-$UNIT_WORKERS} KAFKA_CORE_PYTHONS_COMPAT=0 \
    KAFKA_CORE_PYTHONS_WHOLE_CODEC=cython bash ci/pythons.sh "${PYTEST_ARGS[@]}"
}
background pythons "CPython 3.13: the whole unit suite with the Cython codec" \
  pythons_after_integration

# Spark's own connector runs only in a venv of its pyspark version (ci/spark_diff.sh): made now
# (nice'd: a download, pyspark built from its sdist, the connector's jars), its suite run once
# the integration stage has ended (Spark is CPU-bound).
spark_diff_after_integration() {
  local began=$SECONDS
  nice .venv/bin/python -m kafka_core.devtools.brokers.spark_connector >/dev/null
  echo "==> the connector's venv: ready in $((SECONDS - began)) s"
  while [ ! -e build/logs/integration.done ]; do sleep 5; done
  bash ci/spark_diff.sh -p no:cacheprovider "${PYTEST_ARGS[@]}"
}
background spark-diff "differential suite: format kafka (Spark's connector) against format kafka_core" \
  spark_diff_after_integration

stage "ruff" lint
stage "mypy" mypy
stage "Apache Kafka $KAFKA_NEWEST and $KAFKA_OLDEST from Maven Central, a node of each" fetch_kafka

# The unit suite needs no broker: it runs on every core (pytest-xdist), more workers than cores on two.
# Here with the pure-Python twins; with the extension on the newest CPython (ci/pythons.sh, after
# the integration stage), where the parity tests run. (It was the other way round, plus the twins'
# suites with the extension on 3.13: the same coverage, 140 s more of a CPU-bound tail.) Every later
# stage requires the extension again.
unit_pure() { KAFKA_CORE_REQUIRE_EXTENSION= KAFKA_CORE_PURE_PYTHON=1 run_pytest tests/unit -n "$UNIT_WORKERS" --durations=20; }
stage "unit suite, pure-Python twins" unit_pure

# The broker stages mostly wait (joins, timeouts, round trips): the compatibility subsets run beside
# the integration suites. What is CPU-bound (the other CPythons' unit runs, the Spark differential
# suite) waits for them to end: under the load of four broker workers and those, a Spark planner's
# Python worker took longer than the 10 s Spark gives it to connect back
# (PythonWorkerFactory.createSimpleWorker).
if [ -n "${KAFKA_BOOTSTRAP_SERVERS:-}" ]; then
  stage "integration and interop suites against $KAFKA_BOOTSTRAP_SERVERS" \
    run_pytest tests/integration tests/interop -n "$INTEGRATION_WORKERS" --dist loadgroup
else
  # The two compatibility subsets one after the other, beside the integration stage: both mostly
  # wait on their broker, and the SeaweedFS one runs beside them as well.
  oldest_then_tansu() {
    local status=0 setup
    compat_subset kafka-oldest kafka "$KAFKA_OLDEST" || status=$?
    # the newest CPython's set-up (the first the pythons stage does), or the end of a failed one
    while [ ! -e build/logs/pythons-newest.ready ] && [ ! -e build/logs/pythons-setup.done ]; do sleep 5; done
    if [ ! -e build/logs/pythons-newest.ready ]; then
      echo "the newest CPython's set-up failed (build/logs/pythons.log): no Tansu subset" >&2
      return 1
    fi
    KAFKA_CORE_PYTHONS=$(cat build/logs/pythons-newest.ready) KAFKA_CORE_PYTHONS_UNIT=0 \
      bash ci/pythons.sh "${PYTEST_ARGS[@]}" || status=$?
    return "$status"
  }
  background compat "compatibility subsets: Apache Kafka $KAFKA_OLDEST, then Tansu on the newest CPython" \
    oldest_then_tansu
  integration_on_kafka() {
    # --durations: where the stage's time goes (what to look at to keep CI under 40 minutes)
    KAFKA_CORE_TEST_BROKER=kafka KAFKA_CORE_COMPAT_REPORT=build/compat/kafka-newest.json \
      run_pytest tests/integration tests/interop -n "$INTEGRATION_WORKERS" --dist loadgroup --durations=60
  }
  stage "integration and interop suites against Apache Kafka $KAFKA_NEWEST ($INTEGRATION_WORKERS workers)" \
    integration_on_kafka
fi

touch build/logs/integration.done

stage "benchmark harness self-check (correctness only, no timings)" \
  run_pytest bench/test_*.py --benchmark-disable

stage "waiting for the background stages" wait_background
if [ -z "${KAFKA_BOOTSTRAP_SERVERS:-}" ]; then
  python tools/compat_table.py build/compat/*.json
fi
