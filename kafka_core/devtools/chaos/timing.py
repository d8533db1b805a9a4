"""Which requests a SIGKILL of one Kafka node leaves waiting on the *surviving* nodes, and why.

A time-boxed experiment (issue 21), not a test: a three-node ``KafkaCluster`` with every node
behind a :class:`~kafka_core.devtools.chaos.proxy.FaultProxy` that times every request (any API, by
connection and correlation id), the chaos :class:`~kafka_core.devtools.chaos.workload.Workload`
(idempotent acks=all producer, committing classic-group consumer), then a SIGKILL of a node that
is a follower, not the leader, of the group's ``__consumer_offsets`` partition (so the group
coordinator survives). Prints, and writes as JSON, every request that waited ``--slow`` seconds
or more on a surviving node: API, connection, sent and answered relative to the SIGKILL, what it
queued behind on its connection, and the other APIs that connection carried; plus the survivors'
ISR changes from their server logs.

    python -m kafka_core.devtools.chaos.timing --out /tmp/timing.json [--watch 30] [--slow 1]
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from kafka_core.devtools.brokers import KafkaCluster
from kafka_core.devtools.chaos.capture import RequestLog, RequestTiming
from kafka_core.devtools.chaos.proxy import FaultProxy
from kafka_core.devtools.chaos.workload import Workload
from kafka_core.errors import KafkaError
from kafka_core.protocol import ApiKey, ErrorCode, decode_response
from kafka_core.sync_client import KafkaClient

PARTITIONS = 3


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode`` (UTF-16 code units), as Kafka picks a group's offsets partition."""
    h = 0
    for unit in text.encode("utf-16-be").hex(" ", 2).split():
        h = (31 * h + int(unit, 16)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def offsets_partition(group: str, partitions: int) -> int:
    h = java_string_hash(group)
    return (abs(h) if h != -(1 << 31) else 0) % partitions  # Kafka's Utils.abs


def api_name(key: int) -> str:
    try:
        return ApiKey(key).name
    except ValueError:
        return str(key)


def wait_healthy(bootstrap: str, topics: list[str], timeout: float = 120.0) -> None:
    """Every partition of ``topics`` led and with three replicas in sync."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with KafkaClient(bootstrap) as client:
                meta = client.metadata(topics, allow_auto_topic_creation=False)
            parts = [p for t in topics if (m := meta.topic(t)) is not None for p in m.partitions]
            if parts and all(p.leader >= 0 and len(p.isr) == 3 for p in parts):
                return
        except Exception:  # asked again until the deadline
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"{topics} not fully in sync within {timeout:.0f}s")
        time.sleep(0.5)


def resume_per_partition(wl: Workload, since: float, watch: float) -> dict[str, dict[int, float]]:
    """Per partition, seconds from ``since`` to its first acknowledgement and its first delivery
    beyond everything acknowledged or delivered then (as the chaos scenarios time a resume),
    watched for ``watch`` seconds."""
    base = {
        p: max(e["acked_max_offset"], e.get("delivered_max_offset", -1))
        for p, e in wl.ledger.partition_progress().items()
    }
    acked0 = {p: e["acked"] for p, e in wl.ledger.partition_progress().items()}
    ack: dict[int, float] = {}
    got: dict[int, float] = {}
    while (now := time.monotonic()) < since + watch:
        for p, e in wl.ledger.partition_progress().items():
            if p not in ack and e["acked"] > acked0.get(p, 0):
                ack[p] = round(now - since, 3)
            if p not in got and e.get("delivered_max_offset", -1) > base.get(p, -1):
                got[p] = round(now - since, 3)
        time.sleep(0.05)
    return {"ack": dict(sorted(ack.items())), "delivery": dict(sorted(got.items()))}


def describe(
    node: int, log: RequestLog, t: RequestTiming, killed_at: float, apis: dict[int, set[str]]
) -> dict[str, Any]:
    def rel(x: float | None) -> float | None:
        return None if x is None else round(x - killed_at, 3)

    return {
        "node": node,
        "conn": t.conn,
        "api": api_name(t.api_key),
        "version": t.api_version,
        "correlation_id": t.correlation_id,
        "sent_s": rel(t.sent_at),
        "answered_s": rel(t.answered_at),
        "closed_s": rel(t.closed_at),
        "waited_s": round(t.waited(), 3),
        "errors": answer_errors(t),
        "queued_behind": [
            f"{api_name(o.api_key)}#{o.correlation_id} (sent {rel(o.sent_at)}, "
            f"{'answered' if o.answered_at else 'closed' if o.closed_at else 'open'} "
            f"{rel(o.answered_at or o.closed_at)})"
            for o in log.before_on_conn(t)
        ],
        "conn_apis": sorted(apis.get(t.conn, set())),
    }


def answer_errors(t: RequestTiming) -> list[str]:
    """The error names in a kept Heartbeat, OffsetCommit or Produce answer (empty: none kept)."""
    if t.answer is None:
        return []
    try:
        body = decode_response(t.api_key, t.api_version, t.answer).body
    except (KafkaError, ValueError) as exc:
        return [f"undecodable: {exc}"]
    if t.api_key == ApiKey.HEARTBEAT:
        codes = [body.error_code]
    elif t.api_key == ApiKey.PRODUCE:
        codes = [p.error_code for topic in body.responses for p in topic.partition_responses]
    else:
        codes = [p.error_code for topic in body.topics for p in topic.partitions]
    return sorted({error_name(c) for c in codes})


def error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


def isr_lines(cluster: KafkaCluster, victim: int) -> list[str]:
    pattern = re.compile(r"ISR updated|fencing broker|fenced broker|session timed out|shrink", re.IGNORECASE)
    out = []
    for n in cluster.nodes:
        if n.node_id == victim:
            continue
        out += [
            f"node {n.node_id}: {line}" for line in n.log_tail(400_000).splitlines() if pattern.search(line)
        ]
    return out[-80:]


def run(watch: float, slow: float, out: Path | None, victim_arg: int | None, rate: int) -> dict[str, Any]:
    cluster = KafkaCluster(3)
    proxies = {n.node_id: FaultProxy(cluster.host, n.port, timing=True) for n in cluster.nodes}
    for proxy in proxies.values():  # the coordinator's answers are kept, for their error codes
        proxy.requests = RequestLog(keep={ApiKey.HEARTBEAT, ApiKey.OFFSET_COMMIT, ApiKey.PRODUCE})
    try:
        for node_id, proxy in proxies.items():
            proxy.start()
            cluster.advertise_port(node_id, proxy.port)
        cluster.start()
        bootstrap = ",".join(p.address for p in proxies.values())
        topic = f"timing-{uuid.uuid4().hex[:8]}"
        cluster.create_topic(topic, PARTITIONS)
        wait_healthy(cluster.bootstrap, [topic])
        wl = Workload(bootstrap, topic, PARTITIONS, rate=rate)
        group = wl.consumer_options["group_id"]
        wl.start()
        began = time.monotonic()
        print("first ack / delivery:", wl.wait_progress(began, 120), flush=True)
        wait_healthy(cluster.bootstrap, [topic, "__consumer_offsets"])
        time.sleep(5)
        with KafkaClient(cluster.bootstrap) as client:
            coordinator = int(client.find_coordinator(group).node_id)
            meta = client.metadata([topic, "__consumer_offsets"], allow_auto_topic_creation=False)
        offsets_meta = meta.topic("__consumer_offsets")
        assert offsets_meta is not None
        op = offsets_partition(group, len(offsets_meta.partitions))
        op_meta = next(p for p in offsets_meta.partitions if p.partition == op)
        topic_meta = meta.topic(topic)
        assert topic_meta is not None
        leaders = {p.partition: p.leader for p in topic_meta.partitions}
        # The coordinator leads the group's offsets partition; every other replica is a follower.
        followers = [r for r in op_meta.replicas if r not in (op_meta.leader, coordinator)]
        victim = victim_arg if victim_arg is not None else followers[0]
        print(
            f"group {group}: coordinator {coordinator}, __consumer_offsets-{op} leader {op_meta.leader} "
            f"isr {list(op_meta.isr)}; {topic} leaders {leaders}; SIGKILL node {victim}",
            flush=True,
        )
        killed_at = time.time()
        killed = time.monotonic()
        cluster.kill_node(victim)
        resumed = resume_per_partition(wl, killed, watch)
        lines = isr_lines(cluster, victim)
        ledger = wl.ledger
        wl.close()
        slow_rows: list[dict[str, Any]] = []
        for node, proxy in proxies.items():
            log = proxy.requests
            if node == victim or log is None:
                continue
            apis: dict[int, set[str]] = {}
            for t in log.requests:
                apis.setdefault(t.conn, set()).add(api_name(t.api_key))
            slow_rows.extend(
                describe(node, log, t, killed_at, apis)
                for t in log.slow(slow)
                if killed_at - 5 <= t.sent_at <= killed_at + watch
            )
        slow_rows.sort(key=lambda r: r["sent_s"])
        result = {
            "group": group,
            "coordinator": coordinator,
            "offsets_partition": op,
            "offsets_leader": op_meta.leader,
            "topic_leaders": leaders,
            "victim": victim,
            "resume_s": resumed,
            "consumer_errors": [str(e) for e in getattr(ledger, "errors", [])][:20],
            "slow_requests": slow_rows,
            "survivor_isr_log": lines,
        }
        if out is not None:
            out.write_text(json.dumps(result, indent=1, default=str))
        return result
    finally:
        cluster.close()
        for proxy in proxies.values():
            proxy.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m kafka_core.devtools.chaos.timing", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--watch", type=float, default=30.0, help="seconds watched after the SIGKILL")
    parser.add_argument("--slow", type=float, default=1.0, help="report requests waiting this long")
    parser.add_argument("--victim", type=int, default=None, help="node to kill (default: a follower)")
    parser.add_argument("--rate", type=int, default=400)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--client-log", type=Path, default=None, help="kafka_core at DEBUG to this file")
    args = parser.parse_args(argv)
    if args.client_log is not None:
        logging.basicConfig(
            filename=args.client_log,
            level=logging.INFO,
            format="%(asctime)s.%(msecs)03d %(name)s %(levelname)s %(message)s",
            datefmt="%H:%M:%S",
        )
        logging.getLogger("kafka_core.consumer").setLevel(logging.DEBUG)
    result = run(args.watch, args.slow, args.out, args.victim, args.rate)
    print(f"resume per partition, s from the SIGKILL: {result['resume_s']}")
    for r in result["slow_requests"]:
        print(
            f"node {r['node']} conn {r['conn']:>3} {r['api']:<15} #{r['correlation_id']:<6} "
            f"sent {r['sent_s']:>7} waited {r['waited_s']:>6} {','.join(r['errors'])} "
            f"{'answered' if r['answered_s'] is not None else 'CLOSED' if r['closed_s'] is not None else 'OPEN'}"
            f"  behind {r['queued_behind']}  conn carries {r['conn_apis']}"
        )
    for line in result["survivor_isr_log"][-30:]:
        print(line[:240])
    return 0


if __name__ == "__main__":
    sys.exit(main())
