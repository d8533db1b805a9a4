"""Types of the Cython columnar codec (source: _codec/columnar.pyx); the same API as
kafka_core.codec._python.columnar, plus the test hooks of the decode helper thread."""

from typing import Any

from kafka_core._typing import Buffer
from kafka_core.codec.columns import RecordColumns

__all__ = ["decode_record_batches_columns", "encode_record_batch_columns", "set_decode_helper"]

def set_decode_helper(enabled: bool) -> bool: ...
def encode_record_batch_columns(
    keys: Any,
    values: Any,
    *,
    headers: Any = None,
    timestamps: Any = None,
    base_offset: int = 0,
    base_timestamp: int | None = None,
    compression: str = "none",
    compression_level: int | None = None,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    control: bool = False,
    partition_leader_epoch: int = -1,
    log_append_time: bool = False,
) -> bytearray: ...
def decode_record_batches_columns(
    buf: Buffer, *, check_crc: bool = True, zero_copy: bool = False
) -> RecordColumns: ...
def _decode_helper_jobs() -> int: ...
def _decode_helper_testing(wait_claim: bool, min_region: int) -> tuple[bool, int]: ...
def _use_capsule_import(capsule: bool = True) -> None: ...
