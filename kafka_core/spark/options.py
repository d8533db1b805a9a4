"""Spark's Kafka connector options, parsed and checked on the driver before any task runs.

A user switches from Spark's connector by changing only the format name, so the names, the
defaults, the precedence of the timestamp options and the refused ``kafka.*`` keys follow it.
Every problem raises :class:`KafkaConfigError` naming the option and its value.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kafka_core.config import client_keywords, translate
from kafka_core.errors import KafkaConfigError
from kafka_core.spark.registry import FormatOptions, SinkFormat, parse_formats, parse_sink_formats

__all__ = [
    "DEFAULT_TRANSACTION_TIMEOUT_MS",
    "OffsetSpec",
    "SinkOptions",
    "SourceOptions",
    "parse_sink",
    "parse_source",
]

EARLIEST = -2
LATEST = -1

# Spark refuses these: its source manages offsets and deserialisation itself.
_SOURCE_REFUSED = {
    "auto.offset.reset": "set the source option 'startingOffsets' instead",
    "enable.auto.commit": "Spark checkpoints the offsets; to see lag in a group, set 'commitOffsetsToGroup'",
    "key.deserializer": "keys are always read as binary; cast the column in Spark",
    "value.deserializer": "values are always read as binary; cast the column in Spark",
    "interceptor.classes": "interceptors are a Java client feature",
}
_SINK_REFUSED = {
    "key.serializer": "keys are written as binary; cast the column to binary or string in Spark",
    "value.serializer": "values are written as binary; cast the column to binary or string in Spark",
    "interceptor.classes": "interceptors are a Java client feature",
}
# Settings of a group member. Spark's connector passes them to consumers that are assigned their
# partitions and never join a group, so they change nothing there either; refused here, by name,
# rather than accepted and ignored.
_NO_GROUP = (
    "this source joins no consumer group (it reads the partitions it plans, at offsets Spark "
    "checkpoints), so a group member's setting would do nothing"
)
_SOURCE_GROUP_REFUSED = {
    name: _NO_GROUP
    for name in (
        "group.instance.id",
        "group.protocol",
        "group.remote.assignor",
        "session.timeout.ms",
        "heartbeat.interval.ms",
        "max.poll.interval.ms",
        "auto.commit.interval.ms",
    )
}
_SOURCE_GROUP_REFUSED["client.rack"] = (
    "kafka_core's consumer always fetches from the partition leader (no KIP-392 follower "
    "fetching), and the rack otherwise only reaches a group's assignor; this source joins no group"
)
# Handled by the source itself (see _group_id), not passed to the client.
_SOURCE_OWN = {"group.id"}

# Every option a read takes besides ``kafka.*`` and ``schema.registry.*``, as spelled in the docs.
_SOURCE_OPTIONS = (
    "assign",
    "subscribe",
    "subscribePattern",
    "startingOffsets",
    "endingOffsets",
    "startingTimestamp",
    "endingTimestamp",
    "startingOffsetsByTimestamp",
    "endingOffsetsByTimestamp",
    "startingOffsetsByTimestampStrategy",
    "failOnDataLoss",
    "minPartitions",
    "maxRecordsPerPartition",
    "minRecordsPerPartition",
    "maxOffsetsPerTrigger",
    "minOffsetsPerTrigger",
    "maxTriggerDelay",
    "includeHeaders",
    "kafkaConsumer.pollTimeoutMs",
    "fetchOffset.numRetries",
    "fetchOffset.retryIntervalMs",
    "groupIdPrefix",  # refused with its reason below
    "commitOffsetsToGroup",
    "valueFormat",
    "keyFormat",
    "valueSubject",
    "keySubject",
    "valueSchema",
    "keySchema",
    "valueMessageName",
    "keyMessageName",
    "mode",
)
_SOURCE_SPELLED = {name.lower(): name for name in _SOURCE_OPTIONS}


def _check_names(options: Mapping[str, Any]) -> None:
    """An option this source does not know fails the read, with the closest names: Spark's
    connector ignores it, so a misspelt ``startingOffset`` would read from the default."""
    import difflib

    for name in sorted(str(k) for k in options):
        key = name.lower()
        if key in _SOURCE_SPELLED or key.startswith(("kafka.", "schema.registry.")):
            continue
        close = difflib.get_close_matches(key, list(_SOURCE_SPELLED), n=3, cutoff=0.6)
        hint = (
            "did you mean " + " or ".join(repr(_SOURCE_SPELLED[c]) for c in close)
            if close
            else "the options are listed in docs/spark.md, 'Source options'"
        )
        raise KafkaConfigError(f"option {name!r} is not an option of the kafka_core source: {hint}")


_TRUE = ("true", "1", "yes")
_FALSE = ("false", "0", "no")


def _lower_keys(options: Mapping[str, Any]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items() if v is not None}


def _bool(opts: Mapping[str, str], name: str, default: bool) -> bool:
    raw = opts.get(name.lower())
    if raw is None:
        return default
    text = raw.strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise KafkaConfigError(f"option {name!r} must be true or false, not {raw!r}")


def _int(opts: Mapping[str, str], name: str, *, minimum: int = 1) -> int | None:
    raw = opts.get(name.lower())
    if raw is None:
        return None
    try:
        value = int(raw.strip())
    except ValueError:
        raise KafkaConfigError(f"option {name!r} must be an integer, not {raw!r}") from None
    if value < minimum:
        raise KafkaConfigError(f"option {name!r} must be at least {minimum}, not {value}")
    return value


_DURATION = re.compile(r"^\s*(\d+)\s*(ms|s|m|h|d|milliseconds?|seconds?|minutes?|hours?|days?)?\s*$", re.I)
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def _duration_ms(opts: Mapping[str, str], name: str, default_ms: int) -> int:
    """Spark's time strings (``15m``, ``30s``, ``500ms``; a bare number is milliseconds)."""
    raw = opts.get(name.lower())
    if raw is None:
        return default_ms
    m = _DURATION.match(raw)
    if not m:
        raise KafkaConfigError(f"option {name!r} must be a duration such as '15m' or '30s', not {raw!r}")
    unit = (m.group(2) or "ms").lower()
    unit = "ms" if unit.startswith("milli") else unit[0] if len(unit) > 2 else unit
    return int(m.group(1)) * _UNIT_MS[unit]


@dataclass(frozen=True)
class OffsetSpec:
    """Where to start or end: ``earliest``, ``latest``, per-partition offsets (-2/-1 allowed),
    one timestamp for every partition, or per-partition timestamps."""

    kind: str  # "earliest" | "latest" | "offsets" | "timestamp" | "timestamps"
    offsets: dict[str, dict[int, int]] = field(default_factory=dict)
    timestamp: int | None = None


def _json_offsets(name: str, raw: str) -> dict[str, dict[int, int]]:
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise KafkaConfigError(f"option {name!r} is not valid JSON ({exc}): {raw!r}") from None
    if not isinstance(data, dict):
        raise KafkaConfigError(
            f'option {name!r} must be a JSON object like {{"topic":{{"0":23}}}}, not {raw!r}'
        )
    out: dict[str, dict[int, int]] = {}
    for topic, parts in data.items():
        if not isinstance(parts, dict):
            raise KafkaConfigError(
                f'option {name!r}: topic {topic!r} must map partitions to numbers ({{"0":23}}), not {parts!r}'
            )
        out[topic] = {}
        for p, v in parts.items():
            try:
                part = int(p)
            except ValueError:
                raise KafkaConfigError(
                    f"option {name!r}: partition {p!r} of {topic!r} is not a number"
                ) from None
            if type(v) is not int:
                raise KafkaConfigError(
                    f"option {name!r}: value for {topic}-{p} must be an integer, not {v!r}"
                )
            out[topic][part] = v
    return out


def _offset_spec(opts: Mapping[str, str], which: str, default: str | None) -> OffsetSpec | None:
    """``starting`` or ``ending``: timestamp options take precedence over offsets, as in Spark."""
    ts = opts.get(f"{which}timestamp")
    if ts is not None:
        try:
            return OffsetSpec("timestamp", timestamp=int(ts.strip()))
        except ValueError:
            raise KafkaConfigError(
                f"option '{which}Timestamp' must be milliseconds since the epoch, not {ts!r}"
            ) from None
    by_ts = opts.get(f"{which}offsetsbytimestamp")
    if by_ts is not None:
        return OffsetSpec("timestamps", offsets=_json_offsets(f"{which}OffsetsByTimestamp", by_ts))
    raw = opts.get(f"{which}offsets")
    if raw is None:
        return None if default is None else OffsetSpec(default)
    text = raw.strip()
    if text.lower() in ("earliest", "latest"):
        return OffsetSpec(text.lower())
    return OffsetSpec("offsets", offsets=_json_offsets(f"{which}Offsets", text))


@dataclass(frozen=True)
class SourceOptions:
    """Everything a read needs, picklable (it travels to the executors inside each partition)."""

    client: dict[str, Any]  # keyword arguments for KafkaClient
    consumer: dict[str, Any] = field(default_factory=dict)  # and for the consumer reading a range
    subscribe: tuple[str, ...] = ()
    pattern: str | None = None
    assign: dict[str, tuple[int, ...]] | None = None
    starting: OffsetSpec = OffsetSpec("earliest")
    ending: OffsetSpec | None = None
    starting_strategy: str = "error"
    fail_on_data_loss: bool = True
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    # ranges smaller than this share a task (see planning.pack_ranges); None: one task per range
    min_records_per_partition: int | None = None
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60_000
    include_headers: bool = False
    poll_timeout_ms: int = 120_000
    isolation_level: str = "read_uncommitted"
    # fetchOffset.numRetries / fetchOffset.retryIntervalMs: the driver's offset lookups
    fetch_offset_attempts: int = 3
    fetch_offset_interval_ms: int = 1000
    # streaming only: the consumer group each finished micro-batch's offsets are committed to
    commit_group: str | None = None
    # keyFormat/valueFormat: the columns decoded by Schema Registry (kafka_core.spark.registry)
    key_format: FormatOptions | None = None
    value_format: FormatOptions | None = None
    # a user's schema naming some of the source's columns: only those are built (None: all)
    columns: tuple[str, ...] | None = None


def _kafka_params(
    opts: Mapping[str, str], role: str, refused: Mapping[str, str], own: set[str]
) -> dict[str, Any]:
    """The ``kafka.*`` options as client keywords; ``own`` are the ones the caller handles."""
    params: dict[str, str] = {}
    for key, value in opts.items():
        if not key.startswith("kafka."):
            continue
        name = key[len("kafka.") :]
        if name in refused:
            raise KafkaConfigError(f"Kafka option 'kafka.{name}' is not supported: {refused[name]}")
        if name in own:
            continue
        params[name] = value
    if "bootstrap.servers" not in params or not params["bootstrap.servers"].strip():
        raise KafkaConfigError(
            "option 'kafka.bootstrap.servers' must be specified (e.g. 'host1:9092,host2:9092')"
        )
    return translate(params, role, prefix="kafka.")


def parse_source(options: Mapping[str, Any], *, streaming: bool) -> SourceOptions:
    """Check the read options as Spark's connector does; raise naming the first bad one."""
    _check_names(options)
    opts = _lower_keys(options)
    given = [name for name in ("assign", "subscribe", "subscribepattern") if name in opts]
    spelled = {"assign": "assign", "subscribe": "subscribe", "subscribepattern": "subscribePattern"}
    if len(given) != 1:
        if not given:
            raise KafkaConfigError(
                "one of the options 'assign', 'subscribe' or 'subscribePattern' must be specified"
            )
        raise KafkaConfigError(
            "only one of the options 'assign', 'subscribe' or 'subscribePattern' may be specified, got "
            + " and ".join(repr(spelled[g]) for g in given)
        )
    subscribe: tuple[str, ...] = ()
    pattern = None
    assign = None
    if given[0] == "subscribe":
        subscribe = tuple(t.strip() for t in opts["subscribe"].split(",") if t.strip())
        if not subscribe:
            raise KafkaConfigError(f"option 'subscribe' names no topic: {opts['subscribe']!r}")
    elif given[0] == "subscribepattern":
        pattern = opts["subscribepattern"].strip()
        if not pattern:
            raise KafkaConfigError("option 'subscribePattern' is empty")
        try:
            re.compile(pattern)
        except re.error as exc:
            raise KafkaConfigError(
                f"option 'subscribePattern' is not a valid regex ({exc}): {pattern!r}"
            ) from None
    else:
        raw = opts["assign"]
        try:
            data = json.loads(raw)
        except ValueError as exc:
            raise KafkaConfigError(f"option 'assign' is not valid JSON ({exc}): {raw!r}") from None
        if (
            not isinstance(data, dict)
            or not data
            or not all(
                isinstance(ps, list) and all(type(p) is int and p >= 0 for p in ps) for ps in data.values()
            )
        ):
            raise KafkaConfigError(
                f"option 'assign' must be a JSON object like {{\"topicA\":[0,1]}}, not {raw!r}"
            )
        assign = {t: tuple(sorted(set(ps))) for t, ps in data.items()}

    starting = _offset_spec(opts, "starting", "latest" if streaming else "earliest")
    ending = _offset_spec(opts, "ending", None if streaming else "latest")
    assert starting is not None
    if streaming and ending is not None:
        raise KafkaConfigError(
            "ending offsets ('endingOffsets', 'endingTimestamp', ...) are not valid in streaming queries"
        )
    if not streaming:
        if starting.kind == "latest":
            raise KafkaConfigError("starting offset can't be 'latest' for batch queries on Kafka")
        if (
            any(v == LATEST for ps in starting.offsets.values() for v in ps.values())
            and starting.kind == "offsets"
        ):
            raise KafkaConfigError(
                "starting offset for a partition can't be latest (-1) for batch queries on Kafka"
            )
        assert ending is not None
        if ending.kind == "earliest":
            raise KafkaConfigError("ending offset can't be 'earliest' for batch queries on Kafka")
        if ending.kind == "offsets" and any(
            v == EARLIEST for ps in ending.offsets.values() for v in ps.values()
        ):
            raise KafkaConfigError(
                "ending offset for a partition can't be earliest (-2) for batch queries on Kafka"
            )
    for spec, name in ((starting, "startingOffsets"), (ending, "endingOffsets")):
        if spec is not None and spec.kind == "offsets":
            bad = [f"{t}-{p}: {v}" for t, ps in spec.offsets.items() for p, v in ps.items() if v < -2]
            if bad:
                raise KafkaConfigError(f"option {name!r} has offsets below -2: {', '.join(bad)}")
    strategy = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise KafkaConfigError(
            f"option 'startingOffsetsByTimestampStrategy' must be 'error' or 'latest', not {strategy!r}"
        )

    client, consumer = client_keywords(
        _kafka_params(opts, "consumer", {**_SOURCE_REFUSED, **_SOURCE_GROUP_REFUSED}, _SOURCE_OWN)
    )
    isolation = consumer.pop("isolation_level", "read_uncommitted")
    if isolation not in ("read_uncommitted", "read_committed"):
        raise KafkaConfigError(
            f"option 'kafka.isolation.level' must be read_uncommitted or read_committed, not {isolation!r}"
        )
    # Bigger fetches than a group consumer's default: a task reads one partition from end to end
    # (1 MiB -> 8 MiB read a partition about 1.5x faster here).
    consumer.setdefault("max_partition_fetch_bytes", 8 << 20)
    consumer.setdefault("fetch_max_wait_ms", 100)
    if "groupidprefix" in opts:
        raise KafkaConfigError(
            "option 'groupIdPrefix' is not supported: Spark's connector makes group ids from it "
            "('<prefix>-<uuid>') for consumers that join no group, so that group-prefixed ACLs match "
            "them; kafka_core's source joins no group and sends no request that names one, so there "
            "is no group id to prefix and no group ACL to match. Remove it; to name the client in the "
            "broker's logs and quotas, set 'kafka.client.id'"
        )
    client.setdefault("client_id", "spark-kafka-source-kafka_core")

    min_off = _int(opts, "minOffsetsPerTrigger")
    max_off = _int(opts, "maxOffsetsPerTrigger")
    if min_off is not None and max_off is not None and min_off > max_off:
        raise KafkaConfigError(
            f"option 'minOffsetsPerTrigger' ({min_off}) must not exceed 'maxOffsetsPerTrigger' ({max_off})"
        )
    poll_ms = _int(opts, "kafkaConsumer.pollTimeoutMs")
    commit_group = _group_id(opts, _commit_group(opts, streaming))
    attempts = _int(opts, "fetchOffset.numRetries")
    interval_ms = _int(opts, "fetchOffset.retryIntervalMs", minimum=0)
    key_format, value_format = parse_formats(opts, options)
    return SourceOptions(
        client=client,
        consumer=consumer,
        subscribe=subscribe,
        pattern=pattern,
        assign=assign,
        starting=starting,
        ending=ending,
        starting_strategy=strategy,
        fail_on_data_loss=_bool(opts, "failOnDataLoss", True),
        min_partitions=_int(opts, "minPartitions"),
        max_records_per_partition=_int(opts, "maxRecordsPerPartition"),
        min_records_per_partition=_min_records(opts, streaming),
        max_offsets_per_trigger=max_off,
        min_offsets_per_trigger=min_off,
        max_trigger_delay_ms=_duration_ms(opts, "maxTriggerDelay", 15 * 60_000),
        include_headers=_bool(opts, "includeHeaders", False),
        poll_timeout_ms=poll_ms if poll_ms is not None else 120_000,
        isolation_level=isolation,
        fetch_offset_attempts=3 if attempts is None else attempts,
        fetch_offset_interval_ms=1000 if interval_ms is None else interval_ms,
        commit_group=commit_group,
        key_format=key_format,
        value_format=value_format,
    )


# A Python task costs Spark tens of milliseconds around its rows (a JVM task a few): a
# micro-batch's small ranges are read together rather than one task each.
STREAM_MIN_RECORDS_PER_PARTITION = 10_000


def _min_records(opts: Mapping[str, str], streaming: bool) -> int | None:
    """``minRecordsPerPartition``: given, as given (1: one task per range); otherwise on for
    streaming, off for a batch read, whose tasks stay one per partition as Spark's connector plans them."""
    given = _int(opts, "minRecordsPerPartition")
    if given is not None:
        return given
    return STREAM_MIN_RECORDS_PER_PARTITION if streaming else None


def _commit_group(opts: Mapping[str, str], streaming: bool) -> str | None:
    """``commitOffsetsToGroup``: a group id, for streaming queries only (a batch read has no
    moment at which Spark says its rows were processed, so there is nothing true to commit)."""
    raw = opts.get("commitoffsetstogroup")
    if raw is None:
        return None
    group = raw.strip()
    if not group:
        raise KafkaConfigError("option 'commitOffsetsToGroup' is empty: give it a consumer group id")
    if not streaming:
        raise KafkaConfigError(
            "option 'commitOffsetsToGroup' is for streaming queries (readStream) only: a batch read "
            "has no point at which its rows are known to be processed. After a batch job, commit the "
            "offsets it read with kafka_core's admin client (KafkaAdmin.alter_group_offsets) if you "
            "want them in a group"
        )
    return group


def _group_id(opts: Mapping[str, str], commit_group: str | None) -> str | None:
    """``kafka.group.id``: the group this source's group requests carry. Spark's connector gives
    it to its consumers, which join no group and commit nothing; the only requests here that name
    a group are the commits of ``commitOffsetsToGroup``, so it is taken when it names that group
    and refused otherwise (it would do nothing)."""
    raw = opts.get("kafka.group.id")
    if raw is None:
        return commit_group
    group = raw.strip()
    if commit_group is None:
        raise KafkaConfigError(
            f"Kafka option 'kafka.group.id' ({group!r}) is not supported without 'commitOffsetsToGroup': "
            "kafka_core's source joins no consumer group and sends no request that names one (it "
            "reads the partitions it plans, at offsets Spark checkpoints; Spark's connector never "
            "commits to this group either), so the group would do nothing and no group ACL is "
            "needed. Remove it; to see a streaming query's progress as a group's lag, set "
            "'commitOffsetsToGroup' to a group id no consumer joins"
        )
    if group != commit_group:
        raise KafkaConfigError(
            f"options 'kafka.group.id' ({group!r}) and 'commitOffsetsToGroup' ({commit_group!r}) name "
            "different groups: the source's only group requests are the commits to "
            "'commitOffsetsToGroup'; give one group id (kafka.group.id may be left out)"
        )
    return commit_group


# Kafka's default transaction.max.timeout.ms: the longest a broker lets a transaction stay open.
DEFAULT_TRANSACTION_TIMEOUT_MS = 900_000


@dataclass(frozen=True)
class SinkOptions:
    """What a write needs: the producer's keyword arguments and the default topic.

    With ``transactional_id_prefix`` each task writes in a transaction of its own (id
    ``{prefix}-{task partition}``) and prepares it; the driver commits them all."""

    producer: dict[str, Any]
    topic: str | None = None
    # keyFormat/valueFormat: struct columns encoded by Schema Registry (kafka_core.spark.registry)
    key_format: SinkFormat | None = None
    value_format: SinkFormat | None = None
    transactional_id_prefix: str | None = None
    transaction_timeout_ms: int = DEFAULT_TRANSACTION_TIMEOUT_MS
    # Set by the writer on the driver, one per write: names the write's end mark.
    write_id: str | None = None

    @property
    def cache_key(self) -> str:
        return json.dumps(self.producer, sort_keys=True, default=str)

    def transactional_id(self, task_partition: int) -> str:
        """Stable across a task's attempts and across micro-batches: a newer attempt fences the
        older one, whose open transaction the broker then aborts."""
        return f"{self.transactional_id_prefix}-{task_partition}"

    def end_mark_id(self) -> str:
        """The transactional id the driver creates before it commits or aborts this write; a
        task attempt that finds it begins nothing (see ``kafka_core.spark.txn_mark``)."""
        return f"{self.transactional_id_prefix}-ended-{self.write_id}"


_SINK_TXN_REFUSED = {
    "transactional.id": "set the sink option 'transactionalIdPrefix': every task needs an id of its own",
    "transaction.timeout.ms": "set the sink option 'transactionTimeoutMs'",
}


# The sink compresses unless told otherwise (``kafka.compression.type``), as franz-go's producer
# does by default: a bulk write is mostly the broker's work, and lz4 batches cost it less than half
# the CPU of plain ones (the job's 1M JSON rows on one node: 0.6-1.3 s of broker CPU against
# 1.7-3.2 s) for about the same client CPU; lz4 is in every Kafka client since 0.8.2.
SINK_DEFAULT_COMPRESSION = "lz4"


def parse_sink(options: Mapping[str, Any]) -> SinkOptions:
    opts = _lower_keys(options)
    producer = _kafka_params(opts, "producer", {**_SINK_REFUSED, **_SINK_TXN_REFUSED}, set())
    producer.setdefault("compression", SINK_DEFAULT_COMPRESSION)
    topic = opts.get("topic")
    if topic is not None and not topic.strip():
        raise KafkaConfigError("option 'topic' is empty")
    prefix = opts.get("transactionalidprefix")
    timeout_ms = _int(opts, "transactionTimeoutMs")
    key_format, value_format = parse_sink_formats(opts, options)
    if prefix is None:
        if timeout_ms is not None:
            raise KafkaConfigError("option 'transactionTimeoutMs' needs 'transactionalIdPrefix'")
        return SinkOptions(
            producer=producer,
            topic=topic.strip() if topic else None,
            key_format=key_format,
            value_format=value_format,
        )
    prefix = prefix.strip()
    if not prefix:
        raise KafkaConfigError("option 'transactionalIdPrefix' is empty")
    from kafka_core.producer.options import check_transactional, parse_acks

    timeout_ms = DEFAULT_TRANSACTION_TIMEOUT_MS if timeout_ms is None else timeout_ms
    try:  # the executors would refuse it per task: refuse it once, here
        check_transactional(
            f"{prefix}-0",
            timeout_ms,
            acks=parse_acks(producer.get("acks", -1)),
            idempotent=producer.get("idempotent"),
        )
    except KafkaConfigError as exc:
        raise KafkaConfigError(
            f"option 'transactionalIdPrefix' cannot be used with these kafka.* options: {exc}"
        ) from None
    return SinkOptions(
        producer=producer,
        topic=topic.strip() if topic else None,
        key_format=key_format,
        value_format=value_format,
        transactional_id_prefix=prefix,
        transaction_timeout_ms=timeout_ms,
    )
