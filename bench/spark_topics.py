"""The Spark bench's topics, parent side: which topic the reads share, and whether a write landed
every row (see bench/e2e_spark.py)."""

from __future__ import annotations

from typing import Any

from bench.common import (
    ERROR,
    OK,
    RunResult,
    count_topic,
    create_topic,
    delete_topic,
    produce_all,
    unique_topic,
)
from bench.spark_methods import KEY_SIZE, PARTITIONS, VALUE_SIZE, method_role


def pass_topic(topic: str, index: int) -> str:
    """The topic a write's pass ``index`` goes to (every pass writes the same rows to its own)."""
    return topic if index == 0 else f"{topic}-pass{index}"


def fill_like_frame(bootstrap: str, topic: str, rows: int) -> None:
    """The rows of ``_frame`` written by a confluent-kafka producer (only when no write left a topic)."""
    filler = b"v" * (VALUE_SIZE - KEY_SIZE)
    keys = (b"%0*d" % (KEY_SIZE, i) for i in range(rows))
    produce_all(bootstrap, topic, ((key, key + filler) for key in keys))


def check_result(
    result: RunResult,
    bootstrap: str,
    topic: str,
    rows: int,
    passes: int,
    written: dict[str, str],
    read: list[str],
) -> None:
    """A write counts only if every pass's topic holds exactly ``rows`` records (the first kept for
    the reads while none is picked); a read notes whose topic it read."""
    op = method_role(result.client)[0]
    if result.status == OK:
        result.rss_mb = float(result.extra.get("tree_rss_mb", result.rss_mb))
    if op == "write" and topic:
        landed = [
            count_topic(bootstrap, pass_topic(topic, i), PARTITIONS, rows) if result.status == OK else -1
            for i in range(passes)
        ]
        # A short topic is kept (named in the detail) so its offsets can be examined afterwards.
        short = [pass_topic(topic, i) for i, n in enumerate(landed) if 0 <= n < rows]
        if result.status == OK and landed != [rows] * passes:
            result.status = ERROR
            kept = f"; kept for inspection: {', '.join(short)}" if short else ""
            result.detail = f"{landed} of {rows} rows on the topic (per pass) after the run{kept}"
        for index in range(1, passes):
            if pass_topic(topic, index) not in short:
                delete_topic(bootstrap, pass_topic(topic, index))
        if landed[0] == rows and not read and result.client not in written:
            written[result.client] = topic  # kept for the reads
        elif topic not in short:
            delete_topic(bootstrap, topic)
    if op == "read" and topic and result.status == OK:
        result.extra["note"] += f"; topic written by {read[1]}"


def pick_read_topic(bootstrap: str, written: dict[str, str], rows: int, log: Any) -> tuple[str, str]:
    """(topic, who wrote it): the peer's written topic, else ours', else a new one filled by
    confluent-kafka. The other written topics are deleted (the test broker keeps every record in
    memory)."""
    for writer in ("foreachPartition-confluent", "kafka_core-write"):
        if writer in written:
            topic = written.pop(writer)
            for other in list(written):
                delete_topic(bootstrap, written.pop(other))
            return topic, writer
    topic = unique_topic("spark", "read")
    create_topic(bootstrap, topic, PARTITIONS)
    log(f"  spark: no write left a topic, filling {topic} with confluent-kafka")
    fill_like_frame(bootstrap, topic, rows)
    return topic, "a confluent-kafka producer (_fill_like_frame)"
