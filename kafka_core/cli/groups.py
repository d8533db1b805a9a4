"""``kafka-core groups list|describe|lag`` through the admin client (``kafka_core.KafkaAdmin``).

``lag`` sets each partition's committed offset against its end offset (``--watch``: refreshed,
with rates, :mod:`kafka_core.cli.groupwatch`); a group the cluster does not know is exit 4, as is a topic. ``list``, ``describe`` and ``lag`` show each group's state and
members as DescribeGroups gives them: ListGroups may not say (Tansu answers ``Unknown`` for every
group), and a group that never committed has no offsets to show but is still a group, perhaps one
stuck rebalancing.
"""

from __future__ import annotations

import argparse
from typing import Any

from kafka_core.cli.argtypes import positive_int, positive_seconds
from kafka_core.cli.connect import open_admin
from kafka_core.cli.grouplag import group_error, read_group
from kafka_core.cli.groupwatch import watch_lag
from kafka_core.cli.output import EXIT_OK, EXIT_USAGE, CliError, Output, one_line, plural
from kafka_core.cli.share import describe_any, describe_listed, group_lag_total
from kafka_core.cli.watch import DEFAULT_INTERVAL, DEFAULT_TOP

__all__ = ["add_parser"]

UNSAID = ("", "Unknown")  # a ListGroups state that says nothing: ask DescribeGroups


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    groups = sub.add_parser(
        "groups", parents=[common], help="list and inspect consumer and share groups, their lag"
    )
    gsub = groups.add_subparsers(dest="action", metavar="ACTION", required=True)
    ls = gsub.add_parser("list", parents=[common], help="every group with its type, state and lag")
    ls.set_defaults(run=list_groups)
    ds = gsub.add_parser(
        "describe", parents=[common], help="state, protocol and members with their partitions"
    )
    ds.add_argument("group_ids", nargs="+", metavar="GROUP")
    ds.set_defaults(run=describe_groups)
    lg = gsub.add_parser(
        "lag", parents=[common], help="committed against end offsets, per partition and total"
    )
    lg.add_argument("group_id", metavar="GROUP")
    lg.add_argument(
        "--watch",
        action="store_true",
        help="refresh until Ctrl-C: lag and its trend, records/s consumed and produced, rebalances "
        "(a live table on a terminal; a plain block per refresh when piped; a JSON line with --json)",
    )
    lg.add_argument(
        "--interval",
        type=positive_seconds,
        metavar="SECONDS",
        help=f"--watch: seconds between refreshes (default {DEFAULT_INTERVAL:g})",
    )
    lg.add_argument(
        "--top",
        type=positive_int,
        metavar="N",
        help=f"--watch: show the N partitions with the most lag, beside the totals (default {DEFAULT_TOP})",
    )
    lg.set_defaults(run=group_lag)


def list_groups(args: argparse.Namespace, out: Output) -> int:
    with open_admin(args) as admin:
        listed = admin.list_groups()
        described = describe_listed(admin, listed)
        lags = {g.group_id: group_lag_total(admin, g) for g in listed}
    rows = []
    for g in listed:
        res = described.get(g.group_id)
        desc = res.value if res is not None and res.ok else None
        state = g.state if g.state not in (None, *UNSAID) else None
        if desc is not None and state is None and desc.state not in UNSAID:
            state = desc.state
        rows.append(
            {
                "group_id": g.group_id,
                "state": state or g.state or None,
                "group_type": g.group_type or (desc.group_type if desc is not None else None),
                "protocol_type": g.protocol_type or (desc.protocol_type if desc is not None else None),
                "members": len(desc.members) if desc is not None else None,
                "lag": lags.get(g.group_id),
            }
        )
    if out.as_json:
        out.json(rows)
    else:
        out.table(
            ["group", "state", "type", "protocol", "members", "lag"],
            [
                [
                    r["group_id"],
                    r["state"],
                    r["group_type"],
                    r["protocol_type"] or None,
                    r["members"],
                    r["lag"],
                ]
                for r in rows
            ],
            numeric=["members", "lag"],
        )
    return EXIT_OK


def describe_groups(args: argparse.Namespace, out: Output) -> int:
    ids = list(dict.fromkeys(args.group_ids))
    with open_admin(args) as admin:
        results = describe_any(admin, ids)
    code = EXIT_OK
    report: list[dict[str, Any]] = []
    for gid in ids:
        res = results[gid]
        if not res.ok:
            message, failed = group_error(gid, res.error)
            code = code or failed
            report.append({"group_id": gid, "error": message})
            continue
        d = res.value
        report.append(
            {
                "group_id": gid,
                "state": d.state,
                "protocol_type": d.protocol_type,
                "protocol": d.protocol,
                "members": [
                    {
                        "member_id": m.member_id,
                        "client_id": m.client_id,
                        "host": m.host,
                        "assignment": [[tp.topic, tp.partition] for tp in sorted(m.assignment)],
                    }
                    for m in d.members
                ],
            }
        )
    if out.as_json:
        out.json(report)
        return code
    for g in report:
        if "error" in g:
            out.note(f"kafka-core groups describe: error: {g['error']}", style=None)
            continue
        title = (
            f"{g['group_id']}: {g['state']}, {g['protocol_type'] or '-'}/{g['protocol'] or '-'}, "
            f"{plural(len(g['members']), 'member')}"
        )
        if not g["members"]:
            out.line(title)
            continue
        out.table(
            ["member", "client", "host", "partitions"],
            [
                [
                    m["member_id"],
                    m["client_id"],
                    m["host"],
                    " ".join(f"{t}-{p}" for t, p in m["assignment"]) or None,
                ]
                for m in g["members"]
            ],
            title=title,
        )
    return code


def group_lag(args: argparse.Namespace, out: Output) -> int:
    if args.watch:
        return watch_lag(args, out)
    if args.interval is not None or args.top is not None:
        raise CliError("--interval and --top go with --watch", EXIT_USAGE)
    with open_admin(args) as admin:
        reading = read_group(admin, args.group_id)
    lag, state, members, share = reading.lag, reading.state, reading.members, reading.share
    rows = [
        {
            "topic": p.topic,
            "partition": p.partition,
            "committed": p.committed,
            "end": p.end,
            "lag": p.lag,
            "error": one_line(p.error) if p.error is not None else None,
        }
        for p in lag
    ]
    if out.as_json:
        out.json(
            {
                "group_id": args.group_id,
                "state": state,
                "members": members,
                "total": lag.total,
                "partitions": rows,
            }
        )
        return EXIT_OK
    about = f"{state or '-'}, {plural(members, 'member')}" if members is not None else state or "-"
    if not rows:
        out.line(f"{args.group_id}: {about}; no committed offsets, so no lag to show")
        return EXIT_OK
    out.table(
        ["topic", "partition", "start" if share else "committed", "end", "lag"],
        [[r["topic"], r["partition"], r["committed"], r["end"], r["lag"]] for r in rows],
        title=f"{args.group_id}: {about}; total lag {lag.total:,}",
        numeric=["partition", "start", "committed", "end", "lag"],
    )
    return EXIT_OK
