"""The real ``kafka-core`` console script, run as a subprocess against the test broker.

Each test runs the installed entry point (``<venv>/bin/kafka-core``) with the broker address in
``KAFKA_BOOTSTRAP_SERVERS``, as a user's shell would, and checks stdout, stderr and the exit code.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fakes.cli import KAFKA_CORE, ok, one_error_line, run

from kafka_core import KafkaAdmin, TopicPartition
from kafka_core.devbroker import free_port


def unused_address() -> str:
    return f"127.0.0.1:{free_port()}"


# -- produce and consume -----------------------------------------------------------------------


def test_lines_come_back_exactly_as_text(bootstrap_servers: str, new_topic: Callable[..., str]) -> None:
    topic = new_topic(1)
    lines = ["first", "", "with spaces and\ttab", "ünïcødé ✓", "last"]
    proc = run("produce", "-t", topic, servers=bootstrap_servers, stdin=("\n".join(lines) + "\n").encode())
    assert ok(proc).strip() == f"5 records sent to {topic}"
    assert proc.stderr == b""  # no progress display without a terminal
    got = run("consume", "-t", topic, "--from-beginning", "--count", "5", servers=bootstrap_servers)
    assert ok(got).split("\n")[:-1] == lines


def test_keys_and_headers_in_json_and_text(bootstrap_servers: str, new_topic: Callable[..., str]) -> None:
    topic = new_topic(1)
    produced = run(
        "produce",
        "--topic",
        topic,
        "--key-separator",
        "::",
        "--header",
        "source=cli",
        "--header",
        "n=1=one",
        "--compression",
        "zstd",
        "--json",
        servers=bootstrap_servers,
        stdin=b"k1::v1\nk2::v::2\n::no key\n",
    )
    report = json.loads(ok(produced))
    assert report["acknowledged"] == 3 and report["failed"] == 0
    got = run(
        "consume", "-t", topic, "--from-beginning", "-c", "3", "--format", "json", servers=bootstrap_servers
    )
    records = [json.loads(line) for line in ok(got).splitlines()]
    assert [(r["key"], r["value"]) for r in records] == [("k1", "v1"), ("k2", "v::2"), ("", "no key")]
    assert [r["offset"] for r in records] == [0, 1, 2]
    assert all(r["topic"] == topic and r["partition"] == 0 for r in records)
    assert all(r["headers"] == [["source", "cli"], ["n", "1=one"]] for r in records)
    text = run(
        "consume",
        "-t",
        topic,
        "-p",
        "0",
        "-o",
        "1",
        "-c",
        "2",
        "--print-key",
        "--print-headers",
        "-K",
        "|",
        servers=bootstrap_servers,
    )
    assert ok(text).splitlines() == ["source=cli,n=1=one|k2|v::2", "source=cli,n=1=one||no key"]


def test_produce_from_file_to_one_partition(
    bootstrap_servers: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = new_topic(3)
    data = tmp_path / "lines.txt"
    data.write_text("".join(f"line {i}\n" for i in range(500)))
    report = json.loads(
        ok(run("produce", "-t", topic, "-f", str(data), "-p", "2", "--json", servers=bootstrap_servers))
    )
    assert report == {
        "topic": topic,
        "read": 500,
        "acknowledged": 500,
        "failed": 0,
        "interrupted": False,
        "error": None,
    }
    got = run(
        "consume", "-t", topic, "-p", "2", "-o", "earliest", "-c", "500", "--json", servers=bootstrap_servers
    )
    records = [json.loads(line) for line in ok(got).splitlines()]
    assert [r["value"] for r in records] == [f"line {i}" for i in range(500)]
    assert {r["partition"] for r in records} == {2}


def test_consume_count_not_reached_in_timeout(bootstrap_servers: str, new_topic: Callable[..., str]) -> None:
    topic = new_topic(1)
    ok(run("produce", "-t", topic, servers=bootstrap_servers, stdin=b"a\nb\n"))
    proc = run(  # the subprocess timeout is a hang guard: --timeout ends it
        "consume",
        "-t",
        topic,
        "--from-beginning",
        "-c",
        "5",
        "--timeout",
        "3",
        servers=bootstrap_servers,
        timeout=60,
    )
    assert proc.returncode == 5
    assert proc.stdout.decode().splitlines() == ["a", "b"]
    assert "only 2 of 5 records" in one_error_line(proc)


# -- topics ------------------------------------------------------------------------------------


def test_topics_create_describe_list_delete(bootstrap_servers: str) -> None:
    name = f"cli-{uuid.uuid4().hex[:10]}"
    created = json.loads(
        ok(run("topics", "create", name, "--partitions", "3", "--json", servers=bootstrap_servers))
    )
    assert created["topic"] == name and created["status"] == "created"

    again = run("topics", "create", name, "--partitions", "3", servers=bootstrap_servers)
    assert again.returncode == 1
    assert "already exists" in one_error_line(again)
    assert (
        json.loads(
            ok(
                run(
                    "topics",
                    "create",
                    name,
                    "--partitions",
                    "3",
                    "--if-not-exists",
                    "--json",
                    servers=bootstrap_servers,
                )
            )
        )["status"]
        == "exists"
    )

    [described] = json.loads(ok(run("topics", "describe", name, "--json", servers=bootstrap_servers)))
    assert described["name"] == name
    assert [p["partition"] for p in described["partitions"]] == [0, 1, 2]
    assert all(p["leader"] >= 0 and p["leader"] in p["replicas"] for p in described["partitions"])
    table = ok(run("topics", "describe", name, servers=bootstrap_servers))
    assert name in table and "leader" in table

    listed = json.loads(ok(run("topics", "list", "--json", servers=bootstrap_servers)))
    assert {"name": name, "partitions": 3, "replication_factor": 1} in listed
    assert name in ok(run("topics", "list", servers=bootstrap_servers))

    assert ok(run("topics", "delete", name, servers=bootstrap_servers)).strip() == f"topic {name} deleted"
    deadline = time.monotonic() + 30
    while True:  # deletion may take a moment to reach the metadata
        names = [
            t["name"] for t in json.loads(ok(run("topics", "list", "--json", servers=bootstrap_servers)))
        ]
        if name not in names or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert name not in names
    gone = run("topics", "describe", name, servers=bootstrap_servers)
    assert gone.returncode == 4
    assert "does not exist" in one_error_line(gone)
    missing = run("topics", "delete", name, servers=bootstrap_servers)
    assert missing.returncode == 4
    one_error_line(missing)
    assert ok(run("topics", "delete", name, "--if-exists", servers=bootstrap_servers)).strip() == (
        f"topic {name} does not exist"
    )


# -- groups ------------------------------------------------------------------------------------


def test_groups_list_describe_lag_after_a_group_consume(
    bootstrap_servers: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(2)
    group = f"cli-group-{uuid.uuid4().hex[:8]}"
    ok(
        run(
            "produce", "-t", topic, servers=bootstrap_servers, stdin=b"".join(b"r%d\n" % i for i in range(40))
        )
    )
    got = run(
        "consume",
        "-t",
        topic,
        "-g",
        group,
        "--from-beginning",
        "-c",
        "40",
        "--json",
        servers=bootstrap_servers,
    )
    records = [json.loads(line) for line in ok(got).splitlines()]
    assert sorted(r["value"] for r in records) == sorted(f"r{i}" for i in range(40))

    listed = {
        g["group_id"]: g for g in json.loads(ok(run("groups", "list", "--json", servers=bootstrap_servers)))
    }
    # its real state (Tansu's ListGroups says "Unknown" for every group: DescribeGroups knows)
    assert listed[group]["state"] == "Empty" and listed[group]["members"] == 0
    assert listed[group]["protocol_type"] == "consumer"
    [row] = [
        line for line in ok(run("groups", "list", servers=bootstrap_servers)).splitlines() if group in line
    ]
    assert "Empty" in row and "Unknown" not in row

    [described] = json.loads(ok(run("groups", "describe", group, "--json", servers=bootstrap_servers)))
    assert described["group_id"] == group
    assert described["members"] == []  # the consumer left the group on its way out
    assert described["protocol_type"] == "consumer"

    lag = json.loads(ok(run("groups", "lag", group, "--json", servers=bootstrap_servers)))
    assert lag["group_id"] == group
    committed = {r["partition"]: r["committed"] for r in lag["partitions"]}
    printed_end = {}
    for r in records:
        printed_end[r["partition"]] = max(printed_end.get(r["partition"], 0), r["offset"] + 1)
    assert sorted(committed) == [0, 1]  # every partition of the topic, committed or not
    # the group committed exactly what was printed (None: nothing printed from that partition)
    assert {p: c for p, c in committed.items() if c is not None} == printed_end
    assert lag["total"] == 0 and lag["state"] == "Empty" and lag["members"] == 0
    assert f"{group}: Empty, 0 members; total lag 0" in ok(
        run("groups", "lag", group, servers=bootstrap_servers)
    )


@pytest.mark.tansu_deviation("DescribeGroups of an unknown group answers Empty instead of Dead")
def test_unknown_group_is_not_found(bootstrap_servers: str) -> None:
    proc = run("groups", "describe", f"nobody-{uuid.uuid4().hex[:8]}", servers=bootstrap_servers)
    assert proc.returncode == 4
    assert "does not exist" in one_error_line(proc)


# -- errors ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        ["produce", "-t", "anything"],
        ["consume", "-t", "anything"],
        ["topics", "list"],
        ["groups", "lag", "g"],
        ["bench", "--records", "10"],
    ],
    ids=lambda c: " ".join(c[:2]),
)
def test_bad_address_is_one_line(command: list[str]) -> None:
    # the subprocess timeout is a hang guard: --connect-timeout ends it
    proc = run("--connect-timeout", "3", *command, servers=unused_address(), stdin=b"x\n", timeout=60)
    assert proc.returncode == 3
    assert "cannot reach a Kafka broker" in one_error_line(proc)


def test_address_option_wins_over_environment(bootstrap_servers: str) -> None:
    proc = run("topics", "list", "--json", "-b", bootstrap_servers, servers=unused_address())
    assert isinstance(json.loads(ok(proc)), list)


@pytest.mark.parametrize("command", [["produce", "-t"], ["consume", "-t"]], ids=["produce", "consume"])
def test_missing_topic_is_one_line(bootstrap_servers: str, command: list[str]) -> None:
    name = f"missing-{uuid.uuid4().hex[:10]}"
    proc = run(*command, name, servers=bootstrap_servers, stdin=b"x\n")
    assert proc.returncode == 4
    assert f"topic {name!r} does not exist" in one_error_line(proc)
    # and it was not created by asking
    assert name not in [
        t["name"] for t in json.loads(ok(run("topics", "list", "--json", servers=bootstrap_servers)))
    ]


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["nonsense"],
        ["consume"],
        ["consume", "-t", "x", "--count", "0"],
        ["consume", "-t", "x", "--offset", "5"],
        ["consume", "-t", "x", "--format", "xml"],
        ["produce", "-t", "x", "--compression", "brotli"],
        ["topics", "create", "x"],
        ["topics", "create", "x", "--partitions", "0"],
        ["topics", "create", "x", "--partitions", "1", "--config", "novalue"],
        ["--connect-timeout", "-1", "topics", "list"],
        ["topics", "list", "--unknown-flag"],
    ],
    ids=lambda a: " ".join(a) or "nothing",
)
def test_bad_arguments_exit_2(args: list[str]) -> None:
    proc = run(*args, servers=unused_address())
    assert proc.returncode == 2
    one_error_line(proc)


def test_bad_partition_and_client_option_exit_2(
    bootstrap_servers: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(2)
    proc = run("produce", "-t", topic, "-p", "7", servers=bootstrap_servers, stdin=b"x\n")
    assert proc.returncode == 2
    assert "partitions 0-1" in one_error_line(proc)
    proc = run("-X", "no_such_option=1", "topics", "list", servers=bootstrap_servers)
    assert proc.returncode == 2
    assert "no_such_option" in one_error_line(proc)


def test_group_protocol_options_are_checked(bootstrap_servers: str, new_topic: Callable[..., str]) -> None:
    topic = new_topic(1)
    proc = run("consume", "-t", topic, "--group-protocol", "consumer", servers=bootstrap_servers)
    assert proc.returncode == 2
    assert "needs --group" in one_error_line(proc)
    args = ("consume", "-t", topic, "-g", "g", "--group-protocol", "consumer", "--session-timeout", "5")
    proc = run(*args, servers=bootstrap_servers)
    assert proc.returncode == 2
    assert "--session-timeout is set by the broker" in one_error_line(proc)


def test_read_committed_prints_committed_transactions_only(
    bootstrap_servers: str, new_topic: Callable[..., str]
) -> None:
    from kafka_core import KafkaProducer

    topic = new_topic(1)
    with KafkaProducer(
        bootstrap_servers=bootstrap_servers, transactional_id=f"cli-{uuid.uuid4().hex[:8]}"
    ) as p:
        p.init_transactions(30)
        p.begin_transaction()
        for v in (b"c1", b"c2"):
            p.send(topic, v, partition=0)
        p.commit_transaction(30)
    args = ("consume", "-t", topic, "--from-beginning", "--count", "2", "--timeout", "20")
    assert ok(run(*args, "--isolation-level", "read_committed", servers=bootstrap_servers)) == "c1\nc2\n"


def test_group_protocol_consumer_on_the_mock_cluster(mock_cluster: Any) -> None:
    """KIP-848 from the command line: the broker assigns, offsets are committed as printed."""
    topic = mock_cluster.create_topic(f"cli848-{uuid.uuid4().hex[:6]}", 2, 3)
    lines = b"".join(b"v%d\n" % i for i in range(20))
    ok(run("produce", "-t", topic, servers=mock_cluster.bootstrap, stdin=lines))
    group = f"g848-{uuid.uuid4().hex[:6]}"
    args = ("consume", "-t", topic, "-g", group, "--group-protocol", "consumer", "--from-beginning")
    out = ok(run(*args, "--count", "20", "--timeout", "30", servers=mock_cluster.bootstrap))
    assert sorted(out.split()) == sorted(f"v{i}" for i in range(20))
    again = run(*args, "--count", "1", "--timeout", "3", servers=mock_cluster.bootstrap)
    assert again.returncode == 5 and again.stdout == b""  # everything was committed as printed


def test_line_without_key_separator_fails_and_reports(
    bootstrap_servers: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(1)
    proc = run(
        "produce", "-t", topic, "-K", ":", servers=bootstrap_servers, stdin=b"a:1\nb:2\nno separator\nc:3\n"
    )
    assert proc.returncode == 1
    assert "line 3 has no key separator" in one_error_line(proc)
    assert proc.stdout.decode().strip() == f"2 records sent to {topic}"  # what went before was delivered


# -- Ctrl-C --------------------------------------------------------------------------------------


def test_ctrl_c_stops_a_group_consumer_and_commits_what_it_printed(
    bootstrap_servers: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(3)
    group = f"cli-sigint-{uuid.uuid4().hex[:8]}"
    ok(
        run(
            "produce",
            "-t",
            topic,
            servers=bootstrap_servers,
            stdin=b"".join(b"m%d\n" % i for i in range(300)),
        )
    )
    env = {**os.environ, "KAFKA_BOOTSTRAP_SERVERS": bootstrap_servers}
    proc = subprocess.Popen(
        [KAFKA_CORE, "consume", "-t", topic, "-g", group, "--from-beginning", "--format", "json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    printed: list[dict[str, object]] = []
    try:
        assert proc.stdout is not None
        while len(printed) < 300:
            line = proc.stdout.readline()
            assert line, (
                f"consumer ended early: {proc.wait(10)} {proc.stderr.read() if proc.stderr else b''!r}"
            )
            printed.append(json.loads(line))
        proc.send_signal(signal.SIGINT)
        rest, err = proc.communicate(timeout=30)  # a hang guard: Ctrl-C stops it at once
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err.decode()
    assert b"Traceback" not in err
    assert "interrupted after 300 records" in err.decode()
    printed += [json.loads(line) for line in rest.splitlines()]
    assert sorted(str(r["value"]) for r in printed) == sorted(f"m{i}" for i in range(300))
    expected: dict[TopicPartition, int] = {}
    for r in printed:
        tp = TopicPartition(topic, int(r["partition"]))  # type: ignore[call-overload]
        expected[tp] = max(expected.get(tp, 0), int(r["offset"]) + 1)  # type: ignore[call-overload]
    with KafkaAdmin(bootstrap_servers=bootstrap_servers) as admin:
        committed = {tp: om.offset for tp, om in admin.list_group_offsets(group).items()}
    assert committed == expected


def test_ctrl_c_while_producing_from_stdin(bootstrap_servers: str, new_topic: Callable[..., str]) -> None:
    topic = new_topic(1)
    env = {**os.environ, "KAFKA_BOOTSTRAP_SERVERS": bootstrap_servers}
    proc = subprocess.Popen(
        [KAFKA_CORE, "produce", "-t", topic, "--json"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        assert proc.stdin is not None
        proc.stdin.write(b"one\ntwo\n")
        proc.stdin.flush()  # stdin stays open: the producer waits for more lines
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            got = run(
                "consume",
                "-t",
                topic,
                "--from-beginning",
                "-c",
                "2",
                "--timeout",
                "2",
                servers=bootstrap_servers,
            )
            if got.returncode == 0:
                break
        assert got.stdout.decode().splitlines() == ["one", "two"]
        proc.send_signal(signal.SIGINT)
        # Stdin stays open until the command has ended, as in a terminal: only the signal can end
        # it. communicate() alone closes stdin at once, racing the signal with an EOF (in CI the
        # command once ended 0 with nothing on stderr, as after an EOF; not yet explained).
        proc.wait(timeout=30)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err.decode()
    assert json.loads(out)["acknowledged"] == 2
    assert b"Traceback" not in err


# -- progress display in a real terminal ---------------------------------------------------------


def test_progress_display_in_a_terminal(
    bootstrap_servers: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    tmux = shutil.which("tmux")
    if tmux is None:
        pytest.fail("tmux is needed for the terminal test", pytrace=False)
    topic = new_topic(3)
    data = tmp_path / "lines.txt"
    data.write_text("".join(f"record number {i}\n" for i in range(200_000)))
    done = tmp_path / "done"
    session = f"kcli-{uuid.uuid4().hex[:8]}"
    command = (
        f"KAFKA_BOOTSTRAP_SERVERS={bootstrap_servers} {KAFKA_CORE} produce -t {topic} -f {data}; "
        f"echo EXIT=$? > {done}; sleep 60"
    )
    subprocess.run(
        [tmux, "new-session", "-d", "-s", session, "-x", "120", "-y", "30", command], check=True, timeout=30
    )
    try:
        deadline = time.monotonic() + 180
        while not done.exists() and time.monotonic() < deadline:
            time.sleep(0.5)
        screen = subprocess.run(
            [tmux, "capture-pane", "-p", "-t", session], capture_output=True, check=True, timeout=30
        ).stdout.decode()
    finally:
        subprocess.run([tmux, "kill-session", "-t", session], check=False, timeout=30)
    assert done.exists(), screen
    assert done.read_text().strip() == "EXIT=0", screen
    assert "producing" in screen, screen  # the progress line, left on screen when done
    assert "200,000 read, 200,000 acknowledged" in screen, screen
    assert "records/s" in screen, screen
    assert f"200000 records sent to {topic}" in screen, screen


# -- bench, broker, pipeline, python -m ------------------------------------------------------------


def test_bench_reports_both_phases(bootstrap_servers: str) -> None:
    report = json.loads(
        ok(run("bench", "--records", "3000", "--size", "64", "--json", servers=bootstrap_servers))
    )
    assert [p["phase"] for p in report["phases"]] == ["produce", "consume"]
    for phase in report["phases"]:
        assert phase["records"] == 3000
        assert phase["records_per_s"] > 0 and phase["mb_per_s"] > 0
    table = ok(run("bench", "--records", "500", servers=bootstrap_servers))
    assert "records/s" in table and "MB/s" in table
    leftovers = [
        t
        for t in json.loads(ok(run("topics", "list", "--json", servers=bootstrap_servers)))
        if t["name"].startswith("kafka-core-bench-")
    ]
    assert leftovers == []  # its topics are deleted


def test_broker_runs_in_the_foreground_until_ctrl_c() -> None:
    proc = subprocess.Popen(
        [KAFKA_CORE, "broker", "--port", "0", "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert first, proc.stderr.read() if proc.stderr else b""
        servers = json.loads(first)["bootstrap_servers"]
        name = f"cli-{uuid.uuid4().hex[:8]}"
        ok(run("topics", "create", name, "--partitions", "1", servers=servers))
        ok(run("produce", "-t", name, servers=servers, stdin=b"hello\n"))
        assert ok(run("consume", "-t", name, "--from-beginning", "-c", "1", servers=servers)) == "hello\n"
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0
    stopped = run("--connect-timeout", "2", "topics", "list", servers=servers)
    assert stopped.returncode == 3  # the broker went with it


def test_pipeline_passes_its_arguments_on() -> None:
    helped = run("pipeline", "--help", servers=None)
    assert "--events" in ok(helped) and "--max-offsets-per-trigger" in helped.stdout.decode()
    refused = run("pipeline", "--events", "0", servers=None)
    assert refused.returncode == 2
    assert "--events" in refused.stderr.decode()
    assert b"Traceback" not in refused.stderr


def test_python_dash_m_is_the_same_command() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "kafka_core.cli", "--help"], capture_output=True, check=False, timeout=60
    )
    assert proc.returncode == 0
    assert "exit codes" in proc.stdout.decode() and "consume" in proc.stdout.decode()
