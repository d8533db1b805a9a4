"""Exception hierarchy shared by every layer, so callers can catch one base type."""

from __future__ import annotations

from typing import Any


class KafkaError(Exception):
    """Base of every error raised by kafka_core."""


class KafkaCodecError(KafkaError, ValueError):
    """A wire buffer could not be encoded or decoded (what went wrong and where)."""


# --- network and client errors (owned by the network/client layer) ---


class KafkaConfigError(KafkaError, ValueError):
    """An option passed to a client is invalid or inconsistent with the others."""


class KafkaUnknownOptionError(KafkaConfigError, TypeError):
    """A class was given an option it does not take (a typo, or another client's name for one).

    A TypeError too, as Python raises for an unexpected keyword argument."""


class KafkaConnectionError(KafkaError, ConnectionError):
    """A broker connection failed, was dropped, or sent something that forced us to drop it.

    In-flight requests on a dropped connection fail with this error; the request may or may not
    have reached the broker, so callers decide whether resending is safe.
    """


class KafkaTimeoutError(KafkaError, TimeoutError):
    """An operation did not complete within its deadline (connect, request, or a retry loop)."""


class KafkaAuthenticationError(KafkaConnectionError):
    """SASL or TLS authentication failed (bad credentials or certificate); retrying will not help."""


class KafkaUnsupportedVersionError(KafkaError):
    """The broker and this client share no usable version of an API."""


class KafkaClosedError(KafkaError):
    """The client or connection has been closed by its owner."""


class KafkaProtocolError(KafkaError):
    """An error code from a broker response, or a frame that breaks the protocol.

    ``code``/``name``/``retriable`` follow Kafka's Errors.java table
    (kafka_core.protocol.errors.ERRORS); ``message`` is the broker's message when it sent one.
    """

    def __init__(self, code: int, name: str, retriable: bool, message: str | None = None) -> None:
        self.code = code
        self.name = name
        self.retriable = retriable
        self.message = message
        super().__init__(f"[Error {code}] {name}" + (f": {message}" if message else ""))

    def __reduce__(self) -> tuple[type, tuple[int, str, bool, str | None]]:
        return (type(self), (self.code, self.name, self.retriable, self.message))


# --- transactions (KIP-98, KIP-447, KIP-890) ---


class KafkaTransactionError(KafkaError):
    """A transactional producer call failed, or was made in the wrong state.

    ``abortable``: the transaction can be aborted and the producer goes on with the next one.
    ``fatal``: the producer cannot go on; every later call raises this same error: close it.
    Neither: the call was wrong for the state (nothing was sent). ``code`` is the Kafka error code
    that caused it, when one did.
    """

    def __init__(
        self, message: str, *, abortable: bool = False, fatal: bool = False, code: int | None = None
    ) -> None:
        self.abortable = abortable
        self.fatal = fatal
        self.code = code
        super().__init__(message)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_txn_error, (type(self), str(self), self.abortable, self.fatal, self.code))


class KafkaProducerFencedError(KafkaTransactionError):
    """Another producer with the same transactional id took over (a newer epoch): fatal."""

    def __init__(self, message: str, *, code: int | None = None, **_: Any) -> None:
        super().__init__(message, abortable=False, fatal=True, code=code)


def _rebuild_txn_error(
    cls: type[KafkaTransactionError], message: str, abortable: bool, fatal: bool, code: int | None
) -> KafkaTransactionError:
    return cls(message, abortable=abortable, fatal=fatal, code=code)


# --- consumer position errors (KIP-320) ---


class KafkaLogTruncationError(KafkaError):
    """The log a consumer was reading was truncated under it (an unclean leader election), and
    ``auto_offset_reset="none"`` says not to reset: the records in each lost range are gone.

    ``divergent`` maps each TopicPartition to ``(position, end_offset)``: the consumer stood at
    ``position``, the new leader's log for that epoch ends at ``end_offset`` (so offsets
    ``end_offset .. position-1`` were lost). Seek the partitions to go on.
    """

    def __init__(self, divergent: dict[object, tuple[int, int]], message: str | None = None) -> None:
        self.divergent = dict(divergent)
        lost = ", ".join(f"{tp}: offsets {end}..{pos - 1} lost" for tp, (pos, end) in self.divergent.items())
        super().__init__(message or f"log truncation detected ({lost})")

    def __reduce__(self) -> tuple[type, tuple[dict[object, tuple[int, int]], str]]:
        return (type(self), (self.divergent, str(self)))


# --- schema registry (kafka_core.schema_registry) ---


class SchemaRegistryError(KafkaError):
    """The schema registry refused a request, or could not be reached in time.

    ``http_status_code`` and ``error_code`` are the registry's (``error_code`` is Confluent's, e.g.
    40401 subject not found, 40403 schema not found, 409 incompatible, 42201 invalid schema; see
    :class:`kafka_core.schema_registry.RegistryErrorCode`); both are -1 when no answer came, and
    the message then says why. Names match confluent-kafka's error, so handlers carry over.
    """

    UNKNOWN = -1

    def __init__(self, http_status_code: int, error_code: int, error_message: str) -> None:
        self.http_status_code = http_status_code
        self.error_code = error_code
        self.error_message = error_message
        super().__init__(f"{error_message} (HTTP status code {http_status_code}, SR code {error_code})")

    def __reduce__(self) -> tuple[type, tuple[int, int, str]]:
        return (type(self), (self.http_status_code, self.error_code, self.error_message))


class SchemaRegistryTimeoutError(SchemaRegistryError, KafkaTimeoutError):
    """The registry did not answer within the client's ``timeout``."""


class SerializationError(KafkaError, ValueError):
    """A value could not be serialized or deserialized with its schema (the cause is chained)."""
