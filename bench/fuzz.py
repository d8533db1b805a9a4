"""Bad input at volume: mutated frames through every response decoder and the record decoders.

    python -m bench.fuzz                # a sample (50,000 frames)
    python -m bench.fuzz --full         # 1,000,000 frames
    python -m bench.fuzz --frames N --seed S --json out.json

Seeds are valid frames (every response API at every version, filled from the generated
protocol schema, tools/protocol_gen/schema_table.py, with a seeded RNG; record batches of every codec, control batches, legacy message
sets), mutated by bit flips, byte stores, truncations, forged length fields, splices, inserts and
deletions. Frame ``i`` of seed ``S`` is always the same bytes, so a finding is reproducible with
``--only i``. A decoder may return or raise KafkaCodecError/KafkaProtocolError, nothing else; each
decode is timed (the per-frame budget flags a hang) and its Python allocation peak measured with
tracemalloc (a forged length must not drive an allocation). The forged-length probes decode
frames whose length fields claim gigabytes and report each one's allocation peak.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import random
import struct
import sys
import time
import tracemalloc
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.fuzz_frames import INT32_MAX, fix_crcs, mutate, record_decoders, record_seeds, response_seeds
from kafka_core.errors import KafkaCodecError, KafkaProtocolError
from kafka_core.protocol import ApiKey, decode_response

TYPED = (KafkaCodecError, KafkaProtocolError)
FULL_FRAMES = 1_000_000
SAMPLE_FRAMES = 50_000
FRAME_BUDGET_S = 1.0  # a decode slower than this counts as a hang
ALLOC_LIMIT = 64 << 20  # no frame here is over ~100 KB: a peak above this is a forged length obeyed


# ------------------------------------------------------------------------------------------
# the run
# ------------------------------------------------------------------------------------------
@dataclass
class Stats:
    frames: int = 0
    decodes: Counter = field(default_factory=Counter)  # per decoder
    outcomes: Counter = field(default_factory=Counter)  # ok / error type name
    mutations: Counter = field(default_factory=Counter)
    crashes: list = field(default_factory=list)  # (frame index, decoder, repr(exc), hex)
    slow: list = field(default_factory=list)
    disagreements: list = field(default_factory=list)  # record decoders with different verdicts
    max_time: float = 0.0
    max_time_at: str = ""
    max_alloc: int = 0
    max_alloc_at: str = ""
    max_frame_bytes: int = 0
    elapsed: float = 0.0

    def summary(self) -> dict[str, Any]:
        return {
            "frames": self.frames,
            "decodes": sum(self.decodes.values()),
            "per_decoder": dict(sorted(self.decodes.items())),
            "outcomes": dict(self.outcomes.most_common()),
            "mutations": dict(self.mutations.most_common()),
            "untyped_errors": len(self.crashes),
            "first_untyped": self.crashes[:5],
            "over_budget": len(self.slow),
            "first_over_budget": self.slow[:5],
            "verdict_disagreements": len(self.disagreements),
            "first_disagreements": self.disagreements[:5],
            "max_time_per_frame_ms": round(self.max_time * 1000, 3),
            "max_time_at": self.max_time_at,
            "peak_alloc_per_frame_bytes": self.max_alloc,
            "peak_alloc_at": self.max_alloc_at,
            "largest_frame_bytes": self.max_frame_bytes,
            "elapsed_s": round(self.elapsed, 1),
        }


def _decode_one(stats: Stats, name: str, fn: Callable[[], Any], where: str, frame: bytes, trace: bool) -> str:
    """Run one decode; account for its outcome, time and allocation peak; return 'ok'/'error'."""
    if trace:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
    t0 = time.perf_counter()
    try:
        fn()
        verdict = "ok"
        stats.outcomes["ok"] += 1
    except TYPED as exc:
        verdict = "error"
        stats.outcomes[type(exc).__name__] += 1
    except Exception as exc:  # the property under test: nothing else may escape
        verdict = "crash"
        stats.outcomes[f"UNTYPED {type(exc).__name__}"] += 1
        stats.crashes.append((where, name, repr(exc)[:200], frame[:256].hex()))
    dt = time.perf_counter() - t0
    stats.decodes[name] += 1
    if dt > stats.max_time:
        stats.max_time, stats.max_time_at = dt, f"{where} {name}"
    if dt > FRAME_BUDGET_S:
        stats.slow.append((where, name, round(dt, 3)))
    if trace:
        peak = tracemalloc.get_traced_memory()[1] - base
        if peak > stats.max_alloc:
            stats.max_alloc, stats.max_alloc_at = peak, f"{where} {name} ({len(frame)}-byte frame)"
    return verdict


def frames(
    seed: int, n: int, responses: list, records: list[bytes]
) -> Iterator[tuple[int, str, Any, bytes, list, bool]]:
    """Frame i: ('response', (key, version), frame) or ('records', check_crc, frame); 70% responses."""
    for i in range(n):
        rng = random.Random(seed * 1_000_003 + i)
        if rng.random() < 0.7:
            key, version, data = rng.choice(responses)
            other = rng.choice(responses)[2]
            mutated, ops = mutate(rng, data, other)
            yield i, "response", (key, version), mutated, ops, True
        else:
            data = rng.choice(records)
            mutated, ops = mutate(rng, data, rng.choice(records))
            if rng.random() < 0.5:
                mutated = fix_crcs(mutated)
                ops.append("crc-fixed")
            yield i, "records", None, mutated, ops, rng.random() < 0.7


def run(
    n: int, seed: int = 1, *, trace: bool = True, only: int | None = None, progress: bool = False
) -> Stats:
    rng = random.Random(seed)
    records = record_seeds(rng)
    responses = response_seeds(rng, records, per_version=3)
    decoders = record_decoders()
    stats = Stats()
    # A process's first decodes import what the decoders load on first use (pyarrow, the compression
    # libraries, the protocol's message modules): done here, untimed and before tracemalloc, so that
    # an import never counts as a slow decode (stop 48: the first pure-Python columnar decode of a
    # fresh venv took 11.9 s under load, byte-compiling pyarrow's modules under tracemalloc). The
    # seeds are valid: a decoder that fails on one fails the run.
    for data in records:
        for fn in decoders.values():
            fn(data, True)
    for key, version, data in responses:
        decode_response(key, version, data)
    if trace:
        tracemalloc.start()
    t0 = time.perf_counter()
    try:
        for i, kind, target, frame, ops, crc in frames(seed, n, responses, records):
            if only is not None and i != only:
                continue
            stats.frames += 1
            if progress and stats.frames % 100_000 == 0:
                print(f"... {stats.frames} frames, {time.perf_counter() - t0:.0f} s", file=sys.stderr)
            stats.mutations.update(ops)
            stats.max_frame_bytes = max(stats.max_frame_bytes, len(frame))
            where = f"frame {i} (seed {seed})"
            if kind == "response":
                key, version = target
                name = f"response-{ApiKey(key).name}"
                call = functools.partial(decode_response, key, version, frame)
                _decode_one(stats, name, call, where, frame, trace)
                continue
            verdicts = {
                name: _decode_one(stats, name, functools.partial(fn, frame, crc), where, frame, trace)
                for name, fn in decoders.items()
            }
            if len(set(verdicts.values())) > 1:
                stats.disagreements.append((where, verdicts))
    finally:
        stats.elapsed = time.perf_counter() - t0
        if trace:
            tracemalloc.stop()
    return stats


# ------------------------------------------------------------------------------------------
# forged lengths claiming gigabytes
# ------------------------------------------------------------------------------------------
def _batch_header(length: int, count: int, attributes: int = 0) -> bytes:
    return struct.pack(">qiibIhiqqqhii", 0, length, -1, 2, 0, attributes, 0, 0, 0, -1, -1, -1, count)


def forged_frames() -> list[tuple[str, str, Callable[[], Any]]]:
    """(what, decoder, call): each frame is small but a length field in it claims gigabytes."""
    corr = struct.pack(">i", 1)
    gib2 = struct.pack(">i", INT32_MAX)
    probes: list[tuple[str, str, Callable[[], Any]]] = []

    def resp(what: str, key: int, version: int, frame: bytes) -> None:
        probes.append((what, f"response-{ApiKey(key).name}", lambda: decode_response(key, version, frame)))

    resp("Metadata v1 brokers array of 2**31-1", ApiKey.METADATA, 1, corr + gib2 + b"\x00" * 64)
    resp(
        "Metadata v12 compact array of 2**32-2",
        ApiKey.METADATA,
        12,
        corr + b"\x00" + b"\x00" * 4 + b"\xff\xff\xff\xff\x0f" + b"\x00" * 32,
    )
    resp(
        "SaslAuthenticate v1 bytes of 2**31-1",
        ApiKey.SASL_AUTHENTICATE,
        1,
        corr + b"\x00\x00\xff\xff" + gib2 + b"x" * 64,
    )
    resp(
        "SaslAuthenticate v2 compact bytes of 2**32-2",
        ApiKey.SASL_AUTHENTICATE,
        2,
        corr + b"\x00" + b"\x00\x00\x00\x00" + b"\xff\xff\xff\xff\x0f" + b"x" * 32,
    )
    fetch4 = corr + b"\x00" * 4 + struct.pack(">i", 1) + b"\x00\x01t" + struct.pack(">i", 1)
    fetch4 += struct.pack(">ihqq", 0, 0, 0, 0) + struct.pack(">i", 0) + gib2 + b"r" * 64
    resp("Fetch v4 records of 2**31-1 bytes", ApiKey.FETCH, 4, fetch4)
    resp(
        "ApiVersions v3 array of 2**32-2",
        ApiKey.API_VERSIONS,
        3,
        corr + b"\x00\x00" + b"\xff\xff\xff\xff\x0f" + b"\x00" * 16,
    )
    resp(
        "Metadata v1 string of 32767 bytes",
        ApiKey.METADATA,
        1,
        corr + struct.pack(">i", 1) + struct.pack(">i", 0) + b"\x7f\xff" + b"h" * 8,
    )

    rec = []
    rec.append(("batch length 2**31-1 (trailing, truncated)", _batch_header(INT32_MAX, 1) + b"\x00" * 16))
    rec.append(("record count 2**31-1", _fix(_batch_header(49 + 16, INT32_MAX) + b"\x02" * 16)))
    rec.append(
        (
            "record count 2**31-1, zstd",
            _fix(_batch_header(49 + 16, INT32_MAX, 4) + b"\x28\xb5\x2f\xfd" + b"\x00" * 12),
        )
    )
    rec.append(
        (
            "record length varint 2**31-1",
            _fix(_batch_header(49 + 16, 1) + b"\xfe\xff\xff\xff\x0f" + b"\x00" * 11),
        )
    )
    rec.append(
        (
            "key length varint 2**31-1",
            _fix(_batch_header(49 + 16, 1) + b"\x1e\x00\x00\x00\xfe\xff\xff\xff\x0f" + b"\x00" * 7),
        )
    )
    rec.append(
        (
            "header count 2**31-1",
            _fix(_batch_header(49 + 16, 1) + b"\x1e\x00\x00\x00\x01\x01\xfe\xff\xff\xff\x0f" + b"\x00" * 5),
        )
    )
    snappy = b"\xff\xff\xff\xff\x0f" + b"\x00" * 11  # raw snappy preamble: 4 GiB
    rec.append(("snappy preamble of 4 GiB", _fix(_batch_header(49 + 16, 1, 2) + snappy)))
    zstd = b"\x28\xb5\x2f\xfd\xa0" + struct.pack("<I", 0xFFFFFFFF) + b"\x01\x00\x00"  # content size 4 GiB
    rec.append(("zstd frame content size of 4 GiB", _fix(_batch_header(49 + len(zstd), 1, 4) + zstd)))
    lz4 = b"\x04\x22\x4d\x18\x6c\x70" + struct.pack("<Q", 1 << 34) + b"\x00" + b"\x00\x00\x00\x00"
    rec.append(("lz4 frame content size of 16 GiB", _fix(_batch_header(49 + len(lz4), 1, 3) + lz4)))
    rec.append(("legacy message size 2**31-1", struct.pack(">qi", 0, INT32_MAX) + b"\x00" * 20))
    legacy_key = struct.pack(">qi", 0, 26) + b"\x00" * 4 + b"\x00\x00" + gib2 + b"\x00" * 16
    rec.append(("legacy key length 2**31-1", legacy_key))
    for what, frame in rec:
        for name, fn in record_decoders().items():
            probes.append((what, name, lambda f=fn, b=frame: f(b, False)))
    return probes


def _fix(batch: bytes) -> bytes:
    return fix_crcs(batch)


def run_forged() -> list[dict[str, Any]]:
    """Decode each forged frame with tracemalloc on; its outcome and allocation peak."""
    out = []
    probes = forged_frames()
    for _what, _name, call in probes:  # warm up: lazy imports of message classes are not the frame's
        with contextlib.suppress(Exception):
            call()
    tracemalloc.start()
    try:
        for what, name, call in probes:
            tracemalloc.reset_peak()
            base = tracemalloc.get_traced_memory()[0]
            try:
                call()
                outcome = "ok"
            except TYPED as exc:
                outcome = type(exc).__name__
            except Exception as exc:
                outcome = f"UNTYPED {type(exc).__name__}: {exc}"
            peak = tracemalloc.get_traced_memory()[1] - base
            out.append({"frame": what, "decoder": name, "outcome": outcome, "peak_alloc_bytes": peak})
    finally:
        tracemalloc.stop()
    return out


def vm_hwm_kib() -> int:
    """Peak resident set of this process (VmHWM), in KiB: native allocations tracemalloc misses."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return -1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="mutated frames through every decoder (typed errors only)")
    ap.add_argument("--full", action="store_true", help=f"{FULL_FRAMES:,} frames")
    ap.add_argument("--frames", type=int, default=None, help=f"frames to run (default {SAMPLE_FRAMES:,})")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--only", type=int, default=None, help="run frame i only (to reproduce a finding)")
    ap.add_argument("--no-trace", action="store_true", help="skip tracemalloc (faster)")
    ap.add_argument("--json", type=Path, default=None, help="write the summary here")
    args = ap.parse_args(argv)
    n = args.frames or (FULL_FRAMES if args.full else SAMPLE_FRAMES)
    hwm_before = vm_hwm_kib()
    forged = run_forged()
    stats = run(n, args.seed, trace=not args.no_trace, only=args.only, progress=True)
    summary = stats.summary()
    summary["seed"] = args.seed
    summary["forged_length_probes"] = len(forged)
    summary["forged_max_peak_alloc_bytes"] = max(p["peak_alloc_bytes"] for p in forged)
    summary["forged_untyped"] = [p for p in forged if p["outcome"].startswith("UNTYPED")]
    summary["vm_hwm_kib_before"] = hwm_before
    summary["vm_hwm_kib_after"] = vm_hwm_kib()
    print(json.dumps(summary, indent=2))
    for p in forged:
        print(
            f"forged: {p['frame']:<45} {p['decoder']:<28} {p['outcome']:<20} peak {p['peak_alloc_bytes']:,} B"
        )
    bad = stats.crashes or stats.slow or summary["forged_untyped"] or stats.disagreements
    bad = bad or stats.max_alloc > ALLOC_LIMIT or summary["forged_max_peak_alloc_bytes"] > ALLOC_LIMIT
    errors = sum(v for k, v in stats.outcomes.items() if k != "ok")
    print(
        f"SUMMARY frames={stats.frames:,} decodes={sum(stats.decodes.values()):,} typed_errors={errors:,} "
        f"untyped={len(stats.crashes)} over_budget={len(stats.slow)} disagreements={len(stats.disagreements)} "
        f"max_ms_per_frame={stats.max_time * 1000:.1f} peak_alloc_per_frame={stats.max_alloc:,}B "
        f"forged_peak={summary['forged_max_peak_alloc_bytes']:,}B vm_hwm={summary['vm_hwm_kib_after']:,}KiB "
        f"elapsed={stats.elapsed:.0f}s -> {'FAIL' if bad else 'PASS'}"
    )
    if args.json:
        args.json.write_text(json.dumps({**summary, "forged": forged}, indent=2))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
