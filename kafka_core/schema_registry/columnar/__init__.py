"""Schema Registry Avro as Arrow columns: the registry side of the columnar Avro codec.

``AvroColumnDeserializer`` decodes a column of Confluent-framed Avro values (``poll_columns``'
``value_decoder=``/``key_decoder=``, the Spark source) into one typed Arrow column: each record
by the writer schema its id names, resolved to one reader schema (given, or the latest of the
subject). ``AvroColumnSerializer`` encodes an Arrow table or struct column (``send_batch``'
``value_encoder=``/``key_encoder=``, the Spark sink) under a registered schema.

The client is anything with confluent-kafka's ``SchemaRegistryClient`` methods used here
(``get_schema``, ``get_version``, ``get_latest_version``, ``register_schema``,
``lookup_schema``): ours (``kafka_core.schema_registry.SchemaRegistryClient``) or theirs.
"""

from __future__ import annotations

import threading
from typing import Any, Literal

from kafka_core.codec.avro_columns import AvroColumnDecoder, DecodedColumn, Mode
from kafka_core.codec.avro_encode import AvroColumnEncoder
from kafka_core.codec.avro_schema import AvroSchemaError, AvroType, arrow_type, parse_schema
from kafka_core.errors import KafkaConfigError

__all__ = [
    "AvroColumnDeserializer",
    "AvroColumnSerializer",
    "parse_registered",
    "subject_for",
    "unknown_schema_id",
]

Field = Literal["key", "value"]


def subject_for(topic: str, field: Field) -> str:
    """The topic name strategy's subject: ``<topic>-value`` or ``<topic>-key``."""
    return f"{topic}-{field}"


def unknown_schema_id(exc: BaseException) -> bool:
    """The registry answered that no schema has the id (HTTP 404): the record is at fault. Any
    other failure (no answer, refused credentials) is the registry's, not the record's."""
    return getattr(exc, "http_status_code", None) == 404


def parse_registered(client: Any, schema: Any, named: dict[str, AvroType] | None = None) -> AvroType:
    """A registry ``Schema`` parsed with the named types of its references (fetched by subject and
    version, recursively, before the schema itself)."""
    kind = (getattr(schema, "schema_type", None) or "AVRO").upper()
    if kind != "AVRO":
        raise AvroSchemaError(f"the registry's schema is {kind}, not AVRO")
    named = {} if named is None else named
    for ref in getattr(schema, "references", None) or ():
        parse_registered(client, client.get_version(ref.subject, ref.version).schema, named)
    return parse_schema(schema.schema_str, named)


class AvroColumnDeserializer:
    """Framed Avro values -> one typed Arrow column (see the module docstring).

    ``reader_schema``: the schema every record is resolved to (JSON text); without it, version
    ``version`` (default: the latest) of ``subject`` (default: ``<topic>-<field>`` of each
    topic) when first needed. ``mode``: FAILFAST raises KafkaCodecError at a bad record; PERMISSIVE makes it a
    null row and gives its error in a second column.
    """

    def __init__(
        self,
        schema_registry_client: Any,
        reader_schema: str | None = None,
        *,
        subject: str | None = None,
        version: int | None = None,
        field: Field = "value",
        mode: Mode = "FAILFAST",
    ) -> None:
        if mode not in ("FAILFAST", "PERMISSIVE"):
            raise KafkaConfigError(f"mode must be FAILFAST or PERMISSIVE, not {mode!r}")
        self._client = schema_registry_client
        self._reader = reader_schema
        self._subject = subject
        self._version = version
        self.field = field
        self.mode: Mode = mode
        self._decoders: dict[str | None, AvroColumnDecoder] = {}
        self._lock = threading.Lock()  # guards _decoders

    def decoder(self, topic: str | None = None) -> AvroColumnDecoder:
        """The decoder of ``topic``'s records (one for all when the reader schema or subject is fixed)."""
        key = None if self._reader is not None or self._subject is not None else topic
        with self._lock:
            found = self._decoders.get(key)
        if found is not None:
            return found
        if self._reader is not None:
            reader: Any = parse_schema(self._reader)
        else:
            if key is None and self._subject is None:
                raise KafkaConfigError("no reader schema, subject or topic to find the reader schema by")
            subject = self._subject or subject_for(str(key), self.field)
            if self._version is not None:
                registered = self._client.get_version(subject, self._version)
            else:
                registered = self._client.get_latest_version(subject)
            reader = parse_registered(self._client, registered.schema)
        decoder = AvroColumnDecoder(reader, self._writer_schema)
        with self._lock:
            return self._decoders.setdefault(key, decoder)

    def arrow_type(self, topic: str | None = None) -> Any:
        return self.decoder(topic).arrow_type

    def _writer_schema(self, schema_id: int) -> AvroType:
        """The decoder's lookup: an unknown id is a LookupError (its records' error); a registry
        that does not answer raises its own error, which the decode passes on."""
        try:
            schema = self._client.get_schema(schema_id)
        except Exception as exc:
            if unknown_schema_id(exc):
                raise LookupError(f"not in the registry: {exc}") from exc
            raise
        return parse_registered(self._client, schema)

    def decode(self, values: Any, topic: str | None = None) -> DecodedColumn:
        return self.decoder(topic).decode(values, self.mode)

    def decode_column(self, values: Any, topics: Any) -> tuple[Any, Any | None]:
        """consumer.columns' decoder method: rows of several topics decoded each by its own
        topic's decoder (they must agree on the Arrow type: one column)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        if topics is None or len(values) == 0:
            result = self.decode(values, None if topics is None or len(topics) == 0 else topics[0].as_py())
            return result.values, result.errors
        names = pc.unique(topics).to_pylist()
        if len(names) == 1:
            result = self.decode(values, names[0])
            return result.values, result.errors
        for name in names[1:]:
            if self.arrow_type(name) != self.arrow_type(names[0]):
                raise KafkaConfigError(
                    f"topics {names[0]!r} and {name!r} have different reader schemas: give a reader schema or subject"
                )
        parts, errors, order = [], [], []
        for name in names:
            rows = pc.indices_nonzero(pc.equal(topics, name))
            result = self.decode(values.take(rows), name)
            parts.append(result.values)
            errors.append(result.errors)
            order.append(rows)
        back = pc.sort_indices(pa.concat_arrays(order))
        column = pa.concat_arrays(parts).take(back)
        error_column = None if errors[0] is None else pa.concat_arrays(errors).take(back)
        return column, error_column


class AvroColumnSerializer:
    """Arrow rows -> framed Avro values under a registered schema.

    ``schema_str`` given: registered under the subject (``auto_register``, the default) or looked
    up there; ``use_latest_version``: the subject's latest schema instead. The subject is
    ``subject`` or ``<topic>-<field>``. Arrow columns are matched to record fields by name.
    """

    def __init__(
        self,
        schema_registry_client: Any,
        schema_str: str | None = None,
        *,
        subject: str | None = None,
        field: Field = "value",
        auto_register: bool = True,
        use_latest_version: bool = False,
    ) -> None:
        if schema_str is None and not use_latest_version:
            raise KafkaConfigError("give a schema, or use_latest_version=True")
        if schema_str is not None:
            arrow_type(parse_schema(schema_str))  # a schema Arrow cannot type fails here
        self._client = schema_registry_client
        self._schema = schema_str
        self._subject = subject
        self.field = field
        self.auto_register = auto_register
        self.use_latest_version = use_latest_version
        self._encoders: dict[str, AvroColumnEncoder] = {}
        self._lock = threading.Lock()  # guards _encoders

    def encoder(self, topic: str) -> AvroColumnEncoder:
        subject = self._subject or subject_for(topic, self.field)
        with self._lock:
            found = self._encoders.get(subject)
        if found is not None:
            return found
        if self.use_latest_version:
            latest = self._client.get_latest_version(subject)
            encoder = AvroColumnEncoder(parse_registered(self._client, latest.schema), latest.schema_id)
        else:
            from kafka_core.schema_registry.schema import Schema

            schema = Schema(str(self._schema), "AVRO")
            if self.auto_register:
                schema_id = self._client.register_schema(subject, schema)
            else:
                schema_id = self._client.lookup_schema(subject, schema).schema_id
            encoder = AvroColumnEncoder(parse_schema(str(self._schema)), schema_id)
        with self._lock:
            return self._encoders.setdefault(subject, encoder)

    def encode(self, values: Any, topic: str) -> Any:
        return self.encoder(topic).encode(values)

    def encode_column(self, values: Any, topic: str) -> Any:
        """producer.columns' encoder method."""
        return self.encode(values, topic)
