#!/usr/bin/env bash
# Set-up shared by every entry point: a virtualenv in .venv with the package (Cython codec built
# in place) and the test/bench/spark/cli/broker/schema-registry/gssapi extras. Idempotent:
# reinstalls only when the packaging files change. Needs Python >= 3.11 (and Java 17 for Spark) on the machine; MIT
# Kerberos's packages (the GSSAPI tests' KDC, and the headers `gssapi` compiles against) are
# installed by ci/kerberos.sh when missing, which needs root.
set -euo pipefail
cd "$(dirname "$0")/.."

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

bash ci/kerberos.sh

stamp=.venv/.kafka_core-installed
want=$(cat pyproject.toml setup.py | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "==> installing kafka_core and its dev dependencies"
  python -m pip install -q --disable-pip-version-check -U pip
  python -m pip install -q --disable-pip-version-check "Cython>=3.0.10" "setuptools>=77" wheel build
  python -m pip install -q --disable-pip-version-check -e ".[test,bench,spark,cli,broker,schema-registry,gssapi]"
  # Spark finds data sources by listing top-level pyspark_* modules on sys.path, which an
  # editable install's import hook does not show: put the checkout itself on sys.path.
  site=$(python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  echo "$PWD" > "$site/kafka_core_checkout.pth"
  echo "$want" > "$stamp"
fi

echo "==> building the Cython codec in place"
KAFKA_CORE_REQUIRE_EXTENSION=1 python setup.py -q build_ext --inplace 2>&1 | grep -v -E '^(running|copying|creating)' || true
python - <<'PY'
import os
os.environ["KAFKA_CORE_REQUIRE_EXTENSION"] = "1"
import kafka_core.codec as c
print(f"==> kafka_core codec: {c.IMPLEMENTATION}")
PY
