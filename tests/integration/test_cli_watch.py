"""``kafka-core groups lag GROUP --watch`` run as a subprocess against the test broker while a
producer and a group consumer run beside it: the figures move as the group's work does.

The watch's JSON lines are read as they come; the phases are driven by what the frames show
(a deadline on each is a hang guard, never an assertion about time).
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fakes.cli import KAFKA_CORE, ok, one_error_line, run

from kafka_core import KafkaConsumer, KafkaProducer

INTERVAL = "0.5"  # seconds between refreshes: the rates span 5 of them
PHASE_GUARD = 90.0  # seconds a phase may take before the test gives up (a hang guard)


class Watch:
    """The watch subprocess and a reader thread handing its stdout lines over a queue."""

    def __init__(self, servers: str, *command: str) -> None:
        env = {k: v for k, v in os.environ.items() if k != "KAFKA_BOOTSTRAP_SERVERS"}
        env["KAFKA_BOOTSTRAP_SERVERS"] = servers
        self.proc = subprocess.Popen(
            [KAFKA_CORE, *command, "--interval", INTERVAL],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            text=True,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def line(self, guard: float = PHASE_GUARD) -> str:
        try:
            got = self.lines.get(timeout=guard)
        except queue.Empty:
            pytest.fail(f"the watch printed nothing for {guard} s")
        if got is None:
            err = self.proc.stderr.read() if self.proc.stderr else ""
            pytest.fail(f"the watch ended early: exit {self.proc.wait(10)}, {err}")
        return got

    def frame_until(self, wanted: Callable[[dict[str, Any]], bool], what: str) -> list[dict[str, Any]]:
        """The frames up to the first one that satisfies ``wanted``."""
        frames: list[dict[str, Any]] = []
        deadline = time.monotonic() + PHASE_GUARD
        while time.monotonic() < deadline:
            frames.append(json.loads(self.line()))
            if wanted(frames[-1]):
                return frames
        pytest.fail(f"no frame showed {what} within {PHASE_GUARD} s; the last: {frames[-1:]}")

    def interrupt(self) -> tuple[int, str, str]:
        """Ctrl-C; the exit code, what was left on stdout, and stderr."""
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=30)  # a hang guard: Ctrl-C ends it at once
        finally:
            self.close()
        rest = []
        while (line := self.lines.get(timeout=10)) is not None:
            rest.append(line)
        return self.proc.returncode, "".join(rest), self.proc.stderr.read() if self.proc.stderr else ""

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


class Producing:
    """A producer writing small batches round-robin to every partition until stopped."""

    def __init__(self, servers: str, topic: str, partitions: int) -> None:
        self.stop = threading.Event()
        self.sent = 0
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(servers, topic, partitions), daemon=True)
        self.thread.start()

    def _run(self, servers: str, topic: str, partitions: int) -> None:
        try:
            with KafkaProducer(bootstrap_servers=servers, linger_ms=5) as producer:
                while not self.stop.is_set():
                    for p in range(partitions):
                        for _ in range(5):
                            producer.send(topic, b"x" * 20, partition=p)
                    producer.flush(30)
                    self.sent += 5 * partitions
                    self.stop.wait(0.05)
        except BaseException as exc:
            self.error = exc

    def end(self) -> None:
        self.stop.set()
        self.thread.join(60)
        assert self.error is None, self.error


class Consuming:
    """A group member polling and committing often (auto-commit every 200 ms) until stopped;
    it leaves the group on its way out."""

    def __init__(self, servers: str, topic: str, group: str) -> None:
        self.stop = threading.Event()
        self.got = 0
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(servers, topic, group), daemon=True)
        self.thread.start()

    def _run(self, servers: str, topic: str, group: str) -> None:
        try:
            consumer = KafkaConsumer(
                topic,
                bootstrap_servers=servers,
                group_id=group,
                auto_offset_reset="earliest",
                auto_commit_interval_ms=200,
                session_timeout_ms=10_000,
            )
            try:
                while not self.stop.is_set():
                    self.got += len(consumer.poll(timeout_ms=200))
            finally:
                consumer.close()
        except BaseException as exc:
            self.error = exc

    def end(self) -> None:
        self.stop.set()
        self.thread.join(60)
        assert self.error is None, self.error


@pytest.fixture
def running(bootstrap_servers: str, new_topic: Callable[..., str]) -> Iterator[tuple[str, str, Producing]]:
    """A 3-partition topic being produced to, and a group with one member consuming it and
    committing: ``(topic, group, producer)``; the member is stopped by the test."""
    topic = new_topic(3)
    group = f"cli-watch-{uuid.uuid4().hex[:8]}"
    producing = Producing(bootstrap_servers, topic, 3)
    try:
        yield topic, group, producing
    finally:
        producing.stop.set()
        producing.thread.join(60)


def test_watch_follows_a_group_consuming_then_stopped(
    bootstrap_servers: str, running: tuple[str, str, Producing]
) -> None:
    topic, group, producing = running
    consuming = Consuming(bootstrap_servers, topic, group)
    try:
        # The group exists for the watch once it committed something.
        deadline = time.monotonic() + PHASE_GUARD
        while (
            proc := run("groups", "lag", group, "--json", servers=bootstrap_servers)
        ).returncode != 0 or not [p for p in json.loads(proc.stdout)["partitions"] if p["committed"]]:
            assert time.monotonic() < deadline, proc.stderr.decode()
            time.sleep(0.5)
        watch = Watch(bootstrap_servers, "groups", "lag", group, "--watch", "--json", "--top", "2")
        try:
            first = json.loads(watch.line())
            assert first["group_id"] == group and first["refresh"] == 1 and first["error"] is None
            assert first["partition_count"] == 3 and len(first["partitions"]) == 2  # --top 2
            assert first["total"]["consumed_per_s"] is None  # no rates from one reading
            # both sides moving: records consumed and produced per second, one member
            working = watch.frame_until(
                lambda f: bool(
                    f["members"] == 1
                    and f["total"]["consumed_per_s"]
                    and f["total"]["produced_per_s"]
                    and f["window_s"] > 0
                ),
                "a member consuming while records are produced",
            )[-1]
            assert working["total"]["consumed_per_s"] > 0 and working["total"]["produced_per_s"] > 0
            assert working["state"] == "Stable"
            lags = [p["lag"] for p in working["partitions"]]
            assert lags == sorted(lags, reverse=True)  # the most lag first
            consuming.end()  # the member leaves; the producer goes on
            behind = watch.frame_until(
                lambda f: bool(
                    f["members"] == 0
                    and f["total"]["consumed_per_s"] == 0
                    and (f["total"]["lag_per_s"] or 0) > 0
                ),
                "the lag rising with nobody consuming",
            )
            last = behind[-1]
            assert last["state"] == "Empty"
            assert last["total"]["produced_per_s"] > 0
            assert last["rebalances"] >= 1  # the member's leaving changed the group
            producing.end()
            steady = watch.frame_until(
                lambda f: f["total"]["produced_per_s"] == 0 and f["total"]["lag_per_s"] == 0,
                "the lag steady once nothing is produced",
            )[-1]
            assert steady["total"]["lag"] >= last["total"]["lag"]
            code, rest, err = watch.interrupt()
        finally:
            watch.close()
    finally:
        consuming.stop.set()
        consuming.thread.join(60)
    assert code == 0, err
    assert "Traceback" not in err
    assert "stopped after" in err and "refreshes" in err
    for line in rest.splitlines():  # a line cut by Ctrl-C would not parse
        json.loads(line)


def test_piped_watch_prints_plain_blocks(bootstrap_servers: str, new_topic: Callable[..., str]) -> None:
    topic = new_topic(2)
    group = f"cli-watch-plain-{uuid.uuid4().hex[:8]}"
    ok(
        run(
            "produce", "-t", topic, servers=bootstrap_servers, stdin=b"".join(b"r%d\n" % i for i in range(20))
        )
    )
    ok(run("consume", "-t", topic, "-g", group, "--from-beginning", "-c", "10", servers=bootstrap_servers))
    # 10 on Apache Kafka; Tansu's end offsets may read lower (docs/cli.md): the one-shot figure
    lag = json.loads(ok(run("groups", "lag", group, "--json", servers=bootstrap_servers)))["total"]
    watch = Watch(bootstrap_servers, "groups", "lag", group, "--watch")
    try:
        block: list[str] = []
        blocks: list[list[str]] = []
        while len(blocks) < 2:
            line = watch.line().rstrip("\n")
            if line:
                block.append(line)
            else:
                blocks.append(block)
                block = []
        code, _, err = watch.interrupt()
    finally:
        watch.close()
    assert code == 0, err
    for lines in blocks:
        text = "\n".join(lines)
        assert "\x1b" not in text
        assert lines[0].startswith(f"{group}: Empty, 0 members; rebalances seen 0")
        assert lines[1].startswith(f"total lag {lag} (")
        assert lines[2].split()[:5] == ["topic", "partition", "committed", "end", "lag"]
        assert {line.split()[0] for line in lines[4:]} == {topic}
    assert "rates from the next refresh" in blocks[0][1]
    assert f"total lag {lag} (steady); consumed 0/s, produced 0/s over the last" in blocks[1][1]


@pytest.mark.tansu_deviation("DescribeGroups of an unknown group answers Empty instead of Dead")
def test_watch_of_a_group_that_does_not_exist_is_exit_4(bootstrap_servers: str) -> None:
    proc = run(
        "groups",
        "lag",
        f"nobody-{uuid.uuid4().hex[:8]}",
        "--watch",
        servers=bootstrap_servers,
        timeout=30,  # a hang guard: Tansu's answer would make it watch an empty group
    )
    assert proc.returncode == 4
    assert "does not exist" in one_error_line(proc)


# -- topics watch ------------------------------------------------------------------------------------


def test_topics_watch_follows_the_produce_rate(
    bootstrap_servers: str, running: tuple[str, str, Producing]
) -> None:
    topic, _, producing = running
    watch = Watch(bootstrap_servers, "topics", "watch", topic, "--json", "--top", "2")
    try:
        first = json.loads(watch.line())
        assert first["topic"] == topic and first["partition_count"] == 3 and len(first["partitions"]) == 2
        assert first["total"]["produced_per_s"] is None
        moving = watch.frame_until(
            lambda f: bool(f["total"]["produced_per_s"]), "records produced per second"
        )[-1]
        rates = [p["produced_per_s"] for p in moving["partitions"]]
        assert all(r > 0 for r in rates) and rates == sorted(rates, reverse=True)
        assert moving["total"]["produced_per_s"] >= sum(rates)  # the total counts all 3 partitions
        producing.end()
        still = watch.frame_until(lambda f: f["total"]["produced_per_s"] == 0, "nothing produced")[-1]
        assert [p["produced_per_s"] for p in still["partitions"]] == [0, 0]
        code, _, err = watch.interrupt()
    finally:
        watch.close()
    assert code == 0, err
    assert "kafka-core topics watch: stopped after" in err


def test_topics_watch_of_a_missing_topic_is_exit_4(bootstrap_servers: str) -> None:
    proc = run("topics", "watch", f"nothing-{uuid.uuid4().hex[:8]}", servers=bootstrap_servers, timeout=30)
    assert proc.returncode == 4
    assert "does not exist" in one_error_line(proc)


# -- in a real terminal ------------------------------------------------------------------------------


def test_watch_redraws_in_place_in_a_terminal(
    bootstrap_servers: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    tmux = shutil.which("tmux")
    if tmux is None:
        pytest.fail("tmux is needed for the terminal test", pytrace=False)
    topic = new_topic(2)
    group = f"cli-watch-tty-{uuid.uuid4().hex[:8]}"
    ok(
        run(
            "produce", "-t", topic, servers=bootstrap_servers, stdin=b"".join(b"r%d\n" % i for i in range(20))
        )
    )
    ok(run("consume", "-t", topic, "-g", group, "--from-beginning", "-c", "10", servers=bootstrap_servers))
    # 10 on Apache Kafka; Tansu's end offsets may read lower (docs/cli.md): the one-shot figure
    lag = json.loads(ok(run("groups", "lag", group, "--json", servers=bootstrap_servers)))["total"]
    done = tmp_path / "done"
    session = f"kwatch-{uuid.uuid4().hex[:8]}"
    command = (
        f"KAFKA_BOOTSTRAP_SERVERS={bootstrap_servers} {KAFKA_CORE} groups lag {group} --watch "
        f"--interval {INTERVAL}; echo EXIT=$? > {done}; sleep 60"
    )
    subprocess.run(
        [tmux, "new-session", "-d", "-s", session, "-x", "140", "-y", "30", command], check=True, timeout=30
    )

    def screen() -> str:
        return subprocess.run(
            [tmux, "capture-pane", "-p", "-t", session], capture_output=True, check=True, timeout=30
        ).stdout.decode()

    try:
        deadline = time.monotonic() + PHASE_GUARD
        shown = ""
        while "over the last" not in shown and time.monotonic() < deadline:  # the second refresh or later
            time.sleep(0.5)
            shown = screen()
        subprocess.run([tmux, "send-keys", "-t", session, "C-c"], check=True, timeout=30)
        while not done.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        final = screen()
    finally:
        subprocess.run([tmux, "kill-session", "-t", session], check=False, timeout=30)
    assert "over the last" in shown, shown
    assert shown.count(f"{group}: Empty, 0 members") == 1, shown  # redrawn in place, not appended
    assert f"total lag {lag} (steady)" in shown and "Ctrl-C to stop" in shown, shown
    assert "┃" in shown or "│" in shown, shown  # rich's table, not the plain one
    assert done.exists() and done.read_text().strip() == "EXIT=0", final
