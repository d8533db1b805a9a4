#!/usr/bin/env bash
# What the GSSAPI (Kerberos) tests and the dev broker's GSSAPI listener need of the machine:
# MIT Kerberos's KDC and admin tools (a throwaway realm started by the tests,
# kafka_core/devtools/kerberos.py), its client tools, and the headers PyPI's `gssapi` compiles
# against (`krb5-config`). Debian/Ubuntu packages, installed only when missing; installing needs
# root (`apt-get update` once first). Called by ci/bootstrap.sh before the Python packages.
set -euo pipefail

PACKAGES=(krb5-kdc krb5-admin-server krb5-user libkrb5-dev)

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
  echo "ci/kerberos.sh: missing ${missing[*]} and no apt-get here: install MIT Kerberos's KDC," >&2
  echo "admin server, client tools and development headers (krb5-config) by your system's means." >&2
  exit 1
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "ci/kerberos.sh: the GSSAPI tests need the Debian packages ${missing[*]}, and installing" >&2
  echo "them needs root: run  sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
  echo "(or run ci/bootstrap.sh as root)." >&2
  exit 1
fi
echo "==> installing ${missing[*]} (apt-get)"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends "${missing[@]}"
