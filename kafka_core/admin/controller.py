"""Where a call's controller requests go: the active controller, looked up afresh after
NOT_CONTROLLER (a KRaft broker forwards these requests to it; a moved controller says so)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafka_core.admin.engine import outcome
from kafka_core.errors import KafkaError
from kafka_core.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kafka_core.client.cluster import KafkaClient


class Controller:
    """One call's view of the controller: the next round asks again after NOT_CONTROLLER."""

    def __init__(self, client: KafkaClient) -> None:
        self.client = client
        self.stale = False

    async def node(self) -> int:
        node = await self.client.controller_node(refresh=self.stale)
        self.stale = False
        return node

    def saw(self, code: int) -> None:
        """Note an error code from the controller's answer."""
        if code == ErrorCode.NOT_CONTROLLER:
            self.stale = True

    def outcome(self, code: int, what: str, detail: str | None = None) -> KafkaError | None:
        """A resource's outcome in the controller's answer (``engine.outcome``), its code noted."""
        self.saw(code)
        return outcome(code, what, detail)
