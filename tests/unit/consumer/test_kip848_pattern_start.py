"""A KIP-848 member subscribed by a regex matches the pattern against the known topics once at its
start, not once per known topic (issue 40: quadratic in the topics, a stall at thousands)."""

from __future__ import annotations

import re
from typing import Any

from fakes.consumer_helpers import run
from fakes.kip848_coordinator import FakeCoordinator, member, until

from kafka_core.consumer.group import kip848


def test_the_pattern_is_matched_once_over_the_known_topics(monkeypatch: Any) -> None:
    topics = {f"t-{i}": 1 for i in range(40)} | {f"other-{i}": 1 for i in range(40)}
    client = FakeCoordinator(topics, version=1)
    calls: list[int] = []
    real = kip848.topics_matching

    def counted(pattern: re.Pattern[str], known: Any) -> list[str]:
        known = list(known)
        calls.append(len(known))
        return real(pattern, known)

    monkeypatch.setattr(kip848, "topics_matching", counted)

    async def main() -> None:
        await client.metadata(None)  # the client knows every topic before the member starts
        c = member(client, [], topics=None, pattern=re.compile(r"t-\d+"))
        await until(c, lambda: bool(client.requests))
        await c.close()

    run(main())
    assert calls and calls[0] >= 80
    assert len(calls) == 1, f"matched {len(calls)} times over the known topics"
