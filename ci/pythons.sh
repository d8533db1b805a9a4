#!/usr/bin/env bash
# The other CPythons the wheels are built for (pyproject's classifiers): for each, its own venv
# (.venv-3.13, .venv-3.12) with the package and the test extras and the Cython extension built in
# place for it (the .so names carry the ABI tag, so builds for several Pythons coexist beside
# .venv's), then the suites of the modules that have a pure-Python twin (ci/twin_suites.sh) with
# the extension; on the newest, the whole unit suite with the pure-Python twins. With ci/test.sh's
# run on 3.11 (the whole suite with the extension) every test runs with each codec, and the twins'
# suites with the extension on the oldest and the newest CPython. CI runs the newest only: what
# differs between CPythons shows at the oldest or the newest, and on a CI machine of two cores a
# third interpreter's set-up and runs were five of its minutes (KAFKA_CORE_PYTHONS="3.12 3.13"
# adds 3.12). On the newest, the compatibility subset against Tansu too (its report is
# build/compat/tansu.json). 3.11 is .venv's, run by ci/test.sh. A missing interpreter fails the
# run, naming what to install: never a skip.
#   KAFKA_CORE_PYTHONS="3.13"        the versions (default); the last one gets the Tansu subset
#   KAFKA_CORE_PYTHONS_JOBS=2        pytest-xdist workers per unit run (default: every core)
#   KAFKA_CORE_PYTHONS_WHOLE="3.12 3.13"  where the whole unit suite runs with the twins (default:
#                                    the newest); elsewhere the twins' suites run with them only
#                                    where KAFKA_CORE_PYTHONS_TWINS_PURE names the version
#   KAFKA_CORE_TWIN_SUITES="tests/unit"  what the twins' suites are (ci/twin_suites.sh)
#   KAFKA_CORE_PYTHONS_WHOLE_CODEC=cython  where the whole unit suite runs, run it with the extension
#                                    instead (no twins' suites there): for a caller that runs the
#                                    whole suite with the twins itself (ci/test.sh, on 3.11)
#   KAFKA_CORE_PYTHONS_COMPAT=0      leave the Tansu subset out (unit suites only)
#   KAFKA_CORE_PYTHONS_UNIT=0        leave the unit suites out (set-up and the Tansu subset only;
#                                    ci/test.sh runs that beside the integration stage)
#   KAFKA_CORE_COMPAT_WORKERS=2      pytest-xdist workers of the Tansu subset (as ci/test.sh)
#   KAFKA_CORE_PYTHONS_SETUP_ONLY=1  the venvs and the extension only (ci/test.sh sets them up early),
#                                    the newest first
#   KAFKA_CORE_PYTHONS_NEWEST_READY=FILE  with SETUP_ONLY: FILE is written once the newest is set
#                                    up (ci/test.sh's Tansu subset waits for it, not for the others)
# Extra arguments go to every pytest run.
set -euo pipefail
cd "$(dirname "$0")/.."
VERSIONS=(${KAFKA_CORE_PYTHONS:-3.13})
JOBS=${KAFKA_CORE_PYTHONS_JOBS:-auto}
# shellcheck source=ci/twin_suites.sh
source ci/twin_suites.sh
stage() { echo "==> $* ($(date -u +%H:%M:%S))"; }
began=$(date +%s)
# Every run goes on after a failed one (each is worth seeing); the script fails at the end.
FAILED=()
run() {
  local name=$1 status=0 run_began
  shift
  run_began=$(date +%s)
  "$@" || status=$?
  echo "    $name: $([ "$status" -eq 0 ] && echo ok || echo "FAILED (exit $status)") in $(($(date +%s) - run_began)) s"
  [ "$status" -eq 0 ] || FAILED+=("$name")
}

# An interpreter of minor version $1 (e.g. 3.12): pyenv's, else python3.12 on PATH; empty if none.
find_python() {
  local want=$1 cand
  local -a cands=()
  if command -v pyenv >/dev/null 2>&1; then
    cand=$(pyenv prefix "$want" 2>/dev/null | head -n 1) && [ -n "$cand" ] && cands+=("$cand/bin/python$want")
  fi
  for cand in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$want".*/bin/python"$want"; do cands+=("$cand"); done
  cand=$(command -v "python$want" 2>/dev/null) && cands+=("$cand")
  for cand in "${cands[@]}"; do
    # pyenv's shims exist for versions not selected and fail when run: ask each one its version.
    if [ -x "$cand" ] && [ "$("$cand" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)" = "$want" ]; then
      echo "$cand"
      return
    fi
  done
}

missing=()
declare -A PY
for version in "${VERSIONS[@]}"; do
  PY[$version]=$(find_python "$version")
  [ -n "${PY[$version]}" ] || missing+=("$version")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "ci/pythons.sh: no CPython ${missing[*]} found (looked in pyenv and on PATH)." >&2
  echo "Install it, e.g. \`pyenv install ${missing[0]}\` or your system's python${missing[0]} package;" >&2
  echo "the unit suite must run on every CPython the wheels are built for, it is not skipped." >&2
  exit 1
fi

ORDER=("${VERSIONS[@]}")
newest=${VERSIONS[${#VERSIONS[@]} - 1]}
WHOLE=(${KAFKA_CORE_PYTHONS_WHOLE:-$newest})
TWINS_PURE=(${KAFKA_CORE_PYTHONS_TWINS_PURE:-})
if [ "${KAFKA_CORE_PYTHONS_SETUP_ONLY:-0}" != "0" ]; then
  # the newest first: the Tansu subset runs on it as soon as it is ready
  ORDER=("$newest")
  for version in "${VERSIONS[@]}"; do [ "$version" = "$newest" ] || ORDER+=("$version"); done
fi
for version in "${ORDER[@]}"; do
  venv=.venv-$version
  py=$venv/bin/python
  stage "CPython $version ($("${PY[$version]}" --version 2>&1), ${PY[$version]}): $venv"
  setup_began=$(date +%s)
  if [ ! -x "$py" ]; then
    "${PY[$version]}" -m venv "$venv"
  fi
  # As ci/bootstrap.sh: reinstall only when the packaging files change. The bench extra is left
  # out (the unit suite does not use it).
  stamp=$venv/.kafka_core-installed
  want=$(cat pyproject.toml setup.py | sha256sum | cut -d' ' -f1)
  if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    "$py" -m pip install -q --disable-pip-version-check -U pip
    "$py" -m pip install -q --disable-pip-version-check "Cython>=3.0.10" "setuptools>=77" wheel build
    # --no-compile, then compileall on every core: as ci/bootstrap.sh
    "$py" -m pip install -q --disable-pip-version-check --no-compile -e ".[test,spark,cli,broker,schema-registry]"
    site=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    "$py" -m compileall -q -j 0 "$site" >/dev/null 2>&1 || true
    echo "$PWD" >"$site/kafka_core_checkout.pth"  # Spark finds pyspark_kafka_core on sys.path
    echo "$want" >"$stamp"
  fi
  KAFKA_CORE_REQUIRE_EXTENSION=1 "$py" setup.py -q build_ext --inplace -j "$(nproc 2>/dev/null || echo 2)" 2>&1 \
    | grep -v -E '^(running|copying|creating)' || true
  KAFKA_CORE_REQUIRE_EXTENSION=1 "$py" -c 'import kafka_core.codec as c, sys; print(f"    codec: {c.IMPLEMENTATION} on {sys.version.split()[0]}")'
  echo "    set-up: $(($(date +%s) - setup_began)) s"
  if [ "$version" = "$newest" ] && [ -n "${KAFKA_CORE_PYTHONS_NEWEST_READY:-}" ]; then
    echo "$version" >"$KAFKA_CORE_PYTHONS_NEWEST_READY"
  fi
  [ "${KAFKA_CORE_PYTHONS_SETUP_ONLY:-0}" = "0" ] || continue
  [ "${KAFKA_CORE_PYTHONS_UNIT:-1}" != "0" ] || continue

  whole_cython=0
  if [ "${KAFKA_CORE_PYTHONS_WHOLE_CODEC:-pure}" = cython ] && [[ " ${WHOLE[*]} " == *" $version "* ]]; then
    whole_cython=1
  fi
  cython=("${TWIN_SUITES[@]}")
  [ "$whole_cython" = 0 ] || cython=(tests/unit)
  stage "CPython $version: ${cython[*]}, Cython codec"
  run "CPython $version ${cython[*]}, Cython codec" env KAFKA_CORE_REQUIRE_EXTENSION=1 KAFKA_CORE_PURE_PYTHON= \
    "$py" -m pytest "${cython[@]}" -n "$JOBS" -p no:cacheprovider -q "$@"
  [ "$whole_cython" = 0 ] || continue
  pure=()
  if [[ " ${WHOLE[*]} " == *" $version "* ]]; then
    pure=(tests/unit)
  elif [[ " ${TWINS_PURE[*]} " == *" $version "* ]]; then
    pure=("${TWIN_SUITES[@]}")
  fi
  [ "${#pure[@]}" -gt 0 ] || continue
  stage "CPython $version: ${pure[*]}, pure-Python twins"
  run "CPython $version ${pure[*]}, pure-Python twins" env KAFKA_CORE_REQUIRE_EXTENSION= KAFKA_CORE_PURE_PYTHON=1 \
    "$py" -m pytest "${pure[@]}" -n "$JOBS" -p no:cacheprovider -q "$@"
done

if [ "${KAFKA_CORE_PYTHONS_SETUP_ONLY:-0}" != "0" ]; then
  stage "CPython ${VERSIONS[*]}: set up in $(($(date +%s) - began)) s"
  exit 0
fi
if [ "${KAFKA_CORE_PYTHONS_COMPAT:-1}" != "0" ] && [ -z "${KAFKA_BOOTSTRAP_SERVERS:-}" ]; then
  stage "CPython $newest: compatibility subset against Tansu"
  mkdir -p build/compat
  run "CPython $newest compatibility subset on Tansu" env KAFKA_CORE_REQUIRE_EXTENSION=1 \
    KAFKA_CORE_PURE_PYTHON= KAFKA_CORE_TEST_BROKER=tansu KAFKA_CORE_COMPAT_REPORT=build/compat/tansu.json \
    ".venv-$newest/bin/python" -m pytest tests/integration -m compat -p no:cacheprovider \
    -n "${KAFKA_CORE_COMPAT_WORKERS:-2}" --dist loadgroup "$@"
fi
stage "CPython ${VERSIONS[*]}: $(($(date +%s) - began)) s in all"
if [ "${#FAILED[@]}" -gt 0 ]; then
  printf 'failed: %s\n' "${FAILED[@]}" >&2
  exit 1
fi
