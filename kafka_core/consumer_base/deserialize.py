"""The error a key or value deserializer leads to, in either consumer's poll."""

from __future__ import annotations

from kafka_core.errors import KafkaCodecError


class KafkaDeserializationError(KafkaCodecError):
    """A key or value deserializer raised: which record (topic, partition, offset) and which
    part; the deserializer's own exception is the ``__cause__``. The position stays on that
    record, so polling again raises again: ``seek`` past it to skip it."""

    def __init__(self, topic: str, partition: int, offset: int, part: str, cause: BaseException) -> None:
        super().__init__(f"{part}_deserializer failed on {topic}[{partition}] offset {offset}: {cause!r}")
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.part = part

    def __reduce__(self) -> tuple[type, tuple[str, int, int, str, BaseException]]:
        return (type(self), (self.topic, self.partition, self.offset, self.part, self.__cause__ or self))
