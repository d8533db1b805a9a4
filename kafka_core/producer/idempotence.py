"""Producer id and epoch for the idempotent producer (KIP-98), with KIP-360 epoch bumps."""

from __future__ import annotations

import logging
from typing import Any

from kafka_core.errors import KafkaProtocolError

log = logging.getLogger("kafka_core.producer")

__all__ = ["INIT_PRODUCER_ID_MIN_VERSION", "IdempotenceState"]

# v0 is not enough for some brokers (Tansu answers it with UNKNOWN_SERVER_ERROR); v3 adds the
# producer id/epoch fields that let an existing producer bump its epoch instead of starting over.
INIT_PRODUCER_ID_MIN_VERSION = 1
_MAX_EPOCH = 0x7FFF


class IdempotenceState:
    """The identity stamped on every batch, and whether it must be renewed before sending more."""

    def __init__(self) -> None:
        self.producer_id = -1
        self.producer_epoch = -1
        self.bump_needed = False

    async def acquire(self, client: Any) -> None:
        """Get a first id, or bump the epoch of the current one (a new id when that is refused)."""
        bump = self.producer_id >= 0 and self.producer_epoch < _MAX_EPOCH - 1
        try:
            if bump:
                got = await client.init_producer_id(
                    None, producer_id=self.producer_id, producer_epoch=self.producer_epoch
                )
            else:
                got = await client.init_producer_id(None)
        except KafkaProtocolError as exc:
            if not bump or exc.retriable:
                raise
            log.info("epoch bump refused (%s); asking for a new producer id", exc)
            got = await client.init_producer_id(None)
        log.debug(
            "producer id %s epoch %s (was %s/%s)", got[0], got[1], self.producer_id, self.producer_epoch
        )
        self.producer_id, self.producer_epoch = int(got[0]), int(got[1])
        self.bump_needed = False
