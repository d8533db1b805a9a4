"""``kafka-core transactions list|describe|producers|find-hanging|abort``, as
``kafka-transactions.sh``: find the transactions that hold a partition's last stable offset back
(read_committed consumers stop there) and abort them on that partition.

``abort`` names the transaction by its first offset on the partition (``--start-offset``, as
``find-hanging`` prints it), or by the producer's ids; it is refused unless the transaction is
open there, so a wrong offset aborts nothing.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from kafka_core.cli.connect import open_admin
from kafka_core.cli.output import EXIT_FAILED, EXIT_NOT_FOUND, EXIT_OK, CliError, Output, one_line

__all__ = ["add_parser"]


def _non_negative(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, not {value}")
    return value


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    txn = sub.add_parser(
        "transactions", parents=[common], help="list, describe, find hanging and abort transactions"
    )
    tsub = txn.add_subparsers(dest="action", metavar="ACTION", required=True)

    ls = tsub.add_parser("list", parents=[common], help="transactional ids with producer id and state")
    ls.add_argument(
        "--state", action="append", metavar="STATE", help="only these states, e.g. Ongoing (repeatable)"
    )
    ls.add_argument("--producer-id", action="append", type=int, metavar="ID", help="only these producer ids")
    ls.set_defaults(run=list_transactions)

    ds = tsub.add_parser("describe", parents=[common], help="a transaction as its coordinator sees it")
    ds.add_argument("transactional_ids", nargs="+", metavar="TRANSACTIONAL_ID")
    ds.set_defaults(run=describe_transactions)

    pr = tsub.add_parser("producers", parents=[common], help="the producers a partition holds state for")
    pr.add_argument("-t", "--topic", required=True)
    pr.add_argument("-p", "--partition", type=_non_negative, required=True)
    pr.add_argument("--broker-id", type=int, help="ask this replica instead of the leader")
    pr.set_defaults(run=describe_producers)

    fh = tsub.add_parser(
        "find-hanging", parents=[common], help="open transactions no coordinator will finish"
    )
    where = fh.add_mutually_exclusive_group(required=True)
    where.add_argument("-t", "--topic", help="search this topic (with -p: one partition)")
    where.add_argument("--broker-id", type=int, help="search the partitions this broker holds")
    fh.add_argument("-p", "--partition", type=_non_negative)
    fh.add_argument(
        "--max-transaction-timeout",
        type=_non_negative,
        default=15,
        metavar="MINUTES",
        help="only transactions open longer than this (default 15, transaction.max.timeout.ms's default)",
    )
    fh.set_defaults(run=find_hanging)

    ab = tsub.add_parser("abort", parents=[common], help="abort the open transaction on one partition")
    ab.add_argument("-t", "--topic", required=True)
    ab.add_argument("-p", "--partition", type=_non_negative, required=True)
    ab.add_argument("--start-offset", type=_non_negative, help="the transaction's first offset there")
    ab.add_argument("--producer-id", type=int)
    ab.add_argument("--producer-epoch", type=int)
    ab.add_argument("--coordinator-epoch", type=int)
    ab.set_defaults(run=abort)


def list_transactions(args: argparse.Namespace, out: Output) -> int:
    with open_admin(args) as admin:
        listed = admin.list_transactions(states=args.state, producer_ids=args.producer_id)
    rows = [
        {"transactional_id": t.transactional_id, "producer_id": t.producer_id, "state": t.state}
        for t in listed
    ]
    if out.as_json:
        out.json(rows)
    else:
        out.table(
            ["transactional id", "producer id", "state"],
            [[r["transactional_id"], r["producer_id"], r["state"]] for r in rows],
            numeric=["producer id"],
        )
    return EXIT_OK


def describe_transactions(args: argparse.Namespace, out: Output) -> int:
    ids = list(dict.fromkeys(args.transactional_ids))
    with open_admin(args) as admin:
        results = admin.describe_transactions(ids)
    code = EXIT_OK
    report: list[dict[str, Any]] = []
    for tid in ids:
        res = results[tid]
        if not res.ok:
            missing = getattr(res.error, "name", "") == "TRANSACTIONAL_ID_NOT_FOUND"
            code = code or (EXIT_NOT_FOUND if missing else EXIT_FAILED)
            message = "does not exist" if missing else one_line(res.error)
            report.append({"transactional_id": tid, "error": message})
            continue
        d = res.value
        assert d is not None
        report.append(
            {
                "transactional_id": tid,
                "coordinator": d.coordinator_id,
                "state": d.state,
                "producer_id": d.producer_id,
                "producer_epoch": d.producer_epoch,
                "timeout_ms": d.timeout_ms,
                "start_time_ms": d.start_time_ms,
                "partitions": [[tp.topic, tp.partition] for tp in d.partitions],
            }
        )
    if out.as_json:
        out.json(report)
        return code
    rows = []
    for r in report:
        if "error" in r:
            # one line, never folded (a script reads it)
            print(
                f"kafka-core transactions describe: error: transactional id {r['transactional_id']!r}: {r['error']}",
                file=sys.stderr,
                flush=True,
            )
            continue
        open_s = (
            None
            if r["start_time_ms"] is None
            else f"{max(time.time() * 1000 - r['start_time_ms'], 0) / 1000:.0f}"
        )
        parts = " ".join(f"{t}-{p}" for t, p in r["partitions"]) or None
        rows.append(
            [
                r["transactional_id"],
                r["coordinator"],
                r["state"],
                r["producer_id"],
                r["producer_epoch"],
                r["timeout_ms"],
                open_s,
                parts,
            ]
        )
    if rows:
        out.table(
            [
                "transactional id",
                "coordinator",
                "state",
                "producer id",
                "epoch",
                "timeout ms",
                "open s",
                "partitions",
            ],
            rows,
            numeric=["coordinator", "producer id", "epoch", "timeout ms", "open s"],
        )
    return code


def describe_producers(args: argparse.Namespace, out: Output) -> int:
    from kafka_core import TopicPartition

    tp = TopicPartition(args.topic, args.partition)
    with open_admin(args) as admin:
        res = admin.describe_producers([tp], broker_id=args.broker_id)[tp]
    if not res.ok:
        missing = getattr(res.error, "name", "") == "UNKNOWN_TOPIC_OR_PARTITION"
        raise CliError(
            f"{args.topic}-{args.partition}: {'does not exist' if missing else one_line(res.error)}",
            EXIT_NOT_FOUND if missing else EXIT_FAILED,
        )
    rows = [
        {
            "producer_id": s.producer_id,
            "producer_epoch": s.producer_epoch,
            "last_sequence": s.last_sequence,
            "last_timestamp_ms": s.last_timestamp_ms,
            "coordinator_epoch": s.coordinator_epoch,
            "current_txn_start_offset": s.current_txn_start_offset,
        }
        for s in res.value or []
    ]
    if out.as_json:
        out.json(rows)
    else:
        out.table(
            [
                "producer id",
                "epoch",
                "last sequence",
                "last timestamp",
                "coordinator epoch",
                "open txn start",
            ],
            [list(r.values()) for r in rows],
            title=f"{args.topic}-{args.partition}",
            numeric=[
                "producer id",
                "epoch",
                "last sequence",
                "last timestamp",
                "coordinator epoch",
                "open txn start",
            ],
        )
    return EXIT_OK


def find_hanging(args: argparse.Namespace, out: Output) -> int:
    from kafka_core import TopicPartition

    if args.partition is not None and args.topic is None:
        raise CliError("--partition goes with --topic", 2)
    partitions = [TopicPartition(args.topic, args.partition)] if args.partition is not None else None
    with open_admin(args) as admin:
        found = admin.find_hanging_transactions(
            partitions,
            topics=[args.topic] if args.topic is not None and partitions is None else None,
            broker_id=args.broker_id,
            max_transaction_timeout_ms=args.max_transaction_timeout * 60_000,
        )
    now_ms = time.time() * 1000
    rows = [
        {
            "topic": h.topic,
            "partition": h.partition,
            "producer_id": h.producer_id,
            "producer_epoch": h.producer_epoch,
            "coordinator_epoch": h.coordinator_epoch,
            "start_offset": h.start_offset,
            "last_timestamp_ms": h.last_timestamp_ms,
            "minutes": round(max(now_ms - h.last_timestamp_ms, 0) / 60_000, 1),
            "transactional_id": h.transactional_id,
            "reason": h.reason,
        }
        for h in found
    ]
    if out.as_json:
        out.json(rows)
    elif not rows:
        out.line("no hanging transactions")
    else:
        out.table(
            [
                "topic",
                "partition",
                "producer id",
                "epoch",
                "coordinator epoch",
                "start offset",
                "minutes",
                "why",
            ],
            [
                [
                    r["topic"],
                    r["partition"],
                    r["producer_id"],
                    r["producer_epoch"],
                    r["coordinator_epoch"],
                    r["start_offset"],
                    r["minutes"],
                    r["reason"],
                ]
                for r in rows
            ],
            numeric=["partition", "producer id", "epoch", "coordinator epoch", "start offset", "minutes"],
        )
    return EXIT_OK


def abort(args: argparse.Namespace, out: Output) -> int:
    from kafka_core import TopicPartition

    ids = (args.producer_id, args.producer_epoch, args.coordinator_epoch)
    by_ids = all(i is not None for i in ids)
    if (args.start_offset is None) == (not any(i is not None for i in ids)) or (
        args.start_offset is None and not by_ids
    ):
        raise CliError("give --start-offset, or --producer-id, --producer-epoch and --coordinator-epoch", 2)
    tp = TopicPartition(args.topic, args.partition)
    with open_admin(args) as admin:
        state = admin.abort_transaction(
            tp,
            start_offset=args.start_offset,
            producer_id=args.producer_id,
            producer_epoch=args.producer_epoch,
            coordinator_epoch=args.coordinator_epoch,
        )
    if out.as_json:
        out.json(
            {
                "topic": tp.topic,
                "partition": tp.partition,
                "producer_id": state.producer_id,
                "producer_epoch": state.producer_epoch,
                "status": "aborted",
            }
        )
    else:
        out.line(
            f"aborted producer {state.producer_id} (epoch {state.producer_epoch})'s transaction on "
            f"{tp.topic}-{tp.partition}"
        )
    return EXIT_OK
