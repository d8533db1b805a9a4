"""The Spark source's option checks and offset planning, without a broker or a Spark session."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafka_core.client.metadata import TopicPartition
from kafka_core.config import client_keywords, translate
from kafka_core.errors import KafkaConfigError
from kafka_core.spark.options import OffsetSpec, parse_sink, parse_source
from kafka_core.spark.planning import (
    DataLossError,
    OffsetLookups,
    OffsetRange,
    check_ranges,
    check_specs,
    from_json,
    pack_ranges,
    rate_limit,
    resolve,
    split_ranges,
    to_json,
)

BOOT = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


def tp(t: str, p: int) -> TopicPartition:
    return TopicPartition(t, p)


# -- options ---------------------------------------------------------------------------------


def test_defaults_match_spark() -> None:
    batch = parse_source({**BOOT, "subscribe": "a, b"}, streaming=False)
    assert batch.subscribe == ("a", "b")
    assert batch.starting == OffsetSpec("earliest") and batch.ending == OffsetSpec("latest")
    assert batch.fail_on_data_loss and not batch.include_headers
    stream = parse_source({**BOOT, "subscribe": "a"}, streaming=True)
    assert stream.starting == OffsetSpec("latest") and stream.ending is None
    assert stream.max_trigger_delay_ms == 15 * 60_000
    # small ranges share a task in streaming; a batch read plans a task per partition, as Spark's
    assert stream.min_records_per_partition == 10_000 and batch.min_records_per_partition is None
    given = parse_source({**BOOT, "subscribe": "a", "minRecordsPerPartition": "5"}, streaming=False)
    assert given.min_records_per_partition == 5


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"subscribe": "a"}, "kafka.bootstrap.servers"),
        ({**BOOT}, "one of the options 'assign', 'subscribe' or 'subscribePattern'"),
        ({**BOOT, "subscribe": "a", "assign": '{"a":[0]}'}, "'assign' and 'subscribe'"),
        ({**BOOT, "subscribe": "a", "subscribePattern": "a.*"}, "'subscribe' and 'subscribePattern'"),
        ({**BOOT, "subscribe": " , "}, "names no topic"),
        ({**BOOT, "subscribePattern": "a("}, "not a valid regex"),
        ({**BOOT, "assign": "{bad"}, "'assign' is not valid JSON"),
        ({**BOOT, "assign": '{"a": 0}'}, 'like {"topicA":[0,1]}'),
        ({**BOOT, "subscribe": "a", "startingOffsets": "latest"}, "can't be 'latest' for batch"),
        ({**BOOT, "subscribe": "a", "endingOffsets": "earliest"}, "can't be 'earliest' for batch"),
        ({**BOOT, "subscribe": "a", "startingOffsets": '{"a":{"0":-1}}'}, "can't be latest (-1)"),
        ({**BOOT, "subscribe": "a", "endingOffsets": '{"a":{"0":-2}}'}, "can't be earliest (-2)"),
        ({**BOOT, "subscribe": "a", "startingOffsets": '{"a":{"0":'}, "'startingOffsets' is not valid JSON"),
        ({**BOOT, "subscribe": "a", "startingOffsets": '{"a":{"x":1}}'}, "partition 'x'"),
        ({**BOOT, "subscribe": "a", "startingOffsets": '{"a":{"0":-7}}'}, "below -2"),
        ({**BOOT, "subscribe": "a", "startingTimestamp": "yesterday"}, "startingTimestamp"),
        ({**BOOT, "subscribe": "a", "failOnDataLoss": "maybe"}, "'failOnDataLoss' must be true or false"),
        ({**BOOT, "subscribe": "a", "minPartitions": "0"}, "'minPartitions' must be at least 1"),
        (
            {**BOOT, "subscribe": "a", "minRecordsPerPartition": "0"},
            "'minRecordsPerPartition' must be at least 1",
        ),
        (
            {**BOOT, "subscribe": "a", "maxRecordsPerPartition": "x"},
            "'maxRecordsPerPartition' must be an integer",
        ),
        ({**BOOT, "subscribe": "a", "startingOffsetsByTimestampStrategy": "oops"}, "'error' or 'latest'"),
        (
            {**BOOT, "subscribe": "a", "kafka.auto.offset.reset": "earliest"},
            "'kafka.auto.offset.reset' is not supported",
        ),
        ({**BOOT, "subscribe": "a", "kafka.enable.auto.commit": "true"}, "'kafka.enable.auto.commit'"),
        ({**BOOT, "subscribe": "a", "kafka.key.deserializer": "x"}, "'kafka.key.deserializer'"),
        (
            {**BOOT, "subscribe": "a", "kafka.no.such.thing": "1"},
            "unknown consumer option 'kafka.no.such.thing'",
        ),
        ({**BOOT, "subscribe": "a", "kafka.fetch.min.bytes": "lots"}, "bad value for kafka.fetch.min.bytes"),
        ({**BOOT, "subscribe": "a", "kafka.isolation.level": "dirty"}, "read_uncommitted or read_committed"),
        (
            {**BOOT, "subscribe": "a", "minOffsetsPerTrigger": "10", "maxOffsetsPerTrigger": "5"},
            "must not exceed 'maxOffsetsPerTrigger'",
        ),
        ({**BOOT, "subscribe": "a", "maxTriggerDelay": "soon"}, "'maxTriggerDelay' must be a duration"),
    ],
)
def test_bad_source_options_are_named(options: dict[str, str], message: str) -> None:
    with pytest.raises(KafkaConfigError) as info:
        parse_source(options, streaming=False)
    assert message in str(info.value)


def test_ending_offsets_refused_in_streaming() -> None:
    with pytest.raises(KafkaConfigError, match="not valid in streaming"):
        parse_source({**BOOT, "subscribe": "a", "endingOffsets": "latest"}, streaming=True)


def test_timestamp_options_take_precedence() -> None:
    opts = parse_source(
        {
            **BOOT,
            "subscribe": "a",
            "startingOffsets": "earliest",
            "startingOffsetsByTimestamp": '{"a":{"0":5}}',
            "startingTimestamp": "1000",
            "endingOffsetsByTimestamp": '{"a":{"0":9}}',
        },
        streaming=False,
    )
    assert opts.starting == OffsetSpec("timestamp", timestamp=1000)
    assert opts.ending == OffsetSpec("timestamps", offsets={"a": {0: 9}})


def test_option_names_are_case_insensitive_and_kafka_params_mapped() -> None:
    opts = parse_source(
        {
            "KAFKA.BOOTSTRAP.SERVERS": "h:1",
            "Subscribe": "a",
            "kafka.Isolation.Level": "read_committed",
            "kafka.sasl.jaas.config": 'org.apache.kafka...PlainLoginModule required username="u" password="p\\"w";',
            "kafka.security.protocol": "sasl_plaintext",
            "kafka.sasl.mechanism": "plain",
            "kafka.group.id": "lag-view",
            "commitOffsetsToGroup": "lag-view",
            "maxTriggerDelay": "30s",
            "includeHeaders": "TRUE",
        },
        streaming=True,
    )
    assert opts.client["bootstrap_servers"] == "h:1"
    assert opts.client["sasl_username"] == "u" and opts.client["sasl_password"] == 'p\\"w'
    assert opts.client["security_protocol"] == "SASL_PLAINTEXT" and opts.client["sasl_mechanism"] == "PLAIN"
    assert opts.isolation_level == "read_committed" and "group_id" not in opts.consumer
    assert opts.max_trigger_delay_ms == 30_000 and opts.include_headers
    assert opts.commit_group == "lag-view"
    assert opts.client["client_id"].startswith("spark-kafka-source")


def test_assign_parsed() -> None:
    opts = parse_source({**BOOT, "assign": '{"a":[2,0,2],"b":[1]}'}, streaming=False)
    assert opts.assign == {"a": (0, 2), "b": (1,)} and not opts.subscribe and opts.pattern is None


def test_sink_options() -> None:
    sink = parse_sink({**BOOT, "topic": "out", "kafka.linger.ms": "20", "kafka.acks": "1"})
    assert sink.topic == "out"
    assert sink.producer == {
        "bootstrap_servers": "127.0.0.1:9092",
        "linger_ms": 20.0,
        "acks": 1,
        "compression": "lz4",  # the sink's default
    }
    plain = parse_sink({**BOOT, "topic": "out", "kafka.compression.type": "none"})
    assert plain.producer["compression"] == "none"
    with pytest.raises(KafkaConfigError, match=r"'kafka\.value\.serializer' is not supported"):
        parse_sink({**BOOT, "kafka.value.serializer": "x"})
    with pytest.raises(KafkaConfigError, match=r"unknown producer option 'kafka\.fetch\.min\.bytes'"):
        parse_sink({**BOOT, "kafka.fetch.min.bytes": "1"})


def test_translate_and_split() -> None:
    kwargs = translate({"bootstrap.servers": "h:1", "linger.ms": "5", "compression.type": "ZSTD"}, "producer")
    assert kwargs == {"bootstrap_servers": "h:1", "linger_ms": 5.0, "compression": "zstd"}
    client, rest = client_keywords(translate({"bootstrap.servers": "h", "fetch.max.bytes": "9"}, "consumer"))
    assert client == {"bootstrap_servers": "h"} and rest == {"fetch_max_bytes": 9}
    with pytest.raises(KafkaConfigError, match="role must be"):
        translate({}, "admin-ish")
    with pytest.raises(KafkaConfigError, match=r"sasl\.jaas\.config"):
        translate({"sasl.jaas.config": "no credentials here"}, "client")


# -- resolving offsets -------------------------------------------------------------------------


class FakeLog:
    """Earliest/latest offsets and record timestamps per partition."""

    def __init__(
        self, logs: dict[TopicPartition, list[int]], earliest: dict[TopicPartition, int] | None = None
    ):
        self.logs = logs  # timestamps of offsets earliest.. in order
        self.first = earliest or dict.fromkeys(logs, 0)

    def lookups(self) -> OffsetLookups:
        return OffsetLookups(
            earliest=lambda tps: {t: self.first[t] for t in tps},
            latest=lambda tps: {t: self.first[t] + len(self.logs[t]) for t in tps},
            for_times=lambda wanted: {
                t: next((self.first[t] + i for i, ts in enumerate(self.logs[t]) if ts >= w), None)
                for t, w in wanted.items()
            },
        )


def test_resolve_specs() -> None:
    a0, a1 = tp("a", 0), tp("a", 1)
    log = FakeLog({a0: [10, 20, 30], a1: [5]}, {a0: 100, a1: 7})
    tps = [a0, a1]
    lk = log.lookups()
    assert resolve(OffsetSpec("earliest"), tps, lk, starting=True) == {a0: 100, a1: 7}
    assert resolve(OffsetSpec("latest"), tps, lk, starting=False) == {a0: 103, a1: 8}
    spec = OffsetSpec("offsets", offsets={"a": {0: 101, 1: -2}})
    assert resolve(spec, tps, lk, starting=True) == {a0: 101, a1: 7}
    spec = OffsetSpec("offsets", offsets={"a": {0: -1, 1: 7}})
    assert resolve(spec, tps, lk, starting=False) == {a0: 103, a1: 7}
    assert resolve(OffsetSpec("timestamp", timestamp=15), tps, lk, starting=False) == {a0: 101, a1: 8}
    with pytest.raises(KafkaConfigError, match=r"no record at or after the given timestamp in a-1"):
        resolve(OffsetSpec("timestamp", timestamp=15), tps, lk, starting=True)
    got = resolve(OffsetSpec("timestamp", timestamp=15), tps, lk, starting=True, strategy="latest")
    assert got == {a0: 101, a1: 8}
    spec = OffsetSpec("timestamps", offsets={"a": {0: 25, 1: 1}})
    assert resolve(spec, tps, lk, starting=True) == {a0: 102, a1: 7}
    with pytest.raises(KafkaConfigError, match="missing a-1"):
        resolve(OffsetSpec("offsets", offsets={"a": {0: 1}}), tps, lk, starting=True)
    with pytest.raises(KafkaConfigError, match="missing a-0"):
        resolve(OffsetSpec("timestamps", offsets={"a": {1: 1}}), tps, lk, starting=True)
    assert resolve(OffsetSpec("earliest"), [], lk, starting=True) == {}


def test_specs_name_exactly_the_partitions_read() -> None:
    """As Spark: JSON offsets or timestamps for a partition not read are refused too."""
    log = FakeLog({tp("a", 0): [10], tp("a", 1): [5]}, {tp("a", 0): 0, tp("a", 1): 0})
    tps = [tp("a", 0), tp("a", 1)]
    with pytest.raises(
        KafkaConfigError, match="'startingOffsets' gives an offset for partitions that are not read: a-2"
    ):
        resolve(OffsetSpec("offsets", offsets={"a": {0: 1, 1: 1, 2: 1}}), tps, log.lookups(), starting=True)
    with pytest.raises(KafkaConfigError, match="'endingOffsetsByTimestamp' does not give a timestamp"):
        spec = OffsetSpec("timestamps", offsets={"a": {0: 1}})
        resolve(spec, tps, log.lookups(), starting=False, name="endingOffsets")


def test_check_specs_before_any_lookup() -> None:
    def offsets(kind: str, **parts: int) -> OffsetSpec:
        return OffsetSpec(kind, offsets={"a": {int(p[1:]): v for p, v in parts.items()}})

    check_specs(offsets("offsets", p0=5, p1=-2), offsets("offsets", p0=9, p1=-1))
    check_specs(offsets("offsets", p0=5), OffsetSpec("latest"))
    check_specs(offsets("offsets", p0=-2), offsets("offsets", p0=-1))
    with pytest.raises(KafkaConfigError, match="start offset 10, after the end offset 5"):
        check_specs(offsets("offsets", p0=10), offsets("offsets", p0=5))
    with pytest.raises(KafkaConfigError, match="must name the same partitions: a-0, a-1 against a-0"):
        check_specs(offsets("offsets", p0=1, p1=1), offsets("offsets", p0=5))
    with pytest.raises(KafkaConfigError, match="'startingOffsetsByTimestamp' gives a-0 the start timestamp"):
        check_specs(offsets("timestamps", p0=900), offsets("timestamps", p0=100))


def test_offset_json_round_trip() -> None:
    offsets = {tp("b", 1): 5, tp("a", 10): 7, tp("a", 2): 0}
    data = to_json(offsets)
    assert data == {"a": {"2": 0, "10": 7}, "b": {"1": 5}}
    assert from_json(data) == offsets


def test_check_ranges_reports_offsets_going_backwards() -> None:
    seen: list[str] = []
    start = {tp("a", 0): 10, tp("a", 1): 50}
    end = {tp("a", 0): 20, tp("a", 1): 40}
    with pytest.raises(
        DataLossError,
        match=r"\(a-1\): offsets from 50 on.*went backwards from 50 to 40.*'failOnDataLoss' to 'false'",
    ):
        check_ranges(start, end, fail_on_data_loss=True, on_loss=seen.append)
    ranges = check_ranges(start, end, fail_on_data_loss=False, on_loss=seen.append)
    assert ranges == [OffsetRange("a", 0, 10, 20)]
    assert len(seen) == 1 and "failOnDataLoss" in seen[0]


# -- splitting ---------------------------------------------------------------------------------


def test_split_follows_spark() -> None:
    r = [OffsetRange("a", 0, 0, 1000), OffsetRange("a", 1, 0, 10), OffsetRange("a", 2, 5, 5)]
    assert split_ranges(r, None, None) == r[:2]  # empty range dropped, nothing split
    assert split_ranges(r, 2, None) == r[:2]  # already as many tasks as asked
    got = split_ranges(r, 10, None)
    # partition 1 would get one piece anyway: it stays whole and out of the sum, and partition 0
    # gets the other 9 (Spark 4's rule; before, round(1000 / 1010 * 10) = 10 pieces)
    assert [x.size for x in got if x.partition == 0] == [111] * 8 + [112]
    assert [x for x in got if x.partition == 1] == [r[1]]
    got = split_ranges(r, None, 300)
    assert [(x.start, x.end) for x in got if x.partition == 0] == [
        (0, 250),
        (250, 500),
        (500, 750),
        (750, 1000),
    ]


def test_batch_split_keeps_empty_partitions_unless_it_cuts() -> None:
    """Spark's batch relation plans a task per partition, empty ones too, unless it must cut."""
    r = [OffsetRange("a", 0, 0, 100), OffsetRange("a", 1, 7, 7), OffsetRange("a", 2, 0, 50)]
    assert split_ranges(r, None, None, keep_empty=True) == r
    assert split_ranges(r, 3, 100, keep_empty=True) == r
    # cutting: the empty partition is dropped; partition 2 (one piece by its share) stays whole
    assert split_ranges(r, 4, None, keep_empty=True) == [
        OffsetRange("a", 0, 0, 33),
        OffsetRange("a", 0, 33, 66),
        OffsetRange("a", 0, 66, 100),
        OffsetRange("a", 2, 0, 50),
    ]
    assert [x.size for x in split_ranges(r, None, 60, keep_empty=True)] == [50, 50, 50]


ranges_strategy = st.lists(
    st.tuples(st.integers(0, 5), st.integers(0, 10_000), st.integers(0, 5_000)), min_size=0, max_size=6
).map(lambda xs: [OffsetRange("t", p, s, s + n) for p, s, n in {x[0]: x for x in xs}.values()])


@given(ranges_strategy, st.none() | st.integers(1, 40), st.none() | st.integers(1, 3000))
def test_split_covers_every_offset_once(
    ranges: list[OffsetRange], min_parts: int | None, max_recs: int | None
) -> None:
    got = split_ranges(ranges, min_parts, max_recs)
    for r in ranges:
        pieces = sorted((x for x in got if x.partition == r.partition), key=lambda x: x.start)
        if r.size == 0:
            assert not pieces
            continue
        assert pieces[0].start == r.start and pieces[-1].end == r.end
        assert all(a.end == b.start for a, b in itertools.pairwise(pieces))
        assert all(x.size > 0 for x in pieces)
        if max_recs is not None and (min_parts is None or len(got) >= min_parts):
            assert all(x.size <= max_recs for x in pieces)


def test_pack_small_ranges() -> None:
    r = [OffsetRange("t", p, 0, n) for p, n in enumerate((3, 4, 20, 5, 0, 6, 1))]
    assert pack_ranges(r, None) == [(x,) for x in r]
    assert pack_ranges(r, 1) == [(x,) for x in r]
    # 3+4 reach 7; 20 alone; 5+0+6 reach 7; 1 left over
    assert pack_ranges(r, 7) == [(r[0], r[1]), (r[2],), (r[3], r[4], r[5]), (r[6],)]
    # never past maxRecordsPerPartition: 5 + 6 would be 11
    assert pack_ranges(r, 100, 10) == [(r[0], r[1]), (r[2],), (r[3], r[4]), (r[5], r[6])]


@given(ranges_strategy, st.none() | st.integers(1, 20_000), st.none() | st.integers(1, 6_000))
def test_pack_keeps_every_range_once_in_order(
    ranges: list[OffsetRange], min_recs: int | None, max_recs: int | None
) -> None:
    tasks = pack_ranges(ranges, min_recs, max_recs)
    assert sorted((r for t in tasks for r in t), key=lambda r: r.partition) == sorted(
        ranges, key=lambda r: r.partition
    )
    small = [r for t in tasks for r in t if min_recs is None or r.size < min_recs]
    assert small == [r for r in ranges if min_recs is None or r.size < min_recs]  # order kept
    for t in tasks:
        if len(t) > 1:
            assert min_recs is not None and all(r.size < min_recs for r in t)
            assert sum(r.size for r in t[:-1]) < min_recs  # closed once it held enough
            if max_recs is not None:
                assert sum(r.size for r in t) <= max(max_recs, t[0].size)


# -- admission control --------------------------------------------------------------------------


def test_rate_limit_shares_by_lag() -> None:
    start = {tp("a", 0): 0, tp("a", 1): 0, tp("a", 2): 100}
    latest = {tp("a", 0): 900, tp("a", 1): 100, tp("a", 2): 100}
    assert rate_limit(start, latest, 2000) == latest
    assert rate_limit(start, latest, 100) == {tp("a", 0): 90, tp("a", 1): 10, tp("a", 2): 100}
    # a share below one record still moves by one
    assert (
        rate_limit({tp("a", 0): 0, tp("a", 1): 0}, {tp("a", 0): 10_000, tp("a", 1): 1}, 100)[tp("a", 1)] == 1
    )
    # new partitions (not in start) start from their end: nothing admitted there
    assert rate_limit({}, {tp("b", 0): 50}, 10) == {tp("b", 0): 50}
