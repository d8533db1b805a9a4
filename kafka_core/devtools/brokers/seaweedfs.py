"""The SeaweedFS Kafka gateway (SeaweedFS Message Queue), a Kafka-compatible server in Go, for the
compatibility subset of the tests.

SeaweedFS is not on PyPI: a small Go program of ours (``seaweedfs_gateway/`` beside this module,
package data shipped in the wheel) runs a one-node SeaweedFS (master, volume server, filer, MQ
broker) and the gateway in one process, with no schema registry. It is built with ``go`` on first
use into the user cache (``~/.cache/kafka_core/seaweedfs/``, keyed by the program's sources and build flags), from
SeaweedFS without the plugins it never runs; a cold build (450 MB of modules, some 1,200 packages)
takes about 4 minutes on two cores (CI: :func:`download_seaweedfs_gateway_modules` early,
:func:`seaweedfs_gateway_binary` later). Ready
takes about 30 s (the MQ broker must win its balancer lock before it can create a topic).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kafka_core.devtools.brokers.common import (
    BrokerStartError,
    OneProcessBroker,
    admin_create_topic,
    die_with_parent,
    free_ports,
    port_open,
    read_tail,
    stop_process,
)
from kafka_core.devtools.brokers.kafka_jars import cache_root

__all__ = [
    "SeaweedGateway",
    "download_seaweedfs_gateway_modules",
    "seaweedfs_build_key",
    "seaweedfs_gateway_binary",
]

_READY = b"seaweedfs-gateway ready "  # the Go program's one line on stdout (main.go: ReadyPrefix)
_SOURCES = ("go.mod", "go.sum", "main.go")
_NAME = "seaweedfs-gateway"
_MODULE = "github.com/seaweedfs/seaweedfs"
# A cold build is compile-bound: some 1,200 packages on two cores. SeaweedFS registers its optional
# plugins (filer stores, notification queues, credential stores, KMS, remote and tiered storage,
# replication sinks, worker tasks) by blank imports; the gateway's node runs none of them (the filer
# keeps its default leveldb2 store), so the build compiles a copy of the module whose blank imports
# of plugins are dropped, but for these. No other line of SeaweedFS changes.
_PLUGINS_KEPT = frozenset(
    f"{_MODULE}/weed/{name}"
    for name in (
        "filer/leveldb",
        "filer/leveldb2",
        "filer/leveldb3",
        "notification/log",
        "credential/filer_etc",
        "credential/memory",
        "kms/local",
    )
)
_BLANK_IMPORT = re.compile(rb'^[ \t]*_[ \t]+"(github\.com/seaweedfs/seaweedfs/[^"]+)"[^\n]*\n', re.MULTILINE)
# -N -l (no optimisation, no inlining) compile faster; given to every package but those the
# gateway runs (the standard library, SeaweedFS, gRPC, protobuf, HTTP/2, leveldb, compression, the
# MQ broker's parquet log store), the latest pattern winning. -s -w leave out the symbol table and
# DWARF (a shorter link, a smaller binary); -trimpath keeps the build's paths out of the binary.
# Part of the cache key: other flags give another binary.
_FAST_PACKAGES = (
    "std",
    f"{_MODULE}/...",
    "google.golang.org/grpc/...",
    "google.golang.org/protobuf/...",
    "golang.org/x/net/...",
    "github.com/syndtr/goleveldb/...",
    "github.com/klauspost/compress/...",
    "github.com/golang/snappy/...",
    "github.com/pierrec/lz4/...",
    "github.com/parquet-go/...",
    "golang.org/x/sys/...",
)
_BUILD_FLAGS: tuple[str, ...] = (
    "-trimpath",
    "-buildvcs=false",
    "-ldflags=-s -w",
    "-gcflags=all=-N -l",
    *(f"-gcflags={pattern}=" for pattern in _FAST_PACKAGES),
)


def _source_dir() -> Path:
    """``$SEAWEEDFS_GATEWAY_SRC``, else the package's own copy (``seaweedfs_gateway/``, read only:
    the build writes to the cache)."""
    explicit = os.environ.get("SEAWEEDFS_GATEWAY_SRC")
    if explicit:
        return Path(explicit)
    return Path(__file__).resolve().with_name("seaweedfs_gateway")


def _sources() -> Path:
    """The Go sources' directory, checked to hold every file the build and the cache key use."""
    source = _source_dir()
    if not all((source / name).is_file() for name in _SOURCES):
        raise BrokerStartError(
            f"the SeaweedFS gateway's Go sources are not at {source} (main.go, go.mod and go.sum ship "
            "in the package): set SEAWEEDFS_GATEWAY_SRC or SEAWEEDFS_GATEWAY_BIN"
        )
    return source


def _go(source: Path) -> str:
    go = shutil.which("go")
    if go is None:
        raise BrokerStartError(
            f"the SeaweedFS gateway is built from {source} with Go, and `go` is not on PATH: install "
            "Go 1.26 or newer (https://go.dev/doc/install; Debian's golang-go may be too old), "
            "or set KAFKA_BOOTSTRAP_SERVERS to a running gateway"
        )
    return go


def _run_go(command: list[str], source: Path, what: str, timeout: float) -> bytes:
    """Run one go command in the sources (nice'd: it shares the machine with the tests); its stdout."""
    env = dict(os.environ)
    env["GOFLAGS"] = "-mod=readonly"  # go.sum is committed: never rewrite it
    if shutil.which("nice"):
        command = ["nice", *command]
    try:
        result = subprocess.run(
            command, cwd=source, env=env, capture_output=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise BrokerStartError(
            f"{what} of the SeaweedFS gateway ({source}) took over {timeout:.0f} s"
        ) from exc
    if result.returncode != 0:
        output = (result.stdout + result.stderr).decode(errors="replace")
        raise BrokerStartError(
            f"{what} of the SeaweedFS gateway in {source} failed ({result.returncode}); "
            f"is the Go module proxy reachable? {output[-2000:]}"
        )
    return result.stdout


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)  # the module cache's files are never written: a hard link is a copy
    except OSError:
        shutil.copyfile(src, dst)


def _without_plugins(text: bytes) -> bytes | None:
    """``text`` without its blank imports of SeaweedFS plugins not kept, or None if it has none."""
    dropped = False

    def drop(match: re.Match[bytes]) -> bytes:
        nonlocal dropped
        if match.group(1).decode() in _PLUGINS_KEPT:
            return match.group(0)
        dropped = True
        return b""

    kept = _BLANK_IMPORT.sub(drop, text)
    return kept if dropped else None


def _trimmed_module(go: str, source: Path, workdir: Path, timeout: float) -> list[str]:
    """Lay out SeaweedFS without its unused plugins in ``workdir``; the go flags that build with it.

    Downloads the module (the version go.mod pins, checked against go.sum), links its files into
    ``workdir`` and rewrites the files that blank-import a plugin not kept; the build then reads a
    go.mod of its own (``-modfile``: go.mod plus a replace to that copy) and the committed go.sum.
    """
    info = json.loads(
        _run_go([go, "mod", "download", "-json", _MODULE], source, "downloading SeaweedFS", timeout)
    )
    module = Path(info["Dir"])
    tree = workdir / "seaweedfs"
    for folder, _dirs, files in os.walk(module):
        target = tree / Path(folder).relative_to(module)
        target.mkdir(parents=True, exist_ok=True)
        for name in files:
            _link_or_copy(os.path.join(folder, name), str(target / name))
            if not name.endswith(".go") or name.endswith("_test.go"):
                continue
            trimmed = _without_plugins((target / name).read_bytes())
            if trimmed is not None:
                (target / name).unlink()  # a link: writing through it would change the module cache
                (target / name).write_bytes(trimmed)
    modfile = workdir / "build.mod"
    replace = f"replace {_MODULE} => {json.dumps(str(tree))}"  # a Go string: the path may hold spaces
    modfile.write_text(f"{(source / 'go.mod').read_text()}\n{replace}\n")
    shutil.copyfile(source / "go.sum", workdir / "build.sum")  # -modfile's go.sum sits beside it
    return [f"-modfile={modfile}"]


def download_seaweedfs_gateway_modules(*, timeout: float = 1800.0) -> None:
    """Fetch the Go modules the gateway's build needs into Go's module cache, compiling nothing.

    For CI to start the download early, in the background, while other stages use the CPU: the
    later :func:`seaweedfs_gateway_binary` then only compiles. Loading the program's package graph
    fetches the modules that provide its packages and no other (``go mod download`` would take
    every module go.mod lists). Does nothing when ``$SEAWEEDFS_GATEWAY_BIN`` is set.
    """
    if os.environ.get("SEAWEEDFS_GATEWAY_BIN"):
        return
    source = _sources()
    go = _go(source)
    _building_dir().mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="download-", dir=_building_dir()) as workdir:
        flags = _trimmed_module(go, source, Path(workdir), timeout)
        _run_go(
            [go, "list", *flags, "-deps", "-f", "{{.ImportPath}}", "."],
            source,
            "downloading the modules",
            timeout,
        )


def _building_dir() -> Path:
    return cache_root() / "seaweedfs" / "building"


def seaweedfs_build_key(source: Path) -> str:
    """The build cache's key: the Go sources in ``source``, the build flags and the plugins kept."""
    digest = hashlib.sha256()
    for name in _SOURCES:
        digest.update((source / name).read_bytes())
    digest.update("\0".join([*_BUILD_FLAGS, *sorted(_PLUGINS_KEPT)]).encode())
    return digest.hexdigest()[:16]


def seaweedfs_gateway_binary(*, timeout: float = 3600.0) -> str:
    """Path of the gateway program: ``$SEAWEEDFS_GATEWAY_BIN``, else built from the sources.

    The build is keyed by the sources' hash and the build flags, so an edit (a new SeaweedFS
    version) builds anew; concurrent callers wait for one build (a file lock). Raises
    :class:`BrokerStartError` naming what to install when ``go`` is missing, and go's own complaint
    when the build fails.
    """
    explicit = os.environ.get("SEAWEEDFS_GATEWAY_BIN")
    if explicit:
        return explicit
    source = _sources()
    target_dir = cache_root() / "seaweedfs" / seaweedfs_build_key(source)
    target = target_dir / _NAME
    if target.is_file():
        return str(target)
    go = _go(source)
    target_dir.mkdir(parents=True, exist_ok=True)
    with (target_dir / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be building the same sources
        if target.is_file():
            return str(target)
        staging = target_dir / f".{_NAME}.{os.getpid()}"
        _building_dir().mkdir(parents=True, exist_ok=True)
        try:
            with tempfile.TemporaryDirectory(prefix="build-", dir=_building_dir()) as workdir:
                flags = _trimmed_module(go, source, Path(workdir), timeout)
                command = [go, "build", *flags, *_BUILD_FLAGS, "-o", str(staging), "."]
                _run_go(command, source, "`go build`", timeout)
            if not staging.is_file():
                raise BrokerStartError(f"`go build` of the SeaweedFS gateway in {source} wrote no {staging}")
        except BaseException:
            staging.unlink(missing_ok=True)
            raise
        staging.rename(target)
    return str(target)


class SeaweedGateway(OneProcessBroker):
    """One SeaweedFS node and its Kafka gateway, in one process on loopback.

    Every port is chosen once, so :meth:`restart` comes back on the same address with the same
    data directory. Topics survive it; in a first check, records produced just before a graceful
    restart were not read back after it, so tests should not rely on records surviving yet.
    """

    def __init__(
        self,
        port: int | None = None,
        *,
        host: str = "127.0.0.1",
        default_partitions: int = 1,
        workdir: str | Path | None = None,
        startup_timeout: float = 120.0,
        build_timeout: float = 3600.0,
    ) -> None:
        self.host = host
        internal = (
            "master.port",
            "master.port.grpc",
            "volume.port",
            "volume.port.grpc",
            "filer.port",
            "filer.port.grpc",
            "broker.port",
        )
        picked = [p for p in free_ports(len(internal) + 1, host) if p != port]
        self.port = port or picked.pop()
        self.internal_ports = dict(zip(internal, picked, strict=False))
        self.default_partitions = default_partitions
        self.startup_timeout = startup_timeout
        self.build_timeout = build_timeout
        self._owns_workdir = workdir is None
        self.workdir = Path(workdir) if workdir is not None else Path(tempfile.mkdtemp(prefix="seaweedfs-"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.log_path = self.workdir / "gateway.log"
        self._proc: subprocess.Popen[bytes] | None = None
        self.start_seconds: float | None = None  # the last start, from spawn to the ready line

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def _command(self, binary: str) -> list[str]:
        return [
            binary,
            f"-host={self.host}",
            f"-port={self.port}",
            f"-dir={self.workdir / 'data'}",
            f"-default-partitions={self.default_partitions}",
            *(f"-{name}={port}" for name, port in self.internal_ports.items()),
        ]

    def start(self) -> SeaweedGateway:
        """Build the program if needed, start it, return once the gateway says it is ready."""
        if self.running:
            return self
        binary = seaweedfs_gateway_binary(timeout=self.build_timeout)
        env = dict(os.environ)
        env.pop("KAFKA_ADVERTISED_HOST", None)
        began = time.monotonic()
        with self.log_path.open("ab") as log:
            log.write(b"--- kafka_core devbroker: starting the SeaweedFS gateway ---\n")
            log.flush()
            ready_from = log.tell()
            self._proc = subprocess.Popen(
                self._command(binary),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                cwd=self.workdir,
                preexec_fn=die_with_parent if sys.platform == "linux" else None,
            )
        deadline = began + self.startup_timeout
        while True:
            if self._proc.poll() is not None:
                code = self._proc.returncode
                self._proc = None
                raise BrokerStartError(
                    f"the SeaweedFS gateway exited with {code} while starting: {self.log_tail()}"
                )
            if self._ready_line_since(ready_from) and port_open(self.host, self.port):
                self.start_seconds = time.monotonic() - began
                return self
            if time.monotonic() > deadline:
                self.kill()
                raise BrokerStartError(
                    f"the SeaweedFS gateway was not ready on {self.bootstrap} within "
                    f"{self.startup_timeout:.0f} s: {self.log_tail()}"
                )
            time.sleep(0.1)

    def _ready_line_since(self, offset: int) -> bool:
        with self.log_path.open("rb") as log:
            log.seek(offset)
            return _READY in log.read()

    def stop(self, timeout: float = 20.0) -> None:
        """A clean shutdown (SIGTERM: the gateway closes, then the servers under it)."""
        proc, self._proc = self._proc, None
        stop_process(proc, timeout)

    def create_topic(self, name: str, partitions: int = 3, timeout: float = 60.0) -> None:
        """Create a topic through kafka_core's admin (a topic that already exists is fine)."""
        admin_create_topic(self.bootstrap, name, partitions, 1, timeout=timeout)

    def log_tail(self, limit: int = 4000) -> str:
        return read_tail(self.log_path, limit)

    def close(self) -> None:
        try:
            self.stop()
        finally:
            if self._owns_workdir:
                shutil.rmtree(self.workdir, ignore_errors=True)

    def __repr__(self) -> str:
        return f"SeaweedGateway(bootstrap={self.bootstrap!r}, workdir={str(self.workdir)!r})"
