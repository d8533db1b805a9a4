"""What OpenTelemetry tracing costs: produce and consume throughput with tracing off and on,
kafka_core (kafka_core.tracing) beside confluent-kafka (the contrib instrumentation), in one run.

Each round measures every case once, in turn (off and on alternate, so load drifts hit both);
the figures are medians over ``--rounds``. Tracing on: the OpenTelemetry SDK, every span sampled,
a BatchSpanProcessor handing spans to an exporter that drops them (the SDK's own cost, not an
exporter's). The consumed topic's records carry a ``traceparent`` header (written by a traced
kafka_core producer), so the consume side pays for extracting it.

Cases: ``send`` (one record per call, then flush), ``poll`` (kafka_core's poll: one span per
poll, linked to the records' producer spans; confluent's ``consume(500)``, the same shape) and
``per-record`` (kafka_core's iteration and confluent's ``poll()``: one span per record).

    python -m bench.bench_tracing [--records 50000] [--size 100] [--rounds 3] [--json FILE]

Uses KAFKA_BOOTSTRAP_SERVERS when set, else the bench broker (bench/brokers.py). Prints the
median rates, the on/off ratio per client and case and ours against confluent's (medians of the
rounds' ratios, pairs measured in the same round), and the load average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from bench.brokers import bench_broker, broker_description


def _provider() -> Any:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

    class Drop(SpanExporter):
        def export(self, spans: Sequence[Any]) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    tp = TracerProvider()
    tp.add_span_processor(BatchSpanProcessor(Drop(), max_queue_size=1 << 16))
    return tp


class Tracing:
    """Turns ours and the contrib's instrumentation on and off between measurements."""

    def __init__(self) -> None:
        from opentelemetry.instrumentation.confluent_kafka import ConfluentKafkaInstrumentor

        from kafka_core.tracing import KafkaCoreInstrumentor

        self.provider = _provider()
        self.ours = KafkaCoreInstrumentor()
        self.theirs = ConfluentKafkaInstrumentor()

    def set(self, on: bool) -> None:
        if on and not self.ours.is_instrumented_by_opentelemetry:
            self.ours.instrument(tracer_provider=self.provider)
            self.theirs.instrument(tracer_provider=self.provider)
        elif not on and self.ours.is_instrumented_by_opentelemetry:
            self.provider.force_flush()
            self.ours.uninstrument()
            self.theirs.uninstrument()


def ours_send(bootstrap: str, topic: str, n: int, value: bytes) -> float:
    from kafka_core import KafkaProducer

    with KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5) as producer:
        producer.send(topic, value).result(timeout=60)  # metadata and connections first
        began = time.perf_counter()
        send = producer.send
        for _ in range(n):
            send(topic, value)
        producer.flush(120)
        return n / (time.perf_counter() - began)


def confluent_send(bootstrap: str, topic: str, n: int, value: bytes) -> float:
    import confluent_kafka

    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    producer.produce(topic, value)
    producer.flush(60)
    began = time.perf_counter()
    for _ in range(n):
        while True:
            try:
                producer.produce(topic, value)
                break
            except BufferError:
                producer.poll(0.01)
    if producer.flush(120):
        raise RuntimeError("confluent-kafka did not deliver everything")
    return n / (time.perf_counter() - began)


def ours_consume(bootstrap: str, topic: str, n: int, per_record: bool) -> float:
    from kafka_core import KafkaConsumer

    consumer = KafkaConsumer(
        topic, bootstrap_servers=bootstrap, group_id=None, auto_offset_reset="earliest", max_poll_records=500
    )
    try:
        got = len(consumer.poll(timeout_ms=10_000))  # connected and fetching: the clock starts
        began = time.perf_counter()
        deadline = began + 120
        if per_record:
            for _ in consumer:
                got += 1
                if got >= n or time.perf_counter() > deadline:
                    break
        else:
            while got < n and time.perf_counter() < deadline:
                got += len(consumer.poll(timeout_ms=1_000))
        elapsed = time.perf_counter() - began
    finally:
        consumer.close()
    if got < n:
        raise RuntimeError(f"kafka_core consumed {got} of {n}")
    return n / elapsed


def confluent_consume(bootstrap: str, topic: str, n: int, per_record: bool) -> float:
    import confluent_kafka

    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([topic])
    try:
        got = 0
        began = None
        deadline = time.perf_counter() + 180
        while got < n and time.perf_counter() < deadline:
            if per_record:
                msg = consumer.poll(1.0)
                batch = [msg] if msg is not None and msg.error() is None else []
            else:
                batch = [m for m in consumer.consume(min(500, n - got), 1.0) if m.error() is None]
            if batch and began is None:
                began = time.perf_counter()
            got += len(batch)
        elapsed = time.perf_counter() - (began or time.perf_counter())
    finally:
        consumer.close()
    if got < n:
        raise RuntimeError(f"confluent-kafka consumed {got} of {n}")
    return n / elapsed


CASES = ("send", "poll", "per-record")
CLIENTS = ("kafka_core", "confluent-kafka")


def run_tracing(
    bootstrap: str,
    *,
    records: int = 50_000,
    size: int = 100,
    rounds: int = 3,
    log: Callable[[str], None] = lambda line: print(line, file=sys.stderr),
) -> dict[str, Any]:
    """Every case, off and on, ``rounds`` times on the broker at ``bootstrap``; returns the
    figures as bench/results.json keeps them: each client, case and setting's rate per round
    (``rates``), and the table's ``rows`` (:func:`summarize`)."""
    from kafka_core import KafkaAdmin, NewTopic

    n, value = records, os.urandom(size)
    rates: dict[tuple[str, str, bool], list[float]] = {}
    tracing = Tracing()
    produce_topics = [f"bench-tracing-p-{uuid.uuid4().hex[:8]}" for _ in range(4 * rounds)]
    consume_topic = f"bench-tracing-c-{uuid.uuid4().hex[:8]}"
    with KafkaAdmin(bootstrap) as admin:
        for result in admin.create_topics(
            [NewTopic(t, 1, 1) for t in [*produce_topics, consume_topic]]
        ).values():
            result.result()
    try:
        tracing.set(True)  # the consumed records carry the producer's context, as traced ones do
        ours_send(bootstrap, consume_topic, n, value)
        tracing.set(False)
        n_consume = n + 1
        for round_no in range(rounds):
            for on in (False, True):
                topics = iter(produce_topics[round_no * 4 + (2 if on else 0) :])
                t1, t2 = next(topics), next(topics)
                cases: list[tuple[str, str, Callable[[], float]]] = [
                    ("kafka_core", "send", partial(ours_send, bootstrap, t1, n, value)),
                    ("confluent-kafka", "send", partial(confluent_send, bootstrap, t2, n, value)),
                    ("kafka_core", "poll", lambda: ours_consume(bootstrap, consume_topic, n_consume, False)),
                    (
                        "confluent-kafka",
                        "poll",
                        lambda: confluent_consume(bootstrap, consume_topic, n_consume, False),
                    ),
                    (
                        "kafka_core",
                        "per-record",
                        lambda: ours_consume(bootstrap, consume_topic, n_consume, True),
                    ),
                    (
                        "confluent-kafka",
                        "per-record",
                        lambda: confluent_consume(bootstrap, consume_topic, n_consume, True),
                    ),
                ]
                tracing.set(on)
                for client, case, measure in cases:
                    rates.setdefault((client, case, on), []).append(measure())
                    log(f"round {round_no + 1} tracing {'on ' if on else 'off'} {client:16} {case:10} "
                        f"{rates[(client, case, on)][-1]:>10,.0f} records/s")  # fmt: skip
    finally:
        tracing.set(False)
    per_round = [
        {"client": c, "case": k, "tracing": on, "rates": v} for (c, k, on), v in sorted(rates.items())
    ]
    return {"records": n, "size": size, "rounds": rounds, "rates": per_round, "rows": summarize(per_round)}


def summarize(per_round: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The table: each client and case's median rate off and on, and on/off; then kafka_core over
    confluent-kafka with tracing on and off. Ratios are the medians of the rounds' ratios: each
    round's pair was measured minutes apart at most, so the load's drift between rounds cancels."""
    rates = {(r["client"], r["case"], r["tracing"]): r["rates"] for r in per_round}

    def paired(a: tuple[str, str, bool], b: tuple[str, str, bool]) -> float:
        return statistics.median(x / y for x, y in zip(rates[a], rates[b], strict=True))

    rows: list[dict[str, Any]] = []
    for client in CLIENTS:
        for case in CASES:
            off, on = rates[(client, case, False)], rates[(client, case, True)]
            rows.append(
                {
                    "client": client,
                    "case": case,
                    "off": statistics.median(off),
                    "on": statistics.median(on),
                    "on_over_off": paired((client, case, True), (client, case, False)),
                }
            )
    for case in CASES:
        on_ratio = paired(("kafka_core", case, True), ("confluent-kafka", case, True))
        off_ratio = paired(("kafka_core", case, False), ("confluent-kafka", case, False))
        rows.append({"client": "kafka_core/confluent-kafka", "case": case, "off": off_ratio, "on": on_ratio})
    return rows


def run_from_command_line(
    description: str, run: Callable[..., dict[str, Any]], argv: list[str] | None, *, records: int, rounds: int
) -> dict[str, Any]:
    """A tracing bench's command line (``--records --size --rounds --json``): ``run`` on the bench
    broker, what it ran on and the load printed, the figures written to ``--json``; returns the
    figures, with the load average before and after under ``"load"``."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--records", type=int, default=records)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=rounds)
    parser.add_argument("--json", help="write the figures here too")
    args = parser.parse_args(argv)
    load_before = os.getloadavg()
    with bench_broker() as bootstrap:
        figures = run(bootstrap, records=args.records, size=args.size, rounds=args.rounds)
    load_after = os.getloadavg()
    print(f"\n{args.records:,} records of {args.size} B, {args.rounds} rounds, {broker_description()}")
    print(f"load average before {load_before[0]:.1f}, after {load_after[0]:.1f} ({os.cpu_count()} cores)\n")
    figures = {**figures, "load": [load_before, load_after]}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=2)
    return figures


def main(argv: list[str] | None = None) -> int:
    figures = run_from_command_line(__doc__.splitlines()[0], run_tracing, argv, records=50_000, rounds=3)
    print(f"{'client':16} {'case':10} {'off rec/s':>12} {'on rec/s':>12} {'on/off':>7}")
    for row in figures["rows"]:
        if "on_over_off" in row:
            print(f"{row['client']:16} {row['case']:10} {row['off']:>12,.0f} {row['on']:>12,.0f} {row['on_over_off']:>7.2f}")  # fmt: skip
    print("\nkafka_core / confluent-kafka (median of the rounds' ratios):")
    for row in figures["rows"]:
        if "on_over_off" not in row:
            print(f"  {row['case']:10} tracing on {row['on']:.2f}x, off {row['off']:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
