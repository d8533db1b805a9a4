"""The SeaweedFS gateway launcher: how it finds or builds the program, and how it sees readiness.

The real program takes a long Go build; a stand-in script plays its part here (it listens on the
port it is given and prints the ready line, or misbehaves). The real gateway is exercised by the
integration suites with KAFKA_BROKER_FLAVOR=seaweedfs.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from kafka_core.devtools.brokers.common import BrokerStartError, port_open
from kafka_core.devtools.brokers.seaweedfs import (
    SeaweedGateway,
    seaweedfs_build_key,
    seaweedfs_gateway_binary,
)

pytestmark = pytest.mark.timeout(60)

STAND_IN = """\
import socket, sys, time
args = dict(a.lstrip("-").split("=", 1) for a in sys.argv[1:] if "=" in a)
mode = {mode!r}
if mode == "exit":
    print("no master", flush=True)
    sys.exit(3)
server = socket.socket()
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind((args["host"], int(args["port"])))
server.listen()
time.sleep(0.5)  # listening before it is ready, as the gateway is not
if mode == "ready":
    print("seaweedfs-gateway ready " + args["host"] + ":" + args["port"], flush=True)
while True:
    time.sleep(1)
"""


def stand_in(tmp_path: Path, mode: str) -> str:
    script = tmp_path / f"gateway-{mode}"
    script.write_text(f"#!{sys.executable}\n" + STAND_IN.format(mode=mode))
    script.chmod(0o755)
    return str(script)


@pytest.fixture
def no_prebuilt(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("SEAWEEDFS_GATEWAY_BIN", raising=False)
    monkeypatch.delenv("SEAWEEDFS_GATEWAY_SRC", raising=False)
    monkeypatch.setenv("KAFKA_CORE_CACHE", str(tmp_path / "cache"))


@pytest.mark.usefixtures("no_prebuilt")
def test_missing_go_names_what_to_install(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    with pytest.raises(BrokerStartError, match=r"`go` is not on PATH: install Go 1\.26"):
        seaweedfs_gateway_binary()
    with pytest.raises(BrokerStartError, match="`go` is not on PATH"):
        SeaweedGateway(workdir=tmp_path / "work").start()


@pytest.mark.usefixtures("no_prebuilt")
def test_missing_sources_say_where_they_were_looked_for(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("SEAWEEDFS_GATEWAY_SRC", str(tmp_path / "nowhere"))
    with pytest.raises(BrokerStartError, match="SEAWEEDFS_GATEWAY_SRC"):
        seaweedfs_gateway_binary()


@pytest.mark.usefixtures("no_prebuilt")
def test_a_built_program_is_reused_without_go(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The cache is keyed by the sources: once built, starting needs no Go toolchain."""
    source = tmp_path / "src"
    source.mkdir()
    for name in ("go.mod", "go.sum", "main.go"):
        (source / name).write_text(f"// {name}\n")
    built = tmp_path / "cache" / "seaweedfs" / seaweedfs_build_key(source) / "seaweedfs-gateway"
    built.parent.mkdir(parents=True)
    built.write_text("#!/bin/sh\n")
    monkeypatch.setenv("SEAWEEDFS_GATEWAY_SRC", str(source))
    monkeypatch.setenv("PATH", str(tmp_path))
    assert seaweedfs_gateway_binary() == str(built)
    (source / "main.go").write_text("// changed\n")
    with pytest.raises(BrokerStartError, match="`go` is not on PATH"):
        seaweedfs_gateway_binary()


def test_ready_only_once_the_program_says_so(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SEAWEEDFS_GATEWAY_BIN", stand_in(tmp_path, "ready"))
    gateway = SeaweedGateway(startup_timeout=30)
    workdir = gateway.workdir
    try:
        with gateway:
            assert gateway.running and gateway.pid is not None
            assert gateway.bootstrap == f"127.0.0.1:{gateway.port}"
            assert "seaweedfs-gateway ready" in gateway.log_tail()
            gateway.restart(crash=True)
            assert gateway.running and port_open("127.0.0.1", gateway.port)
            assert gateway.log_tail().count("seaweedfs-gateway ready") == 2
        assert not gateway.running
        assert not workdir.exists()
    finally:
        gateway.close()


def test_listening_is_not_ready(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SEAWEEDFS_GATEWAY_BIN", stand_in(tmp_path, "never"))
    gateway = SeaweedGateway(startup_timeout=3, workdir=tmp_path / "work")
    try:
        with pytest.raises(BrokerStartError, match=r"not ready on 127\.0\.0\.1"):
            gateway.start()
        assert not gateway.running
    finally:
        gateway.close()
    assert (tmp_path / "work").is_dir()  # a directory it was given is not its to remove


def test_a_program_that_exits_reports_its_log(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SEAWEEDFS_GATEWAY_BIN", stand_in(tmp_path, "exit"))
    with pytest.raises(BrokerStartError, match=r"(?s)exited with 3 while starting: .*no master"):
        SeaweedGateway(startup_timeout=30, workdir=tmp_path / "work").start()
