"""The cooperative-sticky assignor gives exactly what it gave before its evening-out and
cooperative steps stopped being quadratic in the partitions (issue 40: seconds at 10,000).

``reference_assign`` is that earlier version, kept here as the oracle: every fixed input below
(random but seeded: several members, topics, subscriptions that differ, owned partitions with
stale generations, double claims and partitions that no longer exist) must get the same plan.
"""

from __future__ import annotations

import random
from collections.abc import Mapping

import pytest

from kafka_core.consumer.group.assignors import CooperativeStickyAssignor, MemberInfo
from kafka_core.consumer.group.classic_meta import Subscription

Plan = dict[str, dict[str, list[int]]]


def reference_assign(partitions: Mapping[str, int], members: Mapping[str, MemberInfo]) -> Plan:
    """CooperativeStickyAssignor.assign as it was before (a sort per move, list scans per claim)."""
    ordered = sorted(members.values(), key=lambda m: m.sort_key)
    if not ordered:
        return {}
    eligible: dict[tuple[str, int], list[str]] = {}
    for topic in sorted(partitions):
        subs = [m.member_id for m in ordered if topic in m.subscription.topics]
        if subs:
            for p in range(partitions[topic]):
                eligible[(topic, p)] = subs
    prev_owner: dict[tuple[str, int], str] = {}
    best_gen: dict[tuple[str, int], int] = {}
    for m in ordered:
        gen = m.subscription.generation_id
        for topic, ps in m.subscription.owned_partitions.items():
            for p in ps:
                tp = (topic, p)
                if tp not in eligible or m.member_id not in eligible[tp]:
                    continue
                if tp not in best_gen or gen > best_gen[tp]:
                    best_gen[tp] = gen
                    prev_owner[tp] = m.member_id
    owned: dict[str, list[tuple[str, int]]] = {m.member_id: [] for m in ordered}
    for tp, member_id in sorted(prev_owner.items()):
        owned[member_id].append(tp)
    if len({frozenset(m.subscription.topics) for m in ordered}) == 1:
        quota_max = -(-len(eligible) // len(ordered))
        for tps in owned.values():
            while len(tps) > quota_max:
                tps.pop()
    assigned = {tp for tps in owned.values() for tp in tps}
    for tp, subs in eligible.items():
        if tp not in assigned:
            owned[min(subs, key=lambda mid: (len(owned[mid]), mid))].append(tp)
    changed = True
    while changed:
        changed = False
        for src in sorted(owned, key=lambda mid: (-len(owned[mid]), mid)):
            for tp in sorted(owned[src], reverse=True):
                candidates = [mid for mid in eligible[tp] if len(owned[mid]) < len(owned[src]) - 1]
                if candidates:
                    dst = min(candidates, key=lambda mid: (len(owned[mid]), mid))
                    owned[src].remove(tp)
                    owned[dst].append(tp)
                    changed = True
                    break
            if changed:
                break
    plan: Plan = {m: {} for m in members}
    for member_id, tps in owned.items():
        for tp in tps:
            old = prev_owner.get(tp)
            claimed = [
                m.member_id
                for m in ordered
                if m.member_id != member_id and tp[1] in m.subscription.owned_partitions.get(tp[0], ())
            ]
            if (old is not None and old != member_id) or (old is None and claimed):
                continue
            plan[member_id].setdefault(tp[0], []).append(tp[1])
    return {m: {t: sorted(ps) for t, ps in tps.items() if ps} for m, tps in plan.items()}


def _scenario(seed: int) -> tuple[dict[str, int], dict[str, MemberInfo]]:
    rng = random.Random(seed)
    topics = {f"t{i}": rng.randint(0, 40) for i in range(rng.randint(1, 4))}
    names = list(topics)
    members: dict[str, MemberInfo] = {}
    same = rng.random() < 0.5  # one subscription for all (the shedding step runs) or mixed
    shared = rng.sample(names, rng.randint(1, len(names)))
    for i in range(rng.randint(1, 6)):
        member_id = f"m{rng.randint(0, 99)}-{i}"
        subscribed = shared if same else rng.sample(names, rng.randint(1, len(names)))
        owned: dict[str, list[int]] = {}
        for topic in rng.sample([*names, "gone"], rng.randint(0, len(names))):
            count = topics.get(topic, 5) + 3  # some claims past the topic's end
            owned[topic] = rng.sample(range(count), rng.randint(0, count))
        sub = Subscription(topics=list(subscribed), owned_partitions=owned, generation_id=rng.randint(1, 4))
        instance = f"i{rng.randint(0, 9)}" if rng.random() < 0.3 else None
        members[member_id] = MemberInfo(member_id, sub, instance)
    return topics, members


def _plan(result: Mapping[str, object]) -> Plan:
    return {m: dict(a.partitions) for m, a in result.items()}  # type: ignore[attr-defined]


@pytest.mark.parametrize("seed", range(300))
def test_same_plan_as_before_on_seeded_inputs(seed: int) -> None:
    partitions, members = _scenario(seed)
    assert _plan(CooperativeStickyAssignor().assign(partitions, members)) == reference_assign(
        partitions, members
    )


def _members(
    owned: Mapping[str, dict[str, list[int]]], names: list[str], topics: list[str]
) -> dict[str, MemberInfo]:
    return {
        m: MemberInfo(m, Subscription(topics=topics, owned_partitions=owned.get(m, {}), generation_id=1))
        for m in names
    }


def test_same_plan_as_before_over_a_wide_topic_joining_and_leaving() -> None:
    """3,000 partitions: three members join, one leaves, one comes back, one owner held all."""
    sticky = CooperativeStickyAssignor()
    counts = {"wide": 3_000}
    names = ["a", "b", "c"]
    first = sticky.assign(counts, _members({}, names, ["wide"]))
    owned = _plan(first)
    cases = [
        _members({}, names, ["wide"]),
        _members(owned, names, ["wide"]),  # nothing changed: sticky
        _members({m: owned[m] for m in ("a", "b")}, ["a", "b"], ["wide"]),  # c left
        _members({m: owned[m] for m in ("a", "b")}, names, ["wide"]),  # c (re)joins with nothing
        _members({"a": {"wide": list(range(3_000))}}, names, ["wide"]),  # a held all
    ]
    for members in cases:
        assert _plan(sticky.assign(counts, members)) == reference_assign(counts, members)


def test_many_topics_mixed_subscriptions_as_before() -> None:
    """500 topics of 6 partitions, members subscribed to overlapping halves of them."""
    counts = {f"topic-{i:03d}": 6 for i in range(500)}
    names = sorted(counts)
    members = {
        "a": MemberInfo("a", Subscription(topics=names[:300])),
        "b": MemberInfo("b", Subscription(topics=names[200:])),
        "c": MemberInfo("c", Subscription(topics=names[::2])),
    }
    assert _plan(CooperativeStickyAssignor().assign(counts, members)) == reference_assign(counts, members)
