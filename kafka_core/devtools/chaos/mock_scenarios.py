"""Chaos capabilities on librdkafka's 3-broker mock cluster: what one Tansu cannot do.

Leader moves, a broker down while the others serve, and retriable error codes injected per API,
each under the same paced idempotent producer and committing group consumer as the Tansu
scenarios, with the same books (the log is read back by confluent-kafka up to the sentinels).
The helpers of :mod:`kafka_core.devtools.chaos.scenarios` are imported when a run starts, not at import
time, because that module registers these capabilities.
"""

from __future__ import annotations

import functools
import random
import time
from collections.abc import Callable
from typing import Any

from kafka_core.devtools.chaos.artifacts import Outcome
from kafka_core.devtools.chaos.faulted import faulted_run
from kafka_core.devtools.chaos.workload import Workload
from kafka_core.devtools.mockcluster import MockCluster, MockClusterError, librdkafka_version
from kafka_core.protocol import ApiKey
from kafka_core.protocol.errors import ErrorCode as E

__all__ = ["CAPABILITIES", "missing_prerequisite", "parameters"]

BROKERS = 3
# Every injected code is retriable, so zero loss and zero duplicates.
INJECTED: dict[str, tuple[int, ...]] = {
    "Produce": (E.NOT_LEADER_OR_FOLLOWER, E.REQUEST_TIMED_OUT, E.NOT_ENOUGH_REPLICAS, E.CORRUPT_MESSAGE),
    "Fetch": (E.NOT_LEADER_OR_FOLLOWER, E.UNKNOWN_TOPIC_OR_PARTITION, E.NOT_LEADER_OR_FOLLOWER),
    "OffsetCommit": (E.COORDINATOR_NOT_AVAILABLE, E.NOT_COORDINATOR, E.COORDINATOR_LOAD_IN_PROGRESS),
    "FindCoordinator": (E.COORDINATOR_NOT_AVAILABLE, E.COORDINATOR_NOT_AVAILABLE),
    "InitProducerId": (E.COORDINATOR_LOAD_IN_PROGRESS, E.NOT_COORDINATOR),
}
API_KEYS = {
    "Produce": ApiKey.PRODUCE,
    "Fetch": ApiKey.FETCH,
    "OffsetCommit": ApiKey.OFFSET_COMMIT,
    "FindCoordinator": ApiKey.FIND_COORDINATOR,
    "InitProducerId": ApiKey.INIT_PRODUCER_ID,
}
LEFT_OUT = {
    "JoinGroup": "the mock's error answers to JoinGroup carry null strings (protocol_name, leader, "
    "member_id) where the schema allows none; they do not decode (MOCK_NULL_STRINGS in "
    "tests/integration/test_mock_cluster.py), so JoinGroup errors are not injected here"
}
CONSUME_WAIT_S = 15.0  # injected errors must be taken by requests within this, or the cycle fails
SCALES: dict[str, dict[str, Any]] = {
    "short": {"leader_changes": 2, "broker_downs": 2, "down_s": (3.0, 4.0), "error_rounds": 1},
    "full": {"leader_changes": 100, "broker_downs": 20, "down_s": (3.0, 8.0), "error_rounds": 20},
}


def missing_prerequisite() -> str | None:
    """Why the mock cluster cannot run here (exactly), or None."""
    try:
        version = librdkafka_version()
    except MockClusterError as exc:
        return f"librdkafka's mock cluster cannot be loaded (confluent-kafka): {exc}"
    return None if version else "librdkafka reports no version"


def parameters(capability: str, mode: str, seed: int, common: dict[str, Any]) -> dict[str, Any]:
    s, rng = SCALES[mode], random.Random(f"{seed}:{capability}")
    base = {**common, "brokers": BROKERS, "replication": BROKERS}
    if capability == "mock-leader-change":
        return {**base, "cycles": s["leader_changes"]}
    if capability == "mock-broker-down":
        lo, hi = s["down_s"]
        return {**base, "down_s": [round(rng.uniform(lo, hi), 1) for _ in range(s["broker_downs"])]}
    if capability == "mock-injected-errors":
        return {
            **base,
            "rounds": s["error_rounds"],
            "errors": {api: list(codes) for api, codes in INJECTED.items()},
            "init_producer_id": "injected before the producer starts (it sends InitProducerId only then)",
            "find_coordinator": "injected mid-stream, then E.NOT_COORDINATOR on a commit makes the "
            "consumer look its coordinator up again; the mock's error answer carries a null host "
            "that does not decode, so the client drops that connection and retries",
            "left_out": LEFT_OUT,
        }
    raise KeyError(capability)


def _broker_info(cluster: MockCluster) -> dict[str, Any]:
    return {
        "name": "librdkafka-mock",
        "version": librdkafka_version(),
        "brokers": len(cluster.broker_ids),
        "listener": cluster.bootstrap,
        "advertised": cluster.bootstrap,
        "through_fault_proxy": False,
    }


def _leaders(bootstrap: str, topic: str) -> dict[int, int]:
    from kafka_core.sync_client import KafkaClient

    with KafkaClient(bootstrap) as client:
        meta = client.metadata([topic]).topic(topic)
    if meta is None:
        raise MockClusterError(f"topic {topic} missing from the mock cluster's metadata")
    return {p.partition: p.leader for p in meta.partitions}


def _coordinator(bootstrap: str, group: str) -> int:
    from kafka_core.sync_client import KafkaClient

    with KafkaClient(bootstrap) as client:
        return client.find_coordinator(group).node_id


def _on_mock(
    outcome: Outcome,
    make_faults: Callable[[MockCluster], list[tuple[str, Callable[[Workload], dict[str, Any]]]]],
    before_start: Callable[[MockCluster], None] | None = None,
) -> None:
    failures: list[str] = []
    with MockCluster(BROKERS) as cluster:
        cluster.set_group_initial_rebalance_delay_ms(0)
        outcome.broker = _broker_info(cluster)
        if before_start is not None:
            before_start(cluster)
        faulted_run(outcome, cluster, cluster.bootstrap, make_faults(cluster), failures)  # type: ignore[arg-type]
    outcome.judge(failures)


def mock_leader_change(outcome: Outcome) -> None:
    def faults(cluster: MockCluster) -> list[tuple[str, Callable[[Workload], dict[str, Any]]]]:
        cluster.start_request_tracking()

        def move(wl: Workload) -> dict[str, Any]:
            before = _leaders(cluster.bootstrap, wl.topic)
            cluster.clear_requests()
            for p, leader in before.items():
                cluster.set_leader(wl.topic, p, leader % BROKERS + 1)
            after = _leaders(cluster.bootstrap, wl.topic)
            moved = all(after[p] != before[p] for p in before)
            # The producer really followed: every new leader received Produce requests.
            deadline = time.monotonic() + CONSUME_WAIT_S
            while True:
                reached = {r.broker_id for r in cluster.get_requests() if r.api_key == ApiKey.PRODUCE}
                if set(after.values()) <= reached or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            followed = set(after.values()) <= reached
            return {
                "leaders_before": before,
                "leaders_after": after,
                "produce_reached_brokers": sorted(reached),
                "passed": moved and followed,
            }

        return [("every partition's leader moves to another broker", move)] * outcome.parameters["cycles"]

    _on_mock(outcome, faults)


def mock_broker_down(outcome: Outcome) -> None:
    def faults(cluster: MockCluster) -> list[tuple[str, Callable[[Workload], dict[str, Any]]]]:
        def down(wl: Workload, k: int, seconds: float) -> dict[str, Any]:
            leaders = _leaders(cluster.bootstrap, wl.topic)
            broker = leaders[k % len(leaders)]  # a leader each time, another partition's each cycle
            coordinator = _coordinator(cluster.bootstrap, wl.consumer_options["group_id"])
            acked, delivered = set(wl.ledger.acked), set(wl.ledger.deliveries)
            cluster.broker_down(broker)
            time.sleep(seconds)
            cluster.broker_up(broker)
            with wl.ledger.lock:  # what the brokers left up served meanwhile, per partition
                acked_during = _per_partition(wl.ledger.acked[s][0] for s in set(wl.ledger.acked) - acked)
                delivered_during = _per_partition(
                    wl.ledger.deliveries[s][0][0] for s in set(wl.ledger.deliveries) - delivered
                )
            # The partitions whose leader stayed up must keep going: the producer's always; the
            # consumer's unless the group coordinator went down too (its synchronous commit then
            # waits for the coordinator, as the Java client's commitSync does).
            served = {p for p, b in leaders.items() if b != broker}
            need_acks = bool(served)
            need_deliveries = bool(served) and coordinator != broker
            passed = (not need_acks or bool(served & set(acked_during))) and (
                not need_deliveries or bool(served & set(delivered_during))
            )
            return {
                "broker_down": broker,
                "down_s": seconds,
                "leader_of": sorted(p for p, b in leaders.items() if b == broker),
                "coordinator": coordinator,
                "acked_during": acked_during,
                "delivered_during": delivered_during,
                "progress_required": {"acks": need_acks, "deliveries": need_deliveries},
                "passed": passed,
            }

        return [
            (f"broker down {s}s", functools.partial(down, k=k, seconds=s))
            for k, s in enumerate(outcome.parameters["down_s"])
        ]

    _on_mock(outcome, faults)


def _per_partition(partitions: Any) -> dict[int, int]:
    counts: dict[int, int] = {}
    for p in partitions:
        counts[p] = counts.get(p, 0) + 1
    return dict(sorted(counts.items()))


def _count(cluster: MockCluster, api_key: int) -> int:
    return sum(1 for r in cluster.get_requests() if r.api_key == api_key)


def _wait_taken(cluster: MockCluster, api_key: int, needed: int) -> int:
    """Requests of ``api_key`` seen since the last clear, once ``needed`` arrived or time ran out."""
    deadline = time.monotonic() + CONSUME_WAIT_S
    seen = _count(cluster, api_key)
    while seen < needed and time.monotonic() < deadline:
        time.sleep(0.1)
        seen = _count(cluster, api_key)
    return seen


def mock_injected_errors(outcome: Outcome) -> None:
    init_codes = INJECTED["InitProducerId"]

    def before_start(cluster: MockCluster) -> None:
        cluster.start_request_tracking()
        cluster.push_request_errors(ApiKey.INIT_PRODUCER_ID, *init_codes)

    def faults(cluster: MockCluster) -> list[tuple[str, Callable[[Workload], dict[str, Any]]]]:
        def initial(_: Workload) -> dict[str, Any]:
            # Pushed before the producer started: its InitProducerId requests took the errors.
            seen = _wait_taken(cluster, ApiKey.INIT_PRODUCER_ID, len(init_codes) + 1)
            return _verdict("InitProducerId", init_codes, seen)

        def inject(api: str) -> Callable[[Workload], dict[str, Any]]:
            def run(_: Workload) -> dict[str, Any]:
                codes, key = INJECTED[api], API_KEYS[api]
                cluster.clear_requests()
                cluster.push_request_errors(key, *codes)
                if api == "FindCoordinator":  # make the consumer look its coordinator up again
                    cluster.push_request_errors(ApiKey.OFFSET_COMMIT, E.NOT_COORDINATOR)
                seen = _wait_taken(cluster, key, len(codes) + 1)
                return _verdict(api, codes, seen)

            return run

        cycles: list[tuple[str, Callable[[Workload], dict[str, Any]]]] = [
            ("InitProducerId errors at producer start", initial)
        ]
        for _ in range(outcome.parameters["rounds"]):
            cycles += [
                (f"{api} errors {list(INJECTED[api])}", inject(api))
                for api in INJECTED
                if api != "InitProducerId"
            ]
        return cycles

    _on_mock(outcome, faults, before_start)


def _verdict(api: str, codes: tuple[int, ...], seen: int) -> dict[str, Any]:
    """A cycle passes only when every injected error was answered and a request after them too."""
    return {
        "api": api,
        "codes": list(codes),
        "requests_seen": seen,
        "passed": seen >= len(codes) + 1,
        **({} if seen >= len(codes) + 1 else {"problem": f"only {seen} {api} requests in {CONSUME_WAIT_S}s"}),
    }


CAPABILITIES: dict[str, Callable[[Outcome], None]] = {
    "mock-leader-change": mock_leader_change,
    "mock-broker-down": mock_broker_down,
    "mock-injected-errors": mock_injected_errors,
}
