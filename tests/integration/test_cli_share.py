"""``kafka-core share consume`` and the share groups in ``kafka-core groups list``, run as the
console script against Apache Kafka 4.4 (and Tansu, which has no share groups)."""

from __future__ import annotations

import json

import pytest
from fakes.cli import ok, one_error_line, run
from fakes.share_groups import broker_without_share_groups, make_topic, produce, unique

from kafka_core import KafkaAdmin
from kafka_core.devbroker import KafkaCluster, TansuBroker

pytestmark = [pytest.mark.broker, pytest.mark.timeout(240)]


def share_consume(bootstrap: str, topic: str, group: str, *extra: str) -> list[dict[str, object]]:
    out = ok(
        run(
            "share",
            "consume",
            "-t",
            topic,
            "-g",
            group,
            "--json",
            "--timeout",
            "20",
            *extra,
            servers=bootstrap,
        )
    )
    return [json.loads(line) for line in out.splitlines()]


def test_printed_records_are_accepted_and_groups_list_shows_share_groups_with_lag(
    real_kafka: KafkaCluster,
) -> None:
    bootstrap = real_kafka.bootstrap
    topic = make_topic(bootstrap, partitions=1)
    group = unique("cli-share")
    produce(bootstrap, topic, [b"a", b"b", b"c", b"d"])

    first = share_consume(bootstrap, topic, group, "--from-beginning", "--max-messages", "3")
    assert [(r["value"], r["offset"], r["delivery_count"]) for r in first] == [
        ("a", 0, 1),
        ("b", 1, 1),
        ("c", 2, 1),
    ]
    # "d" may have been fetched with them, but it was not printed: released, not accepted
    rest = share_consume(bootstrap, topic, group, "--max-messages", "1")
    assert [r["value"] for r in rest] == ["d"]

    # a consumer group beside it
    consumer_group = unique("cli-classic")
    ok(run("consume", "-t", topic, "-g", consumer_group, "--from-beginning", "-c", "2", servers=bootstrap))
    listed = {g["group_id"]: g for g in json.loads(ok(run("groups", "list", "--json", servers=bootstrap)))}
    assert listed[group]["group_type"] == "share" and listed[group]["state"] == "Empty"
    assert listed[group]["members"] == 0 and listed[group]["lag"] == 0
    assert listed[consumer_group]["group_type"] == "classic"
    assert listed[consumer_group]["lag"] == 2  # 2 of 4 records committed
    [row] = [line for line in ok(run("groups", "list", servers=bootstrap)).splitlines() if group in line]
    assert "share" in row

    # describe and lag know a share group too
    [described] = json.loads(ok(run("groups", "describe", group, "--json", servers=bootstrap)))
    assert described["protocol_type"] == "share" and described["members"] == []
    lag = json.loads(ok(run("groups", "lag", group, "--json", servers=bootstrap)))
    assert lag["total"] == 0 and [(p["partition"], p["end"]) for p in lag["partitions"]] == [(0, 4)]
    assert "start" in ok(run("groups", "lag", group, servers=bootstrap))


def test_release_gives_records_back_and_reject_refuses_them(real_kafka: KafkaCluster) -> None:
    bootstrap = real_kafka.bootstrap
    topic = make_topic(bootstrap, partitions=1)
    group = unique("cli-share")
    produce(bootstrap, topic, [b"x", b"y"])

    released = share_consume(bootstrap, topic, group, "--from-beginning", "--max-messages", "2", "--release")
    assert [(r["value"], r["delivery_count"]) for r in released] == [("x", 1), ("y", 1)]
    rejected = share_consume(bootstrap, topic, group, "--max-messages", "2", "--reject")
    assert [(r["value"], r["delivery_count"]) for r in rejected] == [("x", 2), ("y", 2)]

    # rejected: never delivered again, and nothing is left to deliver
    nothing = run(
        "share",
        "consume",
        "-t",
        topic,
        "-g",
        group,
        "--max-messages",
        "1",
        "--timeout",
        "3",
        servers=bootstrap,
    )
    assert nothing.returncode == 5 and nothing.stdout == b""
    assert "only 0 of 1 records arrived" in one_error_line(nothing)
    with KafkaAdmin(bootstrap) as admin:
        assert admin.share_group_lag(group).total == 0


def test_bad_input_and_exit_codes(real_kafka: KafkaCluster) -> None:
    bootstrap = real_kafka.bootstrap
    topic = make_topic(bootstrap, partitions=1)
    both = run("share", "consume", "-t", topic, "-g", "g", "--release", "--reject", servers=bootstrap)
    assert both.returncode == 2 and "not allowed with argument" in both.stderr.decode()
    missing = run("share", "consume", "-t", unique("none"), "-g", "g", servers=bootstrap)
    assert missing.returncode == 4 and "does not exist" in one_error_line(missing)
    no_group = run("share", "consume", "-t", topic, servers=bootstrap)
    assert no_group.returncode == 2


def test_a_broker_without_share_groups_is_one_clear_line(tansu: TansuBroker | None) -> None:
    with broker_without_share_groups(tansu) as bootstrap:
        topic = unique("t")
        ok(run("topics", "create", topic, "--partitions", "1", servers=bootstrap))
        proc = run("share", "consume", "-t", topic, "-g", "g", "--timeout", "5", servers=bootstrap)
    assert proc.returncode == 1
    assert "no share groups" in one_error_line(proc)
