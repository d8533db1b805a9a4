"""``kafka-core share consume``: print records of a share group (KIP-932), acknowledging each one
once its line was written to stdout; and the share-group rows of ``kafka-core groups list``.

A record is accepted only after its whole line went out (``--release`` gives it back for
redelivery instead, ``--reject`` marks it unprocessable: both for trying a queue out). Records
fetched but not printed (``--max-messages`` reached, the reader gone, Ctrl-C) are released on
the way out, so another member gets them. ``--timeout`` is idle time once the member has its
partitions; exit codes as ``consume`` (5: --max-messages not reached within --timeout).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from kafka_core.cli.argtypes import positive_int, positive_seconds
from kafka_core.cli.connect import bootstrap_servers, client_options, open_admin, topic_partitions
from kafka_core.cli.consume import format_record
from kafka_core.cli.output import EXIT_OK, EXIT_TIMEOUT, EXIT_USAGE, CliError, Output, one_line, plural
from kafka_core.errors import KafkaConnectionError, KafkaError, KafkaUnsupportedVersionError

__all__ = ["add_parser", "describe_any", "describe_listed", "group_lag_total", "run"]

CLOSE_TIMEOUT = 5.0  # seconds to send the last acknowledgements and leave the group
JOIN_TIMEOUT = 60.0  # with --timeout: how long the member may take to get its partitions


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    share = sub.add_parser("share", parents=[common], help="share groups (queues, KIP-932): consume")
    ssub = share.add_subparsers(dest="action", metavar="ACTION", required=True)
    p = ssub.add_parser(
        "consume",
        parents=[common],
        help="print records of a topic as a member of a share group, accepting each as printed",
        description="Print records as a member of a share group (Apache Kafka 4.1+): the value "
        "per line (text) or one JSON object per line (with its delivery_count). Each record is "
        "accepted once printed (--release / --reject to give it back or refuse it instead).",
    )
    p.add_argument("-t", "--topic", required=True, help="topic to read (must exist)")
    p.add_argument("-g", "--group", required=True, help="the share group to join")
    ack = p.add_mutually_exclusive_group()
    ack.add_argument(
        "--release", action="store_true", help="release each printed record: delivered again (testing)"
    )
    ack.add_argument(
        "--reject", action="store_true", help="reject each printed record: never delivered again (testing)"
    )
    p.add_argument(
        "--from-beginning",
        action="store_true",
        help="set the group's share.auto.offset.reset to earliest first (partitions it has no state for)",
    )
    p.add_argument(
        "-c", "--max-messages", dest="count", type=positive_int, help="stop after this many records"
    )
    p.add_argument(
        "--timeout",
        type=positive_seconds,
        metavar="SECONDS",
        help="stop when no record arrived for this long, counted once the member has its partitions",
    )
    p.add_argument("--format", choices=("text", "json"), default="text", help="text (default) or json lines")
    p.add_argument("--print-key", action="store_true", help="text: print KEY<SEP>VALUE")
    p.add_argument("--print-headers", action="store_true", help="text: print k=v,k2=v2<SEP> first")
    p.add_argument(
        "-K", "--key-separator", default="\t", metavar="SEP", help="text: separator after key/headers (tab)"
    )
    p.set_defaults(run=run)


def _line(record: Any, args: argparse.Namespace) -> bytes:
    line = format_record(record, args)
    if args.format == "json":  # the share group's own field beside consume's
        data = json.loads(line)
        data["delivery_count"] = record.delivery_count
        line = json.dumps(data, ensure_ascii=False).encode()
    return line + b"\n"


def _write(data: bytes) -> None:
    out = sys.stdout.buffer
    out.write(data)
    out.flush()


def _prepare(args: argparse.Namespace) -> None:
    """Fail fast on a broker without share groups; set the group's start when asked."""
    with open_admin(args) as admin:
        admin.describe_share_groups([args.group])  # raises KafkaShareGroupsUnsupportedError
        if args.from_beginning:
            from kafka_core.admin import ConfigResource

            resource = ConfigResource.group(args.group)
            done = admin.incremental_alter_configs({resource: {"share.auto.offset.reset": "earliest"}})
            done[resource].result()


def run(args: argparse.Namespace, out: Output) -> int:
    from kafka_core import KafkaShareConsumer

    if out.as_json:
        args.format = "json"
    if not args.key_separator.encode():
        raise CliError("--key-separator must not be empty", EXIT_USAGE)
    topic_partitions(args, args.topic)  # a missing topic: exit 4
    _prepare(args)
    kind = "release" if args.release else "reject" if args.reject else "accept"
    consumer = KafkaShareConsumer(
        args.topic,
        bootstrap_servers=bootstrap_servers(args),
        group_id=args.group,
        share_acknowledgement_mode="explicit",
        **client_options(args),
    )
    printed = 0
    started = time.monotonic()
    joined: float | None = None
    last_record = started
    last_error = ""
    interrupted: KeyboardInterrupt | None = None
    try:
        while args.count is None or printed < args.count:
            wait_ms = 1_000.0
            if args.timeout is not None:
                now = time.monotonic()
                if joined is None and consumer.assignment():
                    joined = now
                left = (
                    JOIN_TIMEOUT - (now - started)
                    if joined is None
                    else args.timeout - (now - max(last_record, joined))
                )
                if left <= 0:
                    break
                wait_ms = min(wait_ms, left * 1000)
            try:
                batch = consumer.poll(wait_ms)
            except KafkaConnectionError as exc:  # retriable: the consumer resumes by itself
                if one_line(exc) != last_error:
                    last_error = one_line(exc)
                    out.note(f"kafka-core: warning: {last_error}", style="yellow")
                continue
            if batch:
                last_record = time.monotonic()
                joined = joined or last_record
            for record in batch:
                if args.count is not None and printed >= args.count:
                    break  # not printed: released at close, for another member
                _write(_line(record, args))
                consumer.acknowledge(record, kind)
                printed += 1
    except KeyboardInterrupt as exc:
        interrupted = exc
    except BrokenPipeError:  # the reader went away (| head): the record being written is released
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
    finally:
        _close(consumer)
    if interrupted is not None:  # Ctrl-C or SIGTERM: main turns it into the exit code
        raise type(interrupted)(f"interrupted after {plural(printed, 'record')}")
    if args.count is not None and printed < args.count:
        raise CliError(
            f"only {printed} of {args.count} records arrived within --timeout {args.timeout:g}s", EXIT_TIMEOUT
        )
    return EXIT_OK


def _close(consumer: Any) -> None:
    """Send the acknowledgements (unprinted records released) and leave the group; bounded."""
    try:
        consumer.close(CLOSE_TIMEOUT)
    except KafkaError as exc:
        print(f"kafka-core: warning: {one_line(exc)}", file=sys.stderr)


# -- groups list ------------------------------------------------------------------------------


def describe_listed(admin: Any, listed: list[Any]) -> dict[str, Any]:
    """``{group_id: Result}`` for ``groups list``: share groups by ShareGroupDescribe (the
    broker does not describe them as classic or consumer groups), the others as before."""
    share = [g.group_id for g in listed if g.group_type == "share"]
    others = [g.group_id for g in listed if g.group_type != "share"]
    described: dict[str, Any] = dict(admin.describe_groups(others)) if others else {}
    if share:
        described.update(admin.describe_share_groups(share))
    return described


def group_lag_total(admin: Any, listing: Any) -> int | None:
    """The group's total lag: records not acknowledged (a share group) or past the committed
    offsets (a consumer group); None when it cannot be read."""
    try:
        if listing.group_type == "share":
            return int(admin.share_group_lag(listing.group_id).total)
        if listing.group_type == "consumer" or listing.protocol_type in ("consumer", "", None):
            return int(admin.consumer_group_lag(listing.group_id).total)
    except KafkaError:
        return None
    return None


def describe_any(admin: Any, group_ids: list[str], *, timeout_ms: float | None = None) -> dict[str, Any]:
    """``describe_groups``, with the groups it does not know looked up as share groups (Kafka
    describes those by ShareGroupDescribe only); a broker without share groups: as before."""
    results = dict(admin.describe_groups(group_ids, timeout_ms=timeout_ms))
    missing = [g for g in group_ids if getattr(results[g].error, "name", "") == "GROUP_ID_NOT_FOUND"]
    if not missing:
        return results
    try:
        shared = admin.describe_share_groups(missing, timeout_ms=timeout_ms)
    except KafkaUnsupportedVersionError:
        return results
    results.update({g: res for g, res in shared.items() if res.ok})
    return results
