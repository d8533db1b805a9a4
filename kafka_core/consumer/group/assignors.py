"""Partition assignors run by the group leader: range, roundrobin, cooperative-sticky (KIP-429).

Pure functions of (partition counts, member subscriptions): no I/O, so they are unit-tested alone.
Members are ordered by group instance id when they have one (static membership keeps its place
across restarts), else by member id.
"""

from __future__ import annotations

from bisect import insort
from collections.abc import Mapping
from dataclasses import dataclass, field

from kafka_core.consumer.group.classic_meta import Assignment, Subscription

EAGER = "eager"
COOPERATIVE = "cooperative"


@dataclass
class MemberInfo:
    member_id: str
    subscription: Subscription
    group_instance_id: str | None = None

    @property
    def sort_key(self) -> tuple[str, str]:
        return (self.group_instance_id or self.member_id, self.member_id)


@dataclass
class GroupAssignment:
    assignments: dict[str, Assignment] = field(default_factory=dict)


def _sorted_members(members: Mapping[str, MemberInfo]) -> list[MemberInfo]:
    return sorted(members.values(), key=lambda m: m.sort_key)


def _empty(members: Mapping[str, MemberInfo]) -> dict[str, dict[str, list[int]]]:
    return {m: {} for m in members}


def _finish(plan: dict[str, dict[str, list[int]]]) -> dict[str, Assignment]:
    return {
        m: Assignment(partitions={t: sorted(ps) for t, ps in tps.items() if ps}) for m, tps in plan.items()
    }


def _even_out(owned: dict[str, list[tuple[str, int]]], eligible: Mapping[tuple[str, int], list[str]]) -> None:
    """Move partitions one at a time from the most loaded member (the highest partition first
    that may go) to the least loaded eligible member two or more below it, until no move helps.

    Each member's partitions are kept sorted, so a move costs a bisection and not a sort of the
    member's list (that sort per move made 10,000 partitions take seconds). Partitions of one
    topic share their list of eligible members, so a scan asks once per topic whether any of
    them is light enough.
    """
    for tps in owned.values():
        tps.sort()
    while True:
        moved = False
        for src in sorted(owned, key=lambda mid: (-len(owned[mid]), mid)):
            src_tps = owned[src]
            limit = len(src_tps) - 1
            verdict: dict[int, str | None] = {}
            for i in range(len(src_tps) - 1, -1, -1):
                tp = src_tps[i]
                subs = eligible[tp]
                key = id(subs)
                if key not in verdict:
                    candidates = [mid for mid in subs if len(owned[mid]) < limit]
                    verdict[key] = (
                        min(candidates, key=lambda mid: (len(owned[mid]), mid)) if candidates else None
                    )
                dst = verdict[key]
                if dst is not None:
                    del src_tps[i]
                    insort(owned[dst], tp)
                    moved = True
                    break
            if moved:
                break
        if not moved:
            return


class RangeAssignor:
    """Per topic, contiguous ranges; the first members get one extra when it does not divide."""

    name = "range"
    protocol = EAGER

    def assign(
        self, partitions: Mapping[str, int], members: Mapping[str, MemberInfo]
    ) -> dict[str, Assignment]:
        plan = _empty(members)
        ordered = _sorted_members(members)
        for topic in sorted(partitions):
            subscribers = [m for m in ordered if topic in m.subscription.topics]
            if not subscribers:
                continue
            count = partitions[topic]
            per, extra = divmod(count, len(subscribers))
            start = 0
            for i, member in enumerate(subscribers):
                n = per + (1 if i < extra else 0)
                if n:
                    plan[member.member_id].setdefault(topic, []).extend(range(start, start + n))
                start += n
        return _finish(plan)


class RoundRobinAssignor:
    """All partitions in (topic, partition) order dealt to subscribed members in turn."""

    name = "roundrobin"
    protocol = EAGER

    def assign(
        self, partitions: Mapping[str, int], members: Mapping[str, MemberInfo]
    ) -> dict[str, Assignment]:
        plan = _empty(members)
        ordered = _sorted_members(members)
        if not ordered:
            return {}
        i = 0
        for topic in sorted(partitions):
            subscribers = {m.member_id for m in ordered if topic in m.subscription.topics}
            if not subscribers:
                continue
            for p in range(partitions[topic]):
                while ordered[i % len(ordered)].member_id not in subscribers:
                    i += 1
                plan[ordered[i % len(ordered)].member_id].setdefault(topic, []).append(p)
                i += 1
        return _finish(plan)


class CooperativeStickyAssignor:
    """Balanced and sticky; a partition changing owner is withheld for one round (KIP-429).

    The previous owner revokes it and rejoins; the next rebalance hands it to the new owner, so no
    partition is ever owned by two members at once and the others keep consuming throughout.
    """

    name = "cooperative-sticky"
    protocol = COOPERATIVE

    def assign(
        self, partitions: Mapping[str, int], members: Mapping[str, MemberInfo]
    ) -> dict[str, Assignment]:
        ordered = _sorted_members(members)
        if not ordered:
            return {}
        eligible: dict[tuple[str, int], list[str]] = {}
        for topic in sorted(partitions):
            subs = [m.member_id for m in ordered if topic in m.subscription.topics]
            if subs:
                for p in range(partitions[topic]):
                    eligible[(topic, p)] = subs
        # 1. Previous owners keep what they still may own; a claim by two members goes to the
        #    one with the newer generation (the other is stale after a missed rebalance).
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
        # 2. Shed load above the fair share (ceil) so that newcomers can get some.
        members_by_topicset = {frozenset(m.subscription.topics) for m in ordered}
        if len(members_by_topicset) == 1:
            total = len(eligible)
            quota_max = -(-total // len(ordered))
            for tps in owned.values():
                while len(tps) > quota_max:
                    tps.pop()
        assigned = {tp for tps in owned.values() for tp in tps}
        # 3. Unowned partitions go to the least loaded eligible member.
        for tp, subs in eligible.items():
            if tp in assigned:
                continue
            target = min(subs, key=lambda mid: (len(owned[mid]), mid))
            owned[target].append(tp)
        # 4. Even out: move from the most to the least loaded eligible member while it helps.
        _even_out(owned, eligible)
        # 5. Cooperative: withhold partitions still owned by someone else this round.
        claims: dict[tuple[str, int], list[str]] = {}
        for m in ordered:
            for topic, ps in m.subscription.owned_partitions.items():
                for p in ps:
                    claims.setdefault((topic, p), []).append(m.member_id)
        plan = _empty(members)
        for member_id, tps in owned.items():
            for tp in tps:
                old = prev_owner.get(tp)
                claimed = any(mid != member_id for mid in claims.get(tp, ()))
                if (old is not None and old != member_id) or (old is None and claimed):
                    continue
                plan[member_id].setdefault(tp[0], []).append(tp[1])
        return _finish(plan)


ASSIGNORS: dict[str, type] = {
    RangeAssignor.name: RangeAssignor,
    RoundRobinAssignor.name: RoundRobinAssignor,
    CooperativeStickyAssignor.name: CooperativeStickyAssignor,
}


def get_assignor(name_or_obj: object) -> RangeAssignor | RoundRobinAssignor | CooperativeStickyAssignor:
    """Accept a registered name or any object with ``name``, ``protocol`` and ``assign``."""
    if isinstance(name_or_obj, str):
        try:
            return ASSIGNORS[name_or_obj]()
        except KeyError:
            from kafka_core.errors import KafkaConfigError

            raise KafkaConfigError(
                f"unknown assignor {name_or_obj!r}; known: {', '.join(sorted(ASSIGNORS))}"
            ) from None
    for attr in ("name", "protocol", "assign"):
        if not hasattr(name_or_obj, attr):
            from kafka_core.errors import KafkaConfigError

            raise KafkaConfigError(f"assignor {name_or_obj!r} has no {attr!r}")
    return name_or_obj  # type: ignore[return-value]
