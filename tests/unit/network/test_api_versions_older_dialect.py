"""A broker that answers every ApiVersions version with an older version's body (kafka-rs does).

The answer below is kafka-rs's, byte for byte, captured from its server (commit bd1b121 of
elsonwu/kafka-rs) for requests at v4, v3, v2 and v0 alike: error 0, an int32-counted array of
(api_key, min, max) and a throttle time, i.e. the v1/v2 layout. The Java client reads such an
answer at v0; this client asks again at v0 and uses the versions listed. CI has no kafka-rs, so
this loopback server plays it.
"""

from __future__ import annotations

import asyncio
import struct
from typing import Any

import pytest
from fakes.loopback_broker import LoopbackBroker, frame_of
from fakes.timing import aio

from kafka_core.aio import KafkaClient
from kafka_core.client.metadata_cache import metadata_request
from kafka_core.errors import KafkaError, KafkaUnsupportedVersionError
from kafka_core.network.connection import BrokerConnection
from kafka_core.protocol import ApiKey, Request, RequestHeader, Response, encode_request, encode_response
from kafka_core.protocol.messages import MetadataResponse

pytestmark = pytest.mark.timeout(60)

# kafka-rs's ApiVersions answer after the correlation id: Produce 0-3, Fetch 0-1, ListOffsets 0-2,
# Metadata 0-2, OffsetCommit 0-2, OffsetFetch 0-2, FindCoordinator 0-1, JoinGroup 0-2,
# Heartbeat 0-1, LeaveGroup 0-1, SyncGroup 0-1, ApiVersions 0-2, then throttle_time_ms 0.
KAFKA_RS_API_VERSIONS_BODY = bytes.fromhex(
    "0000"
    "0000000c"
    "000000000003"
    "000100000001"
    "000200000002"
    "000300000002"
    "000800000002"
    "000900000002"
    "000a00000001"
    "000b00000002"
    "000c00000001"
    "000d00000001"
    "000e00000001"
    "001200000002"
    "00000000"
)


class OldDialectBroker(LoopbackBroker):
    """Answers ApiVersions as kafka-rs does (``body``, whatever the version) and Metadata in the
    version asked, naming itself and no topic."""

    def __init__(self, body: bytes = KAFKA_RS_API_VERSIONS_BODY) -> None:
        super().__init__()
        self.body = body
        self.api_versions_seen: list[int] = []
        self.metadata_seen: list[int] = []

    async def answer(self, req: Any, writer: asyncio.StreamWriter) -> bool:
        h = req.header
        if h.api_key == ApiKey.API_VERSIONS:
            self.api_versions_seen.append(h.api_version)
            writer.write(frame_of(struct.pack(">i", h.correlation_id) + self.body))
        elif h.api_key == ApiKey.METADATA:
            self.metadata_seen.append(h.api_version)
            broker = MetadataResponse.MetadataResponseBroker(node_id=0, host="127.0.0.1", port=self.port)
            body = MetadataResponse(brokers=[broker], controller_id=0, topics=[])
            writer.write(
                frame_of(encode_response(Response(h.api_key, h.api_version, h.correlation_id, body)))
            )
        else:
            return False
        await writer.drain()
        return True

    def connection(self) -> BrokerConnection:
        return BrokerConnection(
            "127.0.0.1", self.port, node_id=0, connect_timeout_ms=5000, request_timeout_ms=5000
        )


def test_the_captured_answer_is_the_v1_layout_and_no_v3_one() -> None:
    # What makes it a case at all: valid as v1/v2, garbled as the v3/v4 the client asks first.
    from kafka_core.protocol import decode_response

    frame = struct.pack(">i", 1) + KAFKA_RS_API_VERSIONS_BODY
    listed = decode_response(ApiKey.API_VERSIONS, 2, frame).body
    assert len(listed.api_keys) == 12 and listed.error_code == 0
    with pytest.raises(KafkaError, match="ApiVersionsResponse"):
        decode_response(ApiKey.API_VERSIONS, 4, frame)


@aio
async def test_an_older_dialect_answer_is_asked_again_at_v0_and_its_versions_used() -> None:
    async with OldDialectBroker() as broker:
        conn = broker.connection()
        await conn.connect()
        try:
            assert broker.api_versions_seen == [4, 0]
            assert broker.connections == 1  # on the same socket
            assert conn.api_versions_used == 0
            versions = conn.negotiated_versions()
            assert versions[ApiKey.METADATA] == 2
            assert versions[ApiKey.PRODUCE] == 3
            assert ApiKey.CREATE_TOPICS not in versions
            # Fetch 0-1 is below what the client speaks: said by name, not garbled.
            with pytest.raises(KafkaUnsupportedVersionError, match="no usable version of FETCH"):
                conn.choose_version(ApiKey.FETCH)
        finally:
            await conn.close()


@aio
async def test_a_client_bootstraps_and_reads_metadata_v2_from_it() -> None:
    # Before v4 a Metadata request cannot carry allow_auto_topic_creation=false; a request naming
    # no topic leaves it out, so bootstrap and "all topics" work on such a broker.
    async with OldDialectBroker() as broker, KafkaClient(broker.bootstrap, api_timeout_ms=5000) as client:
        await client.start()
        meta = await client.metadata()
        assert [b.node_id for b in meta.brokers] == [0]
        assert set(broker.metadata_seen) == {2}


@aio
async def test_an_answer_that_is_no_version_at_all_is_still_garbled() -> None:
    # Leniency is for a whole older body: the same with a byte cut off is a codec error.
    async with OldDialectBroker(body=KAFKA_RS_API_VERSIONS_BODY[:-5]) as broker:
        conn = broker.connection()
        with pytest.raises(KafkaError, match="garbled API_VERSIONS v4"):
            await conn.connect()
        assert broker.api_versions_seen == [4]


def _encode_metadata(version: int, topics: list[str] | None) -> bytes:
    body = metadata_request(version, topics, auto_create=False)
    return encode_request(Request(RequestHeader(ApiKey.METADATA, version, 1, "t"), body))


def test_metadata_before_v4_names_no_auto_creation_only_where_it_means_something() -> None:
    for version in (0, 1, 2, 3):
        assert _encode_metadata(version, None)
        assert _encode_metadata(version, [])
    # Naming topics without auto-creation cannot be said before v4 (the Java client refuses too).
    with pytest.raises(KafkaError, match="allow_auto_topic_creation"):
        _encode_metadata(2, ["t"])
    assert metadata_request(4, None, auto_create=False).allow_auto_topic_creation is False
