"""The wide bench's tables for RESULTS.md, from results.json's ``wide`` section (bench/bench_wide.py):
kafka_core beside confluent-kafka per partition count, the broker's CPU beside, and the group,
assignor and metadata figures (bench/bench_wide_groups.py) when they were measured."""

from __future__ import annotations

from typing import Any

from bench.common import fmt_rate, fmt_ratio, markdown_table

WIDE_TITLE = "Wide topics (issue 40)"
OURS = "kafka_core"
PEER = "confluent-kafka"

WIDE_TEXT = (
    "{records:,} keyed records of 100 B spread over every partition of a fresh topic, one Apache Kafka "
    "node. Each client produces once (linger 5 ms, acks=all, otherwise its defaults) in a child process, "
    "then reads the topic twice in another (static assignment of every partition, a fresh consumer per "
    "read, at most 10,000 records a poll, fetch wait 500 ms; from the consumer's construction to the last "
    "record, every record and value byte counted), then polls for {idle_s:g} s with nothing to read. CPU "
    "is the client process's user+system time (getrusage, every thread); the broker's is its JVM's /proc "
    "stat over the same phase. Ratios are kafka_core / confluent-kafka in the same run; figures are medians "
    "of {repeat} round(s) (of both reads for consume). Details: bench/bench_wide.py."
)

HEADERS = [
    "partitions",
    "produce kafka_core vs confluent-kafka",
    "consume kafka_core vs confluent-kafka",
    "CPU s per M, produce (confluent)",
    "CPU s per M, consume (confluent)",
    "idle CPU, share of a core (confluent)",
    "broker CPU: consume s per M, idle share (with confluent)",
    "first record s (confluent)",
]


def _num(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _share(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _pair(ours: str, theirs: str) -> str:
    return f"{ours} ({theirs})"


def _versus(ours: dict[str, Any], theirs: dict[str, Any], key: str) -> str:
    a, b = ours.get(key) or 0.0, theirs.get(key) or 0.0
    return f"{fmt_rate(a)} vs {fmt_rate(b)}/s ({fmt_ratio(a, b)})"


def wide_rows(section: dict[str, Any]) -> list[list[str]]:
    rows = []
    for count, clients in sorted(section.get("by_partitions", {}).items(), key=lambda kv: int(kv[0])):
        ours, theirs = clients.get(OURS, {}), clients.get(PEER, {})
        label = f"{int(count):,}"
        errors = [f"{name}: {c['error']}" for name, c in ((OURS, ours), (PEER, theirs)) if "error" in c]
        if errors:
            rows.append([label, "; ".join(errors), *[""] * (len(HEADERS) - 2)])
            continue
        broker = (
            f"{_num(ours.get('consume_broker_cpu_per_m'))}, {_share(ours.get('idle_broker_cpu_share'))} "
            f"({_num(theirs.get('consume_broker_cpu_per_m'))}, {_share(theirs.get('idle_broker_cpu_share'))})"
        )
        rows.append(
            [
                label,
                _versus(ours, theirs, "produce_rate"),
                _versus(ours, theirs, "consume_rate"),
                _pair(_num(ours.get("produce_cpu_per_m")), _num(theirs.get("produce_cpu_per_m"))),
                _pair(_num(ours.get("consume_cpu_per_m")), _num(theirs.get("consume_cpu_per_m"))),
                _pair(_share(ours.get("idle_cpu_share")), _share(theirs.get("idle_cpu_share"))),
                broker,
                _pair(_num(ours.get("first_record_s")), _num(theirs.get("first_record_s"))),
            ]
        )
    return rows


def wide_tables(section: dict[str, Any]) -> list[str]:
    """The section's blocks of markdown: the stamp, what was measured, the table, the groups."""
    stamp = (
        f"Measured {section.get('date', '?')} on {section.get('broker', '?')}, load average "
        f"{section.get('load', '?')} before, {section.get('load_after', '?')} after"
        + (f", kafka_core {section['revision']}" if section.get("revision") else "")
        + f". Command: `{section.get('command', '?')}`."
    )
    for rerun in section.get("reruns", ()):  # rows measured again by a later run, on their own
        counts = " and ".join(f"{p:,}" for p in rerun["partitions"])
        stamp += (
            f" The rows for {counts} partitions are from a later run: {rerun['date']}, load average "
            f"{rerun['load']} before, {rerun['load_after']} after, kafka_core {rerun['revision']}. "
            f"Command: `{rerun['command']}`."
        )
    out = [stamp]
    if section.get("failed"):
        return [*out, f"**The section failed:** `{section['failed']}`"]
    out.append(
        WIDE_TEXT.format(
            records=section.get("records", 0),
            idle_s=section.get("idle_s", 0),
            repeat=section.get("repeat", 0),
        )
    )
    out.append(markdown_table(HEADERS, wide_rows(section)))
    groups = section.get("groups")
    if groups:
        out += groups_blocks(groups)
    return out


def groups_blocks(groups: dict[str, Any]) -> list[str]:
    """Groups over a wide topic, the assignors' own time, metadata decode and routing."""
    out = []
    if groups.get("revision"):
        out.append(
            f"Groups, assignors and metadata measured {groups.get('date', '?')} on kafka_core "
            f"{groups['revision']}, load average {groups.get('load', '?')} (Apache Kafka, one node)."
        )
    if groups.get("failed"):
        out.append(f"**Groups and metadata failed:** `{groups['failed']}`")
    members = groups.get("members")
    if members:
        rows = [
            [
                name,
                _num(m.get("join_s")),
                _num(m.get("leave_s")),
                str(m.get("rebalances", "-")),
                m.get("error", ""),
            ]
            for name, m in members.items()
        ]
        out.append(
            f"A group of 3 kafka_core members (each in its own process, no commits) over one topic of "
            f"{groups.get('partitions', 0):,} partitions holding a record each: from the start of the "
            "three to every partition fetched by its owner, and from one member's close (it leaves the "
            "group) to each of its partitions fetched by another member."
        )
        out.append(
            markdown_table(
                [
                    "group protocol",
                    "join to all fetched, s",
                    "leave to taken over, s",
                    "assignments seen",
                    "error",
                ],
                rows,
            )
        )
    live = next((m["metadata"] for m in (members or {}).values() if "metadata" in m), None)
    if live:
        out.append(
            f"Live, over the group's topic of {groups.get('partitions', 0):,} partitions: a kafka_core client's "
            f"Metadata request took {_num(live.get('request_ms'), 1)} ms (median of 5), the event loop's "
            f"longest stall meanwhile {_num(live.get('stall_ms'), 1)} ms (a 1 ms ticker on the same loop; "
            f"{_num(live.get('quiet_gap_ms'), 1)} ms with nothing else to do)."
        )
    regex = groups.get("regex")
    if regex:
        out.append(
            f"One kafka_core member subscribed by a regex matching {groups.get('regex_topics', 0):,} "
            "one-partition topics (a record each): from its start to every topic fetched."
        )
        rows = [[name, _num(r.get("all_fetched_s")), r.get("error", "")] for name, r in regex.items()]
        out.append(markdown_table(["group protocol", "start to all fetched, s", "error"], rows))
    assignors = groups.get("assignors")
    if assignors:
        rows = [
            [name, *(_num(v.get(k), 3) for k in ("fresh", "steady", "leave", "join"))]
            for name, v in assignors.items()
        ]
        out.append(
            f"The assignors' own time (seconds, median of 3) for 3 members over {groups.get('assignor_partitions', 0):,} "
            "partitions of one topic: a first assignment, nothing changed, one of three left, a third "
            "joined two."
        )
        out.append(markdown_table(["assignor", "fresh", "steady", "leave", "join"], rows))
    meta = groups.get("metadata")
    if meta:
        rows = [
            [
                m["shape"],
                _num(m.get("decode_ms"), 1),
                _num(m.get("parse_ms"), 1),
                _num(m.get("cache_ms"), 1),
                _num(m.get("route_ms"), 1),
                _num(m.get("total_ms"), 1),
            ]
            for m in meta
        ]
        out.append(
            "A Metadata response decoded, parsed, taken into the client's cache and every partition's "
            "leader looked up (milliseconds, median of 5; all on the event loop, so the total is the "
            "loop's stall)."
        )
        out.append(
            markdown_table(
                [
                    "metadata",
                    "decode",
                    "parse",
                    "cache update",
                    "route every partition",
                    "total (loop stall)",
                ],
                rows,
            )
        )
    live = groups.get("live_metadata")
    if live:
        out.append("Live: " + "; ".join(f"{k}: {v}" for k, v in live.items()))
    return out
