"""``kafka-core bench``, run here (:mod:`kafka_core.devtools.commands`): a quick produce-then-consume
throughput run (as kafka-producer-perf-test). Its arguments are the CLI's (``kafka_core.cli.dev``).

It writes ``--records`` records of ``--size`` bytes into a fresh topic with the public
``KafkaProducer``, reads them all back with ``KafkaConsumer``, and prints records/s and MB/s of
each phase; the topic is deleted afterwards. A smoke test of a cluster and the client, not the
project's benchmark (``bench/`` measures against the peers).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import time
import uuid
from typing import Any

from kafka_core.cli.connect import bootstrap_servers, client_options, unreachable
from kafka_core.cli.output import EXIT_FAILED, EXIT_OK, CliError, Output, one_line
from kafka_core.errors import KafkaConnectionError, KafkaTimeoutError

__all__ = ["run"]


def _phase(name: str, records: int, size: int, seconds: float) -> dict[str, Any]:
    seconds = max(seconds, 1e-9)
    mb = records * size / 1e6
    return {
        "phase": name,
        "records": records,
        "mb": round(mb, 3),
        "seconds": round(seconds, 3),
        "records_per_s": round(records / seconds),
        "mb_per_s": round(mb / seconds, 2),
    }


def run(args: argparse.Namespace, out: Output) -> int:
    from kafka_core import KafkaClient, NewTopic

    servers = bootstrap_servers(args)
    options = client_options(args)
    topic = f"kafka-core-bench-{uuid.uuid4().hex[:10]}"
    admin = KafkaClient(servers, **{**options, "api_timeout_ms": float(args.connect_timeout) * 1000})
    try:
        try:
            admin.create_topics([NewTopic(topic, args.partitions, -1)], ignore_existing=False)
        except (KafkaConnectionError, KafkaTimeoutError) as exc:
            raise unreachable(servers, exc) from None
        try:
            phases = [
                _produce(args, out, servers, options, topic),
                _consume(args, out, servers, options, topic),
            ]
        finally:
            with contextlib.suppress(Exception):
                admin.delete_topics([topic])
    finally:
        admin.close()
    if out.as_json:
        out.json(
            {
                "records": args.records,
                "size": args.size,
                "partitions": args.partitions,
                "compression": args.compression,
                "phases": phases,
            }
        )
    else:
        out.table(
            ["phase", "records", "MB", "seconds", "records/s", "MB/s"],
            [
                [
                    p["phase"],
                    f"{p['records']:,}",
                    f"{p['mb']:,.1f}",
                    f"{p['seconds']:.2f}",
                    f"{p['records_per_s']:,}",
                    f"{p['mb_per_s']:,.2f}",
                ]
                for p in phases
            ],
            title=f"{args.records:,} records x {args.size} B, {args.partitions} partitions, "
            f"compression {args.compression}, acks {args.acks}",
            numeric=["records", "MB", "seconds", "records/s", "MB/s"],
        )
    return EXIT_OK


def _progress(out: Output, label: str, total: int) -> Any:
    if not out.interactive:
        return None
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(
        TextColumn(f"[bold]{label}[/]"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=out.err,
    )


def _produce(
    args: argparse.Namespace, out: Output, servers: str, options: dict[str, Any], topic: str
) -> dict[str, Any]:
    from kafka_core import KafkaProducer

    value = os.urandom(args.size)
    step = max(args.records // 100, 1)
    progress = _progress(out, "producing", args.records)
    with KafkaProducer(
        servers,
        compression=args.compression,
        acks=args.acks,
        max_block_ms=float(args.connect_timeout) * 1000,
        **options,
    ) as producer:
        send = producer.send
        with progress if progress is not None else contextlib.nullcontext():
            task = progress.add_task("produce", total=args.records) if progress is not None else None
            started = time.perf_counter()
            sample = []  # a record's future from every 1% (a failed batch fails all its records)
            for i in range(args.records):
                future = send(topic, value)
                if i % step == 0 or i == args.records - 1:
                    sample.append(future)
                    if progress is not None:
                        progress.update(task, completed=i)
            try:
                producer.flush(args.timeout)
            except KafkaTimeoutError as exc:
                raise CliError(
                    f"producing did not finish within {args.timeout:g}s: {one_line(exc)}", EXIT_FAILED
                ) from None
            elapsed = time.perf_counter() - started
            if progress is not None:
                progress.update(task, completed=args.records)
        errors = [e for e in (f.exception() for f in sample) if e is not None]
        if errors:
            raise CliError(f"records were not delivered: {one_line(errors[0])}", EXIT_FAILED)
    return _phase("produce", args.records, args.size, elapsed)


def _consume(
    args: argparse.Namespace, out: Output, servers: str, options: dict[str, Any], topic: str
) -> dict[str, Any]:
    from kafka_core import KafkaConsumer

    partitions = {topic: list(range(args.partitions))}
    progress = _progress(out, "consuming", args.records)
    consumer = KafkaConsumer(
        bootstrap_servers=servers,
        partitions=partitions,
        group_id=None,
        auto_offset_reset="earliest",
        **options,
    )
    got = 0
    try:
        with progress if progress is not None else contextlib.nullcontext():
            task = progress.add_task("consume", total=args.records) if progress is not None else None
            started = time.perf_counter()
            deadline = started + args.timeout
            while got < args.records:
                if time.perf_counter() > deadline:
                    raise CliError(
                        f"only {got:,} of {args.records:,} records read back within {args.timeout:g}s",
                        EXIT_FAILED,
                    )
                batch = consumer.poll(timeout_ms=500)
                got += len(batch)
                if progress is not None:
                    progress.update(task, completed=got)
            elapsed = time.perf_counter() - started
    finally:
        consumer.close(5)
    return _phase("consume", got, args.size, elapsed)
