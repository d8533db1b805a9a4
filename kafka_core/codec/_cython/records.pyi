"""Types of the Cython record codec (source: _codec/records.pyx); the same API as
kafka_core.codec._python.records."""

from collections.abc import Iterable
from typing import Any

from kafka_core._typing import Buffer

__all__ = [
    "KafkaRecord",
    "KafkaShareRecord",
    "decode_record_batches",
    "decode_share_records",
    "encode_record_batch",
]

class KafkaRecord:
    """One record (read-only attributes here; the pure twin's are assignable)."""

    @property
    def offset(self) -> int: ...
    @property
    def timestamp(self) -> int | None: ...
    @property
    def timestamp_type(self) -> int: ...
    @property
    def key(self) -> Any: ...
    @property
    def value(self) -> Any: ...
    @property
    def headers(self) -> Any: ...
    @property
    def producer_id(self) -> int: ...
    @property
    def producer_epoch(self) -> int: ...
    @property
    def is_transactional(self) -> bool: ...
    @property
    def is_control(self) -> bool: ...
    def __init__(
        self,
        key: Buffer | None = None,
        value: Buffer | None = None,
        headers: Iterable[tuple[str, Buffer | None]] = (),
        timestamp: int | None = None,
        offset: int = -1,
        timestamp_type: int = 0,
        producer_id: int = -1,
        producer_epoch: int = -1,
        is_transactional: bool = False,
        is_control: bool = False,
    ) -> None: ...
    def __eq__(self, other: object) -> bool: ...
    __hash__: None  # type: ignore[assignment]

class KafkaShareRecord(KafkaRecord):
    """A share group's record: topic, partition and delivery count too; identity-compared."""

    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def delivery_count(self) -> int: ...
    def __init__(
        self,
        topic: str,
        partition: int,
        offset: int,
        key: Buffer | None = None,
        value: Buffer | None = None,
        headers: Iterable[tuple[str, Buffer | None]] | None = None,
        timestamp: int | None = -1,
        timestamp_type: int = 0,
        delivery_count: int = 1,
    ) -> None: ...
    def __eq__(self, other: object) -> bool: ...
    def __hash__(self) -> int: ...  # type: ignore[override]
    def _copy_as(self, cls: type[KafkaShareRecord]) -> KafkaShareRecord: ...

def encode_record_batch(
    records: Iterable[Any],
    *,
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
def decode_record_batches(buf: Buffer, *, check_crc: bool = True) -> list[KafkaRecord]: ...
def decode_share_records(
    buf: Buffer,
    topic: str,
    partition: int,
    acquired: Iterable[tuple[int, int, int]],
    *,
    record_type: type[KafkaShareRecord] = ...,
    check_crc: bool = True,
) -> list[KafkaShareRecord]: ...
