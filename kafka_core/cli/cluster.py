"""``kafka-core partitions reassign|reassignments|cancel|elect|log-dirs`` and ``kafka-core cluster
quorum|features``: where replicas live and who leads, and the cluster's own state.

Partitions are named ``TOPIC:PARTITION``. ``reassign`` returns once the controller took the move
(``--wait`` waits until it is done); several partitions are reported one by one, the exit code
that of the first failure.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from kafka_core.cli.argtypes import positive_seconds
from kafka_core.cli.connect import open_admin
from kafka_core.cli.output import (
    EXIT_FAILED,
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_TIMEOUT,
    CliError,
    Output,
    one_line,
)

__all__ = ["add_parsers"]

MISSING = ("UNKNOWN_TOPIC_OR_PARTITION", "UNKNOWN_TOPIC_ID")


def _partition(text: str) -> tuple[str, int]:
    topic, sep, number = text.rpartition(":")
    try:
        if not sep or not topic:
            raise ValueError
        return topic, int(number)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a partition looks like TOPIC:PARTITION, not {text!r}") from None


def _move(text: str) -> tuple[tuple[str, int], list[int]]:
    where, sep, replicas = text.partition("=")
    try:
        ids = [int(r) for r in replicas.split(",")] if sep else []
    except ValueError:
        ids = []
    if not ids:
        raise argparse.ArgumentTypeError(f"a move looks like TOPIC:PARTITION=1,2,3, not {text!r}")
    return _partition(where), ids


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    parts = sub.add_parser(
        "partitions", parents=[common], help="reassign partitions, elect leaders, show log dirs"
    )
    psub = parts.add_subparsers(dest="action", metavar="ACTION", required=True)
    ra = psub.add_parser("reassign", parents=[common], help="move partitions to new replicas")
    ra.add_argument(
        "moves", nargs="+", type=_move, metavar="TOPIC:PARTITION=B1,B2,...", help="the first broker leads"
    )
    ra.add_argument("--wait", type=positive_seconds, metavar="SECONDS", help="wait until the moves are done")
    ra.set_defaults(run=reassign)
    ls = psub.add_parser("reassignments", parents=[common], help="reassignments under way")
    ls.add_argument("partitions", nargs="*", type=_partition, metavar="TOPIC:PARTITION")
    ls.set_defaults(run=reassignments)
    ca = psub.add_parser("cancel", parents=[common], help="cancel reassignments under way")
    ca.add_argument("partitions", nargs="+", type=_partition, metavar="TOPIC:PARTITION")
    ca.set_defaults(run=cancel)
    el = psub.add_parser("elect", parents=[common], help="elect leaders (preferred or unclean)")
    el.add_argument(
        "partitions", nargs="*", type=_partition, metavar="TOPIC:PARTITION", help="(default: all)"
    )
    el.add_argument("--type", choices=("preferred", "unclean"), default="preferred", dest="election_type")
    el.set_defaults(run=elect)
    ld = psub.add_parser("log-dirs", parents=[common], help="each broker's log dirs and the replicas in them")
    ld.add_argument("--broker-id", type=int, action="append", metavar="ID", help="(default: every broker)")
    ld.add_argument("-t", "--topic", action="append", metavar="TOPIC", help="only these topics' replicas")
    ld.set_defaults(run=log_dirs)

    cluster = sub.add_parser("cluster", parents=[common], help="the KRaft quorum and feature levels")
    csub = cluster.add_subparsers(dest="action", metavar="ACTION", required=True)
    qu = csub.add_parser("quorum", parents=[common], help="the metadata quorum: leader, voters, observers")
    qu.set_defaults(run=quorum)
    fe = csub.add_parser("features", parents=[common], help="finalized feature levels and supported ranges")
    fe.set_defaults(run=features)


def _report(
    what: str, results: dict[Any, Any], out: Output, done: str, also: list[dict[str, Any]] | None = None
) -> int:
    """Each partition's outcome (``also``: rows the caller adds to the JSON); the first failure's code."""
    code = EXIT_OK
    rows: list[dict[str, Any]] = []
    for tp, res in results.items():
        name = getattr(res.error, "name", "")
        if res.ok:
            rows.append({"topic": tp.topic, "partition": tp.partition, "status": done, "error": None})
            continue
        failed = EXIT_NOT_FOUND if name in MISSING else EXIT_FAILED
        code = code or failed
        rows.append(
            {"topic": tp.topic, "partition": tp.partition, "status": "failed", "error": one_line(res.error)}
        )
    if out.as_json:
        out.json(rows + (also or []))
    else:
        for r in rows:
            if r["error"]:
                print(
                    f"kafka-core partitions {what}: error: {r['topic']}:{r['partition']}: {r['error']}",
                    file=sys.stderr,
                    flush=True,
                )
            else:
                out.line(f"{r['topic']}:{r['partition']} {done}")
    return code


def reassign(args: argparse.Namespace, out: Output) -> int:
    moves = {tp: replicas for tp, replicas in args.moves}
    with open_admin(args) as admin:
        results = admin.alter_partition_reassignments(moves)
        code = _report("reassign", results, out, "reassignment started")
        if args.wait is not None and code == EXIT_OK:
            deadline = time.monotonic() + args.wait
            while admin.list_partition_reassignments(list(results)):
                if time.monotonic() >= deadline:
                    raise CliError(f"the reassignments were not done within {args.wait:g}s", EXIT_TIMEOUT)
                time.sleep(0.5)
            if not out.as_json:
                out.line("reassignments done")
    return code


def reassignments(args: argparse.Namespace, out: Output) -> int:
    with open_admin(args) as admin:
        ongoing = admin.list_partition_reassignments(args.partitions or None)
    rows = [
        {
            "topic": r.topic,
            "partition": r.partition,
            "replicas": list(r.replicas),
            "adding": list(r.adding),
            "removing": list(r.removing),
        }
        for r in ongoing.values()
    ]
    if out.as_json:
        out.json(rows)
    elif not rows:
        out.line("no reassignments under way")
    else:
        out.table(
            ["topic", "partition", "replicas", "adding", "removing"],
            [
                [
                    r["topic"],
                    r["partition"],
                    *(",".join(map(str, r[k])) or None for k in ("replicas", "adding", "removing")),
                ]
                for r in rows
            ],
            numeric=["partition"],
        )
    return EXIT_OK


def cancel(args: argparse.Namespace, out: Output) -> int:
    with open_admin(args) as admin:
        results = admin.alter_partition_reassignments(dict.fromkeys(args.partitions))
    return _report("cancel", results, out, "reassignment cancelled")


def elect(args: argparse.Namespace, out: Output) -> int:
    with open_admin(args) as admin:
        results = admin.elect_leaders(args.election_type, args.partitions or None)
    # a partition already led by its preferred replica is not a failure of the command
    settled = {
        tp: res
        for tp, res in results.items()
        if not res.ok and getattr(res.error, "name", "") == "ELECTION_NOT_NEEDED"
    }
    rest = {tp: res for tp, res in results.items() if tp not in settled}
    not_needed = [
        {"topic": tp.topic, "partition": tp.partition, "status": "not needed", "error": None}
        for tp in settled
    ]
    code = _report("elect", rest, out, f"{args.election_type} leader elected", not_needed)
    if not out.as_json:
        for tp in settled:
            out.line(f"{tp.topic}:{tp.partition} election not needed")
        if not results:
            out.line("no partition needed an election")
    return code


def log_dirs(args: argparse.Namespace, out: Output) -> int:
    with open_admin(args) as admin:
        results = admin.describe_log_dirs(args.broker_id, topics=args.topic)
    code = EXIT_OK
    rows: list[dict[str, Any]] = []
    for broker, res in results.items():
        if not res.ok:
            code = code or EXIT_FAILED
            print(
                f"kafka-core partitions log-dirs: error: broker {broker}: {one_line(res.error)}",
                file=sys.stderr,
                flush=True,
            )
            continue
        rows.extend(_dir_row(broker, d) for d in (res.value or {}).values())
    if out.as_json:
        out.json(rows)
        return code
    out.table(
        ["broker", "dir", "replicas", "bytes", "usable", "total", "error"],
        [
            [
                r["broker"],
                r["dir"],
                len(r["replicas"]),
                sum(x["size"] for x in r["replicas"]),
                r["usable_bytes"],
                r["total_bytes"],
                r["error"],
            ]
            for r in rows
        ],
        numeric=["broker", "replicas", "bytes", "usable", "total"],
    )
    return code


def _dir_row(broker: int, d: Any) -> dict[str, Any]:
    return {
        "broker": broker,
        "dir": d.path,
        "error": one_line(d.error) if d.error else None,
        "total_bytes": d.total_bytes,
        "usable_bytes": d.usable_bytes,
        "replicas": [
            {
                "topic": tp.topic,
                "partition": tp.partition,
                "size": r.size,
                "offset_lag": r.offset_lag,
                "future": r.is_future,
            }
            for tp, r in sorted(d.replicas.items())
        ],
    }


def quorum(args: argparse.Namespace, out: Output) -> int:
    with open_admin(args) as admin:
        q = admin.describe_quorum()
    now_ms = time.time() * 1000

    def row(r: Any, role: str) -> dict[str, Any]:
        lag = q.high_watermark - r.log_end_offset
        seen = r.last_fetch_timestamp_ms
        return {
            "node": r.replica_id,
            "role": "leader" if r.replica_id == q.leader_id and role == "voter" else role,
            "log_end_offset": r.log_end_offset,
            "lag": max(lag, 0),
            "last_fetch_ms_ago": None if seen is None else max(int(now_ms - seen), 0),
        }

    rows = [row(r, "voter") for r in q.voters] + [row(r, "observer") for r in q.observers]
    if out.as_json:
        out.json(
            {
                "leader_id": q.leader_id,
                "leader_epoch": q.leader_epoch,
                "high_watermark": q.high_watermark,
                "replicas": rows,
            }
        )
        return EXIT_OK
    out.table(
        ["node", "role", "log end offset", "lag", "last fetch ms ago"],
        [list(r.values()) for r in rows],
        title=f"leader {q.leader_id}, epoch {q.leader_epoch}, high watermark {q.high_watermark:,}",
        numeric=["node", "log end offset", "lag", "last fetch ms ago"],
    )
    return EXIT_OK


def features(args: argparse.Namespace, out: Output) -> int:
    with open_admin(args) as admin:
        f = admin.describe_features()
    names = sorted(set(f.finalized) | set(f.supported))
    rows = [
        {
            "feature": n,
            "finalized": f.finalized[n].max_version if n in f.finalized else None,
            "supported_min": f.supported[n].min_version if n in f.supported else None,
            "supported_max": f.supported[n].max_version if n in f.supported else None,
        }
        for n in names
    ]
    if out.as_json:
        out.json({"epoch": f.finalized_epoch, "features": rows})
        return EXIT_OK
    out.table(
        ["feature", "finalized", "supported min", "supported max"],
        [list(r.values()) for r in rows],
        title=f"finalized epoch {f.finalized_epoch}",
        numeric=["finalized", "supported min", "supported max"],
    )
    return EXIT_OK
