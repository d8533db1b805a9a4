"""Groups and metadata over wide topics (issue 40), the part of the wide bench that is not
produce/consume: kept in results.json's ``wide`` section as ``groups``.

- Groups: 3 kafka_core members, each in its own process, over one topic of 3,000 partitions
  holding a record each, no commits (a member given a partition reads it from the start, so
  "fetched by its owner" is seen as that record arriving): the time from the three's start until
  every partition has been fetched by the member that owns it, then one member closes (leaving
  the group) and the time until each of its partitions is fetched by another. Classic
  (cooperative-sticky) and KIP-848 (``group_protocol="consumer"``).
- A regex subscription matching 500 one-partition topics (a record each): start to all fetched.
- The assignors' own time (in process) for 3 members over 10,000 partitions.
- Metadata: a Metadata response of 10,000 partitions (one topic; 500 topics of 20) decoded,
  parsed, taken into the cache and every partition's leader looked up, in process: all of it runs
  on the client's event loop, so its total is the loop's stall.

    python -m bench.bench_wide_groups [--quick] [--bootstrap HOST:PORT]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import queue
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.bytecode import child_env, warm_bytecode
from bench.common import (
    REPO_DIR,
    confluent_producer,
    create_topic,
    delete_topic,
    git_revision,
    our_export,
)

MODULE = "bench.bench_wide_groups"
GROUP_PARTITIONS = 3_000
QUICK_GROUP_PARTITIONS = 30
ASSIGNOR_PARTITIONS = 10_000
METADATA_PARTITIONS = 10_000
REGEX_TOPICS = 500
QUICK_REGEX_TOPICS = 5
MEMBERS = 3
WAIT_S = 180.0  # a join or a take-over longer than this is reported as an error


# --------------------------------------------------------------------------- in process


def _timed(fn: Callable[[], Any], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def assignor_times(partitions: int = ASSIGNOR_PARTITIONS, rounds: int = 3) -> dict[str, dict[str, float]]:
    """Seconds per assignment for 3 members over one topic: fresh, steady, one leaving, one joining."""
    from kafka_core.consumer.group.assignors import ASSIGNORS, MemberInfo
    from kafka_core.consumer.group.classic_meta import Subscription

    def members(names: Sequence[str], owned: dict[str, dict[str, list[int]]]) -> dict[str, MemberInfo]:
        return {
            m: MemberInfo(m, Subscription(topics=["t"], owned_partitions=owned.get(m, {}), generation_id=1))
            for m in names
        }

    counts = {"t": partitions}
    out: dict[str, dict[str, float]] = {}
    for name, cls in ASSIGNORS.items():
        assignor = cls()
        three, two = ["a", "b", "c"], ["a", "b"]
        owned3 = {m: a.partitions for m, a in assignor.assign(counts, members(three, {})).items()}
        owned2 = {m: a.partitions for m, a in assignor.assign(counts, members(two, {})).items()}
        cases = {
            "fresh": members(three, {}),
            "steady": members(three, owned3),
            "leave": members(two, {m: owned3[m] for m in two}),
            "join": members(three, owned2),
        }
        timed: dict[str, float] = {}
        for case, ms in cases.items():
            timed[case] = _timed(lambda ms=ms, a=assignor: a.assign(counts, ms), rounds)  # type: ignore[misc]
        out[name] = timed
    return out


def _metadata_body(topics: dict[str, int]) -> Any:
    from kafka_core.protocol.messages import MetadataResponse

    part = MetadataResponse.MetadataResponsePartition
    return MetadataResponse(
        brokers=[MetadataResponse.MetadataResponseBroker(node_id=1, host="127.0.0.1", port=9092)],
        cluster_id="bench",
        controller_id=1,
        topics=[
            MetadataResponse.MetadataResponseTopic(
                name=name,
                topic_id=uuid.uuid4(),
                partitions=[
                    part(partition_index=p, leader_id=1, leader_epoch=3, replica_nodes=[1], isr_nodes=[1])
                    for p in range(count)
                ],
            )
            for name, count in topics.items()
        ],
    )


def metadata_times(partitions: int = METADATA_PARTITIONS, rounds: int = 5) -> list[dict[str, Any]]:
    """Milliseconds to decode, parse, cache and route a Metadata answer of ``partitions``."""
    from kafka_core.client.metadata_cache import MetadataCache, parse_metadata
    from kafka_core.protocol.messages import MetadataResponse

    version = 12
    shapes = {
        f"1 topic of {partitions:,} partitions": {"wide": partitions},
        f"{partitions // 20:,} topics of 20 partitions": {f"t{i:04d}": 20 for i in range(partitions // 20)},
    }
    out = []
    for shape, topics in shapes.items():
        encoded = _metadata_body(topics).encode(version)
        steps: dict[str, list[float]] = {"decode": [], "parse": [], "cache": [], "route": []}
        for _ in range(rounds):
            cache = MetadataCache(300.0)
            t0 = time.perf_counter()
            resp = MetadataResponse.decode(encoded, version)
            t1 = time.perf_counter()
            answer = parse_metadata(resp)
            t2 = time.perf_counter()
            cache.update(answer, full=False)
            cache.update(answer, full=False)  # a refresh: compared with what was known
            t3 = time.perf_counter()
            leaders = 0
            for name, count in topics.items():
                for p in range(count):
                    topic = cache.fresh_topic(name)
                    found = topic.partition(p) if topic is not None else None
                    leaders += found is not None and found.leader >= 0
            t4 = time.perf_counter()
            if leaders != sum(topics.values()):
                raise RuntimeError(f"{shape}: {leaders} leaders routed")
            for key, value in zip(steps, (t1 - t0, t2 - t1, t3 - t2, t4 - t3), strict=True):
                steps[key].append(value * 1e3)
        med = {f"{k}_ms": statistics.median(v) for k, v in steps.items()}
        out.append({"shape": shape, **med, "total_ms": sum(med.values()), "bytes": len(encoded)})
    return out


def live_metadata_stall(bootstrap: str, topic: str, rounds: int = 5) -> dict[str, float]:
    """A kafka_core client asks the broker for ``topic``'s metadata ``rounds`` times while a task
    ticks every millisecond on the same loop: the longest gap between ticks is the loop's stall
    (on a loaded machine the OS's scheduling adds to it), beside the median request."""
    import asyncio

    async def main() -> dict[str, float]:
        from kafka_core.aio import KafkaClient

        loop = asyncio.get_running_loop()
        client = KafkaClient(bootstrap_servers=bootstrap)
        try:
            await client.metadata([topic])  # connected, versions known
            gaps: list[float] = []
            done = asyncio.Event()

            async def tick() -> None:
                last = loop.time()
                while not done.is_set():
                    await asyncio.sleep(0.001)
                    now = loop.time()
                    gaps.append(now - last)
                    last = now

            ticker = loop.create_task(tick())
            await asyncio.sleep(0.1)
            quiet = max(gaps, default=0.0)  # the ticker's own gaps with nothing else to do
            gaps.clear()
            took = []
            for _ in range(rounds):
                start = time.perf_counter()
                meta = await client.metadata([topic])
                took.append(time.perf_counter() - start)
                found = meta.topic(topic)
                if found is None or len(found.partitions) == 0:
                    raise RuntimeError(f"metadata of {topic} came back empty")
            done.set()
            await ticker
            return {
                "request_ms": statistics.median(took) * 1e3,
                "stall_ms": max(gaps) * 1e3,
                "quiet_gap_ms": quiet * 1e3,
            }
        finally:
            await client.close()

    return asyncio.run(main())


# --------------------------------------------------------------------------- members


def _member(args: argparse.Namespace) -> int:
    """A group member: prints JSON lines (start, assignment, fetched partitions, leaving, left)
    and closes when told ``leave`` on stdin."""
    leave = threading.Event()

    def listen() -> None:
        for line in sys.stdin:
            if line.strip() == "leave":
                leave.set()
                return

    def emit(**event: Any) -> None:
        sys.stdout.write(json.dumps({"t": time.time(), **event}) + "\n")
        sys.stdout.flush()

    threading.Thread(target=listen, daemon=True).start()
    options: dict[str, Any] = {"group_protocol": args.protocol}
    if args.protocol == "classic":
        options["assignors"] = ["cooperative-sticky"]
    what: dict[str, Any] = {"pattern": args.pattern} if args.pattern else {"topics": [args.topic]}
    emit(ev="start")
    consumer = our_export("KafkaConsumer")(
        bootstrap_servers=args.bootstrap,
        group_id=args.group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        **what,
        **options,
    )
    assigned: frozenset[tuple[str, int]] = frozenset()
    seen: set[tuple[str, int]] = set()
    try:
        while not leave.is_set():
            got = consumer.poll(200, 10_000)
            now_assigned = frozenset((tp.topic, tp.partition) for tp in consumer.assignment())
            if now_assigned != assigned:
                assigned = now_assigned
                seen &= assigned
                emit(ev="assignment", tps=sorted(assigned))
            fresh = {(r.topic, r.partition) for r in got} - seen
            if fresh:
                seen |= fresh
                emit(ev="fetched", tps=sorted(fresh))
        emit(ev="leaving", tps=sorted(assigned))
    finally:
        consumer.close()
    emit(ev="left")
    return 0


class Members:
    """Member processes and what they said, in the order it came."""

    def __init__(
        self, bootstrap: str, group: str, protocol: str, *, topic: str = "", pattern: str = ""
    ) -> None:
        self.events: queue.Queue[tuple[int, dict[str, Any]]] = queue.Queue()
        self.procs: list[subprocess.Popen[str]] = []
        self.args = ["--bootstrap", bootstrap, "--group", group, "--protocol", protocol]
        self.args += ["--pattern", pattern] if pattern else ["--topic", topic]
        # per member: partition -> time fetched under its current assignment; its assignment
        self.fetched: list[dict[tuple[str, int], float]] = []
        self.assigned: list[set[tuple[str, int]]] = []
        self.started: list[float] = []
        self.assignments = 0
        self.left: dict[int, float] = {}

    def start(self, count: int) -> None:
        warm_bytecode()
        for i in range(count):
            proc = subprocess.Popen(
                [sys.executable, "-m", MODULE, "--member", *self.args],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
                cwd=REPO_DIR,
                env=child_env(),
            )
            self.procs.append(proc)
            self.fetched.append({})
            self.assigned.append(set())
            threading.Thread(target=self._read, args=(i, proc), daemon=True).start()

    def _read(self, index: int, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            with contextlib.suppress(ValueError):
                self.events.put((index, json.loads(line)))

    def pump(self, seconds: float) -> None:
        """Take in what the members said for up to ``seconds``."""
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            try:
                index, ev = self.events.get(timeout=left)
            except queue.Empty:
                return
            kind = ev["ev"]
            if kind == "start":
                self.started.append(ev["t"])
            elif kind == "assignment":
                self.assigned[index] = {(tp[0], tp[1]) for tp in ev["tps"]}
                self.fetched[index] = {
                    tp: t for tp, t in self.fetched[index].items() if tp in self.assigned[index]
                }
                self.assignments += 1
            elif kind == "fetched":
                for tp in ev["tps"]:
                    self.fetched[index].setdefault((tp[0], tp[1]), ev["t"])
            elif kind == "leaving":
                self.left[index] = ev["t"]

    def owners_fetched(self, wanted: set[tuple[str, int]], among: Sequence[int]) -> float | None:
        """The last time one of ``wanted`` was fetched by its owner among ``among``; None while
        some partition is not owned or not fetched yet."""
        last = 0.0
        for tp in wanted:
            times = [self.fetched[i][tp] for i in among if tp in self.assigned[i] and tp in self.fetched[i]]
            if not times:
                return None
            last = max(last, min(times))
        return last

    def wait_all_fetched(self, wanted: set[tuple[str, int]], among: Sequence[int], timeout: float) -> float:
        """Pump until every partition of ``wanted`` is fetched by its owner, the assignment then
        still for 2 s; the time of the last such fetch."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.pump(0.5)
            done = self.owners_fetched(wanted, among)
            if done is not None:
                changes = self.assignments
                self.pump(2.0)
                if self.assignments == changes:
                    return done
        owned = set().union(*(self.assigned[i] for i in among)) & wanted
        fetched = {tp for i in among for tp in self.fetched[i] if tp in self.assigned[i]} & wanted
        raise TimeoutError(
            f"{len(fetched)} of {len(wanted)} partitions fetched by their owners within {timeout:.0f} s "
            f"({len(owned)} assigned, {self.assignments} assignments seen)"
        )

    def tell_leave(self, index: int) -> None:
        proc = self.procs[index]
        assert proc.stdin is not None
        proc.stdin.write("leave\n")
        proc.stdin.flush()

    def close(self) -> None:
        for proc in self.procs:
            with contextlib.suppress(OSError, ValueError):
                assert proc.stdin is not None
                proc.stdin.write("leave\n")
                proc.stdin.close()
        for proc in self.procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _fill(bootstrap: str, topics: dict[str, int]) -> None:
    """One record on every partition of ``topics`` (confluent-kafka, acknowledged)."""
    producer, errors = confluent_producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "log_level": 3}
    )
    producer.list_topics(timeout=60)  # every partition known before writing to it
    for topic, count in topics.items():
        for p in range(count):
            producer.produce(topic, b"x" * 100, partition=p)
    left = producer.flush(WAIT_S)
    if left or errors:
        raise RuntimeError(
            f"records for the group bench: {left} undelivered, {len(errors)} failed: {errors[:3]}"
        )


def group_times(bootstrap: str, protocol: str, partitions: int) -> dict[str, Any]:
    """Join of 3 members to every partition fetched, then one leaving to its partitions taken over."""
    topic = f"bench-wide-group-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, partitions, timeout=120.0)
    members = Members(bootstrap, f"bench-wide-{protocol}-{uuid.uuid4().hex[:6]}", protocol, topic=topic)
    try:
        _fill(bootstrap, {topic: partitions})
        stall = live_metadata_stall(bootstrap, topic)
        wanted = {(topic, p) for p in range(partitions)}
        members.start(MEMBERS)
        done = members.wait_all_fetched(wanted, range(MEMBERS), WAIT_S)
        join_s = done - min(members.started)
        join_changes = members.assignments
        leaver = MEMBERS - 1
        theirs = set(members.assigned[leaver])
        members.tell_leave(leaver)
        while leaver not in members.left:
            members.pump(0.5)
        taken = members.wait_all_fetched(theirs, range(leaver), WAIT_S)
        return {
            "join_s": join_s,
            "leave_s": taken - members.left[leaver],
            "rebalances": f"{join_changes} + {members.assignments - join_changes}",
            "left_partitions": len(theirs),
            "metadata": stall,
        }
    finally:
        members.close()
        delete_topic(bootstrap, topic)


def regex_times(bootstrap: str, protocol: str, topics: int) -> dict[str, Any]:
    """One member with a regex matching ``topics`` one-partition topics: start to all fetched."""
    from confluent_kafka.admin import AdminClient, NewTopic

    prefix = f"bench-wide-rx-{uuid.uuid4().hex[:6]}"
    names = [f"{prefix}-{i:04d}" for i in range(topics)]
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    for future in admin.create_topics([NewTopic(n, 1, 1) for n in names]).values():
        future.result(120)
    members = Members(bootstrap, f"{prefix}-{protocol}", protocol, pattern=f"{prefix}-.*")
    try:
        _fill(bootstrap, dict.fromkeys(names, 1))
        members.start(1)
        done = members.wait_all_fetched({(n, 0) for n in names}, [0], WAIT_S)
        return {"all_fetched_s": done - min(members.started)}
    finally:
        members.close()
        with contextlib.suppress(Exception):
            for future in admin.delete_topics(names).values():
                future.result(60)


def run_groups(bootstrap: str, *, quick: bool = False, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Everything above; a part that fails is an ``error`` in its place, the others still run."""
    partitions = QUICK_GROUP_PARTITIONS if quick else GROUP_PARTITIONS
    regex = QUICK_REGEX_TOPICS if quick else REGEX_TOPICS
    out: dict[str, Any] = {
        "date": f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC",
        "load": ", ".join(f"{x:.2f}" for x in os.getloadavg()),
        "revision": git_revision(),
        "partitions": partitions,
        "assignor_partitions": ASSIGNOR_PARTITIONS // (10 if quick else 1),
        "regex_topics": regex,
    }
    log(f"  wide groups: assignors at {out['assignor_partitions']:,} partitions")
    out["assignors"] = assignor_times(out["assignor_partitions"], rounds=1 if quick else 3)
    log(f"  wide groups: metadata of {out['assignor_partitions']:,} partitions")
    out["metadata"] = metadata_times(out["assignor_partitions"], rounds=1 if quick else 5)
    out["members"] = {}
    out["regex"] = {}
    for protocol in ("classic", "consumer"):
        log(f"  wide groups: {MEMBERS} members, {protocol} protocol, {partitions:,} partitions")
        try:
            out["members"][protocol] = group_times(bootstrap, protocol, partitions)
        except Exception as exc:
            out["members"][protocol] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
        log(f"    {out['members'][protocol]}")
        log(f"  wide groups: regex over {regex} topics, {protocol} protocol")
        try:
            out["regex"][protocol] = regex_times(bootstrap, protocol, regex)
        except Exception as exc:
            out["regex"][protocol] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
        log(f"    {out['regex'][protocol]}")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--member", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--group", help=argparse.SUPPRESS)
    parser.add_argument("--protocol", default="classic", help=argparse.SUPPRESS)
    parser.add_argument("--topic", help=argparse.SUPPRESS)
    parser.add_argument("--pattern", help=argparse.SUPPRESS)
    parser.add_argument("--bootstrap", help="a broker; default: one Apache Kafka node")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", type=Path, help="also write the figures (JSON) here")
    args = parser.parse_args(argv)
    if args.member:
        return _member(args)
    from bench.bench_wide import log_line, wide_broker

    with contextlib.ExitStack() as stack:
        bootstrap = args.bootstrap or stack.enter_context(wide_broker(GROUP_PARTITIONS))[0]
        figures = run_groups(bootstrap, quick=args.quick, log=log_line)
    text = json.dumps(figures, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
