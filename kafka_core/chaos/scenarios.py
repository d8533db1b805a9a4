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
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kafka_core.chaos import kafka_scenarios, mock_scenarios
from kafka_core.chaos.accounting import unread_by_both
from kafka_core.chaos.artifacts import BLOCKED, FAIL, INCOMPLETE, Outcome, tansu_version
from kafka_core.chaos.capture import ProduceCapture
from kafka_core.chaos.evidence import judge_duplicates
from kafka_core.chaos.proxy import FaultProxy
from kafka_core.chaos.stopping import stop_requested
from kafka_core.chaos.workload import Workload, read_log_report
from kafka_core.devbroker import BrokerStartError, TansuBroker, free_port, tansu_binary

__all__ = ["CAPABILITIES", "KAFKA_CAPABILITIES", "SCALES", "Settings", "faulted_run", "run_capability"]

SCALES: dict[str, dict[str, Any]] = {
    "short": {
        "cold_starts": 3,
        "cold_records": 300,
        "restarts": 2,
        "restart_pause_s": 0.5,
        "outages_s": [10.0, 25.0],  # the second is in the 20-30 s range that stopped consumers
        "stalls": 1,
        "stall_s": (10, 12),
        "slow_s": {1.0: 6, 5.0: 12},
        "corrupt_s": 10,
        "rate": 400,
    },
    "full": {
        "cold_starts": 100,
        "cold_records": 1_000,
        "restarts": 100,
        "restart_pause_s": 0.5,
        "outages": 5,
        "outage_range_s": (10, 30),
        "stalls": 5,
        "stall_s": (10, 40),
        "slow_s": {1.0: 30, 5.0: 60},
        "corrupt_s": 60,
        "rate": 1_000,
    },
}
PARTITIONS = 3
WARM_S = 2.0  # traffic between faults
RECOVERY_TIMEOUT_S = 30.0  # a cycle fails when acks or deliveries have not resumed by then
FLUSH_TIMEOUT_S = 90.0
DRAIN_TIMEOUT_S = 30.0


@dataclass
class Settings:
    mode: str = "short"
    seed: int = 13
    # Fewer (or more) cycles than the mode's, for a machine too slow for full mode: the artifact
    # records both counts, so a cut-down run never passes for a full one.
    cycles: int | None = None

    @property
    def scale(self) -> dict[str, Any]:
        return SCALES[self.mode]


def _stopped_before(outcome: Outcome, cycle: int, planned: int) -> bool:
    """Whether a stop was asked for (:mod:`kafka_core.chaos.stopping`): the cycles run so far
    then go to the books, and the artifact says how far the run got."""
    why = stop_requested()
    if why is None:
        return False
    outcome.details["stopped"] = {"by": why, "cycles_run": cycle, "cycles_planned": planned}
    return True


def _round(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds, 3)


def _topic() -> str:
    return f"chaos-{uuid.uuid4().hex[:10]}"


def _broker_info(broker: TansuBroker, proxy: FaultProxy | None = None) -> dict[str, Any]:
    return {
        "name": "tansu",
        "version": tansu_version(),
        "storage": broker.storage.split(":")[0],
        "listener": f"{broker.host}:{broker.port}",
        "advertised": broker.bootstrap,
        "through_fault_proxy": proxy is not None,
    }


def _finish_books(
    outcome: Outcome, wl: Workload, failures: list[str], capture: ProduceCapture | None = None
) -> None:
    """Settle, drain, read the log independently, count; name every way the run fell short."""
    wl.finish(FLUSH_TIMEOUT_S, DRAIN_TIMEOUT_S)
    if wl.flush_error:
        failures.append(f"producer did not settle every record: {wl.flush_error}")
    if wl.unsettled:
        failures.append(f"{wl.unsettled} records neither delivered nor failed after flush")
    # Read independently even when our consumer did not drain: confluent-kafka reaching every
    # sentinel then says the records were there and our consumer stalled; it failing too points
    # at the broker (a slow or stuck log), which the artifact records either way.
    began = time.monotonic()
    read = read_log_report(wl.bootstrap, wl.topic, wl.partitions)
    log = read.log
    outcome.details["independent_log_read_s"] = round(time.monotonic() - began, 3)
    ours = wl.ledger.partition_progress()
    outcome.details["partition_progress"] = {
        p: {"independent": read.progress.get(p), "ours": ours.get(p)} for p in range(wl.partitions)
    }
    tally = wl.ledger.tally(log, capture.writes if capture is not None else None)
    if not wl.drained:
        # Neither reader reached the end of a partition: what lies beyond both is unread, not lost
        # (the broker served it to no one); a partition only our consumer stalled on is a failure.
        unread, reach = (
            unread_by_both(wl.ledger.undelivered(), ours, read.progress, wl.sentinels)
            if log is None
            else ([], {})
        )
        tally.lost -= len(unread)
        tally.unread += len(unread)
        gone = set(unread)
        tally.lost_examples = [s for s in tally.lost_examples if s not in gone]
        tally.lost_detail = [d for d in tally.lost_detail if d.get("record") not in gone]
        stalled_ours = sorted(set(range(wl.partitions)) - wl.sentinels)
        message = f"consumer did not reach the end of partitions {stalled_ours} within {DRAIN_TIMEOUT_S:.0f}s"
        if set(stalled_ours) <= set(reach):
            outcome.inconclusive.append(
                f"{message}, nor did an independent confluent-kafka read within 60s (furthest offsets "
                f"reached {reach}): the broker stopped serving its log"
            )
        else:
            failures.append(message)
    if tally.duplicated:  # both copies one batch (a retry appended twice) is the broker's doing
        try:
            broker, tally.duplicate_evidence = judge_duplicates(
                wl.bootstrap, wl.topic, wl.ledger.duplicates(log)
            )
            tally.duplicated -= len(broker)
            tally.broker_duplicated += len(broker)
        except Exception as exc:  # the duplicates stay the client's; the artifact says why
            outcome.details["duplicate_judging_error"] = f"{type(exc).__name__}: {exc}"
    outcome.tally.add(tally)
    if capture is not None:
        outcome.details["produce_capture"] = _capture_summary(capture)
    outcome.details["independent_log_read"] = log is not None
    outcome.details["consumer_errors"] = wl.ledger.errors[:20]
    outcome.details["consumer_error_count"] = len(wl.ledger.errors)
    outcome.details["failed_examples"] = list(wl.ledger.failed.values())[:5]


def faulted_run(
    outcome: Outcome,
    broker: TansuBroker,
    bootstrap: str,
    faults: Sequence[tuple[str, Callable[[Workload], dict[str, Any] | None]]],
    failures: list[str],
    capture: ProduceCapture | None = None,
    **workload: Any,
) -> None:
    """Traffic on, each fault in turn (it returns when the fault has ended), then the books."""
    topic = _topic()
    broker.create_topic(topic, PARTITIONS)
    wl = Workload(bootstrap, topic, PARTITIONS, rate=outcome.parameters["rate"], **workload)
    try:
        began = time.monotonic()
        wl.start()
        ack, got = wl.wait_progress(began, RECOVERY_TIMEOUT_S)
        outcome.details["first_ack_s"], outcome.details["first_delivery_s"] = ack, got
        if ack is None or got is None:
            failures.append(f"no traffic before any fault (first ack {ack}, first delivery {got})")
            return
        for k, (label, inject) in enumerate(faults):
            time.sleep(WARM_S)
            if _stopped_before(outcome, k, len(faults)):
                break
            start = time.monotonic()
            extra = inject(wl) or {}
            healed = time.monotonic()
            ack, got = wl.wait_progress(healed, RECOVERY_TIMEOUT_S)
            passed = ack is not None and got is not None and extra.pop("passed", True)
            outcome.cycles.append(
                {
                    "cycle": k,
                    "fault": label,
                    "fault_s": round(healed - start, 3),
                    "recovery_ack_s": _round(ack),
                    "recovery_delivery_s": _round(got),
                    "passed": passed,
                    **extra,
                }
            )
        _finish_books(outcome, wl, failures, capture)
    finally:
        wl.close()


def _capture_summary(capture: ProduceCapture) -> dict[str, Any]:
    writes = capture.writes
    errors: dict[str, int] = {}
    for w in writes:
        key = "unanswered" if w.error is None else str(w.error)
        errors[key] = errors.get(key, 0) + 1
    return {
        "produce_batches": len(writes),
        "answers": errors,
        "decode_errors": capture.decode_errors,
        "marks": [[round(at, 3), label] for at, label in capture.marks],
    }


# --- the capabilities ---


def cold_start(outcome: Outcome) -> None:
    failures: list[str] = []
    n = outcome.parameters["records"]
    for k in range(outcome.parameters["cycles"]):
        if _stopped_before(outcome, k, outcome.parameters["cycles"]):
            break
        with TansuBroker() as broker:
            outcome.broker = _broker_info(broker)
            began = time.monotonic()
            topic = _topic()
            broker.create_topic(topic, PARTITIONS)
            wl = Workload(broker.bootstrap, topic, PARTITIONS)
            cycle_failures: list[str] = []
            try:
                wl.start(produce=False)
                wl.send(n)
                ack, got = wl.wait_progress(began, RECOVERY_TIMEOUT_S)
                sub = Outcome(outcome.capability, outcome.mode, outcome.seed, outcome.parameters)
                _finish_books(sub, wl, cycle_failures)
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
                "recovery_ack_s": _round(ack),  # from broker start to the first acknowledgement
                "recovery_delivery_s": _round(got),  # ... and to the first delivery
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
        return "no moto_server for Tansu's persistent S3 storage: `pip install 'moto[server]'`"
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
