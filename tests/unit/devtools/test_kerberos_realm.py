"""The throwaway Kerberos realm's module (kafka_core/devtools/kerberos.py) without a KDC: it imports
first in a fresh interpreter (it and the brokers package import each other's modules), and a
machine without MIT's KDC gets an error naming what to install. The realm itself runs in
tests/integration/test_gssapi_kafka.py (the session's ``kerberos_realm``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import kafka_core.devtools.kerberos as kerberos
from kafka_core.devbroker import BrokerStartError


@pytest.mark.parametrize(
    "module",
    ["kafka_core.devtools.kerberos", "kafka_core.devtools.brokers.kafka_kerberos", "kafka_core.devbroker"],
)
def test_each_module_imports_first_in_a_fresh_interpreter(module: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", f"import {module}"], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr


def test_without_the_kdc_the_error_names_the_packages(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(kerberos, "kerberos_tools", lambda: None)
    realm = kerberos.KerberosRealm(workdir=tmp_path)
    with pytest.raises(BrokerStartError, match="krb5-kdc krb5-admin-server") as info:
        realm.start()
    assert "ci/kerberos.sh" in str(info.value)
    assert not realm.running
