"""Types of the Cython columnar Avro encoder (source: _codec/avro_enc.pyx); the same API as
kafka_core.codec._python.avro_enc."""

from typing import Any

__all__ = ["encode_avro"]

def encode_avro(
    nodes: list[tuple[Any, ...]],
    kids: list[int],
    root: int,
    header: bytes,
    length: int,
    nullable_root: bool,
) -> tuple[tuple[int, int, int, int, int] | None, bytes | None, bytes, bytes]: ...
