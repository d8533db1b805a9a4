"""Reconnect/retry backoff: growth, cap, jitter bounds, reset."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafka_core.network.backoff import Backoff


def test_without_jitter_doubles_up_to_the_cap() -> None:
    b = Backoff(100, 1000, jitter=0)
    assert [b.next_ms() for _ in range(6)] == [100, 200, 400, 800, 1000, 1000]
    assert b.attempts == 6


def test_reset_starts_over() -> None:
    b = Backoff(50, 1000, jitter=0)
    for _ in range(4):
        b.next_ms()
    b.reset()
    assert b.attempts == 0
    assert b.next_ms() == 50


@given(
    initial=st.floats(0, 10_000),
    cap=st.floats(0, 100_000),
    multiplier=st.floats(1, 10),
    jitter=st.floats(0, 0.99),
    seed=st.integers(0, 2**32 - 1),
)
def test_each_delay_stays_within_its_steps_jitter_bounds_and_the_cap(
    initial: float, cap: float, multiplier: float, jitter: float, seed: int
) -> None:
    b = Backoff(initial, cap, multiplier=multiplier, jitter=jitter, rng=random.Random(seed))
    for attempt in range(12):
        base = b.base_ms(attempt)
        delay = b.next_ms()
        assert base * (1 - jitter) - 1e-9 <= delay <= min(b.max_ms, base * (1 + jitter)) + 1e-9
        assert delay <= max(cap, initial) + 1e-9
    assert b.attempts == 12


def test_jitter_actually_varies_delays() -> None:
    delays = set()
    for seed in range(10):
        b = Backoff(100, 1000, jitter=0.2, rng=random.Random(seed))
        delays.add(round(b.next_ms(), 6))
    assert len(delays) > 1


def test_huge_attempt_counts_do_not_overflow() -> None:
    b = Backoff(100, 5000, jitter=0)
    assert b.base_ms(10_000) == 5000


def test_next_s_is_in_seconds() -> None:
    b = Backoff(250, 1000, jitter=0)
    assert b.next_s() == 0.25


@pytest.mark.parametrize(
    "kwargs",
    [{"initial_ms": -1}, {"multiplier": 0.5}, {"jitter": 1.0}, {"jitter": -0.1}],
)
def test_rejects_bad_parameters(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        Backoff(**kwargs)  # type: ignore[arg-type]


def test_max_below_initial_is_raised_to_initial() -> None:
    b = Backoff(500, 100, jitter=0)
    assert b.next_ms() == 500
    assert b.next_ms() == 500
