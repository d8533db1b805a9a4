#!/usr/bin/env bash
# What the GSSAPI (Kerberos) tests and the dev broker's GSSAPI listener need of the machine:
# MIT Kerberos's KDC and admin tools (a throwaway realm started by the tests,
# kafka_core/devtools/kerberos.py), its client tools, and the headers PyPI's `gssapi` compiles
# against (`krb5-config`). Debian/Ubuntu packages, installed only when missing; installing needs
# root. Called by ci/bootstrap.sh (the test command's set-up, not the demo's) before the Python
# packages, with the set-up's log as argument: apt-get's output goes there (all of it shown when
# apt-get fails). Without root, or without apt-get, one line says what to install, and exit 1.
#   bash ci/kerberos.sh [LOG]
set -euo pipefail

PACKAGES=(krb5-kdc krb5-admin-server krb5-user libkrb5-dev)
LOG=${1:-}

missing=()
for package in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done
if [ "${#missing[@]}" -eq 0 ]; then
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "ci/kerberos.sh: the test command's GSSAPI tests need MIT Kerberos's KDC, admin server, client tools and headers (krb5-config); no apt-get here: install them by your system's means (bash ci/demo.sh needs none of it)" >&2
  exit 1
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "ci/kerberos.sh: the test command's GSSAPI tests need MIT Kerberos (${missing[*]}): run  sudo apt-get update && sudo apt-get install -y --no-install-recommends ${missing[*]}  (or this command as root; bash ci/demo.sh needs none of it)" >&2
  exit 1
fi
echo "==> installing ${missing[*]} (apt-get)"
export DEBIAN_FRONTEND=noninteractive
if [ -z "$LOG" ]; then
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
  exit 0
fi
if ! { apt-get update -q && apt-get install -y -q --no-install-recommends "${missing[@]}"; } >>"$LOG" 2>&1; then
  echo "ci/kerberos.sh: apt-get failed; the set-up's log ($LOG) follows" >&2
  cat "$LOG" >&2
  exit 1
fi
