"""What KIP-714 client metrics pushes cost in CPU: a client's process with pushes on against off.

Issue 43's target: "KIP-714 pushes cost less than 1% of a core at the default interval, measured".

A push (kafka_core.telemetry.push) takes the client's ``metrics()`` snapshot, turns it into points
(kafka_core.metrics.kip714), encodes them as OTLP (kafka_core.telemetry.otlp), compresses them and
sends a PushTelemetry request. What the user pays is the whole process's CPU with pushes on against
the same process with them off, so that is the headline: a kafka_core producer (and, separately,
a consumer in a group) in a fresh child process sends (reads) records of 100 B at a steady
``--rate`` on a fixed schedule, and after a warm-up (connected, subscribed, the first push done)
its process CPU (``time.process_time``, every thread) is taken over ``--seconds``, with
``enable_metrics_push`` on or off. Each round runs both settings for each client, the order
alternating round by round so that a drift of the machine's load hits both; the figures are
medians over ``--rounds`` of the rounds' paired differences:

- extra CPU, as a share of a core at the measured interval: on's CPU/s minus off's CPU/s;
- per push: on's CPU minus off's CPU over on's window, over the pushes the client counted in that
  window (its ``metrics()``: PushTelemetry responses without error); after each run the broker's
  file is read back to check that it received those pushes;
- the share of a core at the default interval: per push / 300 s (the broker's default
  ``interval.ms``, and kafka_core's DEFAULT_INTERVAL_MS): a push's work does not depend on the
  interval (the same metrics, encoded and compressed the same way), though a push every 300 s
  finds colder caches than one every ``--interval-ms``, which this does not see.

Beside it, a cross-check in the same child after the window: the push's own work (snapshot,
points, encoding, zstd) timed with ``time.thread_time`` on the client's loop thread, where the
pusher runs, ``--samples`` times with a tick of the load before each (without the request, and
with caches warmer than a push every 300 s finds them: a lower bound of the per-push figure).

The broker is one Apache Kafka node of the bench's own with a receiver of KIP-714 pushes
(kafka_core.devtools.brokers.kafka_telemetry; javac and the broker's jars), and a subscription of
every metric (``metrics=*``) every ``--interval-ms`` for the bench's clients. One broker, one
topic of one partition: a client of a larger cluster has more per-node metrics, so more to push.
(KAFKA_BOOTSTRAP_SERVERS is not used: the broker must carry the receiver.)

    python -m bench.bench_telemetry_push [--seconds 20] [--rounds 5] [--interval-ms 500] [--rate 1000]
                                         [--json FILE]

Prints a table and the load average before and after; ``--json`` writes the figures.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

from bench.common import OK, RunResult, child_main, fill_topic, run_child

CLIENT_PREFIX = "kc-bench-telemetry"  # the subscription matches the bench's clients by this id
KINDS = ("producer", "consumer")
TICK_S = 0.05  # the load's schedule: rate * TICK_S records each tick
VALUE = b"v" * 100
ZSTD = 4  # Kafka's first accepted codec for telemetry, what its pushes are compressed with
MODULE = "bench.bench_telemetry_push"


# --------------------------------------------------------------------------- child side


def pace(step: Callable[[], int], seconds: float) -> int:
    """Call ``step`` every TICK_S for ``seconds`` on a fixed schedule (a late tick does not
    shift the next ones); the records it handled."""
    done = 0
    began = time.perf_counter()
    for i in range(max(1, round(seconds / TICK_S))):
        done += step()
        delay = began + (i + 1) * TICK_S - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
    return done


def accepted_pushes(snap: Mapping[str, Any]) -> int:
    """PushTelemetry responses without error, from a ``metrics()`` snapshot."""
    per_node = snap["network"]["requests"].get("PUSH_TELEMETRY", {})
    return sum(s["count"] - s.get("errors", 0) for s in per_node.values())


def push_work(
    kind: str, face: Any, interval_ms: int, samples: int, between: Callable[[], object]
) -> dict[str, float]:
    """The push's own work (snapshot, points, OTLP, zstd; not the request), ``samples`` times on
    the client's loop thread, where the pusher runs, with ``between`` (a tick of the load) before
    each, so that each covers requests of its own as a push's interval does: the median thread CPU
    of one, and the last one's points and sizes."""
    from types import SimpleNamespace

    from kafka_core.codec.compression import compress
    from kafka_core.metrics.kip714 import MetricsCollector
    from kafka_core.telemetry.push import Subscription, TelemetryPusher

    core = face.async_object  # touched on its loop only (loop_thread.call)
    answer = SimpleNamespace(  # a GetTelemetrySubscriptions answer as Kafka gives it
        client_instance_id=uuid.uuid4(),
        subscription_id=1,
        accepted_compression_types=[ZSTD],
        push_interval_ms=interval_ms,
        telemetry_max_bytes=1 << 20,
        delta_temporality=True,
        requested_metrics=["*"],
    )
    sub = Subscription(answer)
    pusher = TelemetryPusher(None, kind, core.metrics)
    collector = MetricsCollector(kind)  # the same points again, untimed, to count them

    def one() -> tuple[float, int, int, int]:
        began = time.thread_time()
        raw = pusher.payload(sub)
        data = compress(ZSTD, raw)
        spent = time.thread_time() - began
        points = collector.collect(core.metrics(), time.monotonic(), delta=True, prefixes=None)
        return spent, len(raw), len(data), len(points)

    face.loop_thread.call(one)  # the collectors' first snapshot: their baseline, as after a push
    measured = []
    for _ in range(samples):
        between()
        measured.append(face.loop_thread.call(one))
    _, raw_bytes, zstd_bytes, points = measured[-1]
    return {
        "push_work_ms": statistics.median(m[0] for m in measured) * 1000,
        "raw_bytes": raw_bytes,
        "zstd_bytes": zstd_bytes,
        "points": points,
    }


def child_run(
    kind: str,
    push: bool,
    bootstrap: str,
    topic: str,
    client_id: str,
    rate: float,
    seconds: float,
    warmup_s: float,
    interval_ms: int,
    samples: int,
) -> RunResult:
    """One client's run: warm-up, the measured window, then the push-work cross-check."""
    from kafka_core import KafkaConsumer, KafkaProducer

    per_tick = max(1, round(rate * TICK_S))
    client: Any
    step: Callable[[], int]
    if kind == "producer":
        client = KafkaProducer(
            bootstrap_servers=bootstrap, client_id=client_id, linger_ms=5, enable_metrics_push=push
        )

        def step() -> int:
            for _ in range(per_tick):
                client.send(topic, VALUE)
            return per_tick

    else:
        client = KafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            client_id=client_id,
            group_id=f"{client_id}-group",
            auto_offset_reset="earliest",
            max_poll_records=per_tick,
            enable_metrics_push=push,
        )

        def step() -> int:
            return len(client.poll(timeout_ms=int(TICK_S * 500)))

    try:
        if kind == "producer":
            client.send(topic, VALUE).result(60)  # connected, metadata known
        warmed = pace(step, warmup_s)
        deadline = time.monotonic() + 60
        # steady state: records flow and, with pushes on, the first push is done
        while warmed == 0 or (push and accepted_pushes(client.metrics()) == 0):
            if time.monotonic() > deadline:
                raise RuntimeError(f"not steady after {warmup_s + 60:.0f} s: {warmed} records, no push yet")
            warmed += pace(step, 0.5)
        pushes_before = accepted_pushes(client.metrics())
        wall, cpu = time.perf_counter(), time.process_time()
        records = pace(step, seconds)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        pushes = accepted_pushes(client.metrics()) - pushes_before
        work = push_work(kind, client, interval_ms, samples, partial(pace, step, TICK_S))
        accepted = accepted_pushes(client.metrics())  # before the terminating push of the close
    finally:
        client.close(10)
    return RunResult(
        kind,
        records=records,
        wall_s=wall,
        cpu_s=cpu,
        extra={"pushes": pushes, "accepted": accepted, **work},
    )


# --------------------------------------------------------------------------- parent side


def run_telemetry_push(
    kafka: Any,
    *,
    seconds: float = 20.0,
    rounds: int = 5,
    interval_ms: int = 500,
    rate: float = 1000.0,
    samples: int = 20,
    log: Callable[[str], None] = lambda line: print(line, file=sys.stderr),
) -> dict[str, Any]:
    """Every round, each client with pushes off and on (the order alternating) on ``kafka``, a
    started :class:`~kafka_core.devtools.brokers.kafka_telemetry.TelemetryKafka`; returns the
    runs and the table's ``rows`` (:func:`summarize`)."""
    from kafka_core import KafkaAdmin, NewTopic

    kafka.subscribe({"bench-telemetry": ("*", f"client_id={CLIENT_PREFIX}-.*")}, interval_ms)
    warmup_s = max(2.0, 1.5 * interval_ms / 1000 + 1.0)  # the first push comes at 0.5-1.5 intervals
    topics = {kind: f"bench-telemetry-{kind}-{uuid.uuid4().hex[:8]}" for kind in KINDS}
    with KafkaAdmin(kafka.bootstrap) as admin:
        for result in admin.create_topics([NewTopic(t, 1, 1) for t in topics.values()]).values():
            result.result()
    fill_topic(kafka.bootstrap, topics["consumer"], [VALUE] * math.ceil(rate * (warmup_s + seconds + 60)))
    runs: list[dict[str, Any]] = []
    for round_no in range(rounds):
        order = (False, True) if round_no % 2 == 0 else (True, False)
        for kind in KINDS:
            for push in order:
                client_id = (
                    f"{CLIENT_PREFIX}-{kind}-{'on' if push else 'off'}-{round_no}-{uuid.uuid4().hex[:6]}"
                )
                args = [
                    "--push",
                    "on" if push else "off",
                    "--bootstrap",
                    kafka.bootstrap,
                    "--topic",
                    topics[kind],
                ]
                args += ["--client-id", client_id, "--rate", str(rate), "--seconds", str(seconds)]
                args += [
                    "--warmup",
                    str(warmup_s),
                    "--interval-ms",
                    str(interval_ms),
                    "--samples",
                    str(samples),
                ]
                result = run_child(MODULE, kind, args, timeout=warmup_s + seconds + 180)
                run = {"client": kind, "push": push, "round": round_no, "client_id": client_id}
                run.update(status=result.status, detail=result.detail, records=result.records)
                run.update(wall_s=result.wall_s, cpu_s=result.cpu_s, **result.extra)
                if result.status == OK:
                    run.update(broker_pushes(kafka, client_id, expected=result.extra["accepted"]))
                runs.append(run)
                log(describe(run))
    return {
        "seconds": seconds,
        "rounds": rounds,
        "interval_ms": interval_ms,
        "default_interval_ms": default_interval_ms(),
        "rate": rate,
        "warmup_s": warmup_s,
        "runs": runs,
        "rows": summarize(runs, interval_ms),
    }


def broker_pushes(kafka: Any, client_id: str, expected: int) -> dict[str, Any]:
    """What the broker's receiver got from ``client_id`` (its pushes before the close, at least
    ``expected``, and the terminating one): counts and the uncompressed payload's median size."""
    deadline = time.monotonic() + 10
    lines = kafka.pushes(client_id)
    while sum(not p.terminating for p in lines) < expected and time.monotonic() < deadline:
        time.sleep(0.2)
        lines = kafka.pushes(client_id)
    regular = [p for p in lines if not p.terminating]
    return {
        "broker_pushes": len(regular),
        "broker_terminating": len(lines) - len(regular),
        "broker_payload_bytes": statistics.median(len(p.data) for p in regular) if regular else 0,
    }


def describe(run: Mapping[str, Any]) -> str:
    """One run's log line."""
    head = f"round {run['round'] + 1} {run['client']:8} push {'on ' if run['push'] else 'off'}"
    if run["status"] != OK:
        return f"{head} FAILED: {run['detail']}"
    line = f"{head} {run['records'] / run['wall_s']:>7,.0f} records/s, CPU {run['cpu_s'] / run['wall_s']:6.2%} of a core"
    if run["push"]:
        line += (
            f", {run['pushes']} pushes in the window, {run['accepted']} accepted before close, "
            f"{run.get('broker_pushes', '?')} received (+{run.get('broker_terminating', '?')} terminating); "
            f"push work {run['push_work_ms']:.2f} ms, {run['points']} points, "
            f"{run['raw_bytes']:,} B ({run['zstd_bytes']:,} B zstd)"
        )
    return line


def default_interval_ms() -> int:
    from kafka_core.telemetry.push import DEFAULT_INTERVAL_MS

    return DEFAULT_INTERVAL_MS


def summarize(
    runs: Sequence[Mapping[str, Any]], interval_ms: int, default_ms: int | None = None
) -> list[dict[str, Any]]:
    """The table, one row per client: median CPU share off and on, pushes per window, and from
    each round's pair (off and on of the same round; a failed run drops its pair): the extra share
    of a core at ``interval_ms``, the CPU of one push, that push's share of a core at the default
    interval; the push-work cross-check beside it."""
    default_s = (default_ms if default_ms is not None else default_interval_ms()) / 1000
    rows = []
    for kind in KINDS:
        pairs: dict[int, dict[bool, Mapping[str, Any]]] = {}
        for run in runs:
            if run["client"] == kind and run["status"] == OK:
                pairs.setdefault(run["round"], {})[run["push"]] = run
        paired = [(p[False], p[True]) for _, p in sorted(pairs.items()) if len(p) == 2]
        if not paired:
            continue
        extra_share = [on["cpu_s"] / on["wall_s"] - off["cpu_s"] / off["wall_s"] for off, on in paired]
        per_push = [
            (on["cpu_s"] - off["cpu_s"] / off["wall_s"] * on["wall_s"]) / on["pushes"]
            for off, on in paired
            if on["pushes"]
        ]
        per_push_s = statistics.median(per_push) if per_push else math.nan
        work_s = statistics.median(on["push_work_ms"] for _, on in paired) / 1000
        rows.append(
            {
                "client": kind,
                "pairs": len(paired),
                "off_share": statistics.median(off["cpu_s"] / off["wall_s"] for off, _ in paired),
                "on_share": statistics.median(on["cpu_s"] / on["wall_s"] for _, on in paired),
                "pushes": statistics.median(on["pushes"] for _, on in paired),
                "extra_share": statistics.median(extra_share),
                "per_push_ms": per_push_s * 1000,
                "per_push_ms_range": [min(per_push) * 1000, max(per_push) * 1000] if per_push else [],
                "default_share": per_push_s / default_s,
                "push_work_ms": work_s * 1000,
                "push_work_default_share": work_s / default_s,
                "interval_share_from_per_push": per_push_s / (interval_ms / 1000),
            }
        )
    return rows


def percent(share: float) -> str:
    """A share of a core as a percentage, three significant digits however small."""
    if math.isnan(share):
        return "-"
    return f"{share * 100:#.3g}%"


HEADERS = (
    "client",
    "CPU off",
    "CPU on",
    "pushes",
    "extra CPU at {interval} ms",
    "CPU per push",
    "rounds' range",
    "push work",
    "share at {default} s",
)


def table(rows: Sequence[Mapping[str, Any]], interval_ms: int, default_ms: int) -> list[str]:
    """The printed table: one line per client (shares of one core; per push in ms)."""
    heads = [h.format(interval=interval_ms, default=f"{default_ms / 1000:g}") for h in HEADERS]
    widths = [max(10, len(h)) for h in heads]
    out = [
        "  ".join(h.rjust(w) if i else h.ljust(w) for i, (h, w) in enumerate(zip(heads, widths, strict=True)))
    ]
    for row in rows:
        cells = [
            row["client"],
            percent(row["off_share"]),
            percent(row["on_share"]),
            f"{row['pushes']:g}",
            percent(row["extra_share"]),
            f"{row['per_push_ms']:.2f} ms",
            "..".join(f"{x:.2f}" for x in row["per_push_ms_range"]) or "-",
            f"{row['push_work_ms']:.2f} ms",
            percent(row["default_share"]),
        ]
        out.append(
            "  ".join(
                c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
            )
        )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="the measured window of each run")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--interval-ms", type=int, default=500, help="the subscription's push interval")
    parser.add_argument("--rate", type=float, default=1000.0, help="records per second sent or read")
    parser.add_argument("--samples", type=int, default=20, help="pushes timed by the push-work cross-check")
    parser.add_argument("--json", help="write the figures here too")
    # a child run (one client, one setting), started by the parent
    parser.add_argument("--child", choices=KINDS, help=argparse.SUPPRESS)
    parser.add_argument("--push", choices=("on", "off"), help=argparse.SUPPRESS)
    parser.add_argument("--bootstrap", help=argparse.SUPPRESS)
    parser.add_argument("--topic", help=argparse.SUPPRESS)
    parser.add_argument("--client-id", help=argparse.SUPPRESS)
    parser.add_argument("--warmup", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        run = partial(
            child_run,
            args.child,
            args.push == "on",
            args.bootstrap,
            args.topic,
            args.client_id,
            args.rate,
            args.seconds,
            args.warmup,
            args.interval_ms,
            args.samples,
        )
        return child_main(args.child, {args.child: run})

    from kafka_core.devtools.brokers.kafka_telemetry import TelemetryKafka

    load_before = os.getloadavg()
    with TelemetryKafka() as kafka:
        assert kafka.cluster is not None
        broker = f"Apache Kafka {kafka.cluster.version} (one KRaft node, a KIP-714 receiver), loopback"
        figures = run_telemetry_push(
            kafka,
            seconds=args.seconds,
            rounds=args.rounds,
            interval_ms=args.interval_ms,
            rate=args.rate,
            samples=args.samples,
        )
    load_after = os.getloadavg()
    print(
        f"\n{args.rate:,.0f} records/s of 100 B, {args.seconds:g} s windows, {args.rounds} rounds, "
        f"subscription metrics=* every {args.interval_ms} ms; {broker}"
    )
    print(f"load average before {load_before[0]:.2f}, after {load_after[0]:.2f} ({os.cpu_count()} cores)\n")
    print("\n".join(table(figures["rows"], args.interval_ms, figures["default_interval_ms"])))
    print(
        "\nCPU off/on: the process's CPU per second of the window, a share of one core (medians); extra CPU: "
        "on minus off, per round; CPU per push: that difference over the pushes in the window (the median "
        "round, and the range of the rounds); push work: the push's own work timed on the loop thread without "
        "the request (a lower bound); share at the default interval: CPU per push over it."
    )
    for row in figures["rows"]:
        print(
            f"{row['client']}: {percent(row['default_share'])} of a core at the default interval "
            f"({figures['default_interval_ms'] / 1000:g} s; issue 43's target: under 1%), "
            f"{percent(row['extra_share'])} at {args.interval_ms} ms"
        )
    failed = [r for r in figures["runs"] if r["status"] != OK]
    # the broker must have received every push the client counted, and nothing with pushes off
    unmatched = [
        r
        for r in figures["runs"]
        if r["status"] == OK
        and (r["broker_pushes"] < r["accepted"] or (not r["push"] and r["broker_pushes"]))
    ]
    for run in failed:
        print(f"FAILED: {describe(run)}")
    for run in unmatched:
        print(
            f"the broker received {run['broker_pushes']} pushes, the client counted {run['accepted']}: {run['client_id']}"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({**figures, "broker": broker, "load": [load_before, load_after]}, f, indent=2)
    return 1 if failed or unmatched else 0


if __name__ == "__main__":
    raise SystemExit(main())
