"""The chaos scenarios: each runs its faults against a real Tansu and returns an Outcome.

Process faults (SIGTERM, SIGKILL restarts) use Tansu with persistent S3 storage on moto_server;
network faults put the fault proxy in front of a Tansu that advertises the proxy's port, so every
connection a client makes goes through it. Durations are drawn from the seed: a run is
reproducible from (mode, seed).
"""

from __future__ import annotations

import importlib.util
import os
import random
import time
from collections.abc import Callable
from typing import Any

from kafka_core.devtools.brokers import BrokerStartError, KafkaCluster, TansuBroker, free_port, tansu_binary
from kafka_core.devtools.chaos import kafka_scenarios, mock_scenarios
from kafka_core.devtools.chaos.artifacts import BLOCKED, FAIL, INCOMPLETE, Outcome, tansu_version
from kafka_core.devtools.chaos.faulted import (
    PARTITIONS,
    RECOVERY_TIMEOUT_S,
    SCALES,
    WARM_S,
    Settings,
    faulted_run,
    finish_books,
    new_topic,
    rounded,
    stopped_before,
)
from kafka_core.devtools.chaos.proxy import FaultProxy
from kafka_core.devtools.chaos.workload import Workload

__all__ = [
    "CAPABILITIES",
    "KAFKA_CAPABILITIES",
    "SCALES",
    "Settings",
    "faulted_run",
    "run_capability",
    "run_on",
]


def _broker_info(broker: TansuBroker, proxy: FaultProxy | None = None) -> dict[str, Any]:
    return {
        "name": "tansu",
        "version": tansu_version(),
        "storage": broker.storage.split(":")[0],
        "listener": f"{broker.host}:{broker.port}",
        "advertised": broker.bootstrap,
        "through_fault_proxy": proxy is not None,
    }


# --- the capabilities ---


def cold_start(outcome: Outcome) -> None:
    failures: list[str] = []
    n = outcome.parameters["records"]
    for k in range(outcome.parameters["cycles"]):
        if stopped_before(outcome, k, outcome.parameters["cycles"]):
            break
        with TansuBroker() as broker:
            outcome.broker = _broker_info(broker)
            began = time.monotonic()
            topic = new_topic()
            broker.create_topic(topic, PARTITIONS)
            wl = Workload(broker.bootstrap, topic, PARTITIONS)
            cycle_failures: list[str] = []
            try:
                wl.start(produce=False)
                wl.send(n)
                ack, got = wl.wait_progress(began, RECOVERY_TIMEOUT_S)
                sub = Outcome(outcome.capability, outcome.mode, outcome.seed, outcome.parameters)
                finish_books(sub, wl, cycle_failures)
                cycle_failures.extend(sub.inconclusive)  # a fresh broker must serve its whole log
            finally:
                wl.close()
        t = sub.tally
        passed = not cycle_failures and t.clean and t.delivered == t.acknowledged == n
        if not passed and not cycle_failures:
            cycle_failures.append(f"{t.delivered} of {n} delivered, {t.acknowledged} acknowledged")
        outcome.tally.add(t)
        outcome.cycles.append(
            {
                "cycle": k,
                "fault": "fresh broker",
                "recovery_ack_s": rounded(ack),  # from broker start to the first acknowledgement
                "recovery_delivery_s": rounded(got),  # ... and to the first delivery
                "passed": passed,
                "problems": cycle_failures,
            }
        )
        failures.extend(f"cycle {k}: {p}" for p in cycle_failures)
    outcome.judge(failures)


def _restarts(outcome: Outcome, crash: bool) -> None:
    """Restarts under traffic. The fault proxy, injecting nothing, records every Produce request
    and answer: the evidence that tells a broker's lost batch from a reused sequence."""
    failures: list[str] = []
    port = free_port()
    proxy = FaultProxy("127.0.0.1", port, seed=outcome.seed, capture=True).start()
    capture = proxy.capture
    assert capture is not None
    broker = TansuBroker.persistent(port, advertised_port=proxy.port)
    try:
        broker.start()
        outcome.broker = _broker_info(broker, proxy)
        pause = outcome.parameters["pause_s"]
        signal = "SIGKILL" if crash else "SIGTERM"

        fetched = {"sum": 0.0, "count": 0}

        def fetch_latency(wl: Workload) -> float | None:
            """Average Fetch answer time since the previous restart, from the consumer's
            metrics(): a broker slowing down as its log grows shows here, cycle by cycle."""
            try:
                per_broker = wl.consumer.metrics()["network"]["requests"].get("FETCH", {})
            except Exception:  # the figure is evidence, never a reason to stop the run
                return None
            total = sum(v["latency_sum_s"] for v in per_broker.values())
            count = sum(v["count"] for v in per_broker.values())
            d_sum, d_count = total - fetched["sum"], count - fetched["count"]
            fetched.update(sum=total, count=count)
            return round(d_sum / d_count, 4) if d_count > 0 else None

        def restart(wl: Workload) -> dict[str, Any]:
            before = fetch_latency(wl)
            capture.mark(f"{signal} sent")
            broker.kill() if crash else broker.stop()
            capture.mark("broker down")
            time.sleep(pause)
            broker.start()
            capture.mark("broker listening")
            return {"fetch_avg_s_before": before}

        faults = [(f"{signal} restart", restart)] * outcome.parameters["cycles"]
        faulted_run(outcome, broker, proxy.address, faults, failures, capture)
    finally:
        broker.close()
        proxy.close()
    outcome.judge(failures)


def broker_restart_sigterm(outcome: Outcome) -> None:
    _restarts(outcome, crash=False)


def broker_restart_sigkill(outcome: Outcome) -> None:
    _restarts(outcome, crash=True)


def _proxied(
    outcome: Outcome, make_faults: Callable[[FaultProxy], list[tuple[str, Any]]], **workload: Any
) -> None:
    failures: list[str] = []
    port = free_port()
    proxy = FaultProxy("127.0.0.1", port, seed=outcome.seed).start()
    broker = TansuBroker(port, advertised_port=proxy.port)
    try:
        broker.start()
        outcome.broker = _broker_info(broker, proxy)
        faulted_run(outcome, broker, proxy.address, make_faults(proxy), failures, **workload)
        outcome.details["proxy"] = {"connections": proxy.connections, "resets": proxy.resets}
    finally:
        broker.close()
        proxy.close()
    outcome.judge(failures)


def network_interruption(outcome: Outcome) -> None:
    def faults(proxy: FaultProxy) -> list[tuple[str, Any]]:
        def outage(seconds: float) -> dict[str, Any]:
            proxy.refuse(seconds)
            cut = proxy.reset_all()
            time.sleep(seconds)
            proxy.heal()
            return {"connections_reset": cut, "refused_s": seconds}

        return [(f"RST all + refuse {s}s", lambda _, s=s: outage(s)) for s in outcome.parameters["outages_s"]]

    _proxied(outcome, faults)


def connection_loss(outcome: Outcome) -> None:
    def faults(proxy: FaultProxy) -> list[tuple[str, Any]]:
        def stall(seconds: float) -> dict[str, Any]:
            proxy.stall(seconds)
            time.sleep(seconds)
            proxy.heal()
            return {"stalled_s": seconds}

        return [(f"TCP stall {s}s", lambda _, s=s: stall(s)) for s in outcome.parameters["stalls_s"]]

    _proxied(outcome, faults)


def slow_broker(outcome: Outcome) -> None:
    def faults(proxy: FaultProxy) -> list[tuple[str, Any]]:
        def slow(wl: Workload, delay: float, hold: float) -> dict[str, Any]:
            ledger = wl.ledger
            acked, delivered = len(ledger.acked), len(ledger.deliveries)
            proxy.delay_responses(delay)
            time.sleep(hold)
            proxy.heal()
            during = {
                "acked_during": len(ledger.acked) - acked,
                "delivered_during": len(ledger.deliveries) - delivered,
            }
            # Working on, slowly, is the requirement: both sides must make progress meanwhile.
            return {
                **during,
                "delay_s": delay,
                "passed": during["acked_during"] > 0 and during["delivered_during"] > 0,
            }

        return [
            (f"every response +{d}s for {h}s", lambda wl, d=d, h=h: slow(wl, d, h))
            for d, h in outcome.parameters["delays_s"].items()
        ]

    _proxied(
        outcome,
        faults,
        producer_options={"request_timeout_ms": 20_000},
        consumer_options={"request_timeout_ms": 20_000},
    )


def corrupt_data(outcome: Outcome) -> None:
    def faults(proxy: FaultProxy) -> list[tuple[str, Any]]:
        def corrupt(wl: Workload, seconds: float) -> dict[str, Any]:
            ledger = wl.ledger
            proxy.corrupt_fetches(outcome.parameters["probability"])
            time.sleep(seconds)
            proxy.heal()
            time.sleep(1.0)  # errors for the last flipped responses reach poll
            raised = [e for e in ledger.errors if e["where"] == "poll" and e["type"] == "KafkaCodecError"]
            named = [
                e
                for e in raised
                if e["topic"] == ledger.topic
                and isinstance(e["partition"], int)
                and isinstance(e["offset"], int)
                and e["offset"] >= 0
                and ledger.topic in e["message"]
            ]
            flips = len(proxy.flips)
            return {
                "bytes_flipped": flips,
                "typed_errors": len(raised),
                "errors_naming_topic_partition_offset": len(named),
                "example_error": raised[0]["message"] if raised else None,
                "passed": flips > 0 and len(raised) > 0 and len(named) == len(raised),
            }

        return [
            (
                f"flip a byte in {outcome.parameters['probability']:.0%} of Fetch batches",
                lambda wl: corrupt(wl, outcome.parameters["seconds"]),
            )
        ]

    _proxied(outcome, faults)


def _parameters(capability: str, settings: Settings) -> dict[str, Any]:
    params = _mode_parameters(capability, settings)
    if settings.cycles is not None and "cycles" in params:
        params = {**params, "cycles": settings.cycles, "mode_cycles": params["cycles"]}
    return params


def _mode_parameters(capability: str, settings: Settings) -> dict[str, Any]:
    s, rng = settings.scale, random.Random(f"{settings.seed}:{capability}")
    common = {
        "rate": s["rate"],
        "partitions": PARTITIONS,
        "warm_s": WARM_S,
        "recovery_timeout_s": RECOVERY_TIMEOUT_S,
    }
    if capability in mock_scenarios.CAPABILITIES:
        return mock_scenarios.parameters(capability, settings.mode, settings.seed, common)
    if capability in KAFKA_CAPABILITIES:
        return kafka_scenarios.parameters(capability, settings.mode, settings.seed, common)
    if capability == "cold-start":
        return {"cycles": s["cold_starts"], "records": s["cold_records"], "partitions": PARTITIONS}
    if capability.startswith("broker-restart"):
        return {
            **common,
            "cycles": s["restarts"],
            "pause_s": s["restart_pause_s"],
            "storage": "s3 (moto_server)",
        }
    if capability == "network-interruption":
        if "outages_s" in s:
            return {**common, "outages_s": s["outages_s"]}
        lo, hi = s["outage_range_s"]
        return {**common, "outages_s": [round(rng.uniform(lo, hi), 1) for _ in range(s["outages"])]}
    if capability == "connection-loss":
        lo, hi = s["stall_s"]
        return {**common, "stalls_s": [round(rng.uniform(lo, hi), 1) for _ in range(s["stalls"])]}
    if capability == "slow-broker":
        return {**common, "delays_s": s["slow_s"]}
    if capability == "corrupt-data":
        return {**common, "seconds": s["corrupt_s"], "probability": 0.3}
    raise KeyError(capability)


CAPABILITIES: dict[str, Callable[[Outcome], None]] = {
    "cold-start": cold_start,
    "broker-restart-sigterm": broker_restart_sigterm,
    "broker-restart-sigkill": broker_restart_sigkill,
    "network-interruption": network_interruption,
    "connection-loss": connection_loss,
    "slow-broker": slow_broker,
    "corrupt-data": corrupt_data,
    **mock_scenarios.CAPABILITIES,  # librdkafka's 3-broker mock cluster: no Tansu needed
}
# A set of its own (``--broker kafka``): a three-node Apache Kafka cluster, no Tansu.
KAFKA_CAPABILITIES = kafka_scenarios.CAPABILITIES


def missing_prerequisite(capability: str) -> str | None:
    """What this machine lacks for ``capability`` (exactly), or None."""
    if capability in mock_scenarios.CAPABILITIES:
        return mock_scenarios.missing_prerequisite()
    if capability in KAFKA_CAPABILITIES:
        return kafka_scenarios.missing_prerequisite()
    try:
        binary = tansu_binary()
    except BrokerStartError as exc:
        return f"no Tansu binary: {exc}"
    if not os.access(binary, os.X_OK):
        return f"no Tansu binary: {binary} does not exist or is not executable (TANSU_BIN)"
    if capability.startswith("broker-restart") and importlib.util.find_spec("moto") is None:
        return "no moto_server for Tansu's persistent S3 storage: pip install 'kafka-core[broker-s3]'"
    return None


def run_capability(capability: str, settings: Settings) -> Outcome:
    """Run one capability; a missing prerequisite gives BLOCKED, a crash of the run gives FAIL."""
    outcome = Outcome(capability, settings.mode, settings.seed, _parameters(capability, settings))
    outcome.started = time.time()
    began = time.monotonic()
    try:
        missing = missing_prerequisite(capability)
        if missing:
            raise BrokerStartError(missing)
        (CAPABILITIES.get(capability) or KAFKA_CAPABILITIES[capability])(outcome)
    except BrokerStartError as exc:
        outcome.verdict, outcome.reason = BLOCKED, f"prerequisite missing: {exc}"
    except Exception as exc:
        outcome.verdict, outcome.reason = FAIL, f"the run itself failed: {type(exc).__name__}: {exc}"
    except KeyboardInterrupt as exc:  # a second stop signal: no books, but the cycles run are kept
        outcome.details["stopped"] = {
            "by": str(exc) or "KeyboardInterrupt",
            "cycles_run": len(outcome.cycles),
        }
        outcome.verdict = INCOMPLETE
        outcome.reason = f"stopped at once ({exc or 'KeyboardInterrupt'}) after {len(outcome.cycles)} cycles: no books made"
    outcome.duration_s = time.monotonic() - began
    return outcome


def run_on(cluster: KafkaCluster, capability: str, mode: str = "short", seed: int = 13) -> Outcome:
    """Run one Apache Kafka capability on an already started three-node cluster (the tests'
    session cluster), through the same code as ``python -m kafka_core.devtools.chaos run --broker
    kafka``; the cluster is left with every node running and advertising its own ports."""
    with kafka_scenarios.on_cluster(cluster):
        return run_capability(capability, Settings(mode, seed))
