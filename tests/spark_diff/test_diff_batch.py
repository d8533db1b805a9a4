"""Batch reads, side by side: Spark's own connector and kafka_core on the same topics.

Each case reads through both formats and asserts the same schema, rows (with headers, timestamps
and timestampType), tasks planned and, for bad options, a refusal before any job naming the same
option. Every assertion on the returned outcome is there so that a case cannot pass on an empty
read by both.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pytest
from conftest import CONNECTOR, OURS, T0, Differ, Rec, sample_records

# The main topic: partition p holds SIZES[p] records; the last partition is empty.
SIZES = (30, 20, 10, 0)


@dataclass(frozen=True)
class Topics:
    prefix: str
    main: str  # SIZES records; headers, null keys, a null value
    side: str  # 2 partitions of 5 records
    other: str  # not matched by the prefix pattern


@pytest.fixture(scope="module")
def topics(make_topic: Callable[..., str], produce: Callable[[str, Sequence[Rec]], None]) -> Topics:
    prefix = f"diffpat-{uuid.uuid4().hex[:8]}"
    main = make_topic(len(SIZES), name=f"{prefix}-main")
    side = make_topic(2, name=f"{prefix}-side")
    other = make_topic(1)
    produce(main, [r for p, n in enumerate(SIZES) for r in sample_records(p, n)])
    produce(side, [r for p in range(2) for r in sample_records(p, 5, tag="s")])
    produce(other, sample_records(0, 3, tag="o"))
    return Topics(prefix, main, side, other)


# -- what to read ----------------------------------------------------------------------------


def test_subscribe_one_topic_defaults(differ: Differ, topics: Topics) -> None:
    out = differ.read({"subscribe": topics.main})
    assert out.count == sum(SIZES)
    assert out.tasks == len(SIZES)


def test_subscribe_two_topics_with_spaces(differ: Differ, topics: Topics) -> None:
    out = differ.read({"subscribe": f" {topics.main} , {topics.side} "})
    assert out.count == sum(SIZES) + 10


def test_subscribe_pattern(differ: Differ, topics: Topics) -> None:
    out = differ.read({"subscribePattern": f"{topics.prefix}-.*"})
    assert out.count == sum(SIZES) + 10
    assert out.offsets(topics.side, 1) == list(range(5))


def test_subscribe_pattern_matching_nothing(differ: Differ, topics: Topics) -> None:
    # Spark plans no task; a Python data source always has at least one (an empty one): on purpose
    out = differ.read({"subscribePattern": f"{topics.prefix}-nothing-.*"}, tasks=False)
    assert out.count == 0 and out.tasks == 1


def test_subscribe_pattern_matches_inside_a_name(differ: Differ, topics: Topics) -> None:
    """Spark's offset reader looks for the pattern anywhere in a topic's name (findFirstIn)."""
    out = differ.read({"subscribePattern": topics.prefix[len("diffpat-") :] + "-ma"})
    assert out.count == sum(SIZES)


def test_assign_some_partitions(differ: Differ, topics: Topics) -> None:
    out = differ.read({"assign": json.dumps({topics.main: [0, 2], topics.side: [1]})})
    assert out.count == SIZES[0] + SIZES[2] + 5


def test_subscribe_missing_topic(differ: Differ, topics: Topics) -> None:
    """On purpose (docs/spark.md): Spark 4's offset reader (Kafka's Admin) fails on a subscribed
    topic that does not exist; kafka_core reads it as empty with a warning, as Spark's older
    consumer-based reader did."""
    options = {"subscribe": f"{topics.side},no-such-topic-{uuid.uuid4().hex[:8]}"}
    message, _ = differ.error(CONNECTOR, options)
    assert "UnknownTopicOrPartitionException" in message
    assert differ.run(OURS, options).count == 10


def test_assign_partition_that_does_not_exist(differ: Differ, topics: Topics) -> None:
    """On purpose (docs/spark.md): Spark reads the assigned partitions that exist and drops the
    others without a word; kafka_core refuses before any task, naming them."""
    options = {"assign": json.dumps({topics.main: [0, 9]})}
    assert differ.run(CONNECTOR, options).count == SIZES[0]
    message, jobs = differ.error(OURS, options)
    assert "assign" in message and "[9]" in message and not jobs


def test_include_headers(differ: Differ, topics: Topics) -> None:
    out = differ.read({"subscribe": topics.main, "includeHeaders": "true"})
    assert "headers" in out.schema
    with_headers = [r for r in out.rows.elements() if r[7]]
    assert with_headers and ("n", None) in with_headers[0][7]


def test_option_names_are_case_insensitive(differ: Differ, topics: Topics) -> None:
    out = differ.read({"SUBSCRIBE": topics.side, "STARTINGoffsets": "earliest", "includeheaders": "TRUE"})
    assert out.count == 10 and "headers" in out.schema


# -- bad options -------------------------------------------------------------------------------


def test_refuses_no_topic_option(differ: Differ, topics: Topics) -> None:
    differ.refuse({}, "subscribe", "assign")


def test_refuses_two_topic_options(differ: Differ, topics: Topics) -> None:
    differ.refuse({"subscribe": topics.main, "assign": json.dumps({topics.main: [0]})}, "assign")


def test_refuses_empty_subscribe(differ: Differ, topics: Topics) -> None:
    differ.refuse({"subscribe": " , "}, "subscribe")


def test_refuses_empty_pattern(differ: Differ, topics: Topics) -> None:
    differ.refuse({"subscribePattern": "  "}, "subscribePattern")


def test_refuses_assign_that_is_not_json_object(differ: Differ, topics: Topics) -> None:
    differ.refuse({"assign": f"[{topics.main}]"}, "assign")


def test_refuses_missing_bootstrap_servers(differ: Differ, topics: Topics) -> None:
    differ.refuse({"kafka.bootstrap.servers": None, "subscribe": topics.main}, "kafka.bootstrap.servers")


@pytest.mark.parametrize(
    ("option", "their_words"),
    [
        ("kafka.auto.offset.reset", ["auto.offset.reset"]),
        ("kafka.key.deserializer", ["key.deserializer"]),
        ("kafka.enable.auto.commit", ["enable.auto.commit"]),
    ],
)
def test_refuses_kafka_options_spark_manages(
    differ: Differ, topics: Topics, option: str, their_words: list[str]
) -> None:
    differ.refuse({"subscribe": topics.main, option: "earliest"}, option[len("kafka.") :], theirs=their_words)


def test_refuses_min_partitions_zero(differ: Differ, topics: Topics) -> None:
    differ.refuse({"subscribe": topics.main, "minPartitions": "0"}, "minPartitions")


def test_refuses_max_records_per_partition_negative(differ: Differ, topics: Topics) -> None:
    differ.refuse({"subscribe": topics.main, "maxRecordsPerPartition": "-1"}, "maxRecordsPerPartition")


# -- starting and ending offsets -------------------------------------------------------------


def test_offset_keywords(differ: Differ, topics: Topics) -> None:
    out = differ.read({"subscribe": topics.main, "startingOffsets": "earliest", "endingOffsets": "latest"})
    assert out.count == sum(SIZES)


def _per_partition(topic: str, values: Sequence[int]) -> str:
    return json.dumps({topic: {str(p): v for p, v in enumerate(values)}})


def test_offsets_json_with_earliest_and_latest(differ: Differ, topics: Topics) -> None:
    out = differ.read(
        {
            "subscribe": topics.main,
            "startingOffsets": _per_partition(topics.main, [3, -2, 4, -2]),
            "endingOffsets": _per_partition(topics.main, [20, -1, 8, -1]),
        }
    )
    assert out.offsets(topics.main, 0) == list(range(3, 20))
    assert out.count == 17 + 20 + 4


def test_refuses_latest_start(differ: Differ, topics: Topics) -> None:
    differ.refuse({"subscribe": topics.main, "startingOffsets": "latest"}, "starting offset")


def test_refuses_earliest_end(differ: Differ, topics: Topics) -> None:
    differ.refuse({"subscribe": topics.main, "endingOffsets": "earliest"}, "ending offset")


def test_refuses_latest_in_starting_json(differ: Differ, topics: Topics) -> None:
    options = {"subscribe": topics.main, "startingOffsets": _per_partition(topics.main, [0, -1, 0, 0])}
    differ.refuse(options, "starting offset", "startingOffsets")


def test_refuses_earliest_in_ending_json(differ: Differ, topics: Topics) -> None:
    options = {"subscribe": topics.main, "endingOffsets": _per_partition(topics.main, [5, -2, 5, 0])}
    differ.refuse(options, "ending offset", "endingOffsets")


def test_refuses_bad_offsets_json(differ: Differ, topics: Topics) -> None:
    differ.refuse(
        {"subscribe": topics.main, "startingOffsets": "{" + topics.main},
        "startingOffsets",
        theirs=["Expected e.g.", "json", "startingOffsets"],
    )


def test_refuses_offsets_json_missing_a_partition(differ: Differ, topics: Topics) -> None:
    options = {"subscribe": topics.main, "startingOffsets": _per_partition(topics.main, [0, 0, 0])}
    differ.refuse(options, "startingOffsets", theirs=["start offsets"])


def test_refuses_offsets_json_naming_a_partition_not_read(differ: Differ, topics: Topics) -> None:
    options = {"subscribe": topics.main, "startingOffsets": _per_partition(topics.main, [0, 0, 0, 0, 0])}
    differ.refuse(options, "startingOffsets", theirs=["start offsets"])


def test_refuses_start_after_end_in_json(differ: Differ, topics: Topics) -> None:
    options = {
        "subscribe": topics.main,
        "startingOffsets": _per_partition(topics.main, [10, 0, 0, 0]),
        "endingOffsets": _per_partition(topics.main, [5, 1, 1, 0]),
    }
    differ.refuse(options, "startingOffsets", theirs=["start offset 10 is greater than the end offset 5"])


def test_refuses_start_and_end_json_on_different_partitions(differ: Differ, topics: Topics) -> None:
    options = {
        "assign": json.dumps({topics.main: [0, 1]}),
        "startingOffsets": json.dumps({topics.main: {"0": 1, "1": 1}}),
        "endingOffsets": json.dumps({topics.main: {"0": 5}}),
    }
    differ.refuse(options, "endingOffsets", theirs=["same topic-partitions"])


# -- timestamps ------------------------------------------------------------------------------


def _assign_filled(topics: Topics) -> str:
    return json.dumps({topics.main: [0, 1, 2]})


def test_starting_timestamp(differ: Differ, topics: Topics) -> None:
    out = differ.read({"assign": _assign_filled(topics), "startingTimestamp": str(T0 + 5000)})
    assert out.count == 25 + 15 + 5
    assert min(out.offsets(topics.main, 1)) == 5


def test_starting_timestamp_with_no_record_after_it_fails(differ: Differ, topics: Topics) -> None:
    # the empty partition has no record at or after any timestamp: strategy "error" (the default)
    options = {"subscribe": topics.main, "startingTimestamp": str(T0 + 5000)}
    differ.refuse(options, "startingOffsetsByTimestampStrategy", theirs=["No offset matched"])


def test_starting_timestamp_strategy_latest(differ: Differ, topics: Topics) -> None:
    out = differ.read(
        {
            "subscribe": topics.main,
            "startingTimestamp": str(T0 + 15_000),
            "startingOffsetsByTimestampStrategy": "latest",
        }
    )
    assert out.count == 15 + 5  # partition 2 (10 records) has none after: it starts at its end


def test_starting_timestamp_strategy_error_named_explicitly(differ: Differ, topics: Topics) -> None:
    options = {
        "assign": _assign_filled(topics),
        "startingTimestamp": str(T0 + 15_000),
        "startingOffsetsByTimestampStrategy": "ERROR",
    }
    differ.refuse(options, "startingOffsetsByTimestampStrategy", theirs=["No offset matched"])


def test_refuses_unknown_strategy(differ: Differ, topics: Topics) -> None:
    options = {"subscribe": topics.main, "startingOffsetsByTimestampStrategy": "nearest"}
    differ.refuse(options, "startingOffsetsByTimestampStrategy", theirs=["nearest"])


def test_refuses_timestamp_that_is_not_a_number(differ: Differ, topics: Topics) -> None:
    options = {"subscribe": topics.main, "startingTimestamp": "yesterday"}
    differ.refuse(options, "startingTimestamp", theirs=["Expected a single long value"])


def test_starting_offsets_by_timestamp(differ: Differ, topics: Topics) -> None:
    by_ts = _per_partition(topics.main, [T0 + 3000, T0 + 19_000, T0, T0 + 500_000])
    out = differ.read(
        {
            "subscribe": topics.main,
            "startingOffsetsByTimestamp": by_ts,
            "startingOffsetsByTimestampStrategy": "latest",
        }
    )
    assert out.count == 27 + 1 + 10


def test_ending_offsets_by_timestamp(differ: Differ, topics: Topics) -> None:
    by_ts = _per_partition(topics.main, [T0 + 10_000, T0 + 5000, T0 + 500_000, T0])
    out = differ.read({"subscribe": topics.main, "endingOffsetsByTimestamp": by_ts})
    assert out.count == 10 + 5 + 10  # no record at or after the time: the end is the latest offset


def test_ending_timestamp(differ: Differ, topics: Topics) -> None:
    out = differ.read({"subscribe": topics.main, "endingTimestamp": str(T0 + 8000)})
    assert out.count == 8 + 8 + 8


def test_global_timestamp_wins_over_the_others(differ: Differ, topics: Topics) -> None:
    out = differ.read(
        {
            "assign": _assign_filled(topics),
            "startingTimestamp": str(T0 + 5000),
            "startingOffsetsByTimestamp": json.dumps({topics.main: {"0": T0, "1": T0, "2": T0}}),
            "startingOffsets": json.dumps({topics.main: {"0": 1, "1": 1, "2": 1}}),
            "endingTimestamp": str(T0 + 9000),
            "endingOffsets": json.dumps({topics.main: {"0": 2, "1": 2, "2": 2}}),
        }
    )
    assert out.count == 3 * 4


def test_timestamps_per_partition_win_over_offsets(differ: Differ, topics: Topics) -> None:
    out = differ.read(
        {
            "assign": _assign_filled(topics),
            "startingOffsetsByTimestamp": json.dumps({topics.main: {"0": T0 + 2000, "1": T0, "2": T0}}),
            "startingOffsets": json.dumps({topics.main: {"0": 9, "1": 9, "2": 9}}),
        }
    )
    assert out.count == 28 + 20 + 10


def test_refuses_timestamps_json_missing_a_partition(differ: Differ, topics: Topics) -> None:
    options = {"subscribe": topics.main, "startingOffsetsByTimestamp": json.dumps({topics.main: {"0": T0}})}
    differ.refuse(options, "startingOffsetsByTimestamp", theirs=["timestamp based start offsets"])


def test_refuses_start_timestamp_after_end_timestamp(differ: Differ, topics: Topics) -> None:
    options = {
        "assign": json.dumps({topics.main: [0]}),
        "startingOffsetsByTimestamp": json.dumps({topics.main: {"0": T0 + 9000}}),
        "endingOffsetsByTimestamp": json.dumps({topics.main: {"0": T0 + 2000}}),
    }
    differ.refuse(options, "startingOffsetsByTimestamp", theirs=["start timestamp"])


# -- splitting into tasks --------------------------------------------------------------------


def test_min_partitions_below_the_partition_count(differ: Differ, topics: Topics) -> None:
    out = differ.read({"subscribe": topics.main, "minPartitions": "2"}, layout=True)
    assert out.tasks == len(SIZES)


def test_min_partitions_splits_big_partitions(differ: Differ, topics: Topics) -> None:
    out = differ.read({"subscribe": topics.main, "minPartitions": "7"}, layout=True)
    assert out.tasks >= 6 and out.count == sum(SIZES)


def test_max_records_per_partition(differ: Differ, topics: Topics) -> None:
    out = differ.read(
        {
            "subscribe": topics.main,
            "startingOffsets": _per_partition(topics.main, [0, 0, 0, 0]),
            "endingOffsets": _per_partition(topics.main, [30, 20, 10, 0]),
            "maxRecordsPerPartition": "7",
        },
        layout=True,
    )
    assert out.layout is not None and max(n for *_, n in out.layout) <= 7


def test_max_records_per_partition_with_default_offsets(differ: Differ, topics: Topics) -> None:
    """On purpose (docs/spark.md): Spark's batch reader weighs maxRecordsPerPartition against
    earliest/latest before it resolves them (-2 to -1: one record) and never splits; kafka_core
    splits as the option says. Same rows; the task counts differ."""
    options = {"subscribe": topics.main, "maxRecordsPerPartition": "7"}
    assert differ.read(options, tasks=False).count == sum(SIZES)
    ours = differ.run(OURS, options, layout=True)
    assert ours.layout is not None and max(n for *_, n in ours.layout) <= 7
    assert ours.tasks == 5 + 3 + 2
    assert differ.run(CONNECTOR, options).tasks == len(SIZES)  # if this fails, Spark fixed it


def test_min_partitions_and_max_records_together(differ: Differ, topics: Topics) -> None:
    out = differ.read(
        {
            "subscribe": f"{topics.main},{topics.side}",
            "startingOffsets": json.dumps(
                {topics.main: {"0": 0, "1": 0, "2": 0, "3": 0}, topics.side: {"0": 0, "1": 0}}
            ),
            "minPartitions": "12",
            "maxRecordsPerPartition": "12",
        },
        layout=True,
    )
    assert out.count == sum(SIZES) + 10
