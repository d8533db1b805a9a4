"""KIP-714 push (kafka_core.telemetry) against a scripted broker: the OTLP bytes decoded by
opentelemetry-proto, the subscription's filter, compression, the terminating push and every
error code of GetTelemetrySubscriptions and PushTelemetry."""

from __future__ import annotations

import asyncio
import functools
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from opentelemetry.proto.metrics.v1.metrics_pb2 import MetricsData

from kafka_core.codec.compression import decompress
from kafka_core.errors import (
    KafkaClosedError,
    KafkaConfigError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    KafkaUnsupportedVersionError,
)
from kafka_core.protocol import ApiKey
from kafka_core.protocol.errors import ErrorCode
from kafka_core.protocol.messages import GetTelemetrySubscriptionsResponse, PushTelemetryResponse
from kafka_core.telemetry import Point, TelemetryPusher, encode_metrics_data, wait_instance_id
from kafka_core.telemetry import push as push_module
from kafka_core.telemetry.otlp import CUMULATIVE, DELTA


def sync(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Run an async test on its own loop."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return asyncio.run(fn(*args, **kwargs))

    return wrapper


INSTANCE = uuid.UUID("12345678-1234-5678-1234-567812345678")


def test_the_hand_written_otlp_decodes_exactly_with_opentelemetry_proto() -> None:
    data = encode_metrics_data(
        [
            Point("a.gauge", 7, attributes={"node_id": "1"}),
            Point("a.gauge", -3, attributes={"node_id": "2"}),
            Point("b.sum", 12, True, {"topic": "t"}),
            Point("c.double", 2.5),
        ],
        resource={"group_id": "g"},
        scope_name="kafka_core",
        scope_version="1.2",
        time_ns=2_000,
        start_ns=1_000,
        temporality=DELTA,
    )
    md = MetricsData.FromString(data)
    (rm,) = md.resource_metrics
    assert {kv.key: kv.value.string_value for kv in rm.resource.attributes} == {"group_id": "g"}
    (sm,) = rm.scope_metrics
    assert (sm.scope.name, sm.scope.version) == ("kafka_core", "1.2")
    gauge, total, double = sm.metrics
    assert gauge.name == "a.gauge" and gauge.WhichOneof("data") == "gauge"
    assert [
        (p.as_int, p.attributes[0].value.string_value, p.time_unix_nano) for p in gauge.gauge.data_points
    ] == [
        (7, "1", 2_000),
        (-3, "2", 2_000),
    ]
    assert total.WhichOneof("data") == "sum"
    assert total.sum.aggregation_temporality == DELTA and total.sum.is_monotonic
    (p,) = total.sum.data_points
    assert (p.as_int, p.start_time_unix_nano, p.time_unix_nano) == (12, 1_000, 2_000)
    assert double.gauge.data_points[0].as_double == 2.5
    assert double.gauge.data_points[0].WhichOneof("value") == "as_double"
    # and re-encoded by protobuf itself, the same bytes
    assert md.SerializeToString(deterministic=True) == data


SNAP: dict[str, Any] = {
    "client_id": "c",
    "network": {
        "connections": {"created": 2},
        "requests": {"PRODUCE": {1: {"count": 4, "latency_sum_s": 0.008, "latency_max_s": 0.004}}},
    },
    "producer": {
        "records_sent": 10,
        "records_failed": 1,
        "retries": 0,
        "bytes_sent": 100,
        "batch_bytes": {"count": 2, "avg": 50.0, "max": 60},
        "buffer_limit_bytes": 1000,
        "buffer_used_bytes": 10,
        "topics": {"t": {"records_sent": 10, "bytes_sent": 100, "records_failed": 1}},
    },
}


class ScriptedClient:
    """What TelemetryPusher uses of KafkaClient; answers from ``answer(request)``."""

    request_timeout_ms = 1_000.0

    def __init__(self, answer: Callable[[Any], Any], supported: bool = True) -> None:
        self.answer = answer
        self.supported = supported
        self.sent: list[Any] = []

    async def any_node(self) -> int:
        return 1

    async def api_version(self, node: int, api_key: int) -> int:
        if not self.supported:
            raise KafkaUnsupportedVersionError(f"no {ApiKey(api_key).name}")
        return 0

    async def send(self, node: int, body: Any) -> Any:
        self.sent.append(body)
        return self.answer(body)


def subscription(**kw: Any) -> GetTelemetrySubscriptionsResponse:
    fields: dict[str, Any] = {
        "client_instance_id": INSTANCE,
        "subscription_id": 7,
        "accepted_compression_types": [4, 1],
        "push_interval_ms": 20,
        "telemetry_max_bytes": 1 << 20,
        "requested_metrics": ["org.apache.kafka.producer.record.", "org.apache.kafka.producer.node."],
    }
    fields.update(kw)
    return GetTelemetrySubscriptionsResponse(**fields)


def pushes(client: ScriptedClient) -> list[Any]:
    return [b for b in client.sent if b.API_KEY == ApiKey.PUSH_TELEMETRY]


def names(push: Any) -> dict[str, Any]:
    md = MetricsData.FromString(decompress(push.compression_type, push.metrics))
    return {m.name: m for rm in md.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}


async def run(
    client: ScriptedClient, until: Callable[[], bool], pusher: TelemetryPusher | None = None
) -> TelemetryPusher:
    pusher = pusher or TelemetryPusher(client, "producer", lambda: SNAP, lambda: {"transactional_id": "tx"})
    pusher.start()
    for _ in range(500):
        if until():
            break
        await asyncio.sleep(0.01)
    return pusher


def answering(sub: Any, push_codes: list[int]) -> Callable[[Any], Any]:
    codes = iter(push_codes)

    def answer(body: Any) -> Any:
        if body.API_KEY == ApiKey.GET_TELEMETRY_SUBSCRIPTIONS:
            return sub() if callable(sub) else sub
        return PushTelemetryResponse(error_code=next(codes, 0))

    return answer


@sync
async def test_pushes_the_subscribed_metrics_compressed_then_a_terminating_push_on_close() -> None:
    client = ScriptedClient(answering(subscription(), []))
    pusher = await run(client, lambda: len(pushes(client)) >= 2)
    await pusher.close()
    got = pushes(client)
    assert len(got) >= 3 and got[-1].terminating and not any(p.terminating for p in got[:-1])
    first = got[0]
    assert (first.client_instance_id, first.subscription_id, first.compression_type) == (INSTANCE, 7, 4)
    metrics = names(first)
    # the filter: record.* and node.* only
    assert set(metrics) == {
        "org.apache.kafka.producer.record.send.total",
        "org.apache.kafka.producer.record.error.total",
        "org.apache.kafka.producer.record.retry.total",
        "org.apache.kafka.producer.node.request.latency.avg",
        "org.apache.kafka.producer.node.request.latency.max",
    }
    sent = metrics["org.apache.kafka.producer.record.send.total"].sum
    assert sent.data_points[0].as_int == 10 and sent.aggregation_temporality == CUMULATIVE
    latency = metrics["org.apache.kafka.producer.node.request.latency.avg"].gauge.data_points[0]
    assert latency.as_double == pytest.approx(2.0) and latency.attributes[0].value.string_value == "1"
    md = MetricsData.FromString(decompress(4, first.metrics))
    assert md.resource_metrics[0].resource.attributes[0].key == "transactional_id"


@sync
async def test_a_broker_without_kip_714_costs_no_request() -> None:
    client = ScriptedClient(answering(subscription(), []), supported=False)
    pusher = await run(client, lambda: False is True)
    await pusher.close()
    assert client.sent == [] and not pusher.enabled


@sync
async def test_no_subscription_one_request_per_interval_and_no_push() -> None:
    client = ScriptedClient(answering(subscription(requested_metrics=[], push_interval_ms=50), []))
    pusher = await run(client, lambda: len(client.sent) >= 2)
    await pusher.close()
    assert client.sent and not pushes(client)


@sync
async def test_star_selects_every_metric_and_delta_sends_increments() -> None:
    client = ScriptedClient(answering(subscription(requested_metrics=["*"], delta_temporality=True), []))
    pusher = await run(client, lambda: len(pushes(client)) >= 2)
    await pusher.close()
    first, second = pushes(client)[:2]
    m1, m2 = names(first), names(second)
    assert "org.apache.kafka.producer.buffer.available.bytes" in m1
    total = "org.apache.kafka.producer.record.send.total"
    assert m1[total].sum.aggregation_temporality == DELTA
    assert (m1[total].sum.data_points[0].as_int, m2[total].sum.data_points[0].as_int) == (10, 0)


@pytest.mark.parametrize(
    "code", [ErrorCode.INVALID_REQUEST, ErrorCode.INVALID_RECORD, ErrorCode.UNSUPPORTED_VERSION]
)
@sync
async def test_push_errors_that_turn_the_push_off(code: ErrorCode) -> None:
    client = ScriptedClient(answering(subscription(), [code]))
    pusher = await run_ref(client, lambda p: not p.enabled)
    await pusher.close()
    assert len(pushes(client)) == 1 and not pusher.enabled and code.name in (pusher.disabled_reason or "")


pusher_ref: list[TelemetryPusher] = []


@pytest.fixture(autouse=True)
def _ref() -> None:
    pusher_ref.clear()


async def run_ref(client: ScriptedClient, until: Callable[[TelemetryPusher], bool]) -> TelemetryPusher:
    pusher = TelemetryPusher(client, "producer", lambda: SNAP)
    pusher_ref.append(pusher)
    return await run(client, lambda: until(pusher), pusher)


@pytest.mark.parametrize(
    "code", [ErrorCode.INVALID_REQUEST, ErrorCode.UNSUPPORTED_VERSION, ErrorCode.UNKNOWN_SERVER_ERROR]
)
@sync
async def test_subscription_errors_that_turn_the_push_off(code: ErrorCode) -> None:
    client = ScriptedClient(answering(GetTelemetrySubscriptionsResponse(error_code=code), []))
    pusher = await run_ref(client, lambda p: not p.enabled)
    await pusher.close()
    assert len(client.sent) == 1 and not pusher.enabled


@sync
async def test_unknown_subscription_id_asks_again_at_once() -> None:
    subs = iter([subscription(subscription_id=1), subscription(subscription_id=2)])
    client = ScriptedClient(
        answering(lambda: next(subs, subscription(subscription_id=2)), [ErrorCode.UNKNOWN_SUBSCRIPTION_ID])
    )
    pusher = await run_ref(client, lambda p: p.pushes >= 1)
    await pusher.close()
    kinds = [b.API_KEY for b in client.sent]
    assert kinds[:4] == [
        ApiKey.GET_TELEMETRY_SUBSCRIPTIONS,
        ApiKey.PUSH_TELEMETRY,
        ApiKey.GET_TELEMETRY_SUBSCRIPTIONS,
        ApiKey.PUSH_TELEMETRY,
    ]
    assert [p.subscription_id for p in pushes(client)[:2]] == [1, 2]
    # the second subscription request carries the instance id the broker gave
    assert client.sent[2].client_instance_id == INSTANCE


@sync
async def test_unsupported_compression_type_drops_that_codec() -> None:
    client = ScriptedClient(answering(subscription(), [ErrorCode.UNSUPPORTED_COMPRESSION_TYPE]))
    pusher = await run_ref(client, lambda p: p.pushes >= 1)
    await pusher.close()
    assert [p.compression_type for p in pushes(client)[:2]] == [4, 1]


@pytest.mark.parametrize("code", [ErrorCode.TELEMETRY_TOO_LARGE, ErrorCode.THROTTLING_QUOTA_EXCEEDED])
@sync
async def test_too_large_and_throttled_wait_an_interval_and_go_on(code: ErrorCode) -> None:
    client = ScriptedClient(answering(subscription(), [code]))
    pusher = await run_ref(client, lambda p: p.pushes >= 1)
    await pusher.close()
    kinds = [b.API_KEY for b in client.sent]
    assert kinds[:3] == [ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, ApiKey.PUSH_TELEMETRY, ApiKey.PUSH_TELEMETRY]
    assert pusher.enabled


@sync
async def test_a_payload_over_telemetry_max_bytes_is_not_sent() -> None:
    client = ScriptedClient(
        answering(subscription(telemetry_max_bytes=10, accepted_compression_types=[]), [])
    )
    pusher = await run_ref(client, lambda p: len(client.sent) >= 1)
    await asyncio.sleep(0.1)
    await pusher.close()
    assert not pushes(client) and pusher.enabled


@sync
async def test_a_push_in_flight_at_close_finishes_before_the_terminating_push() -> None:
    """Cancelled, a push already counted would leave its increments out of a delta subscription."""
    answer = answering(subscription(requested_metrics=["*"], delta_temporality=True), [])
    in_flight = asyncio.Event()

    class Slow(ScriptedClient):
        async def send(self, node: int, body: Any) -> Any:
            if body.API_KEY == ApiKey.PUSH_TELEMETRY and not body.terminating:
                in_flight.set()
                await asyncio.sleep(0.2)
            return await super().send(node, body)

    client = Slow(answer)
    pusher = TelemetryPusher(client, "producer", lambda: SNAP)
    pusher.start()
    for _ in range(500):
        if in_flight.is_set():
            break
        await asyncio.sleep(0.01)
    await pusher.close(5)
    got = pushes(client)
    assert [p.terminating for p in got] == [False, True]
    total = "org.apache.kafka.producer.record.send.total"
    assert sum(names(p)[total].sum.data_points[0].as_int for p in got) == 10


@sync
async def test_a_lost_connection_asks_again_later(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(push_module, "RETRY_S", 0.05)
    answer = answering(subscription(), [])
    failures = [KafkaConnectionError("broker gone")]

    def flaky(body: Any) -> Any:
        if failures:
            raise failures.pop()
        return answer(body)

    client = ScriptedClient(flaky)
    pusher = await run_ref(client, lambda p: p.pushes >= 1)
    await pusher.close()
    assert pusher.enabled and pusher.pushes >= 1
    assert [b.API_KEY for b in client.sent[:2]] == [ApiKey.GET_TELEMETRY_SUBSCRIPTIONS] * 2


# -- client_instance_id (Java's clientInstanceId(Duration)) -----------------------------------------


@sync
async def test_client_instance_id_is_the_one_the_broker_assigned() -> None:
    client = ScriptedClient(answering(subscription(requested_metrics=[]), []))
    pusher = TelemetryPusher(client, "producer", lambda: SNAP)
    try:
        # not started by its owner yet: the call starts asking
        assert await wait_instance_id(pusher, 5) == INSTANCE
        assert await wait_instance_id(pusher, 0) == INSTANCE  # known: no wait
    finally:
        await pusher.close()


@sync
async def test_client_instance_id_against_a_broker_without_kip_714() -> None:
    pusher = TelemetryPusher(
        ScriptedClient(answering(subscription(), []), supported=False), "consumer", lambda: SNAP
    )
    try:
        with pytest.raises(KafkaUnsupportedVersionError, match="does not support KIP-714"):
            await wait_instance_id(pusher, 30)
    finally:
        await pusher.close()


@sync
async def test_client_instance_id_when_the_broker_refuses_the_subscription() -> None:
    client = ScriptedClient(
        answering(GetTelemetrySubscriptionsResponse(error_code=ErrorCode.INVALID_REQUEST), [])
    )
    pusher = TelemetryPusher(client, "producer", lambda: SNAP)
    try:
        with pytest.raises(KafkaError, match="INVALID_REQUEST"):
            await wait_instance_id(pusher, 30)
    finally:
        await pusher.close()


@sync
async def test_client_instance_id_times_out_naming_the_last_error() -> None:
    def down(body: Any) -> Any:
        raise KafkaConnectionError("broker 1 refused the connection")

    pusher = TelemetryPusher(ScriptedClient(down), "producer", lambda: SNAP)
    try:
        with pytest.raises(
            KafkaTimeoutError, match=r"within 0\.2s: no answer to GetTelemetrySubscriptions yet.*refused"
        ):
            await wait_instance_id(pusher, 0.2)
    finally:
        await pusher.close()


@sync
async def test_client_instance_id_before_the_owner_connects_and_after_close() -> None:
    client = ScriptedClient(answering(subscription(), []))
    client.started = False  # type: ignore[attr-defined]
    pusher = TelemetryPusher(client, "consumer", lambda: SNAP)
    with pytest.raises(KafkaTimeoutError, match="the consumer has not connected to the cluster yet"):
        await wait_instance_id(pusher, 0.1)
    waiting = asyncio.ensure_future(wait_instance_id(pusher, 30))
    await asyncio.sleep(0)
    await pusher.close()
    with pytest.raises(KafkaClosedError, match="closed before the broker assigned one"):
        await waiting
    assert client.sent == []


@pytest.mark.parametrize("timeout", [-1, float("nan"), "5", None, True])
@sync
async def test_client_instance_id_takes_seconds_from_zero_up(timeout: Any) -> None:
    pusher = TelemetryPusher(ScriptedClient(answering(subscription(), [])), "producer", lambda: SNAP)
    with pytest.raises(KafkaConfigError, match="timeout must be a number of seconds >= 0"):
        await wait_instance_id(pusher, timeout)


@sync
async def test_client_instance_id_with_metrics_push_off() -> None:
    with pytest.raises(KafkaConfigError, match="enable_metrics_push=False"):
        await wait_instance_id(None, 1)
