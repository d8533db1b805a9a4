"""Types of the Cython columnar Avro decoder (source: _codec/avro.pyx); the same API as
kafka_core.codec._python.avro."""

from typing import Any

from kafka_core.codec.avro_plan import Raw

__all__ = ["decode_avro", "framed_ids"]

def framed_ids(values: Any) -> set[int]: ...
def decode_avro(
    code: bytes,
    blob: bytes,
    entry_ids: bytes,
    entry_pcs: bytes,
    kinds: bytes,
    first: bytes,
    kids: bytes,
    values: Any,
    framed: bool,
    permissive: bool,
) -> tuple[list[Raw], list[tuple[int, str]]]: ...
