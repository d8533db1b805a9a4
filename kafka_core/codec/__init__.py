"""Record codec: RecordBatch v2 (and legacy v0/v1 reading), CRC32C, compression, wire primitives.

The Cython extension (built from ``_codec/``) and its pure-Python twin (``_python``) share module
names (``primitives``, ``records``, ``columnar``) and API; the choice is made once, here, at import. ``KAFKA_CORE_PURE_PYTHON=1`` forces the
twin; ``KAFKA_CORE_REQUIRE_EXTENSION=1`` turns a missing extension into an ImportError instead of
a warning (CI uses it so that a silent fallback cannot pass).
"""

from __future__ import annotations

from kafka_core._env import env_flag
from kafka_core.codec.columns import BatchInfo, RecordColumns
from kafka_core.codec.fallback import fall_back
from kafka_core.errors import KafkaCodecError

if env_flag("KAFKA_CORE_PURE_PYTHON"):
    from kafka_core.codec._python import columnar, primitives, records

    IMPLEMENTATION = "python"
else:
    try:
        from kafka_core.codec._cython import (  # type: ignore[no-redef]
            columnar,
            primitives,
            records,
        )

        IMPLEMENTATION = "cython"
    except ImportError as exc:
        fall_back("codec", exc, stacklevel=2)
        from kafka_core.codec._python import columnar, primitives, records

        IMPLEMENTATION = "python"

from kafka_core.codec.crc import crc32c

KafkaRecord = records.KafkaRecord
KafkaShareRecord = records.KafkaShareRecord
decode_share_records = records.decode_share_records
encode_record_batch = records.encode_record_batch
decode_record_batches = records.decode_record_batches
encode_record_batch_columns = columnar.encode_record_batch_columns
decode_record_batches_columns = columnar.decode_record_batches_columns
set_decode_helper = columnar.set_decode_helper

zigzag_encode = primitives.zigzag_encode
zigzag_decode = primitives.zigzag_decode
size_of_unsigned_varint = primitives.size_of_unsigned_varint
size_of_varint = primitives.size_of_varint
size_of_varlong = primitives.size_of_varlong
encode_unsigned_varint = primitives.encode_unsigned_varint
decode_unsigned_varint = primitives.decode_unsigned_varint
encode_varint = primitives.encode_varint
decode_varint = primitives.decode_varint
encode_varlong = primitives.encode_varlong
decode_varlong = primitives.decode_varlong
new_buffer = primitives.new_buffer
encode_compact_string = primitives.encode_compact_string
decode_compact_string = primitives.decode_compact_string
encode_compact_bytes = primitives.encode_compact_bytes
decode_compact_bytes = primitives.decode_compact_bytes
encode_uuid = primitives.encode_uuid
decode_uuid = primitives.decode_uuid

__all__ = [
    "IMPLEMENTATION",
    "BatchInfo",
    "KafkaCodecError",
    "KafkaRecord",
    "KafkaShareRecord",
    "RecordColumns",
    "crc32c",
    "decode_record_batches",
    "decode_record_batches_columns",
    "decode_share_records",
    "encode_record_batch",
    "encode_record_batch_columns",
    "set_decode_helper",
    *primitives.__all__,
]
