"""Bad input at volume (issue 13): a CI sample of bench/fuzz.py's mutated frames.

Every response decoder and the record decoders (row and columnar, each implementation present)
may only return or raise KafkaCodecError/KafkaProtocolError; no decode may take longer than the
per-frame budget; no frame may drive an allocation near what its forged lengths claim. The full
run (1,000,000 frames) is ``python -m bench.fuzz --full``.
"""

from __future__ import annotations

import random

import pytest

from bench import fuzz
from kafka_core.protocol import RESPONSE_CLASSES, ApiKey

SAMPLE = 20_000
HANG_S = 10.0


@pytest.fixture(scope="module")
def sample() -> fuzz.Stats:
    return fuzz.run(SAMPLE, seed=13)


def test_sample_raises_typed_errors_only(sample: fuzz.Stats) -> None:
    assert sample.frames == SAMPLE
    assert sample.crashes == [], f"untyped errors (reproduce with --seed 13 --only i): {sample.crashes[:3]}"
    # A hang guard, not a timing: bench.fuzz counts a decode over FRAME_BUDGET_S as slow, and on a
    # loaded 2-core CI machine a pure-Python columnar decode of one frame took 1.1 s; a real hang
    # (a forged length looping or allocating) takes far longer than HANG_S.
    hung = [s for s in sample.slow if s[2] > HANG_S]
    assert hung == [], f"decodes over the {HANG_S} s hang guard: {hung[:3]}"
    assert sample.disagreements == [], f"record decoders disagree: {sample.disagreements[:3]}"


def test_sample_reaches_every_decoder_and_both_verdicts(sample: fuzz.Stats) -> None:
    """A fuzzer that only produced garbage (or only valid frames) would test nothing."""
    names = {f"response-{ApiKey(k).name}" for k in RESPONSE_CLASSES} | set(fuzz.record_decoders())
    assert names <= set(sample.decodes)
    errors = sum(n for kind, n in sample.outcomes.items() if kind != "ok")
    assert sample.outcomes["ok"] > SAMPLE // 10
    assert errors > SAMPLE // 10
    assert {"forge-i32", "forge-varint", "splice", "truncate", "crc-fixed"} <= set(sample.mutations)


def test_sample_allocations_stay_small(sample: fuzz.Stats) -> None:
    assert sample.max_alloc < fuzz.ALLOC_LIMIT, sample.max_alloc_at


def test_forged_gigabyte_lengths_are_typed_errors_without_the_allocation() -> None:
    probes = fuzz.run_forged()
    assert len(probes) >= 7 + 11 * len(fuzz.record_decoders())  # responses, then record frames
    for p in probes:
        assert not p["outcome"].startswith("UNTYPED"), p
        # a tiny frame claiming gigabytes: a few KB of bookkeeping at most
        assert p["peak_alloc_bytes"] < 1 << 20, p
    assert any(p["outcome"] == "KafkaCodecError" for p in probes)
    assert any(p["outcome"] == "KafkaProtocolError" for p in probes)


def test_the_harness_reports_an_untyped_error() -> None:
    """The property can fail: a decoder leaking IndexError is recorded as a crash."""
    stats = fuzz.Stats()

    def leaky() -> None:
        raise IndexError("read past the buffer")

    verdict = fuzz._decode_one(stats, "leaky", leaky, "frame 0", b"\x00", trace=False)
    assert verdict == "crash"
    assert stats.crashes and "IndexError" in stats.crashes[0][2]


def test_frames_are_reproducible() -> None:
    rng_a, rng_b = random.Random(5), random.Random(5)
    recs = fuzz.record_seeds(rng_a)
    assert recs == fuzz.record_seeds(rng_b)
    responses = [(1, 4, b"\x00" * 40)]
    first = [f[3] for f in fuzz.frames(7, 50, responses, recs)]
    assert first == [f[3] for f in fuzz.frames(7, 50, responses, recs)]
