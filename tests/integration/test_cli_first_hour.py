"""``kafka-core`` as a library user meets it in the first hour (issue 22): a plain install (no
rich), ``-vv`` beside ``| head`` and ``| jq``, the docs' group example whose join outlasted its
``--timeout``, and groups that have members but no committed offsets."""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from fakes.cli import KAFKA_CORE, ok, one_error_line, run, run_without
from fakes.timing import wait_until

from kafka_core import KafkaAdmin, KafkaConsumer


def test_a_plain_install_without_rich_prints_plain_tables(
    bootstrap_servers: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(2)
    listed = run_without(["rich"], "-v", "topics", "list", servers=bootstrap_servers)
    text = ok(listed)
    assert b"Traceback" not in listed.stderr
    assert "topic" in text.splitlines()[0] and "partitions" in text.splitlines()[0]
    assert any(line.split()[:2] == [topic, "2"] for line in text.splitlines())
    assert "┃" not in text  # no rich box drawing
    described = ok(run_without(["rich"], "topics", "describe", topic, servers=bootstrap_servers))
    assert topic in described and "leader" in described


def test_verbose_logs_stay_off_stdout(bootstrap_servers: str, new_topic: Callable[..., str]) -> None:
    topic = new_topic(1)
    ok(run("produce", "-t", topic, servers=bootstrap_servers, stdin=b"a\nb\nc\n"))
    got = run("-vv", "consume", "-t", topic, "--from-beginning", "-c", "3", servers=bootstrap_servers)
    assert ok(got) == "a\nb\nc\n"  # only the records: | jq and | wc stay right
    assert "DEBUG" in got.stderr.decode()  # the log lines went to stderr


def test_a_reader_that_leaves_ends_a_verbose_group_consume_and_only_printed_records_are_committed(
    bootstrap_servers: str, new_topic: Callable[..., str]
) -> None:
    """``kafka-core -vv consume ... | head -3``: it hung (logs on stdout raised in the client's loop).

    Records larger than the pipe can hold make "printed" exact: when the reader leaves after 3
    lines, the 4th cannot have been written whole, so exactly 3 count as printed."""
    topic = new_topic(1)
    group = f"cli-head-{uuid.uuid4().hex[:8]}"
    big = 300_000  # > the pipe's 64 KiB and the reader's buffer together
    lines = b"".join(b"r%d:" % i + b"x" * big + b"\n" for i in range(12))
    ok(run("produce", "-t", topic, servers=bootstrap_servers, stdin=lines))
    proc = subprocess.Popen(
        [KAFKA_CORE, "-vv", "consume", "-t", topic, "-g", group, "--from-beginning", "--timeout", "8"],
        env={**os.environ, "KAFKA_BOOTSTRAP_SERVERS": bootstrap_servers},
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert proc.stdout is not None
        head = [proc.stdout.readline() for _ in range(3)]
        proc.stdout.close()  # as head does after its lines
        code = proc.wait(timeout=90)  # a hang guard only
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert [line.split(b":")[0] for line in head] == [b"r0", b"r1", b"r2"]
    assert code == 0
    with KafkaAdmin(bootstrap_servers=bootstrap_servers) as admin:
        committed = {tp.partition: om.offset for tp, om in admin.list_group_offsets(group).items()}
    assert committed == {0: 3}


def test_an_idle_consume_ends_when_its_reader_leaves(
    bootstrap_servers: str, new_topic: Callable[..., str]
) -> None:
    """``consume -g G | head -3`` with just 3 records: no further write would fail, yet it ends."""
    topic = new_topic(1)
    group = f"cli-idle-{uuid.uuid4().hex[:8]}"
    ok(run("produce", "-t", topic, servers=bootstrap_servers, stdin=b"a\nb\nc\n"))
    proc = subprocess.Popen(
        [KAFKA_CORE, "consume", "-t", topic, "-g", group, "--from-beginning"],  # no --timeout
        env={**os.environ, "KAFKA_BOOTSTRAP_SERVERS": bootstrap_servers},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None and proc.stderr is not None
        head = [proc.stdout.readline() for _ in range(3)]
        proc.stdout.close()
        code = proc.wait(timeout=90)  # a hang guard only
        err = proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert head == [b"a\n", b"b\n", b"c\n"]
    assert code == 0 and err == b""
    with KafkaAdmin(bootstrap_servers=bootstrap_servers) as admin:
        committed = {tp.partition: om.offset for tp, om in admin.list_group_offsets(group).items()}
    assert committed == {0: 3}


def test_group_timeout_counts_from_the_assignment(
    bootstrap_servers: str, new_topic: Callable[..., str]
) -> None:
    """The docs' example: ``consume -t orders -g billing --from-beginning --timeout 5`` printed
    nothing when the group join took longer than the timeout (about 5 s on Tansu)."""
    topic = new_topic(3)
    ok(
        run(
            "produce", "-t", topic, servers=bootstrap_servers, stdin=b"".join(b"o%d\n" % i for i in range(10))
        )
    )
    group = f"billing-{uuid.uuid4().hex[:8]}"
    args = ("consume", "-t", topic, "-g", group, "--from-beginning", "--format", "json", "--timeout", "2")
    got = run(*args, servers=bootstrap_servers)
    records = [json.loads(line) for line in ok(got).splitlines()]
    assert sorted(r["value"] for r in records) == sorted(f"o{i}" for i in range(10))
    lag = json.loads(ok(run("groups", "lag", group, "--json", servers=bootstrap_servers)))
    assert sum(p["committed"] or 0 for p in lag["partitions"]) == 10


@contextmanager
def _member_that_holds_the_group(servers: str, topic: str, group: str) -> Iterator[KafkaConsumer]:
    """A member with all the partitions that stops polling: a rebalance waits for it to rejoin
    (its on_revoke runs in poll), so another member's join cannot finish meanwhile."""
    consumer = KafkaConsumer(
        bootstrap_servers=servers,
        topics=[topic],
        group_id=group,
        on_revoke=lambda partitions: None,
        max_poll_interval_ms=120_000,
    )
    try:
        assert wait_until(lambda: bool(consumer.poll(timeout_ms=200) or consumer.assignment()), 60)
        yield consumer
    finally:
        consumer.close(5)


def test_a_group_consume_never_assigned_says_so(
    bootstrap_servers: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(2)
    group = f"cli-held-{uuid.uuid4().hex[:8]}"
    with _member_that_holds_the_group(bootstrap_servers, topic, group):
        args = ("consume", "-t", topic, "-g", group, "--join-timeout", "3", "--timeout", "1")
        proc = run(*args, servers=bootstrap_servers)
    assert proc.returncode == 5
    assert proc.stdout == b""
    line = one_error_line(proc)
    assert repr(group) in line and repr(topic) in line and "--join-timeout 3s" in line


def test_groups_show_the_state_and_members_of_a_group_without_commits(
    bootstrap_servers: str, new_topic: Callable[..., str]
) -> None:
    """No committed offsets, yet the group is there: its state and members, not "total lag 0"."""
    topic = new_topic(2)
    group = f"cli-nocommit-{uuid.uuid4().hex[:8]}"
    with _member_that_holds_the_group(bootstrap_servers, topic, group):
        lag = json.loads(ok(run("groups", "lag", group, "--json", servers=bootstrap_servers)))
        text = ok(run("groups", "lag", group, servers=bootstrap_servers))
        [described] = json.loads(ok(run("groups", "describe", group, "--json", servers=bootstrap_servers)))
    assert lag["partitions"] == [] and lag["members"] == 1
    assert lag["state"] == described["state"] and lag["state"]
    assert f"{group}: {lag['state']}, 1 member" in text and "no committed offsets" in text
    assert "total lag" not in text
    assert len(described["members"]) == 1
