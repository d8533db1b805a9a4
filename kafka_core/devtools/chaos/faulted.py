"""One faulted run, shared by every scenario set (Tansu, the mock cluster, Apache Kafka): the
run's settings and scale, traffic through each fault in turn, and the books at the end.

Below the scenario modules and their registry (:mod:`kafka_core.devtools.chaos.scenarios`), which
all build on it.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafka_core.devtools.chaos.accounting import unread_by_both
from kafka_core.devtools.chaos.artifacts import Outcome
from kafka_core.devtools.chaos.capture import ProduceCapture
from kafka_core.devtools.chaos.evidence import judge_duplicates
from kafka_core.devtools.chaos.stopping import stop_requested
from kafka_core.devtools.chaos.workload import Workload, read_log_report

if TYPE_CHECKING:
    from kafka_core.devtools.brokers import TansuBroker

__all__ = [
    "DRAIN_TIMEOUT_S",
    "FLUSH_TIMEOUT_S",
    "PARTITIONS",
    "RECOVERY_TIMEOUT_S",
    "SCALES",
    "WARM_S",
    "Settings",
    "capture_summary",
    "faulted_run",
    "finish_books",
    "new_topic",
    "rounded",
    "stopped_before",
]

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


def stopped_before(outcome: Outcome, cycle: int, planned: int) -> bool:
    """Whether a stop was asked for (:mod:`kafka_core.devtools.chaos.stopping`): the cycles run so far
    then go to the books, and the artifact says how far the run got."""
    why = stop_requested()
    if why is None:
        return False
    outcome.details["stopped"] = {"by": why, "cycles_run": cycle, "cycles_planned": planned}
    return True


def rounded(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds, 3)


def new_topic() -> str:
    return f"chaos-{uuid.uuid4().hex[:10]}"


def finish_books(
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
        outcome.details["produce_capture"] = capture_summary(capture)
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
    topic = new_topic()
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
            if stopped_before(outcome, k, len(faults)):
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
                    "recovery_ack_s": rounded(ack),
                    "recovery_delivery_s": rounded(got),
                    "passed": passed,
                    **extra,
                }
            )
        finish_books(outcome, wl, failures, capture)
    finally:
        wl.close()


def capture_summary(capture: ProduceCapture) -> dict[str, Any]:
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
