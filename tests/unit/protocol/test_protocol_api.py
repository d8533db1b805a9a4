"""The public protocol API: framing, header versions, defaults, version checks, zero copy."""

from __future__ import annotations

import pickle
import struct
import uuid

import pytest

from kafka_core.errors import KafkaError, KafkaProtocolError
from kafka_core.protocol import (
    REQUEST_CLASSES,
    RESPONSE_CLASSES,
    ApiKey,
    Request,
    RequestHeader,
    Response,
    decode_request,
    decode_response,
    encode_request,
    encode_request_parts,
    encode_response,
    encode_response_parts,
    request_header_version,
    response_header_version,
)
from kafka_core.protocol.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    FetchRequest,
    FetchResponse,
    JoinGroupRequest,
    MetadataRequest,
    MetadataResponse,
    ProduceRequest,
)


def test_api_keys_and_class_tables() -> None:
    assert ApiKey.PRODUCE == 0
    assert ApiKey.FETCH == 1
    assert ApiKey.LIST_OFFSETS == 2
    assert ApiKey.METADATA == 3
    assert ApiKey.API_VERSIONS == 18
    assert ApiKey.DESCRIBE_TOPIC_PARTITIONS == 75
    assert REQUEST_CLASSES[0] is ProduceRequest
    assert RESPONSE_CLASSES[3] is MetadataResponse
    assert set(REQUEST_CLASSES) == set(RESPONSE_CLASSES) == {int(k) for k in ApiKey}
    # 4.0's ListClientMetricsResources, renamed in 4.1 (one release's definitions: one name per key)
    assert REQUEST_CLASSES[74].__name__ == "ListConfigResourcesRequest"
    # APIs Kafka 4.0 removed (LeaderAndIsr .. ControlledShutdown, inter-broker) have no classes
    assert not {4, 5, 6, 7} & set(REQUEST_CLASSES)
    for key, cls in REQUEST_CLASSES.items():
        assert key == cls.API_KEY
        assert key == RESPONSE_CLASSES[key].API_KEY


def test_version_attributes_follow_the_spec() -> None:
    assert (ProduceRequest.MIN_VERSION, ProduceRequest.MAX_VERSION, ProduceRequest.FLEXIBLE_MIN) == (3, 13, 9)
    assert (FetchResponse.MIN_VERSION, FetchResponse.MAX_VERSION, FetchResponse.FLEXIBLE_MIN) == (4, 18, 12)
    assert MetadataRequest.FLEXIBLE_MIN == 9
    from kafka_core.protocol.messages import SaslHandshakeRequest

    assert SaslHandshakeRequest.FLEXIBLE_MIN is None


def test_header_versions() -> None:
    assert request_header_version(ApiKey.METADATA, 8) == 1
    assert request_header_version(ApiKey.METADATA, 9) == 2
    assert response_header_version(ApiKey.METADATA, 8) == 0
    assert response_header_version(ApiKey.METADATA, 9) == 1
    # ApiVersions answers with header v0 even at flexible versions (KIP-511)
    assert request_header_version(ApiKey.API_VERSIONS, 3) == 2
    assert response_header_version(ApiKey.API_VERSIONS, 3) == 0
    assert request_header_version(ApiKey.SASL_HANDSHAKE, 1) == 1


def test_constructor_defaults_from_spec() -> None:
    req = MetadataRequest()
    assert req.topics == []
    assert req.allow_auto_topic_creation is True
    assert req.include_topic_authorized_operations is False
    other = MetadataRequest()
    assert req.topics is not other.topics  # no shared mutable default
    fetch = FetchRequest()
    assert fetch.replica_id == -1
    assert fetch.max_bytes == 0x7FFFFFFF
    assert fetch.cluster_id is None
    assert fetch.replica_state == FetchRequest.ReplicaState()
    assert FetchRequest.FetchTopic().topic_id == uuid.UUID(int=0)
    assert JoinGroupRequest().rebalance_timeout_ms == -1
    assert ProduceRequest().topic_data == []
    with pytest.raises(TypeError):
        MetadataRequest([])  # type: ignore[misc]  # keyword-only


def test_nested_struct_names() -> None:
    topic = MetadataResponse.MetadataResponseTopic(name="t")
    assert type(topic).__qualname__ == "MetadataResponse.MetadataResponseTopic"
    assert MetadataResponse.MetadataResponsePartition().leader_id == 0
    assert "MetadataResponseTopic(" in repr(topic)


def test_known_answer_api_versions_request() -> None:
    req = Request(
        RequestHeader(ApiKey.API_VERSIONS, 3, 1, "kc"),
        ApiVersionsRequest(client_software_name="kafka_core", client_software_version="0.1"),
    )
    frame = encode_request(req)
    expected = (
        struct.pack(">hhi", 18, 3, 1)
        + b"\x00\x02kc"  # client id: classic string even in header v2
        + b"\x00"  # header tagged fields
        + b"\x0bkafka_core"  # compact string: length + 1
        + b"\x040.1"
        + b"\x00"  # body tagged fields
    )
    assert frame == expected
    assert decode_request(frame) == req


def test_known_answer_metadata_v8_request() -> None:
    body = MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name="ab")], allow_auto_topic_creation=False
    )
    frame = encode_request(Request(RequestHeader(ApiKey.METADATA, 8, 7, None), body))
    assert (
        frame == struct.pack(">hhi", 3, 8, 7) + b"\xff\xff" + b"\x00\x00\x00\x01\x00\x02ab" + b"\x00\x00\x00"
    )


def test_non_default_value_in_a_version_without_the_field() -> None:
    body = MetadataRequest(topics=[], allow_auto_topic_creation=False)
    with pytest.raises(KafkaProtocolError) as info:
        body.encode(3)  # AllowAutoTopicCreation exists from v4 and is not ignorable
    assert info.value.code == 35
    assert info.value.name == "UNSUPPORTED_VERSION"
    assert "allow_auto_topic_creation" in str(info.value)
    # ignorable fields are dropped silently
    fetch = FetchRequest(cluster_id="c1")  # ClusterId: tagged, v12+, ignorable
    assert fetch.encode(11) == FetchRequest().encode(11)


def test_unknown_version_and_api_key() -> None:
    with pytest.raises(KafkaProtocolError) as info:
        MetadataRequest().encode(99)
    assert info.value.code == 35
    with pytest.raises(KafkaProtocolError):
        MetadataRequest.decode(b"", 99)
    with pytest.raises(KafkaProtocolError) as info:
        decode_request(struct.pack(">hhi", 999, 0, 1) + b"\xff\xff")
    assert info.value.code == 42
    with pytest.raises(KafkaProtocolError):
        decode_response(999, 0, b"\x00\x00\x00\x01")


def test_body_type_must_match_api_key() -> None:
    with pytest.raises(KafkaProtocolError):
        encode_request(Request(RequestHeader(ApiKey.FETCH, 12, 1), MetadataRequest()))


def test_bad_values_are_typed_errors() -> None:
    cases = [
        MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="x" * 40000)]),  # > int16 length
        MetadataRequest(topics=None),  # not nullable before v1? v1+ nullable; v0 is not
        ProduceRequest(acks=1 << 20),  # int16 overflow
        ProduceRequest(topic_data=[ProduceRequest.TopicProduceData(name=None)]),  # type: ignore[arg-type]
        MetadataRequest(topics=[object()]),  # type: ignore[list-item]
    ]
    versions = [8, 0, 9, 9, 8]
    for body, version in zip(cases, versions, strict=True):
        with pytest.raises(KafkaProtocolError):
            body.encode(version)


def _produce(records: object) -> Request:
    body = ProduceRequest(
        acks=-1,
        timeout_ms=30000,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name="t", partition_data=[ProduceRequest.PartitionProduceData(index=0, records=records)]
            )
        ],
    )
    return Request(RequestHeader(ApiKey.PRODUCE, 9, 42, "client"), body)


def test_produce_records_are_not_copied() -> None:
    payload = bytearray(b"R" * 10_000)
    req = _produce(memoryview(payload))
    parts = encode_request_parts(req)
    assert any(p is req.body.topic_data[0].partition_data[0].records for p in parts)
    frame = encode_request(req)
    assert b"".join(bytes(p) for p in parts) == frame
    back = decode_request(frame)
    records = back.body.topic_data[0].partition_data[0].records
    assert isinstance(records, memoryview)
    assert records.obj is frame  # a view into the frame, not a copy
    assert records == payload


def test_produce_records_as_several_buffers() -> None:
    batches = [b"A" * 100, memoryview(b"B" * 50)]
    parts = encode_request_parts(_produce(batches))
    assert parts.count(batches[0]) == 1
    assert any(p is batches[1] for p in parts)
    frame = encode_request(_produce(batches))
    assert frame == encode_request(_produce(b"A" * 100 + b"B" * 50))


def test_fetch_response_records_are_views() -> None:
    body = FetchResponse(
        responses=[
            FetchResponse.FetchableTopicResponse(
                topic_id=uuid.uuid4(),
                partitions=[FetchResponse.PartitionData(partition_index=1, records=b"x" * 64)],
            )
        ]
    )
    resp = Response(ApiKey.FETCH, 13, 5, body)
    frame = encode_response(resp)
    assert b"".join(bytes(p) for p in encode_response_parts(resp)) == frame
    back = decode_response(ApiKey.FETCH, 13, frame)
    rec = back.body.responses[0].partitions[0].records
    assert isinstance(rec, memoryview)
    assert rec.obj is frame
    assert back == resp


def test_unknown_tagged_fields_are_kept() -> None:
    body = ApiVersionsRequest(client_software_name="a", client_software_version="b")
    raw = bytearray(body.encode(3))
    assert raw[-1] == 0
    raw[-1:] = b"\x02\x05\x02hi\x40\x00"  # two tags: 5 -> "hi", 64 -> empty
    back = ApiVersionsRequest.decode(bytes(raw), 3)
    assert back.unknown_tagged_fields == [(5, b"hi"), (64, b"")]
    assert back.encode(3) == bytes(raw)


def test_explicit_default_tagged_fields_round_trip() -> None:
    # Tansu writes every tagged field, defaults included; Java would omit them
    body = ApiVersionsResponse(
        api_keys=[ApiVersionsResponse.ApiVersion(api_key=18, min_version=0, max_version=4)]
    )
    plain = bytearray(body.encode(3))
    assert plain[-1] == 0
    plain[-1:] = b"\x02" + b"\x01\x08" + b"\xff" * 8 + b"\x03\x01\x00"  # epoch -1, zk_migration_ready False
    back = ApiVersionsResponse.decode(bytes(plain), 3)
    assert back.finalized_features_epoch == -1
    assert back.zk_migration_ready is False
    assert back.encode(3) == bytes(plain)
    back.finalized_features_epoch = 7  # a real value replaces the raw default
    again = ApiVersionsResponse.decode(back.encode(3), 3)
    assert again.finalized_features_epoch == 7


def test_trailing_bytes_after_a_request_body_are_kept() -> None:
    # librdkafka 2.16 sends three extra bytes after some Metadata v12 bodies
    frame = bytes.fromhex("0003000c00000006000772646b61666b610000000000010000")
    req = decode_request(frame)
    assert req.header.client_id == "rdkafka"
    assert req.body.topics is None
    assert req.trailing == b"\x01\x00\x00"
    assert encode_request(req) == frame


def test_api_versions_v0_fallback() -> None:
    v0 = ApiVersionsResponse(
        error_code=35, api_keys=[ApiVersionsResponse.ApiVersion(api_key=18, min_version=0, max_version=2)]
    )
    frame = encode_response(Response(ApiKey.API_VERSIONS, 0, 9, v0))
    back = decode_response(ApiKey.API_VERSIONS, 3, frame)
    assert back.api_version == 0
    assert back.body == v0
    assert encode_response(back) == frame


def test_header_tagged_fields_are_kept() -> None:
    req = Request(RequestHeader(ApiKey.METADATA, 12, 3, "c", [(1, b"\x07")]), MetadataRequest())
    frame = encode_request(req)
    back = decode_request(frame)
    assert back.header.unknown_tagged_fields == [(1, b"\x07")]
    assert encode_request(back) == frame
    resp = Response(ApiKey.METADATA, 12, 3, MetadataResponse(), header_tagged_fields=[(0, b"")])
    frame = encode_response(resp)
    assert decode_response(ApiKey.METADATA, 12, frame) == resp


def test_protocol_error_type() -> None:
    err = KafkaProtocolError(6, "NOT_LEADER_OR_FOLLOWER", True, "moved")
    assert isinstance(err, KafkaError)
    assert (err.code, err.name, err.retriable, err.message) == (6, "NOT_LEADER_OR_FOLLOWER", True, "moved")
    copy = pickle.loads(pickle.dumps(err))
    assert (copy.code, copy.name, copy.retriable, copy.message) == (
        6,
        "NOT_LEADER_OR_FOLLOWER",
        True,
        "moved",
    )


def test_response_correlation_id_and_expects_response() -> None:
    frame = encode_response(Response(ApiKey.METADATA, 12, 77, MetadataResponse()))
    from kafka_core.protocol import expects_response, response_correlation_id

    assert response_correlation_id(frame) == 77
    with pytest.raises(KafkaProtocolError):
        response_correlation_id(b"\x00")
    assert expects_response(_produce(b"x"))
    fire_and_forget = _produce(b"x")
    fire_and_forget.body.acks = 0
    assert not expects_response(fire_and_forget)
    assert expects_response(Request(RequestHeader(ApiKey.METADATA, 12, 1), MetadataRequest()))
