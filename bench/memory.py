"""Memory stays bounded under load (issue 13): resident memory of one producer process.

    python -m bench.memory                      # both scenarios, 5,000,000 records each
    python -m bench.memory --records 500000     # smaller
    python -m bench.memory --scenario flushes --json out.json

Each scenario runs in a child process of its own against an embedded Tansu (memory storage),
so that its peak RSS (VmHWM) is its own:

- ``flushes``: N records of 100 bytes through one producer, ``flush()`` every 100,000 records;
  RSS is sampled after each million and the growth between the first and last million reported.
- ``backpressure``: the same records sent with no flush and a small ``buffer_memory`` (8 MiB) by a
  producer faster than the broker; ``send`` must block (counted: sends that took > 1 ms) and RSS
  must stay near the baseline plus ``buffer_memory``.

These are memory figures, not speed: the machine is shared, so the rates printed are only a
sanity check.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

RECORDS = 5_000_000
VALUE = b"v" * 100
FLUSH_EVERY = 100_000
BACKPRESSURE_BUFFER = 8 << 20
RESULT = "MEMORY_RESULT "


def _status_kib(field: str) -> int:
    """A field of /proc/self/status (VmRSS, VmHWM), in KiB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def _mib(kib: int) -> float:
    return round(kib / 1024, 1)


def scenario(name: str, bootstrap: str, records: int) -> dict[str, Any]:
    """Run one scenario in this process; its figures."""
    import kafka_core
    from kafka_core import KafkaProducer

    topic = f"memory-{name}-{int(time.time())}"
    buffer_memory = BACKPRESSURE_BUFFER if name == "backpressure" else 64 << 20
    baseline_before_producer = _status_kib("VmRSS")
    producer = KafkaProducer(bootstrap, linger_ms=5, buffer_memory=buffer_memory, max_block_ms=60_000)
    send = producer.send
    producer.send(topic, VALUE, key=b"warm-up").result(timeout=60)  # metadata and connections
    baseline = _status_kib("VmRSS")
    samples: list[tuple[int, float]] = []  # (records sent, RSS MiB) after each million
    blocked = 0
    longest_block = 0.0
    probes = []  # the future of every 100,000th record: checked at the end (nothing failed silently)
    t0 = time.perf_counter()
    for i in range(records):
        if i % FLUSH_EVERY == 0:
            probes.append(send(topic, VALUE))
        elif name == "backpressure":
            s = time.perf_counter()
            send(topic, VALUE)
            dt = time.perf_counter() - s
            if dt > 0.001:
                blocked += 1
                longest_block = max(longest_block, dt)
        else:
            send(topic, VALUE)
            if (i + 1) % FLUSH_EVERY == 0:
                producer.flush()
        if (i + 1) % 1_000_000 == 0 or i + 1 == records:
            samples.append((i + 1, _mib(_status_kib("VmRSS"))))
            print(f"[{name}] {i + 1:,} records, RSS {samples[-1][1]} MiB", file=sys.stderr, flush=True)
    producer.flush()
    elapsed = time.perf_counter() - t0
    failed = []
    for fut in probes:
        try:
            fut.result(timeout=60)
        except Exception as exc:  # reported, not raised: the figures are still wanted
            failed.append(repr(exc)[:200])
    producer.close()
    first = samples[0][1]
    last = samples[-1][1]
    out = {
        "scenario": name,
        "records": records,
        "value_bytes": len(VALUE),
        "buffer_memory_mib": _mib(buffer_memory // 1024),
        "rss_before_producer_mib": _mib(baseline_before_producer),
        "rss_baseline_mib": _mib(baseline),
        "rss_samples_mib": samples,
        "rss_growth_first_to_last_million_mib": round(last - first, 1),
        "peak_rss_mib": _mib(_status_kib("VmHWM")),
        "peak_over_baseline_mib": round(_mib(_status_kib("VmHWM")) - _mib(baseline), 1),
        "elapsed_s": round(elapsed, 1),
        "records_per_s": round(records / elapsed),
        "codec": kafka_core.codec.IMPLEMENTATION,
        "probe_records_delivered": len(probes) - len(failed),
        "probe_records_failed": failed[:3],
    }
    if name == "backpressure":
        out["sends_blocked_over_1ms"] = blocked
        out["longest_block_s"] = round(longest_block, 3)
    return out


def run_child(name: str, bootstrap: str, records: int) -> dict[str, Any]:
    cmd = [
        sys.executable,
        "-m",
        "bench.memory",
        "--child",
        name,
        "--bootstrap",
        bootstrap,
        "--records",
        str(records),
    ]
    proc = subprocess.run(
        cmd, stdout=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parents[1], check=False
    )
    for line in proc.stdout.splitlines():
        if line.startswith(RESULT):
            return json.loads(line[len(RESULT) :])
    return {"scenario": name, "error": f"child exited {proc.returncode} without a result"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="producer memory under load against an embedded Tansu")
    ap.add_argument("--records", type=int, default=RECORDS)
    ap.add_argument("--scenario", choices=["flushes", "backpressure", "both"], default="both")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--bootstrap", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(RESULT + json.dumps(scenario(args.child, args.bootstrap, args.records)), flush=True)
        return 0
    from kafka_core.devbroker import TansuBroker

    names = ["flushes", "backpressure"] if args.scenario == "both" else [args.scenario]
    results = []
    for name in names:  # a fresh broker each: memory storage keeps every record until it stops
        with TansuBroker() as broker:
            results.append(run_child(name, broker.bootstrap, args.records))
    for r in results:
        print(json.dumps(r))
        if "error" not in r:
            line = (
                f"SUMMARY {r['scenario']}: {r['records']:,} records, peak RSS {r['peak_rss_mib']} MiB "
                f"(baseline {r['rss_baseline_mib']} MiB, +{r['peak_over_baseline_mib']} MiB, "
                f"buffer_memory {r['buffer_memory_mib']} MiB), growth first->last million "
                f"{r['rss_growth_first_to_last_million_mib']} MiB, "
                f"{r['probe_records_delivered']} of {r['probe_records_delivered'] + len(r['probe_records_failed'])} "
                "probe records acknowledged"
            )
            if r["scenario"] == "backpressure":
                line += f", {r['sends_blocked_over_1ms']:,} sends blocked > 1 ms (longest {r['longest_block_s']} s)"
            print(line)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0 if all("error" not in r for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
