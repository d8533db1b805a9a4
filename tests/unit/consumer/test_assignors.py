"""Assignors and the consumer-protocol structs, as pure functions."""

from __future__ import annotations

import pytest

from kafka_core.consumer.group.assignors import (
    CooperativeStickyAssignor,
    MemberInfo,
    RangeAssignor,
    RoundRobinAssignor,
    get_assignor,
)
from kafka_core.consumer.group.classic_meta import (
    Assignment,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from kafka_core.errors import KafkaConfigError, KafkaProtocolError


def members(spec: dict[str, list[str]], owned: dict[str, dict[str, list[int]]] | None = None, gen: int = 1):
    owned = owned or {}
    return {
        m: MemberInfo(m, Subscription(topics=t, owned_partitions=owned.get(m, {}), generation_id=gen))
        for m, t in spec.items()
    }


def flat(result):
    return {m: sorted((t, p) for t, ps in a.partitions.items() for p in ps) for m, a in result.items()}


def test_range_contiguous_with_extra_to_first():
    r = RangeAssignor().assign({"t": 7}, members({"a": ["t"], "b": ["t"], "c": ["t"]}))
    assert {m: a.partitions for m, a in r.items()} == {
        "a": {"t": [0, 1, 2]},
        "b": {"t": [3, 4]},
        "c": {"t": [5, 6]},
    }


def test_range_per_topic_and_unsubscribed():
    r = RangeAssignor().assign({"t": 2, "u": 3}, members({"a": ["t", "u"], "b": ["u"]}))
    assert r["a"].partitions == {"t": [0, 1], "u": [0, 1]}
    assert r["b"].partitions == {"u": [2]}


def test_range_static_members_sorted_by_instance_id():
    ms = members({"m1": ["t"], "m2": ["t"]})
    ms["m1"].group_instance_id = "z"
    ms["m2"].group_instance_id = "a"
    r = RangeAssignor().assign({"t": 2}, ms)
    assert r["m2"].partitions == {"t": [0]} and r["m1"].partitions == {"t": [1]}


def test_roundrobin_deals_in_turn_and_skips_unsubscribed():
    r = RoundRobinAssignor().assign({"t": 3, "u": 2}, members({"a": ["t", "u"], "b": ["t"]}))
    assert flat(r) == {"a": [("t", 0), ("t", 2), ("u", 0), ("u", 1)], "b": [("t", 1)]}


@pytest.mark.parametrize("cls", [RangeAssignor, RoundRobinAssignor, CooperativeStickyAssignor])
def test_every_partition_exactly_once(cls):
    counts = {"t": 5, "u": 4, "v": 1}
    ms = members({"a": ["t", "u", "v"], "b": ["t", "u"], "c": ["u", "v"], "d": ["t"]})
    r = flat(cls().assign(counts, ms))
    got = sorted(tp for tps in r.values() for tp in tps)
    assert got == sorted((t, p) for t, n in counts.items() for p in range(n))
    for m, tps in r.items():
        assert all(t in ms[m].subscription.topics for t, _ in tps)


def test_sticky_first_round_is_balanced():
    r = flat(CooperativeStickyAssignor().assign({"t": 7}, members({"a": ["t"], "b": ["t"], "c": ["t"]})))
    sizes = sorted(len(v) for v in r.values())
    assert sizes == [2, 2, 3]


def test_cooperative_new_member_gets_partitions_only_after_revocation():
    a = CooperativeStickyAssignor()
    owned = {"a": {"t": [0, 1, 2, 3]}}
    first = flat(a.assign({"t": 4}, members({"a": ["t"], "b": ["t"]}, owned)))
    # a keeps two, gives up two; b gets nothing yet (they are still owned by a this round).
    assert len(first["a"]) == 2 and first["b"] == []
    kept = {"t": [p for _, p in first["a"]]}
    second = flat(a.assign({"t": 4}, members({"a": ["t"], "b": ["t"]}, {"a": kept})))
    assert second["a"] == first["a"]
    assert sorted(second["b"]) == sorted(set(("t", p) for p in range(4)) - set(first["a"]))


def test_cooperative_member_leaving_hands_over_immediately():
    owned = {"a": {"t": [0, 1]}, "b": {"t": [2, 3]}}
    r = flat(CooperativeStickyAssignor().assign({"t": 4}, members({"a": ["t"]}, owned)))
    assert r["a"] == [("t", 0), ("t", 1), ("t", 2), ("t", 3)]


def test_cooperative_is_sticky_when_nothing_changes():
    owned = {"a": {"t": [1, 3]}, "b": {"t": [0, 2]}}
    r = flat(CooperativeStickyAssignor().assign({"t": 4}, members({"a": ["t"], "b": ["t"]}, owned)))
    assert r == {"a": [("t", 1), ("t", 3)], "b": [("t", 0), ("t", 2)]}


def test_cooperative_stale_generation_claim_loses():
    ms = members({"a": ["t"], "b": ["t"]})
    ms["a"].subscription.owned_partitions = {"t": [0, 1]}
    ms["a"].subscription.generation_id = 5
    ms["b"].subscription.owned_partitions = {"t": [0]}
    ms["b"].subscription.generation_id = 4
    r = flat(CooperativeStickyAssignor().assign({"t": 2}, ms))
    assert ("t", 0) in r["a"] or ("t", 0) not in r["b"]


def test_get_assignor():
    assert get_assignor("range").name == "range"
    with pytest.raises(KafkaConfigError):
        get_assignor("nope")


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_subscription_round_trip(version):
    sub = Subscription(["a", "bb"], b"ud", {"a": [0, 2]}, 7, "rack1")
    back = decode_subscription(encode_subscription(sub, version))
    assert back.topics == ["a", "bb"] and back.user_data == b"ud"
    assert back.owned_partitions == ({"a": [0, 2]} if version >= 1 else {})
    assert back.generation_id == (7 if version >= 2 else -1)
    assert back.rack_id == ("rack1" if version >= 3 else None)


def test_subscription_known_bytes_v0():
    # version 0, topics ["t"], user_data null: what Java's ConsumerProtocol writes.
    assert encode_subscription(Subscription(["t"]), 0) == b"\x00\x00\x00\x00\x00\x01\x00\x01t\xff\xff\xff\xff"


def test_assignment_round_trip_and_empty():
    a = Assignment({"t": [3, 1]}, None)
    assert decode_assignment(encode_assignment(a)).partitions == {"t": [3, 1]}
    assert decode_assignment(b"").partitions == {}


@pytest.mark.parametrize(
    "buf", [b"\x00", b"\x00\x01\x00\x00\x00\x05", b"\x00\x00\x7f\xff\xff\xff", b"\xff\xff"]
)
def test_corrupt_metadata_is_a_typed_error(buf):
    with pytest.raises(KafkaProtocolError):
        decode_subscription(buf)
