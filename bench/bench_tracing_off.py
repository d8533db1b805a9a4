"""What tracing costs when it is off: kafka_core never traced against kafka_core traced and then
turned off (``KafkaCoreInstrumentor().instrument()``, then ``.uninstrument()``), in one run.

Issue 43's target is that the producer's and consumer's figures do not move with tracing off.
Each measurement runs in a fresh interpreter, so that one mode's process state (imports, the
allocator, the hooks left behind) cannot reach the other's: ``never`` imports neither
OpenTelemetry nor ``kafka_core.tracing``; ``off`` installs the instrumentation with the SDK's
tracer provider and removes it before the clock starts. Each round measures every case in both
modes, in alternating order; the ratio off/never is the median of the rounds' ratios.

Cases as bench/bench_tracing.py's: ``send`` (one record per call, then flush), ``poll`` (500
records a poll) and ``per-record`` (iteration), on records without headers.

    python -m bench.bench_tracing_off [--records 200000] [--size 100] [--rounds 5] [--json FILE]
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import uuid
from typing import Any

CASES = ("send", "poll", "per-record")
MODES = ("never", "off")


def _child(case: str, mode: str, bootstrap: str, topic: str, records: int, size: int) -> float:
    """One measurement, in this (fresh) process."""
    if mode == "off":
        from opentelemetry.sdk.trace import TracerProvider

        from kafka_core.tracing import KafkaCoreInstrumentor

        instrumentor = KafkaCoreInstrumentor()
        instrumentor.instrument(tracer_provider=TracerProvider())
        instrumentor.uninstrument()
    elif "opentelemetry" in sys.modules or "kafka_core.tracing" in sys.modules:
        raise RuntimeError("the 'never' process imported tracing")
    from bench.bench_tracing import ours_consume, ours_send

    if case == "send":
        return ours_send(bootstrap, topic, records, os.urandom(size))
    return ours_consume(bootstrap, topic, records, case == "per-record")


def _measure(case: str, mode: str, bootstrap: str, topic: str, records: int, size: int) -> float:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.bench_tracing_off",
            "--child",
            case,
            mode,
            bootstrap,
            topic,
            str(records),
            str(size),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{case} {mode}: {proc.stderr[-2000:]}")
    return float(proc.stdout.strip().splitlines()[-1])


def run_tracing_off(bootstrap: str, *, records: int, size: int, rounds: int) -> dict[str, Any]:
    from kafka_core import KafkaAdmin, KafkaProducer, NewTopic

    consume_topic = f"bench-tracing-off-c-{uuid.uuid4().hex[:8]}"
    send_topics = [f"bench-tracing-off-p-{uuid.uuid4().hex[:8]}" for _ in range(2 * rounds)]
    with KafkaAdmin(bootstrap) as admin:
        for result in admin.create_topics(
            [NewTopic(t, 1, 1) for t in [consume_topic, *send_topics]]
        ).values():
            result.result()
    value = os.urandom(size)
    with KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5) as producer:
        for _ in range(records + 1):
            producer.send(consume_topic, value)
        producer.flush(120)
    rates: dict[tuple[str, str], list[float]] = {(c, m): [] for c in CASES for m in MODES}
    for round_no in range(rounds):
        order = MODES if round_no % 2 == 0 else MODES[::-1]
        for case in CASES:
            for i, mode in enumerate(order):
                topic = send_topics[2 * round_no + i] if case == "send" else consume_topic
                rate = _measure(case, mode, bootstrap, topic, records, size)
                rates[(case, mode)].append(rate)
                print(f"round {round_no + 1} {case:10} {mode:5} {rate:>12,.0f} records/s", file=sys.stderr)
    rows = [
        {
            "case": case,
            "never": statistics.median(rates[(case, "never")]),
            "off": statistics.median(rates[(case, "off")]),
            "off_over_never": statistics.median(
                off / never for off, never in zip(rates[(case, "off")], rates[(case, "never")], strict=True)
            ),
        }
        for case in CASES
    ]
    return {
        "records": records,
        "size": size,
        "rounds": rounds,
        "rates": [{"case": c, "mode": m, "rates": v} for (c, m), v in rates.items()],
        "rows": rows,
    }


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        case, mode, bootstrap, topic, records, size = argv[1:7]
        print(_child(case, mode, bootstrap, topic, int(records), int(size)))
        return 0
    from bench.bench_tracing import run_from_command_line

    figures = run_from_command_line(__doc__.splitlines()[0], run_tracing_off, argv, records=200_000, rounds=5)
    print(f"{'case':10} {'never rec/s':>12} {'off rec/s':>12} {'off/never':>10}")
    for row in figures["rows"]:
        print(f"{row['case']:10} {row['never']:>12,.0f} {row['off']:>12,.0f} {row['off_over_never']:>10.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
