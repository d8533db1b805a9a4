"""The publish/subscribe adapter over the producer and consumer (docs/transport.md).

``kafka_core.KafkaStreamTransport`` (blocking) and ``kafka_core.aio.KafkaStreamTransport``
(asyncio); handlers receive :class:`Message`; failures are reported as :class:`HandlerError`.
"""

from __future__ import annotations

from kafka_core.transport.options import ErrorPolicy, HandlerError
from kafka_core.transport.payload import Message
from kafka_core.transport.tracking import CommitTracker

__all__ = ["CommitTracker", "ErrorPolicy", "HandlerError", "Message"]
