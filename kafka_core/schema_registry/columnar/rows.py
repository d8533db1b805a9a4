"""JSON Schema and Protobuf values as Arrow columns, through the row (de)serializers.

These formats have no columnar codec: each value goes through ``JSONDeserializer``/
``ProtobufDeserializer`` (or the serializers) as a client's ``poll`` would, and only the typing is
columnar. The id in each frame must name a registered schema of the format, and a Protobuf
record the reader's message (else the record is bad); a JSON value is validated against its
writer schema, then typed by the reader schema, as Avro resolves each record from its writer
schema to the reader's. The column's Arrow type comes from the registered schema: a JSON
Schema's objects, arrays and scalars (anything else: the value's JSON text), or a Protobuf
message as Spark's ``from_protobuf`` types it (enums as their names,
``google.protobuf.Timestamp`` as a timestamp, fields at their zero value null).
"""

from __future__ import annotations

import base64
import datetime
import decimal
import importlib
import json
import threading
from collections.abc import Callable
from typing import Any, Literal

from kafka_core.codec.avro_columns import DecodedColumn, Mode
from kafka_core.errors import KafkaCodecError, KafkaConfigError, SerializationError

__all__ = ["RowColumnDeserializer", "RowColumnSerializer", "json_schema_arrow_type", "protobuf_message_class"]

Field = Literal["key", "value"]
RowFormat = Literal["json", "protobuf"]
_WELL_KNOWN = "google/protobuf/"
_TIMESTAMP = "google.protobuf.Timestamp"


def _registered(client: Any, subject: str, version: int | None) -> Any:
    return (
        client.get_version(subject, version) if version is not None else client.get_latest_version(subject)
    ).schema


# --- JSON Schema -------------------------------------------------------------------------------


def json_schema_arrow_type(schema: Any) -> Any:
    """The Arrow type of values of a JSON Schema (a dict or its text); local ``$ref``s followed."""
    document = json.loads(schema) if isinstance(schema, str) else schema
    return _json_type(document, document, ())


def _json_type(node: Any, root: Any, seen: tuple[str, ...]) -> Any:
    import pyarrow as pa

    if not isinstance(node, dict):
        return pa.string()
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        if ref in seen:
            raise KafkaConfigError(f"recursive JSON Schema ({ref}) has no Spark/Arrow type")
        target: Any = root
        for part in ref[2:].split("/"):
            target = target.get(part, {}) if isinstance(target, dict) else {}
        return _json_type(target, root, (*seen, ref))
    kind = node.get("type")
    if isinstance(kind, list):
        rest = [k for k in kind if k != "null"]
        kind = rest[0] if len(rest) == 1 else None
    if kind == "object":
        props = node.get("properties")
        if isinstance(props, dict) and props:
            return pa.struct([pa.field(name, _json_type(sub, root, seen)) for name, sub in props.items()])
        extra = node.get("additionalProperties")
        if isinstance(extra, dict):
            return pa.map_(pa.string(), _json_type(extra, root, seen))
        return pa.string()
    if kind == "array":
        return pa.list_(_json_type(node.get("items", {}), root, seen))
    return {"integer": pa.int64(), "number": pa.float64(), "boolean": pa.bool_()}.get(str(kind), pa.string())


def _to_arrow_py(value: Any, t: Any) -> Any:
    """A JSON value shaped for ``pa.array(..., t)``: maps as pairs, text for string columns."""
    import pyarrow as pa

    if value is None:
        return None
    if pa.types.is_struct(t):
        if not isinstance(value, dict):
            raise SerializationError(f"a JSON {type(value).__name__} where an object is typed")
        return {
            t.field(i).name: _to_arrow_py(value.get(t.field(i).name), t.field(i).type)
            for i in range(t.num_fields)
        }
    if pa.types.is_map(t):
        if not isinstance(value, dict):
            raise SerializationError(f"a JSON {type(value).__name__} where an object is typed")
        return [(k, _to_arrow_py(v, t.item_type)) for k, v in value.items()]
    if pa.types.is_list(t):
        if not isinstance(value, list):
            raise SerializationError(f"a JSON {type(value).__name__} where an array is typed")
        return [_to_arrow_py(v, t.value_type) for v in value]
    if pa.types.is_string(t) and not isinstance(value, str):
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return value


def _to_json(value: Any, t: Any) -> Any:
    """An Arrow row (pyarrow's Python form) as a JSON value: maps as objects, times as ISO text,
    decimals as numbers, bytes as base64."""
    import pyarrow as pa

    if value is None:
        return None
    if pa.types.is_struct(t):  # null fields left out, as Spark's to_json leaves them
        fields = [(t.field(i).name, t.field(i).type) for i in range(t.num_fields)]
        return {name: _to_json(value[name], ft) for name, ft in fields if value.get(name) is not None}
    if pa.types.is_map(t):
        return {str(k): _to_json(v, t.item_type) for k, v in value}
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return [_to_json(v, t.value_type) for v in value]
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, bytes):
        return base64.standard_b64encode(value).decode("ascii")
    return value


# --- Protobuf ----------------------------------------------------------------------------------


def protobuf_message_class(client: Any, schema: Any, message: str | None = None) -> Any:
    """The message class of a registered Protobuf schema (base64 FileDescriptorProto, or .proto
    text is not accepted) with its references: ``message`` by full name, else the file's first."""
    from google.protobuf import descriptor_pb2, descriptor_pool
    from google.protobuf.message_factory import GetMessageClass

    pool = descriptor_pool.DescriptorPool()
    added: set[str] = set()

    def add(text: str, references: Any) -> Any:
        try:
            proto = descriptor_pb2.FileDescriptorProto.FromString(base64.standard_b64decode(text))
        except Exception as exc:
            raise KafkaConfigError(
                f"the Protobuf schema is not a base64 FileDescriptorProto: {exc}"
            ) from None
        by_name = {ref.name: ref for ref in references or ()}
        for dependency in proto.dependency:
            if dependency in added:
                continue
            if dependency.startswith(_WELL_KNOWN) and dependency not in by_name:
                module = importlib.import_module(
                    "google.protobuf." + dependency[len(_WELL_KNOWN) :][:-6] + "_pb2"
                )
                known = descriptor_pb2.FileDescriptorProto()
                module.DESCRIPTOR.CopyToProto(known)
                pool.Add(known)
            elif dependency in by_name:
                ref = by_name[dependency]
                referenced = client.get_version(ref.subject, ref.version).schema
                add(referenced.schema_str, referenced.references)
            else:
                raise KafkaConfigError(
                    f"the Protobuf schema imports {dependency}, which its references do not name"
                )
            added.add(dependency)
        pool.Add(proto)
        added.add(proto.name)
        return proto

    top = add(schema.schema_str, getattr(schema, "references", None))
    if message is None:
        if not top.message_type:
            raise KafkaConfigError("the Protobuf schema defines no message")
        message = f"{top.package}.{top.message_type[0].name}" if top.package else top.message_type[0].name
    return GetMessageClass(pool.FindMessageTypeByName(message))


def protobuf_arrow_type(descriptor: Any, seen: tuple[str, ...] = ()) -> Any:
    """The Arrow type of a message, as Spark's from_protobuf types it."""
    import pyarrow as pa

    if descriptor.full_name == _TIMESTAMP:
        return pa.timestamp("us", tz="UTC")
    if descriptor.full_name in seen:
        raise KafkaConfigError(f"recursive Protobuf message {descriptor.full_name} has no Spark/Arrow type")
    inner = (*seen, descriptor.full_name)
    fields = []
    for f in descriptor.fields:
        if _is_map(f):
            key, value = f.message_type.fields_by_name["key"], f.message_type.fields_by_name["value"]
            t = pa.map_(_proto_field_type(key, inner), _proto_field_type(value, inner))
        elif _is_repeated(f):
            t = pa.list_(_proto_field_type(f, inner))
        else:
            t = _proto_field_type(f, inner)
        fields.append(pa.field(f.name, t))
    return pa.struct(fields)


def _is_repeated(f: Any) -> bool:
    repeated = getattr(f, "is_repeated", None)  # protobuf >= 6; ``label`` before
    return bool(f.label == f.LABEL_REPEATED if repeated is None else repeated)


def _is_map(f: Any) -> bool:
    return _is_repeated(f) and f.message_type is not None and f.message_type.GetOptions().map_entry


def _proto_field_type(f: Any, seen: tuple[str, ...]) -> Any:
    import pyarrow as pa

    if f.type == f.TYPE_MESSAGE or f.type == f.TYPE_GROUP:
        return protobuf_arrow_type(f.message_type, seen)
    if f.type == f.TYPE_ENUM:
        return pa.string()
    return {
        f.TYPE_INT32: pa.int32(),
        f.TYPE_SINT32: pa.int32(),
        f.TYPE_SFIXED32: pa.int32(),
        f.TYPE_UINT32: pa.int64(),
        f.TYPE_FIXED32: pa.int64(),
        f.TYPE_INT64: pa.int64(),
        f.TYPE_SINT64: pa.int64(),
        f.TYPE_SFIXED64: pa.int64(),
        f.TYPE_UINT64: pa.int64(),
        f.TYPE_FIXED64: pa.int64(),
        f.TYPE_FLOAT: pa.float32(),
        f.TYPE_DOUBLE: pa.float64(),
        f.TYPE_BOOL: pa.bool_(),
        f.TYPE_STRING: pa.string(),
        f.TYPE_BYTES: pa.binary(),
    }[f.type]


def _message_to_py(message: Any) -> Any:
    """A message as its Arrow row: unset fields and fields at their zero value null (as
    from_protobuf without emit.default.values), repeated fields lists, maps pairs."""
    descriptor = message.DESCRIPTOR
    if descriptor.full_name == _TIMESTAMP:
        return message.ToDatetime(tzinfo=datetime.UTC)
    present = {f.name for f, _ in message.ListFields()}
    row: dict[str, Any] = {}
    for f in descriptor.fields:
        value = getattr(message, f.name)
        if _is_map(f):
            vf = f.message_type.fields_by_name["value"]
            row[f.name] = [(k, _scalar_to_py(vf, v)) for k, v in value.items()]
        elif _is_repeated(f):
            row[f.name] = [_scalar_to_py(f, v) for v in value]
        elif f.name not in present:
            row[f.name] = None
        else:
            row[f.name] = _scalar_to_py(f, value)
    return row


def _scalar_to_py(f: Any, value: Any) -> Any:
    if f.type == f.TYPE_MESSAGE or f.type == f.TYPE_GROUP:
        return _message_to_py(value)
    if f.type == f.TYPE_ENUM:
        found = f.enum_type.values_by_number.get(value)
        return str(value) if found is None else found.name
    return value


def _fill_message(message: Any, row: dict[str, Any]) -> Any:
    """The inverse of ``_message_to_py``: an Arrow row's fields set on ``message`` by name."""
    descriptor = message.DESCRIPTOR
    for f in descriptor.fields:
        value = row.get(f.name)
        if value is None:
            continue
        if _is_map(f):
            target = getattr(message, f.name)
            vf = f.message_type.fields_by_name["value"]
            for k, v in value.items() if isinstance(value, dict) else value:
                if vf.type == vf.TYPE_MESSAGE:
                    _set_message(target[k], vf, v)
                else:
                    target[k] = v
        elif _is_repeated(f):
            target = getattr(message, f.name)
            for v in value:
                if f.type == f.TYPE_MESSAGE:
                    _set_message(target.add(), f, v)
                else:
                    target.append(v)
        elif f.type == f.TYPE_MESSAGE:
            _set_message(getattr(message, f.name), f, value)
        else:
            setattr(message, f.name, value)
    return message


def _set_message(target: Any, f: Any, value: Any) -> None:
    if f.message_type.full_name == _TIMESTAMP:
        if value.tzinfo is None:
            value = value.replace(tzinfo=datetime.UTC)
        target.FromDatetime(value)
    else:
        _fill_message(target, value)


# --- the column (de)serializers ----------------------------------------------------------------


class RowColumnDeserializer:
    """Framed JSON Schema or Protobuf values -> one typed Arrow column.

    The reader schema is ``reader_schema`` (JSON Schema text, or a base64 FileDescriptorProto),
    else version ``version`` (default: the latest) of ``subject`` (default ``<topic>-<field>``).
    ``message``: a Protobuf message's full name (default: the file's first).
    ``mode`` as AvroColumnDeserializer's: FAILFAST raises KafkaCodecError at the first bad
    record, PERMISSIVE makes it a null row and gives its error in a second column.
    """

    def __init__(
        self,
        schema_registry_client: Any,
        fmt: RowFormat,
        reader_schema: str | None = None,
        *,
        subject: str | None = None,
        version: int | None = None,
        field: Field = "value",
        mode: Mode = "FAILFAST",
        message: str | None = None,
    ) -> None:
        if fmt not in ("json", "protobuf"):
            raise KafkaConfigError(f"format must be json or protobuf, not {fmt!r}")
        if mode not in ("FAILFAST", "PERMISSIVE"):
            raise KafkaConfigError(f"mode must be FAILFAST or PERMISSIVE, not {mode!r}")
        self._client = schema_registry_client
        self.format = fmt
        self._reader = reader_schema
        self._subject = subject
        self._version = version
        self.field = field
        self.mode: Mode = mode
        self._message = message
        self._lock = threading.Lock()  # guards _decoders, _writers and _written
        self._decoders: dict[str | None, tuple[Any, Callable[[Any], Any]]] = {}
        self._writers: dict[int, str | None] = {}  # schema id -> why its records are bad (None: fine)
        # Protobuf: (schema id, message indexes) -> the full name of the message written
        self._written: dict[tuple[int, tuple[int, ...]], str | None] = {}

    def _check_writer(self, data: Any) -> None:
        """SerializationError when the frame's id names no schema of this format. A registry
        that does not answer raises its own error: the records are not at fault."""
        from kafka_core.schema_registry.columnar import unknown_schema_id
        from kafka_core.schema_registry.serde import schema_id_of

        schema_id = schema_id_of(data)
        with self._lock:
            known = schema_id in self._writers
            problem = self._writers.get(schema_id)
        if not known:
            expected = "JSON" if self.format == "json" else "PROTOBUF"
            try:
                kind = (getattr(self._client.get_schema(schema_id), "schema_type", None) or "AVRO").upper()
                problem = None if kind == expected else f"schema id {schema_id} is {kind}, not {expected}"
            except Exception as exc:
                if not unknown_schema_id(exc):
                    raise
                problem = f"schema id {schema_id} is not in the registry: {exc}"
            with self._lock:
                self._writers[schema_id] = problem
        if problem is not None:
            raise SerializationError(problem)

    def _written_message(self, data: Any) -> str | None:
        """The full name of the message a Protobuf record holds, by its writer schema and message
        index list (None when the writer schema is not a base64 FileDescriptorProto: .proto text,
        as Java's serializers register it, is not parsed here). Records of another message of
        the file, or of another file, would otherwise parse into the reader's class as garbage."""
        from google.protobuf import descriptor_pb2
        from google.protobuf.message import DecodeError

        from kafka_core.schema_registry.protobuf import message_name_at, read_message_indexes
        from kafka_core.schema_registry.serde import split_frame

        schema_id, payload = split_frame(data)
        indexes, _ = read_message_indexes(payload)
        key = (schema_id, tuple(indexes))
        with self._lock:
            if key in self._written:
                return self._written[key]
        try:
            file = descriptor_pb2.FileDescriptorProto.FromString(
                base64.b64decode(self._client.get_schema(schema_id).schema_str, validate=True)
            )
        except (ValueError, DecodeError):
            name = None
        else:
            name = message_name_at(file, indexes)
        with self._lock:
            self._written[key] = name
        return name

    def _decoder(self, topic: str | None) -> tuple[Any, Callable[[Any], Any]]:
        """(Arrow type, one value -> its Arrow row) of ``topic``'s records."""
        key = None if self._reader is not None or self._subject is not None else topic
        with self._lock:
            found = self._decoders.get(key)
        if found is not None:
            return found
        from kafka_core.schema_registry.schema import Schema

        if self._reader is not None:
            schema = Schema(self._reader, "JSON" if self.format == "json" else "PROTOBUF")
        else:
            if key is None and self._subject is None:
                raise KafkaConfigError("no reader schema, subject or topic to find the reader schema by")
            schema = _registered(self._client, self._subject or f"{key}-{self.field}", self._version)
        decoder: tuple[Any, Callable[[Any], Any]]
        if self.format == "json":
            from kafka_core.schema_registry.json_schema import JSONDeserializer

            t = json_schema_arrow_type(schema.schema_str)
            # validated against the schema each record was written with (a closed version 1
            # reader would refuse version 2's added property); typed by the reader's
            row = JSONDeserializer(None, schema_registry_client=self._client)
            decoder = (t, lambda data: _to_arrow_py(row(data), t))
        else:
            from kafka_core.schema_registry.protobuf import ProtobufDeserializer

            cls = protobuf_message_class(self._client, schema, self._message)
            message = ProtobufDeserializer(cls)
            name = cls.DESCRIPTOR.full_name

            def convert(data: Any) -> Any:
                written = self._written_message(data)
                if written is not None and written != name:
                    raise SerializationError(f"the record is a {written}, not a {name}")
                return _message_to_py(message(data))

            decoder = (protobuf_arrow_type(cls.DESCRIPTOR), convert)
        with self._lock:
            return self._decoders.setdefault(key, decoder)

    def arrow_type(self, topic: str | None = None) -> Any:
        return self._decoder(topic)[0]

    def decode(self, values: Any, topic: str | None = None) -> DecodedColumn:
        import pyarrow as pa

        t, convert = self._decoder(topic)
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks()
        rows: list[Any] = []
        errors: list[str | None] = []
        for i, data in enumerate(values.to_pylist() if hasattr(values, "to_pylist") else values):
            try:
                if data is not None:
                    self._check_writer(data)
                row = None if data is None else convert(data)
                if row is not None:
                    pa.array([row], t)  # a value the type cannot hold is this row's error
            except (
                SerializationError,
                KafkaCodecError,
                pa.ArrowInvalid,
                pa.ArrowTypeError,
                TypeError,
            ) as exc:
                if self.mode == "FAILFAST":
                    raise KafkaCodecError(f"row {i}: {exc}") from None
                rows.append(None)
                errors.append(str(exc))
                continue
            rows.append(row)
            errors.append(None)
        column = pa.array(rows, t)
        return DecodedColumn(column, pa.array(errors, pa.string()) if self.mode == "PERMISSIVE" else None)


class RowColumnSerializer:
    """An Arrow struct column (or table) -> framed JSON Schema or Protobuf values, each row
    through ``JSONSerializer``/``ProtobufSerializer``. ``schema_str`` (JSON Schema text, or a
    base64 FileDescriptorProto) registered under the subject (``auto_register``) or looked up;
    ``use_latest_version``: the subject's latest schema."""

    def __init__(
        self,
        schema_registry_client: Any,
        fmt: RowFormat,
        schema_str: str | None = None,
        *,
        subject: str | None = None,
        field: Field = "value",
        auto_register: bool = True,
        use_latest_version: bool = False,
        message: str | None = None,
    ) -> None:
        if fmt not in ("json", "protobuf"):
            raise KafkaConfigError(f"format must be json or protobuf, not {fmt!r}")
        if schema_str is None and not use_latest_version:
            raise KafkaConfigError("give a schema, or use_latest_version=True")
        self._client = schema_registry_client
        self.format = fmt
        self._schema = schema_str
        self._subject = subject
        self.field = field
        self.auto_register = auto_register
        self.use_latest_version = use_latest_version
        self._message = message
        self._lock = threading.Lock()  # guards _encoders
        self._encoders: dict[str, Callable[[Any], bytes | None]] = {}

    def _encoder(self, topic: str) -> Callable[[Any], bytes | None]:
        from kafka_core.schema_registry.schema import Schema
        from kafka_core.schema_registry.serde import MessageField, SerializationContext

        subject = self._subject or f"{topic}-{self.field}"
        with self._lock:
            found = self._encoders.get(subject)
        if found is not None:
            return found
        conf = {
            "auto.register.schemas": self.auto_register and not self.use_latest_version,
            "use.latest.version": self.use_latest_version,
            "subject.name.strategy": lambda _ctx, _name: subject,
        }
        ctx = SerializationContext(topic, MessageField.KEY if self.field == "key" else MessageField.VALUE)
        kind = "JSON" if self.format == "json" else "PROTOBUF"
        schema = (
            _registered(self._client, subject, None) if self._schema is None else Schema(self._schema, kind)
        )
        encode: Callable[[Any], bytes | None]
        if self.format == "json":
            from kafka_core.schema_registry.json_schema import JSONSerializer

            row = JSONSerializer(schema, self._client, conf=conf)
            encode = lambda value: row(value, ctx)  # noqa: E731
        else:
            from kafka_core.schema_registry.protobuf import ProtobufSerializer

            cls = protobuf_message_class(self._client, schema, self._message)
            message = ProtobufSerializer(cls, self._client, conf=conf)
            encode = lambda value: message(_fill_message(cls(), value), ctx)  # noqa: E731
        with self._lock:
            return self._encoders.setdefault(subject, encode)

    def encode(self, values: Any, topic: str) -> Any:
        import pyarrow as pa

        if isinstance(values, (pa.Table, pa.RecordBatch)):
            values = pa.StructArray.from_arrays(
                [c.combine_chunks() if isinstance(c, pa.ChunkedArray) else c for c in values.columns],
                names=values.schema.names,
            )
        elif isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks()
        encode = self._encoder(topic)
        out: list[bytes | None] = []
        for i, row in enumerate(values.to_pylist()):
            if row is None:
                out.append(None)
                continue
            try:
                out.append(encode(_to_json(row, values.type) if self.format == "json" else row))
            except (SerializationError, TypeError, ValueError) as exc:
                raise KafkaCodecError(f"row {i}: {exc}") from None
        return pa.array(out, pa.binary())

    def encode_column(self, values: Any, topic: str) -> Any:
        """producer.columns' encoder method."""
        return self.encode(values, topic)
