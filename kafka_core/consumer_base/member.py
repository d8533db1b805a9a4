"""A group member's id made by the client, for the heartbeat protocols (KIP-848 consumer groups,
KIP-932 share groups)."""

from __future__ import annotations

import base64
import uuid


def new_member_id() -> str:
    """A member id as Kafka's clients make them (KIP-1082): a random UUID, URL-safe base64."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
