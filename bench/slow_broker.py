"""Slow-broker producer bench: every broker response held D seconds, records offered at a fixed rate.

Issue 13 saw our producer collapse behind a slow broker (batches sealed at linger_ms while they
waited behind in-flight requests: 66 records/s where confluent-kafka kept 166/s). This bench
keeps that comparison honest and repeatable: one embedded Tansu (memory storage) behind the
chaos fault proxy, which delays every broker->client frame by D seconds and records every
Produce request. For each D, each client runs in a fresh child process against its own fresh
3-partition topic, sends one warm-up record (connection, metadata, producer id; not counted),
then offers records at a fixed rate for T seconds and flushes. Reported per client:

- acknowledged records/s over the offered window (acks seen by delivery callbacks/futures
  within the T seconds, divided by T) and the ratio to confluent-kafka's;
- records per Produce request, from the proxy's capture (retries count as requests);
- failed records, and the time flush() took after the window.

    python -m bench.slow_broker                        # D = 1 s and 2 s, 2,000 records/s for 30 s
    python -m bench.slow_broker --quick                # a short self-check (about a minute)
    python -m bench.slow_broker --delays 1 --seconds 60 --clients kafka_core,confluent-kafka
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.common import ERROR, OK, RunResult, child_main, make_values, run_child

CLIENTS = ("confluent-kafka", "kafka_core", "aiokafka", "kafka-python")
ANCHOR = "confluent-kafka"
PARTITIONS = 3
LINGER_MS = 5
DELIVERY_TIMEOUT_MS = 120_000
FLUSH_TIMEOUT_S = 150.0  # past the delivery timeout: flush ends because records settled
WARMUP_TIMEOUT_S = 60.0
TICK_S = 0.005  # pacing granularity: records due are sent in bursts this far apart


# --------------------------------------------------------------------------- child side


@dataclass
class Tally:
    """Acks and failures as the client's callbacks report them (any thread)."""

    acks: list[float] = field(default_factory=list)  # monotonic time of each acknowledgement
    failed: int = 0
    errors: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def ack(self) -> None:
        self.acks.append(time.monotonic())

    def fail(self, error: object) -> None:
        with self.lock:
            self.failed += 1
            if len(self.errors) < 3:
                self.errors.append(f"{type(error).__name__}: {error}"[:200])


@dataclass
class Window:
    """The offered window: when it began and ended, and how many records were offered."""

    start: float = 0.0
    end: float = 0.0
    offered: int = 0


def _offer(send: Callable[[int], None], idle: Callable[[float], None], rate: int, seconds: float) -> Window:
    """Send ``rate`` records a second for ``seconds``; a send that blocks delays, never adds."""
    w = Window(start=time.monotonic())
    stop = w.start + seconds
    while (now := time.monotonic()) < stop:
        due = min(int((now - w.start + TICK_S) * rate), int(rate * seconds))
        while w.offered < due:
            send(w.offered)
            w.offered += 1
        idle(min(TICK_S, max(stop - time.monotonic(), 0.0)))
    # An idle that overslept the end leaves the last tick's records: offer them. A client whose
    # send blocked is far behind instead, and stays so (its offered count tells).
    if int(rate * seconds) - w.offered <= 2 * TICK_S * rate:
        while w.offered < int(rate * seconds):
            send(w.offered)
            w.offered += 1
    w.end = time.monotonic()
    return w


def _result(
    client: str, w: Window, tally: Tally, flush_s: float, unsettled: int, seconds: float
) -> RunResult:
    in_window = sum(1 for t in tally.acks if t <= w.end)
    result = RunResult(client=client, records=in_window, wall_s=seconds)
    result.extra = {
        "offered": w.offered,
        "acked_in_window": in_window,
        "acked_total": len(tally.acks),
        "failed": tally.failed,
        "unsettled": unsettled,
        "flush_s": round(flush_s, 3),
        "errors": tally.errors,
    }
    return result


async def _run_aiokafka(
    bootstrap: str, topic: str, values: list[bytes], rate: int, seconds: float
) -> RunResult:
    from aiokafka import AIOKafkaProducer

    tally = Tally()

    def settled(fut: asyncio.Future[Any]) -> None:
        if fut.cancelled():
            tally.fail("cancelled")
        elif (exc := fut.exception()) is not None:
            tally.fail(exc)
        else:
            tally.ack()

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=LINGER_MS)
    await producer.start()
    try:
        await asyncio.wait_for(producer.send_and_wait(topic, b"warm-up"), WARMUP_TIMEOUT_S)
        futures = []
        w = Window(start=time.monotonic())
        stop, total = w.start + seconds, int(rate * seconds)
        while (now := time.monotonic()) < stop:
            due = min(int((now - w.start + TICK_S) * rate), total)
            while w.offered < due:
                fut = await producer.send(topic, values[w.offered])
                fut.add_done_callback(settled)
                futures.append(fut)
                w.offered += 1
            await asyncio.sleep(min(TICK_S, max(stop - time.monotonic(), 0.0)))
        w.end = time.monotonic()
        began = time.monotonic()
        with contextlib.suppress(TimeoutError):  # the unsettled count tells
            await asyncio.wait_for(producer.flush(), FLUSH_TIMEOUT_S)
        flush_s = time.monotonic() - began
        await asyncio.sleep(0)  # let the last done-callbacks run
        unsettled = sum(1 for f in futures if not f.done())
    finally:
        await producer.stop()
    return _result("aiokafka", w, tally, flush_s, unsettled, seconds)


def _run_confluent(bootstrap: str, topic: str, values: list[bytes], rate: int, seconds: float) -> RunResult:
    from confluent_kafka import Producer

    tally = Tally()

    def on_delivery(err: Any, _msg: Any) -> None:
        tally.ack() if err is None else tally.fail(err)

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": LINGER_MS,
            "delivery.timeout.ms": DELIVERY_TIMEOUT_MS,
        }
    )
    producer.produce(topic, b"warm-up")
    if producer.flush(WARMUP_TIMEOUT_S):
        raise RuntimeError(f"warm-up record not delivered within {WARMUP_TIMEOUT_S:.0f} s")

    def send(i: int) -> None:
        while True:
            try:
                producer.produce(topic, values[i], on_delivery=on_delivery)
                return
            except BufferError:
                producer.poll(TICK_S)

    w = _offer(send, producer.poll, rate, seconds)
    began = time.monotonic()
    remaining = producer.flush(FLUSH_TIMEOUT_S)
    return _result("confluent-kafka", w, tally, time.monotonic() - began, remaining, seconds)


def _run_kafka_python(
    bootstrap: str, topic: str, values: list[bytes], rate: int, seconds: float
) -> RunResult:
    from kafka import KafkaProducer

    tally = Tally()
    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all",
        linger_ms=LINGER_MS,
        delivery_timeout_ms=DELIVERY_TIMEOUT_MS,
    )
    try:
        producer.send(topic, b"warm-up").get(WARMUP_TIMEOUT_S)
        futures = []

        def send(i: int) -> None:
            fut = producer.send(topic, values[i])
            fut.add_callback(lambda _meta: tally.ack())
            fut.add_errback(tally.fail)
            futures.append(fut)

        w = _offer(send, time.sleep, rate, seconds)
        began = time.monotonic()
        producer.flush(FLUSH_TIMEOUT_S)
        flush_s = time.monotonic() - began
        unsettled = sum(1 for f in futures if not f.is_done)
    finally:
        producer.close(5)
    return _result("kafka-python", w, tally, flush_s, unsettled, seconds)


def _run_ours(bootstrap: str, topic: str, values: list[bytes], rate: int, seconds: float) -> RunResult:
    from kafka_core import KafkaProducer

    tally = Tally()

    def settled(fut: Any) -> None:
        exc = fut.exception(0)
        tally.ack() if exc is None else tally.fail(exc)

    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all",
        idempotent=True,
        linger_ms=LINGER_MS,
        delivery_timeout_ms=DELIVERY_TIMEOUT_MS,
    )
    try:
        producer.send(topic, b"warm-up").result(WARMUP_TIMEOUT_S)
        futures = []

        def send(i: int) -> None:
            fut = producer.send(topic, values[i])
            fut.add_done_callback(settled)
            futures.append(fut)

        w = _offer(send, time.sleep, rate, seconds)
        began = time.monotonic()
        try:
            producer.flush(FLUSH_TIMEOUT_S)
        except Exception as exc:  # a flush timeout is a finding: report it, keep the counts
            tally.errors.append(f"flush: {type(exc).__name__}: {exc}"[:200])
        flush_s = time.monotonic() - began
        unsettled = sum(1 for f in futures if not f.done())
    finally:
        producer.close(5)
    return _result("kafka_core", w, tally, flush_s, unsettled, seconds)


RUNNERS: dict[str, Callable[[str, str, list[bytes], int, float], RunResult]] = {
    "confluent-kafka": _run_confluent,
    "kafka_core": _run_ours,
    "aiokafka": lambda *a: asyncio.run(_run_aiokafka(*a)),
    "kafka-python": _run_kafka_python,
}


# --------------------------------------------------------------------------- parent side


@dataclass
class Row:
    delay: float
    result: RunResult
    requests: int = 0  # Produce requests carrying this client's topic, as the proxy saw them
    records: int = 0  # records those requests carried (retries included)


def _produce_counts(capture: Any, topic: str) -> tuple[int, int]:
    writes = [w for w in capture.writes if w.topic == topic]
    return len({(w.conn, w.correlation_id) for w in writes}), sum(w.count for w in writes)


def run_bench(
    *,
    delays: Sequence[float],
    clients: Sequence[str],
    rate: int,
    seconds: float,
    value_size: int,
    log: Callable[[str], None] = print,
) -> list[Row]:
    """One broker and proxy for the whole run; per delay, every client on its own fresh topic."""
    from kafka_core.devbroker import TansuBroker, free_port
    from kafka_core.devtools.chaos.proxy import FaultProxy

    port = free_port()
    proxy = FaultProxy("127.0.0.1", port, capture=True).start()
    broker = TansuBroker(port, advertised_port=proxy.port)  # clients are told the proxy's port
    rows: list[Row] = []
    try:
        broker.start()
        capture = proxy.capture
        assert capture is not None
        for delay in delays:
            proxy.delay_responses(delay)
            for client in clients:
                topic = f"slow-{client}-{uuid.uuid4().hex[:8]}".replace("_", "-")
                broker.create_topic(topic, PARTITIONS)  # straight to the broker, not delayed
                args = ["--bootstrap", proxy.address, "--topic", topic, "--rate", str(rate)]
                args += ["--seconds", str(seconds), "--value-size", str(value_size)]
                timeout = seconds + WARMUP_TIMEOUT_S + FLUSH_TIMEOUT_S + 60
                result = run_child("bench.slow_broker", client, args, timeout)
                row = Row(delay, result, *_produce_counts(capture, topic))
                rows.append(row)
                log(f"  +{delay:g}s {client}: {_describe(row)}")
    finally:
        broker.close()
        proxy.close()
    return rows


def _describe(row: Row) -> str:
    r = row.result
    if r.status != OK:
        return f"{r.status}: {r.detail}"
    x = r.extra
    return (
        f"{r.rate:,.0f} acked/s, {x['offered']} offered, {x['acked_total']} acked, {x['failed']} failed, "
        f"{_per_request(row)} records/Produce, flush {x['flush_s']:.1f}s"
    )


def _per_request(row: Row) -> str:
    return f"{row.records / row.requests:,.1f}" if row.requests else "-"


def table(rows: Sequence[Row], rate: int, seconds: float, value_size: int) -> str:
    out = [
        f"Offered {rate:,} records/s of {value_size} B for {seconds:g} s to one {PARTITIONS}-partition "
        f"topic (linger {LINGER_MS} ms, default batch sizes, acks=all); every broker response "
        "delayed by the fault proxy. acked/s = acks within the offered window / window. "
        "Idempotent: kafka_core, confluent-kafka, kafka-python (its default); aiokafka: not (its default).",
        "",
        "| delay | client | offered | acked rec/s | vs confluent-kafka | records / Produce "
        "| Produce requests | failed | unsettled | acked in all | flush s |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    anchors = {
        row.delay: row.result.rate for row in rows if row.result.client == ANCHOR and row.result.status == OK
    }
    for row in rows:
        r = row.result
        if r.status != OK:
            out.append(f"| {row.delay:g} s | {r.client} | {r.status}: {r.detail[:120]} ||||||||| ")
            continue
        x, anchor = r.extra, anchors.get(row.delay)
        ratio = f"{r.rate / anchor:.2f}" if anchor else "-"
        out.append(
            f"| {row.delay:g} s | {r.client} | {x['offered']:,} | {r.rate:,.0f} | {ratio} | {_per_request(row)} | "
            f"{row.requests:,} | {x['failed']:,} | {x['unsettled']:,} | {x['acked_total']:,} "
            f"| {x['flush_s']:.1f} |"
        )
    errors = [(row, row.result.extra["errors"][0]) for row in rows if row.result.extra.get("errors")]
    if errors:
        out += ["", "Errors reported (first of each client):"]
        out += [f"- +{row.delay:g}s {row.result.client}: {e}" for row, e in errors]
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--bootstrap", help=argparse.SUPPRESS)
    parser.add_argument("--topic", help=argparse.SUPPRESS)
    parser.add_argument("--delays", default="1,2", help="seconds added to every response (default 1,2)")
    parser.add_argument("--rate", type=int, default=2_000, help="records offered per second")
    parser.add_argument("--seconds", type=float, default=30.0, help="length of the offered window")
    parser.add_argument("--value-size", type=int, default=100)
    parser.add_argument("--clients", default=",".join(CLIENTS))
    parser.add_argument("--quick", action="store_true", help="self-check: +1 s, 500/s for 5 s")
    args = parser.parse_args(argv)

    if args.child:
        runner = RUNNERS.get(args.child)
        values = make_values(int(args.rate * args.seconds), args.value_size)
        bound = (
            {args.child: lambda: runner(args.bootstrap, args.topic, values, args.rate, args.seconds)}
            if runner
            else {}
        )
        return child_main(args.child, bound)

    if args.quick:
        args.delays, args.rate, args.seconds = "1", 500, 5.0
    try:
        delays = [float(d) for d in args.delays.split(",") if d]
    except ValueError:
        parser.error(f"--delays takes comma-separated seconds, not {args.delays!r}")
    clients = [c for c in args.clients.split(",") if c]
    unknown = sorted(set(clients) - set(RUNNERS))
    if unknown or args.rate <= 0 or args.seconds <= 0 or any(d < 0 for d in delays):
        parser.error(f"unknown clients {unknown} or a non-positive rate/seconds or negative delay")
    rows = run_bench(
        delays=delays, clients=clients, rate=args.rate, seconds=args.seconds, value_size=args.value_size
    )
    print(table(rows, args.rate, args.seconds, args.value_size))
    failed = [r for r in rows if r.result.status == ERROR]
    return 1 if args.quick and (failed or not all(r.result.extra.get("acked_total") for r in rows)) else 0


if __name__ == "__main__":
    sys.exit(main())
