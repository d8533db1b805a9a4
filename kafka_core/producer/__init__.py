"""The producer: partitioners, accumulator, sender, idempotence, transactions; async core and sync face.

``send`` appends to a thread-safe per-partition batch in the caller's thread (accumulator.py,
the owner of the one lock; its common cases in ``accel``: C from ``_codec/accel.pyx`` in
``_cython/`` when built, else the pure-Python twin in ``_python/``, chosen in ``_speedups``);
the I/O loop (sender.py, with expiry.py and leaders.py) seals batches on size or linger, encodes
each with the columnar codec in one call, and sends several partitions per Produce request,
retrying in order. ``send_batch`` hands columns (lists or pyarrow arrays) straight to the
encoder (batching.py). The faces: producer.py (asyncio), sync.py (blocking); transactions are
the subpackage ``transactions``.
"""

from kafka_core.producer.futures import RecordFuture, RecordMetadata, SendBatchFuture, SendBatchResult
from kafka_core.producer.partitioner import (
    DefaultPartitioner,
    Partitioner,
    RoundRobinPartitioner,
    murmur2,
    murmur2_partition,
)
from kafka_core.producer.producer import KafkaProducer as AsyncKafkaProducer
from kafka_core.producer.sync import KafkaProducer, complete_transaction, fence_transactional_id
from kafka_core.producer.transactions.manager import TransactionState
from kafka_core.producer.transactions.prepared import PreparedTransaction

__all__ = [
    "AsyncKafkaProducer",
    "DefaultPartitioner",
    "KafkaProducer",
    "Partitioner",
    "PreparedTransaction",
    "RecordFuture",
    "RecordMetadata",
    "RoundRobinPartitioner",
    "SendBatchFuture",
    "SendBatchResult",
    "TransactionState",
    "complete_transaction",
    "fence_transactional_id",
    "murmur2",
    "murmur2_partition",
]
