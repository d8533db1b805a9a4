"""The consumer protocol's embedded structs: the wire bytes stay what they always were.

The expected bytes were written by the hand codec groupmeta.py had before it used the generated
ConsumerProtocolSubscription/Assignment (and agree with Java's ConsumerProtocol): any change in
the bytes would make members of mixed versions disagree about a group's subscriptions.
"""

from __future__ import annotations

import pytest

from kafka_core.consumer.group.classic_meta import (
    Assignment,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from kafka_core.errors import KafkaProtocolError

FULL = Subscription(["a", "bb"], b"ud", {"a": [0, 2]}, 7, "rack1")

SUBSCRIPTIONS = [
    (Subscription(["t"]), 0, "000000000001000174ffffffff"),
    (
        FULL,
        3,
        "00030000000200016100026262000000027564000000010001610000000200000000000000020000000700057261636b31",
    ),
    (FULL, 1, "0001000000020001610002626200000002756400000001000161000000020000000000000002"),
    (FULL, 2, "000200000002000161000262620000000275640000000100016100000002000000000000000200000007"),
    (
        Subscription(["z", "y"], None, {"z": [5], "y": [1, 0]}, -1, None),
        3,
        "00030000000200017a000179ffffffff0000000200017900000002000000010000000000017a0000000100000005ffffffffffff",
    ),
    (Subscription([], b"", {}, 3, "r"), 3, "000300000000000000000000000000000003000172"),
]

ASSIGNMENTS = [
    (Assignment({"t": [3, 1]}), 3, "000300000001000174000000020000000300000001ffffffff"),
    (Assignment({}, None), 0, "000000000000ffffffff"),
    (
        Assignment({"b": [0], "a": [2, 1]}, b"\x01\x02"),
        1,
        "0001000000020001610000000200000002000000010001620000000100000000000000020102",
    ),
    (Assignment({"x": []}, b""), 3, "0003000000010001780000000000000000"),
]


@pytest.mark.parametrize(("sub", "version", "wire"), SUBSCRIPTIONS)
def test_subscription_bytes_unchanged(sub: Subscription, version: int, wire: str) -> None:
    assert encode_subscription(sub, version).hex() == wire
    back = decode_subscription(bytes.fromhex(wire))
    assert back.topics == sub.topics and back.user_data == sub.user_data
    assert back.owned_partitions == (sub.owned_partitions if version >= 1 else {})
    assert back.generation_id == (sub.generation_id if version >= 2 else -1)
    assert back.rack_id == (sub.rack_id if version >= 3 else None)


@pytest.mark.parametrize(("assignment", "version", "wire"), ASSIGNMENTS)
def test_assignment_bytes_unchanged(assignment: Assignment, version: int, wire: str) -> None:
    assert encode_assignment(assignment, version).hex() == wire
    back = decode_assignment(bytes.fromhex(wire))
    assert back.partitions == assignment.partitions and back.user_data == assignment.user_data


def test_newer_versions_are_read_as_far_as_known() -> None:
    # A v9 member (fields we do not know appended) still tells us its topics and owned partitions.
    wire = bytes.fromhex(SUBSCRIPTIONS[1][2])
    newer = b"\x00\x09" + wire[2:] + b"\x00\x00\x00\x2a"
    back = decode_subscription(newer)
    assert back.topics == ["a", "bb"] and back.owned_partitions == {"a": [0, 2]} and back.rack_id == "rack1"


def test_fields_missing_from_a_labelled_version_are_defaults() -> None:
    # Labelled v3 but written as v1 (seen from other clients): read as what is there.
    wire = b"\x00\x03" + bytes.fromhex(SUBSCRIPTIONS[2][2])[2:]
    back = decode_subscription(wire)
    assert back.owned_partitions == {"a": [0, 2]} and back.generation_id == -1 and back.rack_id is None


@pytest.mark.parametrize(
    "buf",
    [
        b"\x00",
        b"\x00\x01\x00\x00\x00\x05",
        b"\x00\x00\x7f\xff\xff\xff",
        b"\xff\xff",
        b"\x00\x00\x00\x00\x00",
        # v3 whose owned partitions are garbage (not missing): never read as a shorter v0
        b"\x00\x03\x00\x00\x00\x00\xff\xff\xff\xff\x7f\xff\xff\xff",
    ],
)
def test_corrupt_subscription_is_a_typed_error(buf: bytes) -> None:
    with pytest.raises(KafkaProtocolError):
        decode_subscription(buf)


@pytest.mark.parametrize("buf", [b"\x00", b"\x00\x03\x00\x00\x00\x01\x00", b"\xff\xfe\x00\x00\x00\x00"])
def test_corrupt_assignment_is_a_typed_error(buf: bytes) -> None:
    with pytest.raises(KafkaProtocolError):
        decode_assignment(buf)
