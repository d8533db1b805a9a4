"""One JSON verification artifact per capability, and the verdict rules they record.

A verdict is PASS only when every cycle ran and its books balance (zero acknowledged records
lost by the client, zero duplicates, zero corrupt deliveries, recovery within the bound); FAIL
otherwise; INCOMPLETE when the run was stopped part-way and the books of the cycles run balance; BLOCKED when a prerequisite is missing (named exactly) or the broker stopped serving its
log to our consumer and to an independent reader alike (nothing else wrong), never a pass by default.
"""

from __future__ import annotations

import datetime
import json
import platform
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafka_core.devtools.chaos.accounting import Tally

__all__ = ["BLOCKED", "FAIL", "INCOMPLETE", "PASS", "Outcome", "write_artifact"]

# INCOMPLETE: stopped part-way (kafka_core.devtools.chaos.stopping) with the books of the cycles run
# balanced; it is never a pass, since not every cycle ran.
PASS, FAIL, BLOCKED, INCOMPLETE = "PASS", "FAIL", "BLOCKED", "INCOMPLETE"


@dataclass
class Outcome:
    """What one capability's run came to."""

    capability: str
    mode: str
    seed: int
    parameters: dict[str, Any]
    verdict: str = FAIL
    reason: str = ""
    cycles: list[dict[str, Any]] = field(default_factory=list)
    tally: Tally = field(default_factory=Tally)
    details: dict[str, Any] = field(default_factory=dict)
    broker: dict[str, Any] = field(default_factory=dict)
    # Shortfalls the run could not put on either side (the broker stopped serving its log to both
    # readers): with no failure besides them, the verdict is BLOCKED, never PASS.
    inconclusive: list[str] = field(default_factory=list)
    started: float = 0.0
    duration_s: float = 0.0

    @property
    def pass_count(self) -> int:
        return sum(1 for c in self.cycles if c.get("passed"))

    def recovery_times(self) -> dict[str, list[float]]:
        out: dict[str, list[float]] = {}
        for c in self.cycles:
            for key in ("recovery_ack_s", "recovery_delivery_s"):
                if c.get(key) is not None:
                    out.setdefault(key[9:-2], []).append(round(c[key], 3))
        return out

    def judge(self, failures: list[str]) -> None:
        """Set the verdict from the books: every problem found is named in the reason."""
        t = self.tally
        if t.lost:
            failures.append(f"{t.lost} acknowledged records lost by the client (e.g. {t.lost_examples[:5]})")
        if t.duplicated:
            failures.append(f"{t.duplicated} records stored or delivered at two offsets")
        if t.corrupt_delivered:
            failures.append(f"{t.corrupt_delivered} corrupt records delivered as data")
        failed_cycles = [c["cycle"] for c in self.cycles if not c.get("passed")]
        if failed_cycles:
            failures.append(f"cycles {failed_cycles} did not pass")
        if t.unread:
            self.inconclusive.append(
                f"{t.unread} acknowledged records unread: the broker served neither our consumer nor "
                "an independent confluent-kafka read that far (see details.partition_progress)"
            )
        stopped = self.details.get("stopped")
        self.verdict = FAIL if failures else BLOCKED if self.inconclusive else INCOMPLETE if stopped else PASS
        notes = []
        if stopped:
            notes.append(
                f"stopped by {stopped['by']} after {stopped['cycles_run']} of {stopped['cycles_planned']} "
                "cycles; the books cover the cycles run"
            )
        if t.broker_lost:
            notes.append(
                f"{t.broker_lost} acknowledged records lost by the broker (Tansu's DUPLICATE_SEQUENCE_NUMBER "
                "signature, evidence attached), not counted against the client"
            )
        if t.broker_duplicated:
            notes.append(
                f"{t.broker_duplicated} records appended twice by the broker (both copies one batch: same "
                "producer id, epoch and sequence; evidence attached), not counted against the client"
            )
        self.reason = "; ".join(dict.fromkeys(failures + self.inconclusive + notes))


def _version() -> str:
    import kafka_core

    return kafka_core.__version__


def _codec() -> str:
    import kafka_core.codec

    return str(kafka_core.codec.IMPLEMENTATION)


def tansu_version() -> str:
    try:
        from kafka_core.devtools.brokers import tansu_binary

        out = subprocess.run([tansu_binary(), "--version"], capture_output=True, timeout=10, check=False)
        return out.stdout.decode(errors="replace").strip() or "unknown"
    except Exception as exc:  # the artifact says why instead of failing the run
        return f"unknown ({type(exc).__name__}: {exc})"


def write_artifact(outcome: Outcome, out_dir: Path) -> Path:
    """Write ``<capability>.json`` into ``out_dir`` and return its path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    doc = {
        "capability": outcome.capability,
        "verdict": outcome.verdict,
        "reason": outcome.reason,
        "mode": outcome.mode,
        "seed": outcome.seed,
        "parameters": outcome.parameters,
        "cycles_run": len(outcome.cycles),
        "stopped": outcome.details.get("stopped"),
        "pass_count": outcome.pass_count,
        "produced": outcome.tally.produced,
        "acknowledged": outcome.tally.acknowledged,
        "failed": outcome.tally.failed,
        "delivered": outcome.tally.delivered,
        "lost": outcome.tally.lost,
        "lost_detail": outcome.tally.lost_detail[:5],
        "broker_lost": outcome.tally.broker_lost,
        "broker_lost_evidence": outcome.tally.evidence[:50],
        "unread": outcome.tally.unread,
        "duplicated": outcome.tally.duplicated,
        "broker_duplicated": outcome.tally.broker_duplicated,
        "duplicate_evidence": outcome.tally.duplicate_evidence[:50],
        "redelivered": outcome.tally.redelivered,
        "corrupt_delivered": outcome.tally.corrupt_delivered,
        "recovery_times_s": outcome.recovery_times(),
        "cycles": outcome.cycles,
        "details": outcome.details,
        "timestamp": datetime.datetime.fromtimestamp(outcome.started or 0, datetime.UTC).isoformat(),
        "duration_s": round(outcome.duration_s, 2),
        "broker": outcome.broker,
        "kafka_core_version": _version(),
        "codec": _codec(),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }
    path = out_dir / f"{outcome.capability}.json"
    path.write_text(json.dumps(doc, indent=2, default=str) + "\n")
    return path
