#!/usr/bin/env bash
# Set-up shared by every entry point: a virtualenv in .venv with the package (Cython codec built
# in place) and the extras one mode needs. Needs Python >= 3.11 and a C compiler (and Java 17 for
# Spark) on the machine.
#   ci/bootstrap.sh         the test command's: the test/bench/spark/cli/broker/schema-registry/gssapi
#                           extras, and MIT Kerberos's packages (the GSSAPI tests' KDC, the headers
#                           `gssapi` compiles against), installed by ci/kerberos.sh when missing (root)
#   ci/bootstrap.sh --demo  the main job's (ci/demo.sh): the spark, cli and broker extras only; no
#                           Kerberos, no root
# One line per phase; the installers' own output goes to .venv/bootstrap.log, shown in full when one
# fails. Idempotent: reinstalls only when the packaging files change or the venv lacks an extra of
# this mode (a demo venv later used for the tests gets the rest).
set -euo pipefail
cd "$(dirname "$0")/.."

FULL_EXTRAS=test,bench,spark,cli,broker,schema-registry,gssapi
DEMO_EXTRAS=spark,cli,broker
case "${1:-}" in
  "") extras=$FULL_EXTRAS; kerberos=1 ;;
  --demo) extras=$DEMO_EXTRAS; kerberos=0 ;;
  *) echo "usage: ci/bootstrap.sh [--demo]" >&2; exit 2 ;;
esac

PY=${PYTHON:-}
if [ -z "$PY" ]; then
  for cand in python3 python3.13 python3.12 python3.11; do
    if command -v "$cand" >/dev/null 2>&1 && "$cand" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
      PY=$cand; break
    fi
  done
fi
[ -n "$PY" ] || { echo "kafka_core needs Python >= 3.11" >&2; exit 1; }

if [ ! -x .venv/bin/python ]; then
  echo "==> creating .venv with $($PY --version)"
  "$PY" -m venv .venv
fi
export PATH="$PWD/.venv/bin:$PATH"

LOG=.venv/bootstrap.log
: >"$LOG"
echo "==> set-up: the installers' output goes to $LOG"
# quietly CMD...: CMD's output into the log; when it fails, the whole log on stderr and exit 1
quietly() {
  if ! "$@" >>"$LOG" 2>&1; then
    echo "ci/bootstrap.sh: failed: $*; the set-up's log ($LOG) follows" >&2
    cat "$LOG" >&2
    exit 1
  fi
}

if [ "$kerberos" = 1 ]; then
  bash ci/kerberos.sh "$LOG"
fi

# The stamp: the packaging files' hash, then the extras installed with it. A mode is satisfied by
# the same hash and a superset of its extras (a stamp of one line, from before the modes, is the
# full set).
stamp=.venv/.kafka_core-installed
want=$(cat pyproject.toml setup.py | sha256sum | cut -d' ' -f1)
have_hash=$(sed -n 1p "$stamp" 2>/dev/null || true)
have_extras=$(sed -n 2p "$stamp" 2>/dev/null || true)
[ -n "$have_hash" ] && [ -z "$have_extras" ] && have_extras=$FULL_EXTRAS
installed=1
[ "$have_hash" = "$want" ] || installed=0
for extra in ${extras//,/ }; do
  case ",$have_extras," in *",$extra,"*) ;; *) installed=0 ;; esac
done
if [ "$installed" = 0 ]; then
  echo "==> installing kafka_core with the extras $extras (pip)"
  quietly python -m pip install --disable-pip-version-check -U pip
  quietly python -m pip install --disable-pip-version-check "Cython>=3.0.10" "setuptools>=77" wheel build
  # The editable wheel without the extensions (KAFKA_CORE_PURE_PYTHON at build time): the in-place
  # build below makes the ones that import, and building them in the wheel too compiled the codec
  # twice (some minutes of a fresh set-up).
  # --no-compile, then compileall on every core: pip byte-compiles what it installs on one core
  # (pyspark's thousands of modules among them), a third of the install's time. Left to first
  # imports, the compiling lands in the tests: a decode timed under tracemalloc, a Spark worker
  # that must connect back within 10 s. A file that does not compile is the package's (pip's own
  # compile skips it too), not the set-up's failure.
  KAFKA_CORE_PURE_PYTHON=1 quietly python -m pip install --disable-pip-version-check --no-compile -e ".[$extras]"
  site=$(python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  python -m compileall -q -j 0 "$site" >>"$LOG" 2>&1 || true
  # Spark finds data sources by listing top-level pyspark_* modules on sys.path, which an
  # editable install's import hook does not show: put the checkout itself on sys.path.
  echo "$PWD" > "$site/kafka_core_checkout.pth"
  printf '%s\n%s\n' "$want" "$extras" > "$stamp"
fi

# The checkout's own modules, byte-compiled as pip compiles a wheel's: an editable install leaves
# them to the first import, and where PYTHONDONTWRITEBYTECODE is set (this machine, many images)
# every process compiled them again, each new Spark worker among them (half a second of a write
# of 1,000,000 rows whose workers start afresh). Run every time: it skips what has not changed.
python -m compileall -q -j 0 kafka_core pyspark_kafka_core.py >>"$LOG" 2>&1 || true

echo "==> building the Cython codec in place"
began=$(wc -l <"$LOG")
# one compiler per core (-j): the seven extensions build in 33 s on two cores, not 55
KAFKA_CORE_REQUIRE_EXTENSION=1 quietly python setup.py -q build_ext --inplace -j "$(nproc 2>/dev/null || echo 2)"
warnings=$(tail -n +"$((began + 1))" "$LOG" | grep -c 'warning:' || true)
if [ "$warnings" -gt 0 ]; then
  echo "==> the codec's build had $warnings compiler warning(s): see $LOG"
fi
python - <<'PY'
import os
os.environ["KAFKA_CORE_REQUIRE_EXTENSION"] = "1"
import kafka_core.codec as c
print(f"==> kafka_core codec: {c.IMPLEMENTATION}")
PY
