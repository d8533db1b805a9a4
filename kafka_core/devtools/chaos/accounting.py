"""Record accounting for the chaos harness: produced, acknowledged, delivered, lost, duplicated.

Every record carries its sequence number and a body derived from it, so a delivered record is
checked byte for byte (a corrupt delivery is counted, never trusted). An acknowledged record
that never arrives is a loss; it is put down to the broker, not the client, only with Tansu's
signature as evidence: the write was answered DUPLICATE_SEQUENCE_NUMBER (offset -1: "already
written") yet an independent read of the log has a hole in that partition and not the record.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from kafka_core.devtools.chaos.capture import explain_duplicate
from kafka_core.devtools.chaos.values import parse_value

__all__ = ["Ledger", "Tally"]


@dataclass
class Tally:
    """What one cycle (or a whole scenario) came to; the verdict reads only these figures."""

    produced: int = 0
    acknowledged: int = 0
    failed: int = 0  # settled with a typed error (not acknowledged: allowed, never counted lost)
    delivered: int = 0  # distinct records handed to the committing consumer
    lost: int = 0  # acknowledged, never delivered, and not Tansu's signature: the client's fault
    broker_lost: int = 0  # acknowledged, missing, with Tansu's DUPLICATE_SEQUENCE_NUMBER signature
    unread: int = 0  # acknowledged, beyond where both our consumer and an independent read stalled
    duplicated: int = 0  # one record stored at two offsets, not shown to be the broker's
    broker_duplicated: int = 0  # both copies one batch (same producer id, epoch, sequence)
    redelivered: int = 0  # one offset handed over twice (at-least-once replay after a rejoin)
    corrupt_delivered: int = 0  # a delivered body that is not what was produced
    evidence: list[dict[str, Any]] = field(default_factory=list)
    duplicate_evidence: list[dict[str, Any]] = field(default_factory=list)
    lost_examples: list[int] = field(default_factory=list)
    lost_detail: list[dict[str, Any]] = field(default_factory=list)

    def add(self, other: Tally) -> None:
        for name in (
            "produced",
            "acknowledged",
            "failed",
            "delivered",
            "lost",
            "broker_lost",
            "unread",
            "duplicated",
            "broker_duplicated",
            "redelivered",
            "corrupt_delivered",
        ):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.evidence.extend(other.evidence)
        self.duplicate_evidence.extend(other.duplicate_evidence[: max(0, 50 - len(self.duplicate_evidence))])
        self.lost_examples.extend(other.lost_examples[: max(0, 20 - len(self.lost_examples))])
        self.lost_detail.extend(other.lost_detail[: max(0, 5 - len(self.lost_detail))])

    @property
    def clean(self) -> bool:
        return not (self.lost or self.duplicated or self.corrupt_delivered)

    def as_dict(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        out["evidence"] = self.evidence[:50]
        out["duplicate_evidence"] = self.duplicate_evidence[:50]
        return out


def _holes(offsets: list[int]) -> list[list[int]]:
    """Gaps in a partition's offsets, as [first missing, last missing] pairs."""
    out: list[list[int]] = []
    ordered = sorted(set(offsets))
    for a, b in itertools.pairwise(ordered):
        if b > a + 1:
            out.append([a + 1, b - 1])
    return out


class Ledger:
    """Thread-safe books of one run: the producer thread, the consumer thread and the verifier."""

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.lock = threading.Lock()
        self.produced = 0
        self.acked: dict[int, tuple[int, int]] = {}  # seq -> (partition, offset or -1)
        self.failed: dict[int, str] = {}
        self.deliveries: dict[int, list[tuple[int, int]]] = {}  # seq -> [(partition, offset)]
        self.seen_offsets: Counter[tuple[int, int]] = Counter()
        self.corrupt: list[dict[str, Any]] = []
        self.errors: list[dict[str, Any]] = []  # typed errors the consumer raised
        self.last_ack = 0.0
        self.last_delivery = 0.0

    def sent(self, n: int = 1) -> None:
        with self.lock:
            self.produced += n

    def ack(self, seq: int, partition: int, offset: int) -> None:
        with self.lock:
            self.acked[seq] = (partition, offset)
            self.last_ack = time.monotonic()

    def fail(self, seq: int, error: BaseException) -> None:
        with self.lock:
            self.failed[seq] = f"{type(error).__name__}: {error}"

    def deliver(self, partition: int, offset: int, data: bytes | None) -> None:
        seq = parse_value(data)
        with self.lock:
            self.seen_offsets[(partition, offset)] += 1
            self.last_delivery = time.monotonic()
            if seq is None:
                self.corrupt.append(
                    {"partition": partition, "offset": offset, "bytes": (data or b"")[:40].hex()}
                )
                return
            self.deliveries.setdefault(seq, []).append((partition, offset))

    def error(self, exc: BaseException, where: str) -> None:
        with self.lock:
            self.errors.append(
                {
                    "where": where,
                    "type": type(exc).__name__,
                    "message": str(exc)[:300],
                    "topic": getattr(exc, "topic", None),
                    "partition": getattr(exc, "partition", None),
                    "offset": getattr(exc, "offset", None),
                    "at": time.time(),
                }
            )

    def partition_progress(self) -> dict[int, dict[str, Any]]:
        """Per partition: records acknowledged and delivered, and the highest offset of each, so a
        consumer that fell behind shows which partition it stalled on."""
        out: dict[int, dict[str, Any]] = {}
        with self.lock:
            for partition, offset in self.acked.values():
                e = out.setdefault(partition, {"acked": 0, "acked_max_offset": -1, "delivered": 0})
                e["acked"] += 1
                e["acked_max_offset"] = max(e["acked_max_offset"], offset)
            for partition, offset in self.seen_offsets:
                e = out.setdefault(partition, {"acked": 0, "acked_max_offset": -1, "delivered": 0})
                e["delivered"] += 1
                e["delivered_max_offset"] = max(e.get("delivered_max_offset", -1), offset)
        return out

    def _places(self, log: dict[int, list[tuple[int, int]]] | None) -> dict[int, set[tuple[int, int]]]:
        """seq -> every (partition, offset) it was delivered at or read at independently."""
        places: dict[int, set[tuple[int, int]]] = {s: set(p) for s, p in self.deliveries.items()}
        for partition, entries in (log or {}).items():
            for offset, s in entries:
                if s >= 0:  # -1: a body that is not ours (counted when delivered)
                    places.setdefault(s, set()).add((partition, offset))
        return places

    def undelivered(self) -> list[tuple[int, int, int]]:
        """(seq, partition, acknowledged offset or -1) of every acknowledged record not delivered."""
        with self.lock:
            return [(s, p, o) for s, (p, o) in self.acked.items() if s not in self.deliveries]

    def duplicates(self, log: dict[int, list[tuple[int, int]]] | None) -> dict[int, list[tuple[int, int]]]:
        """Records stored at more than one offset: seq -> sorted (partition, offset) places."""
        with self.lock:
            return {s: sorted(p) for s, p in self._places(log).items() if len(p) > 1}

    def tally(self, log: dict[int, list[tuple[int, int]]] | None, writes: list[Any] | None = None) -> Tally:
        """Count the run. ``log`` is an independent read of the topic: partition -> [(offset, seq)].

        ``writes`` is the proxy's capture of the Produce traffic (``ProduceWrite``s), if any.
        """
        with self.lock:
            t = Tally(
                produced=self.produced,
                acknowledged=len(self.acked),
                failed=len(self.failed),
                delivered=len(self.deliveries),
                corrupt_delivered=len(self.corrupt),
                redelivered=sum(c - 1 for c in self.seen_offsets.values() if c > 1),
            )
            stored = Counter(s for entries in (log or {}).values() for _, s in entries)
            places = self._places(log)
            t.duplicated = sum(1 for p in places.values() if len(p) > 1)
            missing = sorted(s for s in self.acked if s not in self.deliveries)
            suspects: dict[int, list[int]] = {}
            for seq in missing:
                partition, offset = self.acked[seq]
                if log is not None and offset == -1 and seq not in stored:
                    suspects.setdefault(partition, []).append(seq)
                else:
                    t.lost += 1
                    if len(t.lost_examples) < 20:
                        t.lost_examples.append(seq)
                        t.lost_detail.append(self._where(seq, log, places))
            for partition, seqs in suspects.items():
                self._judge_suspects(t, partition, seqs, log or {}, places, writes, set(stored))
        return t

    def _judge_suspects(
        self,
        t: Tally,
        partition: int,
        seqs: list[int],
        log: dict[int, list[tuple[int, int]]],
        places: dict[int, set[tuple[int, int]]],
        writes: list[Any] | None = None,
        stored: set[int] | None = None,
    ) -> None:
        """Put a lost batch down to the broker only with evidence that it was the broker's doing.

        A batch is a run of records, consecutive in this partition's send order, all answered
        DUPLICATE_SEQUENCE_NUMBER and all missing. Evidence is either a hole of its size between
        the offsets of the records sent just before and just after it, or (no hole) a wire
        capture showing the same records under the same producer id, epoch and sequence sent
        before, never given an offset (see ``capture.explain_duplicate``). Anything else stays a
        client loss, with what the capture says in ``lost_detail``.
        """
        order = sorted(s for s, (p, _) in self.acked.items() if p == partition)
        index = {s: i for i, s in enumerate(order)}
        holes = _holes([off for off, _ in log.get(partition, [])])
        used: set[int] = set()

        def offset_of(i: int, step: int) -> int | None:
            while 0 <= i < len(order):
                found = [off for p, off in places.get(order[i], ()) if p == partition]
                if found:
                    return found[0]
                i += step
            return None

        runs: list[list[int]] = []
        for seq in seqs:
            if runs and index[seq] == index[runs[-1][-1]] + 1:
                runs[-1].append(seq)
            else:
                runs.append([seq])
        for run in runs:
            before = offset_of(index[run[0]] - 1, -1)
            after = offset_of(index[run[-1]] + 1, 1)
            match = next(
                (
                    k
                    for k, (a, b) in enumerate(holes)
                    if k not in used
                    and b - a + 1 == len(run)
                    and (before is None or a > before)
                    and (after is None or b < after)
                ),
                None,
            )
            wire = (
                explain_duplicate(writes, self.topic, partition, run, stored or set())
                if writes is not None
                else None
            )
            if match is None and wire is not None and wire["verdict"] == "broker":
                t.broker_lost += len(run)
                t.evidence.append(
                    {
                        "partition": partition,
                        "records": [run[0], run[-1]],
                        "count": len(run),
                        "answer": "DUPLICATE_SEQUENCE_NUMBER (error 46; acknowledged with offset -1)",
                        "log_hole": None,
                        "signature": "sequence kept without data or offsets (no hole)",
                        "between_offsets": [before, after],
                        "wire": wire,
                    }
                )
                continue
            if match is None:
                t.lost += len(run)
                for seq in run[: max(0, 20 - len(t.lost_examples))]:
                    t.lost_examples.append(seq)
                    t.lost_detail.append(
                        {
                            **self._where(seq, log, places),
                            "note": "DUPLICATE_SEQUENCE_NUMBER but no hole of its size",
                            **({"wire": wire} if wire is not None else {}),
                        }
                    )
                continue
            used.add(match)
            t.broker_lost += len(run)
            t.evidence.append(
                {
                    "partition": partition,
                    "records": [run[0], run[-1]],
                    "count": len(run),
                    "answer": "DUPLICATE_SEQUENCE_NUMBER (error 46; acknowledged with offset -1)",
                    "log_hole": holes[match],
                    "signature": "hole of the batch's size",
                    "between_offsets": [before, after],
                    **({"wire": wire} if wire is not None else {}),
                }
            )

    def _where(
        self, seq: int, log: dict[int, list[tuple[int, int]]] | None, places: dict[int, set[tuple[int, int]]]
    ) -> dict[str, Any]:
        """What is known of one lost record: its acknowledgement, the log around it."""
        partition, offset = self.acked[seq]
        entries = (log or {}).get(partition, [])
        return {
            "record": seq,
            "acknowledged_at": [partition, offset],
            "in_log_at": sorted(places.get(seq, ())),
            "log_read": log is not None,
            "log_holes": _holes([off for off, _ in entries])[:10],
            "log_has_acknowledged_offset": any(off == offset for off, _ in entries),
        }


def unread_by_both(
    undelivered: list[tuple[int, int, int]],
    ours: dict[int, dict[str, Any]],
    independent: dict[int, dict[str, Any]],
    drained: set[int],
) -> tuple[list[int], dict[int, int]]:
    """Records neither reader reached: in a partition that neither our consumer (``drained``: the
    partitions whose end it reached) nor the independent read finished, every undelivered record
    beyond the furthest offset either of them got to (or placed nowhere, offset -1) cannot be
    judged delivered or lost: the broker did not serve its log that far to anyone.

    Returns (their seqs, partition -> furthest offset reached). An independent read that finished
    a partition, or was not made, leaves that partition's undelivered records lost.
    """
    reach: dict[int, int] = {}
    for p, progress in independent.items():
        if p in drained or not progress or progress.get("sentinel"):
            continue
        ours_max = (ours.get(p) or {}).get("delivered_max_offset", -1)
        theirs = progress.get("last_offset")
        reach[p] = max(ours_max, -1 if theirs is None else theirs)
    seqs = [s for s, p, o in undelivered if p in reach and (o == -1 or o > reach[p])]
    return sorted(seqs), reach
