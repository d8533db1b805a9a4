"""Schema Registry formats of the Spark source and sink: ``valueFormat``/``keyFormat`` = ``avro``,
``protobuf`` or ``json``.

The reader schema is fixed on the driver when the query is planned (``valueSchema`` given, or a
version of ``valueSubject`` / ``<topic>-value``: the latest, pinned by its version number so the
executors read the very same one); the column's Spark type is what ``from_avro`` gives for it
(``from_protobuf`` for Protobuf; a JSON Schema's objects, arrays and scalars for JSON).
Avro runs the columnar codec; Protobuf and JSON the row (de)serializers, value by value.
On the executors each record is decoded by the writer schema its id names, so records of
several schema versions in one micro-batch are read, and a compatible change while a stream runs
needs no restart. ``mode`` = FAILFAST (a bad record fails the task) or PERMISSIVE (a null row and
its error in ``valueError``/``keyError``).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from kafka_core.errors import KafkaConfigError
from kafka_core.spark.cache import WorkerCache

__all__ = [
    "FormatOptions",
    "SinkFormat",
    "column_arrow_type",
    "decode_batch",
    "encode_column",
    "parse_formats",
    "parse_sink_formats",
    "pin_reader",
    "spark_type",
    "with_column_types",
]

REGISTRY_PREFIX = "schema.registry."
FORMATS = ("avro", "protobuf", "json")


@dataclass(frozen=True)
class FormatOptions:
    """How the executors decode one column (picklable; the registry settings stay out of repr)."""

    column: str  # "key" or "value"
    format: str
    registry: dict[str, str] = field(repr=False)  # SchemaRegistryClient's configuration
    subject: str | None = None
    version: int | None = None  # pinned on the driver
    reader_schema: str | None = None
    mode: str = "FAILFAST"
    message: str | None = None  # protobuf: the message's full name (default: the file's first)
    # Avro: the pinned version's schema text and id, fetched once on the driver, so that a task
    # decoding records of that id asks the registry nothing (none when it has references)
    pinned_schema: str | None = field(default=None, repr=False)
    pinned_id: int | None = None

    @property
    def error_column(self) -> str:
        return f"{self.column}Error"

    def cache_key(self) -> str:
        return json.dumps(
            [
                self.column,
                self.format,
                self.registry,
                self.subject,
                self.version,
                self.reader_schema,
                self.mode,
                self.message,
                self.pinned_id,
            ],
            sort_keys=True,
        )


@dataclass(frozen=True)
class SinkFormat:
    column: str
    format: str
    registry: dict[str, str] = field(repr=False)
    subject: str | None = None
    schema: str | None = None
    auto_register: bool = True
    use_latest_version: bool = False
    message: str | None = None  # protobuf: the message's full name (default: the file's first)
    # the struct column's Arrow type (set on the driver from the DataFrame's schema): rows that
    # come as Spark Rows (the 4.0 stream writer) are built into exactly this type
    arrow_type: Any = field(default=None, repr=False, compare=False)

    def cache_key(self) -> str:
        return json.dumps(
            [
                self.column,
                self.format,
                self.registry,
                self.subject,
                self.schema,
                self.auto_register,
                self.use_latest_version,
                self.message,
            ],
            sort_keys=True,
        )


def _registry_conf(opts: Mapping[str, str], original: Mapping[str, Any]) -> dict[str, str]:
    """The ``schema.registry.*`` options as the client's configuration (keys as the user spelled them)."""
    conf = {
        str(k)[len(REGISTRY_PREFIX) :]: str(v)
        for k, v in original.items()
        if str(k).lower().startswith(REGISTRY_PREFIX)
    }
    if not conf.get("url", "").strip():
        raise KafkaConfigError("option 'schema.registry.url' is needed with valueFormat/keyFormat")
    return conf


def _format(opts: Mapping[str, str], column: str) -> str | None:
    raw = opts.get(f"{column}format")
    if raw is None:
        return None
    fmt = raw.strip().lower()
    if fmt not in FORMATS:
        raise KafkaConfigError(f"option '{column}Format' must be avro, protobuf or json, not {raw!r}")
    return fmt


def parse_formats(opts: Mapping[str, str], original: Mapping[str, Any]) -> tuple[FormatOptions | None, ...]:
    """(key, value) decoding of a read; ``opts`` has lower-cased keys, ``original`` the user's."""
    mode = opts.get("mode", "FAILFAST").strip().upper()
    if mode not in ("FAILFAST", "PERMISSIVE"):
        raise KafkaConfigError(f"option 'mode' must be FAILFAST or PERMISSIVE, not {opts['mode']!r}")
    out: list[FormatOptions | None] = []
    for column in ("key", "value"):
        fmt = _format(opts, column)
        if fmt is None:
            out.append(None)
            continue
        out.append(
            FormatOptions(
                column=column,
                format=fmt,
                registry=_registry_conf(opts, original),
                subject=opts.get(f"{column}subject"),
                reader_schema=opts.get(f"{column}schema"),
                mode=mode,
                message=opts.get(f"{column}messagename"),
            )
        )
    return tuple(out)


def parse_sink_formats(opts: Mapping[str, str], original: Mapping[str, Any]) -> tuple[SinkFormat | None, ...]:
    out: list[SinkFormat | None] = []
    for column in ("key", "value"):
        fmt = _format(opts, column)
        if fmt is None:
            out.append(None)
            continue
        latest = opts.get("uselatestversion", "false").strip().lower() in ("true", "1", "yes")
        schema = opts.get(f"{column}schema")
        if schema is None and not latest:
            raise KafkaConfigError(
                f"option '{column}Schema' (the schema to write) or 'useLatestVersion' is needed"
            )
        out.append(
            SinkFormat(
                column=column,
                format=fmt,
                registry=_registry_conf(opts, original),
                subject=opts.get(f"{column}subject"),
                schema=schema,
                auto_register=opts.get("autoregisterschemas", "true").strip().lower() in ("true", "1", "yes"),
                use_latest_version=latest,
                message=opts.get(f"{column}messagename"),
            )
        )
    return tuple(out)


def _client(conf: dict[str, str]) -> Any:
    from kafka_core.schema_registry import SchemaRegistryClient

    return SchemaRegistryClient(dict(conf))


_CLIENTS: WorkerCache[Any] = WorkerCache(_client, lambda c: c.close())


def _client_for(conf: dict[str, str]) -> Any:
    return _CLIENTS.get(json.dumps(conf, sort_keys=True), conf)


def pin_reader(fmt: FormatOptions, topics: tuple[str, ...]) -> FormatOptions:
    """On the driver: the reader schema's subject version fixed (the latest, when not given)."""
    if fmt.reader_schema is not None:
        return fmt
    subject = fmt.subject
    if subject is None:
        if len(topics) != 1:
            raise KafkaConfigError(
                f"option '{fmt.column}Subject' or '{fmt.column}Schema' is needed unless exactly one topic is subscribed"
            )
        subject = f"{topics[0]}-{fmt.column}"
    latest = _client_for(fmt.registry).get_latest_version(subject)
    schema = latest.schema
    if fmt.format == "avro" and not schema.references and (schema.schema_type or "AVRO").upper() == "AVRO":
        return replace(
            fmt,
            subject=subject,
            version=int(latest.version),
            pinned_schema=schema.schema_str,
            pinned_id=int(latest.schema_id),
        )
    return replace(fmt, subject=subject, version=int(latest.version))


class PinnedRegistry:
    """The registry as an executor's Avro decoder sees it: the schema pinned on the driver is
    answered from the options; any other id (records written under another version) asks the
    registry, whose client (and its HTTP library) is built on that first need."""

    def __init__(self, conf: dict[str, str], schema_id: int, schema_str: str) -> None:
        from kafka_core.schema_registry.schema import Schema

        self._conf = conf
        self._id = schema_id
        self._schema = Schema(schema_str, "AVRO")

    def get_schema(self, schema_id: int) -> Any:
        if schema_id == self._id:
            return self._schema
        return _client_for(self._conf).get_schema(schema_id)

    def get_version(self, subject: str, version: int) -> Any:
        return _client_for(self._conf).get_version(subject, version)

    def get_latest_version(self, subject: str) -> Any:
        return _client_for(self._conf).get_latest_version(subject)


def _deserializer(fmt: FormatOptions) -> Any:
    from kafka_core.schema_registry.columnar import AvroColumnDeserializer
    from kafka_core.schema_registry.columnar.rows import RowColumnDeserializer

    field: Literal["key", "value"] = "key" if fmt.column == "key" else "value"
    mode: Literal["FAILFAST", "PERMISSIVE"] = "PERMISSIVE" if fmt.mode == "PERMISSIVE" else "FAILFAST"
    if fmt.format == "avro" and fmt.pinned_schema is not None and fmt.pinned_id is not None:
        return AvroColumnDeserializer(
            PinnedRegistry(fmt.registry, fmt.pinned_id, fmt.pinned_schema),
            fmt.pinned_schema,
            field=field,
            mode=mode,
        )
    client = _client_for(fmt.registry)
    if fmt.format in ("json", "protobuf"):
        return RowColumnDeserializer(
            client,
            "json" if fmt.format == "json" else "protobuf",
            fmt.reader_schema,
            subject=fmt.subject,
            version=fmt.version,
            field=field,
            mode=mode,
            message=fmt.message,
        )
    return AvroColumnDeserializer(
        client, fmt.reader_schema, subject=fmt.subject, version=fmt.version, field=field, mode=mode
    )


_MEMO: dict[str, Any] = {}  # (de)serializers of this worker, by their options
_MEMO_LOCK = threading.Lock()  # guards _MEMO and _BUILDING
_BUILDING: dict[str, threading.Lock] = {}  # one build per key: the warm-up's and the task's wait for one


def _memo(key: str, build: Callable[[], Any]) -> Any:
    with _MEMO_LOCK:
        found = _MEMO.get(key)
        building = _BUILDING.setdefault(key, threading.Lock())
    if found is not None:
        return found
    with building:
        with _MEMO_LOCK:
            found = _MEMO.get(key)
        if found is None:
            found = build()
            with _MEMO_LOCK:
                _MEMO[key] = found
    return found


def _deserializer_for(fmt: FormatOptions) -> Any:
    return _memo("read " + fmt.cache_key(), lambda: _deserializer(fmt))


def prepare_decoding(formats: tuple[FormatOptions | None, ...]) -> None:
    """Build this worker's decoders of ``formats`` ahead of the first batch (a task's warm-up):
    the codec's imports, the reader schema's plan and the pinned writer's."""
    for fmt in formats:
        if fmt is None:
            continue
        deserializer = _deserializer_for(fmt)
        if fmt.format == "avro" and fmt.pinned_id is not None:
            deserializer.decoder().prepare({fmt.pinned_id})


def spark_type(fmt: FormatOptions) -> Any:
    """The column's Spark type (as from_avro or from_protobuf types the reader schema)."""
    from pyspark.sql.pandas.types import from_arrow_type

    return from_arrow_type(_deserializer_for(fmt).arrow_type())


def decode_batch(batch: Any, formats: tuple[FormatOptions | None, ...]) -> Any:
    """A Spark-schema read batch with its key/value columns decoded (error columns appended)."""
    import pyarrow as pa

    names = list(batch.schema.names)
    arrays = list(batch.columns)
    for fmt in formats:
        if fmt is None:
            continue
        result = _deserializer_for(fmt).decode(batch.column(fmt.column))
        arrays[names.index(fmt.column)] = result.values
        if result.errors is not None:
            names.append(fmt.error_column)
            arrays.append(result.errors)
    return pa.RecordBatch.from_arrays(arrays, names=names)


def _serializer(fmt: SinkFormat) -> Any:
    from kafka_core.schema_registry.columnar import AvroColumnSerializer
    from kafka_core.schema_registry.columnar.rows import RowColumnSerializer

    field: Literal["key", "value"] = "key" if fmt.column == "key" else "value"
    client = _client_for(fmt.registry)
    if fmt.format in ("json", "protobuf"):
        return RowColumnSerializer(
            client,
            "json" if fmt.format == "json" else "protobuf",
            fmt.schema,
            subject=fmt.subject,
            field=field,
            auto_register=fmt.auto_register,
            use_latest_version=fmt.use_latest_version,
            message=fmt.message,
        )
    return AvroColumnSerializer(
        client,
        fmt.schema,
        subject=fmt.subject,
        field=field,
        auto_register=fmt.auto_register,
        use_latest_version=fmt.use_latest_version,
    )


def with_column_types(sink: Any, schema: Any) -> Any:
    """SinkOptions whose formats know their column's Arrow type (on the driver, from the
    DataFrame's Spark schema)."""
    import inspect

    from pyspark.sql.pandas.types import to_arrow_type

    # newer pysparks want the time zone of TimestampType (instants: UTC); older ones take UTC
    zone: dict[str, Any] = (
        {"timezone": "UTC"} if "timezone" in inspect.signature(to_arrow_type).parameters else {}
    )
    names = {f.name.lower(): f.dataType for f in schema.fields}
    typed = {}
    for name in ("key_format", "value_format"):
        fmt = getattr(sink, name)
        if fmt is not None and fmt.column in names:
            typed[name] = replace(fmt, arrow_type=to_arrow_type(names[fmt.column], **zone))
    return replace(sink, **typed) if typed else sink


def column_arrow_type(fmt: SinkFormat | None) -> Any:
    return None if fmt is None else fmt.arrow_type


def encode_column(fmt: SinkFormat, column: Any, topic: str) -> Any:
    """A struct column of the sink encoded to framed values of its format for ``topic``."""
    return _memo("write " + fmt.cache_key(), lambda: _serializer(fmt)).encode_column(column, topic)


def pinned(options: Any) -> Any:
    """SourceOptions with their formats' reader schemas pinned (on the driver)."""
    topics = tuple(options.subscribe)
    formats = {}
    for name in ("key_format", "value_format"):
        fmt = getattr(options, name)
        if fmt is not None:
            formats[name] = pin_reader(fmt, topics)
    return replace(options, **formats) if formats else options


def read_schema_with_formats(base: Any, formats: tuple[FormatOptions | None, ...]) -> Any:
    """Spark's Kafka read schema with decoded key/value types and the PERMISSIVE error columns."""
    from pyspark.sql.types import StringType, StructField, StructType

    fields = list(base.fields)
    names = [f.name for f in fields]
    for fmt in formats:
        if fmt is None:
            continue
        fields[names.index(fmt.column)] = StructField(fmt.column, spark_type(fmt), True)
    fields.extend(
        StructField(fmt.error_column, StringType(), True)
        for fmt in formats
        if fmt is not None and fmt.mode == "PERMISSIVE"
    )
    return StructType(fields)


def source_formats(options: Mapping[str, Any]) -> tuple[tuple[FormatOptions | None, ...], tuple[str, ...]]:
    """The formats of a read's raw options and its subscribed topics (for the schema, which
    Spark asks for before it says whether the read is a stream)."""
    opts = {str(k).lower(): str(v) for k, v in options.items()}
    topics = tuple(t.strip() for t in opts.get("subscribe", "").split(",") if t.strip())
    return parse_formats(opts, options), topics
