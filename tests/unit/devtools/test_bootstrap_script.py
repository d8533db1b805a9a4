"""ci/bootstrap.sh and ci/kerberos.sh, run for real on a stand-in checkout whose venv's python
only records how it was called: the demo's set-up (``--demo``) never runs ci/kerberos.sh and
installs only its own extras, the test command's installs the rest, also over a venv the demo made
(the install stamp tells the two apart), installers stay quiet unless one fails, and a user
without root is told in one line what the GSSAPI tests need."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
# The editable install builds no extension ("pure"): the in-place build after it does, once.
DEMO_INSTALL = "-m pip install --disable-pip-version-check --no-compile -e .[spark,cli,broker] (pure)"
FULL_INSTALL = "-m pip install --disable-pip-version-check --no-compile -e .[test,bench,spark,cli,broker,schema-registry,gssapi] (pure)"

# The venv's python: records its arguments; `-c` answers the site-packages path, `-` (the codec
# check) the line the real one prints; FAIL_ON makes the call containing it fail, noisily.
FAKE_PYTHON = """#!/usr/bin/env bash
echo "$*${KAFKA_CORE_PURE_PYTHON:+ (pure)}" >>"$CALLS"
if [ -n "${FAIL_ON:-}" ] && [[ "$*" == *"$FAIL_ON"* ]]; then
  echo "ERROR: the installer's own words"; exit 1
fi
case "$1" in
  -c) echo "$SITE" ;;
  -) cat >/dev/null; echo "==> kafka_core codec: cython" ;;
  *) echo "a line an installer prints" ;;
esac
"""


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "ci").mkdir(parents=True)
    shutil.copy(ROOT / "ci" / "bootstrap.sh", root / "ci" / "bootstrap.sh")
    (root / "ci" / "kerberos.sh").write_text('echo "kerberos.sh $*" >>"$CALLS"\n')
    (root / "pyproject.toml").write_text('[project]\nname = "stand-in"\n')
    (root / "setup.py").write_text("")
    (root / "site").mkdir()
    python = root / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(FAKE_PYTHON)
    python.chmod(0o755)
    return root


def bootstrap(
    root: Path, *args: str, fail_on: str = ""
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    calls = root / "calls"
    calls.write_text("")
    # The pure-Python unit run sets KAFKA_CORE_PURE_PYTHON for the tests; the scripts must not
    # inherit it, or every call would read as the editable install's extension-less build.
    inherited = {k: v for k, v in os.environ.items() if k != "KAFKA_CORE_PURE_PYTHON"}
    env = {
        **inherited,
        "CALLS": str(calls),
        "SITE": str(root / "site"),
        "PYTHON": sys.executable,
        "FAIL_ON": fail_on,
    }
    proc = subprocess.run(
        ["bash", str(root / "ci" / "bootstrap.sh"), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    return proc, calls.read_text().splitlines()


def test_the_demo_set_up_installs_its_extras_only_and_never_kerberos(checkout: Path) -> None:
    proc, calls = bootstrap(checkout, "--demo")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not [c for c in calls if c.startswith("kerberos.sh")], calls
    assert DEMO_INSTALL in calls, calls
    assert not [c for c in calls if "gssapi" in c], calls
    # the codec, compiled once, here, one compiler per core
    builds = [c for c in calls if "build_ext" in c]
    assert len(builds) == 1 and re.fullmatch(r"setup\.py -q build_ext --inplace -j [1-9]\d*", builds[0]), (
        calls
    )


def test_the_test_commands_set_up_runs_kerberos_with_the_log_and_installs_every_extra(checkout: Path) -> None:
    proc, calls = bootstrap(checkout)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert calls[0] == "kerberos.sh .venv/bootstrap.log", calls
    assert FULL_INSTALL in calls, calls


def test_a_demo_venv_used_for_the_tests_gets_the_rest_and_not_the_other_way(checkout: Path) -> None:
    assert bootstrap(checkout, "--demo")[0].returncode == 0
    _, calls = bootstrap(checkout, "--demo")
    assert not [c for c in calls if "pip install" in c], calls  # warm: nothing installed
    _, calls = bootstrap(checkout)
    assert FULL_INSTALL in calls, calls
    _, calls = bootstrap(checkout, "--demo")
    assert not [c for c in calls if "pip install" in c], calls  # the full set covers the demo's
    _, calls = bootstrap(checkout)
    assert not [c for c in calls if "pip install" in c], calls


def test_changed_packaging_files_reinstall(checkout: Path) -> None:
    assert bootstrap(checkout)[0].returncode == 0
    (checkout / "pyproject.toml").write_text('[project]\nname = "stand-in"\nversion = "2"\n')
    _, calls = bootstrap(checkout, "--demo")
    assert DEMO_INSTALL in calls, calls
    _, calls = bootstrap(checkout)  # the stamp now says: the demo's extras only
    assert FULL_INSTALL in calls, calls


def test_installers_are_quiet_one_line_a_phase_and_shown_in_full_when_one_fails(checkout: Path) -> None:
    proc, _ = bootstrap(checkout, "--demo")
    assert "a line an installer prints" not in proc.stdout + proc.stderr
    assert all(line.startswith("==> ") for line in proc.stdout.splitlines()), proc.stdout
    assert ".venv/bootstrap.log" in proc.stdout.splitlines()[0], proc.stdout
    (checkout / ".venv" / ".kafka_core-installed").unlink()

    proc, _ = bootstrap(checkout, "--demo", fail_on="-e .[")
    assert proc.returncode == 1
    assert "failed: python -m pip install" in proc.stderr, proc.stderr
    assert "ERROR: the installer's own words" in proc.stderr, proc.stderr
    assert "a line an installer prints" in proc.stderr, proc.stderr  # the whole log, not a tail
    assert not (checkout / ".venv" / ".kafka_core-installed").exists()


def test_a_mode_it_does_not_know_is_refused(checkout: Path) -> None:
    proc, calls = bootstrap(checkout, "--demmo")
    assert proc.returncode == 2 and "usage: ci/bootstrap.sh [--demo]" in proc.stderr
    assert calls == []


def test_kerberos_without_root_says_what_to_install_in_one_line(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in {
        "dpkg-query": "exit 1",
        "apt-get": "echo apt-get ran >&2; exit 0",
        "id": "echo 1000",
    }.items():
        (bin_dir / name).write_text(f"#!/usr/bin/env bash\n{body}\n")
        (bin_dir / name).chmod(0o755)
    proc = subprocess.run(
        ["bash", str(ROOT / "ci" / "kerberos.sh")],
        capture_output=True,
        text=True,
        env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"},
        timeout=30,
        check=False,
    )
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "sudo apt-get update && sudo apt-get install -y" in lines[0], lines[0]
    assert "krb5-kdc krb5-admin-server krb5-user libkrb5-dev" in lines[0], lines[0]
    assert "apt-get ran" not in proc.stderr and proc.stdout == ""
