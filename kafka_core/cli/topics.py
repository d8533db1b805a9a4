"""``kafka-core topics list|create|delete|describe|watch`` through the admin client (``kafka_core.KafkaAdmin``;
``watch``: :mod:`kafka_core.cli.topicwatch`).

Several topics in one command are reported one by one (one failing does not hide the others);
the exit code is that of the first failure: 4 for a topic that does not exist, 1 for other
Kafka errors (e.g. TOPIC_ALREADY_EXISTS).
"""

from __future__ import annotations

import argparse
from typing import Any

from kafka_core.cli.argtypes import positive_int, positive_seconds
from kafka_core.cli.connect import open_admin, parse_pairs
from kafka_core.cli.output import EXIT_FAILED, EXIT_NOT_FOUND, EXIT_OK, CliError, Output, one_line
from kafka_core.cli.topicwatch import MISSING, watch_topic
from kafka_core.cli.watch import DEFAULT_INTERVAL, DEFAULT_TOP

__all__ = ["add_parser"]


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    topics = sub.add_parser("topics", parents=[common], help="list, create, delete, describe topics")
    tsub = topics.add_subparsers(dest="action", metavar="ACTION", required=True)

    ls = tsub.add_parser("list", parents=[common], help="topics with partition counts")
    ls.add_argument("--internal", action="store_true", help="include internal topics")
    ls.set_defaults(run=list_topics)

    cr = tsub.add_parser("create", parents=[common], help="create a topic")
    cr.add_argument("name")
    cr.add_argument("--partitions", type=positive_int, required=True, metavar="N")
    cr.add_argument(
        "--replication-factor", type=positive_int, metavar="R", help="(default: the broker's default)"
    )
    cr.add_argument("--config", action="append", metavar="KEY=VALUE", help="topic config (repeatable)")
    cr.add_argument("--if-not-exists", action="store_true", help="an existing topic is not an error")
    cr.add_argument("--validate-only", action="store_true", help="ask the broker to check, create nothing")
    cr.set_defaults(run=create_topic)

    de = tsub.add_parser("delete", parents=[common], help="delete topics")
    de.add_argument("names", nargs="+", metavar="NAME")
    de.add_argument("--if-exists", action="store_true", help="a missing topic is not an error")
    de.set_defaults(run=delete_topics)

    ds = tsub.add_parser("describe", parents=[common], help="partitions, leaders, replicas and offsets")
    ds.add_argument("names", nargs="+", metavar="NAME")
    ds.add_argument("--configs", action="store_true", help="also the topic configs that are not defaults")
    ds.set_defaults(run=describe_topics)

    wa = tsub.add_parser(
        "watch",
        parents=[common],
        help="records/s produced per partition, refreshed until Ctrl-C",
        description="Refresh the topic's end offsets every --interval seconds: records/s produced "
        "per partition (the busiest first) and in total (a live table on a terminal; a plain block "
        "per refresh when piped; a JSON line with --json).",
    )
    wa.add_argument("name", metavar="TOPIC")
    wa.add_argument(
        "--interval",
        type=positive_seconds,
        metavar="SECONDS",
        help=f"seconds between refreshes (default {DEFAULT_INTERVAL:g})",
    )
    wa.add_argument(
        "--top",
        type=positive_int,
        metavar="N",
        help=f"show the N partitions producing the most, beside the total (default {DEFAULT_TOP})",
    )
    wa.set_defaults(run=watch_topic)


def _failure(what: str, error: BaseException | None) -> tuple[str, int]:
    name = getattr(error, "name", "")
    code = EXIT_NOT_FOUND if name in MISSING else EXIT_FAILED
    if name in MISSING:
        return f"{what}: does not exist", code
    return f"{what}: {one_line(error)}", code


def list_topics(args: argparse.Namespace, out: Output) -> int:
    with open_admin(args) as admin:
        names = admin.list_topics(internal=args.internal)
        described = admin.describe_topics(names) if names else {}
    rows = []
    for name in names:
        res = described.get(name)
        desc = res.value if res is not None and res.ok else None
        parts = desc.partitions if desc is not None else []
        rf = max((len(p.replicas) for p in parts), default=None)
        rows.append({"name": name, "partitions": len(parts) if desc else None, "replication_factor": rf})
    if out.as_json:
        out.json(rows)
    else:
        out.table(
            ["topic", "partitions", "replication"],
            [[r["name"], r["partitions"], r["replication_factor"]] for r in rows],
            numeric=["partitions", "replication"],
        )
    return EXIT_OK


def create_topic(args: argparse.Namespace, out: Output) -> int:
    from kafka_core import NewTopic

    configs = dict(parse_pairs(args.config, "--config"))
    topic = NewTopic(args.name, args.partitions, args.replication_factor or -1, configs)
    with open_admin(args) as admin:
        result = admin.create_topics([topic], validate_only=args.validate_only)[args.name]
    existed = not result.ok and getattr(result.error, "name", "") == "TOPIC_ALREADY_EXISTS"
    if not result.ok and not (existed and args.if_not_exists):
        if existed:
            raise CliError(f"topic {args.name!r} already exists", EXIT_FAILED)
        raise CliError(f"creating topic {args.name!r} failed: {one_line(result.error)}", EXIT_FAILED)
    status = "exists" if existed else "valid" if args.validate_only else "created"
    if out.as_json:
        out.json({"topic": args.name, "status": status, "partitions": args.partitions, "configs": configs})
    else:
        verb = {
            "exists": "already exists",
            "valid": "would be created (--validate-only)",
            "created": "created",
        }
        out.line(f"topic {args.name} {verb[status]}")
    return EXIT_OK


def delete_topics(args: argparse.Namespace, out: Output) -> int:
    names = list(dict.fromkeys(args.names))
    with open_admin(args) as admin:
        results = admin.delete_topics(names)
    report: list[dict[str, Any]] = []
    code = EXIT_OK
    for name in names:
        res = results[name]
        missing = not res.ok and getattr(res.error, "name", "") in MISSING
        if res.ok or (missing and args.if_exists):
            report.append({"topic": name, "status": "missing" if missing else "deleted", "error": None})
            continue
        message, failed = _failure(f"topic {name!r}", res.error)
        code = code or failed
        report.append({"topic": name, "status": "failed", "error": message})
    if out.as_json:
        out.json(report)
    else:
        for r in report:
            if r["status"] == "failed":
                out.note(f"kafka-core topics delete: error: {r['error']}", style=None)
            else:
                out.line(f"topic {r['topic']} {'deleted' if r['status'] == 'deleted' else 'does not exist'}")
    return code


def describe_topics(args: argparse.Namespace, out: Output) -> int:
    from kafka_core.admin import ConfigResource

    names = list(dict.fromkeys(args.names))
    with open_admin(args) as admin:
        described = admin.describe_topics(names)
        tps = [
            (name, p.partition)
            for name in names
            if described[name].ok
            for p in described[name].value.partitions
        ]
        earliest = admin.list_offsets(dict.fromkeys(tps, "earliest")) if tps else {}
        latest = admin.list_offsets(dict.fromkeys(tps, "latest")) if tps else {}
        found = [n for n in names if described[n].ok]
        configs = (
            admin.describe_configs([ConfigResource.topic(n) for n in found]) if args.configs and found else {}
        )

    def offset(results: dict[Any, Any], tp: tuple[str, int]) -> int | None:
        from kafka_core import TopicPartition

        res = results.get(TopicPartition(*tp))
        return res.value.offset if res is not None and res.ok and res.value is not None else None

    code = EXIT_OK
    report: list[dict[str, Any]] = []
    for name in names:
        res = described[name]
        if not res.ok:
            message, failed = _failure(f"topic {name!r}", res.error)
            code = code or failed
            report.append({"name": name, "error": message})
            continue
        desc = res.value
        entry: dict[str, Any] = {
            "name": name,
            "topic_id": str(desc.topic_id) if desc.topic_id else None,
            "internal": desc.internal,
            "partitions": [
                {
                    "partition": p.partition,
                    "leader": p.leader,
                    "replicas": list(p.replicas),
                    "isr": list(p.isr),
                    "offline": list(p.offline),
                    "earliest": offset(earliest, (name, p.partition)),
                    "latest": offset(latest, (name, p.partition)),
                }
                for p in sorted(desc.partitions, key=lambda p: p.partition)
            ],
        }
        if args.configs:
            cres = configs.get(ConfigResource.topic(name))
            if cres is not None and cres.ok:
                entry["configs"] = {k: e.value for k, e in sorted(cres.value.items()) if not e.is_default}
        report.append(entry)
    if out.as_json:
        out.json(report)
        return code
    for entry in report:
        if "error" in entry:
            out.note(f"kafka-core topics describe: error: {entry['error']}", style=None)
            continue
        out.table(
            ["partition", "leader", "replicas", "isr", "offline", "earliest", "latest"],
            [
                [
                    p["partition"],
                    p["leader"],
                    ",".join(map(str, p["replicas"])),
                    ",".join(map(str, p["isr"])),
                    ",".join(map(str, p["offline"])) or None,
                    p["earliest"],
                    p["latest"],
                ]
                for p in entry["partitions"]
            ],
            title=f"{entry['name']} ({len(entry['partitions'])} partitions, id {entry['topic_id'] or '-'})",
            numeric=["partition", "leader", "earliest", "latest"],
        )
        if entry.get("configs"):
            out.table(["config", "value"], sorted(entry["configs"].items()), title=f"{entry['name']} configs")
    return code
