"""librdkafka's mock Kafka cluster (from the confluent-kafka wheel) driven through ctypes.

It is the multi-broker test bed: real loopback sockets and the real protocol, with leader moves,
brokers going down, injected error codes per API and slow brokers under the test's control.
Everything lives in memory and is gone when :meth:`MockCluster.close` destroys the handle.
Signatures follow librdkafka's ``src/rdkafka_mock.h``; every function used is declared below.
"""

from __future__ import annotations

import ctypes
import glob
import os
from dataclasses import dataclass
from typing import Any

__all__ = [
    "BROKEN_VERSIONS",
    "MockCluster",
    "MockClusterError",
    "MockRequest",
    "librdkafka_version",
    "load_librdkafka",
]

_V = ctypes.c_void_p
_S = ctypes.c_char_p
_I16 = ctypes.c_int16
_I32 = ctypes.c_int32
_I64 = ctypes.c_int64
_INT = ctypes.c_int
_SIZE = ctypes.c_size_t
_ERR = ctypes.c_int  # rd_kafka_resp_err_t

# name -> (restype, argtypes). Only these are ever called.
_SIGNATURES: dict[str, tuple[Any, list[Any]]] = {
    "rd_kafka_conf_new": (_V, []),
    "rd_kafka_conf_set": (_INT, [_V, _S, _S, _S, _SIZE]),
    "rd_kafka_new": (_V, [_INT, _V, _S, _SIZE]),
    "rd_kafka_destroy": (None, [_V]),
    "rd_kafka_err2name": (_S, [_ERR]),
    "rd_kafka_version_str": (_S, []),
    "rd_kafka_mock_cluster_new": (_V, [_V, _INT]),
    "rd_kafka_mock_cluster_destroy": (None, [_V]),
    "rd_kafka_mock_cluster_bootstraps": (_S, [_V]),
    "rd_kafka_mock_topic_create": (_ERR, [_V, _S, _INT, _INT]),
    "rd_kafka_mock_topic_set_error": (None, [_V, _S, _ERR]),
    "rd_kafka_mock_partition_set_leader": (_ERR, [_V, _S, _I32, _I32]),
    "rd_kafka_mock_partition_set_follower": (_ERR, [_V, _S, _I32, _I32]),
    "rd_kafka_mock_broker_set_down": (_ERR, [_V, _I32]),
    "rd_kafka_mock_broker_set_up": (_ERR, [_V, _I32]),
    "rd_kafka_mock_broker_set_rtt": (_ERR, [_V, _I32, _INT]),
    "rd_kafka_mock_push_request_errors_array": (None, [_V, _I16, _SIZE, ctypes.POINTER(_ERR)]),
    "rd_kafka_mock_clear_request_errors": (None, [_V, _I16]),
    # Variadic: (error code, rtt ms) pairs follow; argtypes name the fixed part only.
    "rd_kafka_mock_broker_push_request_error_rtts": (_ERR, [_V, _I32, _I16, _SIZE]),
    "rd_kafka_mock_broker_error_stack_cnt": (_ERR, [_V, _I32, _I16, ctypes.POINTER(_SIZE)]),
    "rd_kafka_mock_coordinator_set": (_ERR, [_V, _S, _S, _I32]),
    "rd_kafka_mock_set_apiversion": (_ERR, [_V, _I16, _I16, _I16]),
    "rd_kafka_mock_group_initial_rebalance_delay_ms": (None, [_V, _I32]),
    "rd_kafka_mock_start_request_tracking": (None, [_V]),
    "rd_kafka_mock_stop_request_tracking": (None, [_V]),
    "rd_kafka_mock_get_requests": (ctypes.POINTER(_V), [_V, ctypes.POINTER(_SIZE)]),
    "rd_kafka_mock_clear_requests": (None, [_V]),
    "rd_kafka_mock_request_id": (_I32, [_V]),
    "rd_kafka_mock_request_api_key": (_I16, [_V]),
    "rd_kafka_mock_request_timestamp": (_I64, [_V]),
    "rd_kafka_mock_request_destroy_array": (None, [ctypes.POINTER(_V), _SIZE]),
    "rd_kafka_mock_partition_set_follower_wmarks": (_ERR, [_V, _S, _I32, _I64, _I64]),
    "rd_kafka_mock_partition_push_leader_response": (_ERR, [_V, _S, _INT, _I32, _I32]),
    "rd_kafka_mock_partition_delete_records": (_ERR, [_V, _S, _I32, _I64]),
    "rd_kafka_mock_topic_delete": (_ERR, [_V, _S]),
    "rd_kafka_mock_set_group_consumer_session_timeout_ms": (None, [_V, _INT]),
    "rd_kafka_mock_set_group_consumer_heartbeat_interval_ms": (None, [_V, _INT]),
    "rd_kafka_topic_partition_list_new": (_V, [_INT]),
    "rd_kafka_topic_partition_list_add": (_V, [_V, _S, _I32]),
    "rd_kafka_topic_partition_list_destroy": (None, [_V]),
    "rd_kafka_mock_cgrp_consumer_target_assignment_new": (_V, [ctypes.POINTER(_S), _INT, ctypes.POINTER(_V)]),
    "rd_kafka_mock_cgrp_consumer_target_assignment_destroy": (None, [_V]),
    "rd_kafka_mock_cgrp_consumer_target_assignment": (None, [_V, _S, _V]),
}

_LIB: ctypes.CDLL | None = None

# API key -> the range the mock can really parse, where it advertises more. Its group handlers
# read array counts as int32 even in flexible versions, and LeaveGroup only in the v0-v2 layout:
# JoinGroup v6 and SyncGroup v4 drop the connection ("ProtocolCnt ... > max allowed 1000"),
# LeaveGroup v3+ gets a v0-style answer. librdkafka's own client never sends those versions.
BROKEN_VERSIONS: dict[int, tuple[int, int]] = {11: (0, 5), 13: (0, 2), 14: (0, 3)}


class MockClusterError(RuntimeError):
    """The mock cluster could not be loaded, created, or refused a command."""


def load_librdkafka() -> ctypes.CDLL:
    """The librdkafka shared library bundled in the confluent-kafka wheel, with typed functions."""
    global _LIB
    if _LIB is not None:
        return _LIB
    try:
        import confluent_kafka
    except ImportError as exc:
        raise MockClusterError(f"confluent-kafka (the mock cluster's home) is not installed: {exc}") from exc
    base = os.path.dirname(os.path.dirname(os.path.abspath(confluent_kafka.__file__)))
    found = sorted(glob.glob(os.path.join(base, "confluent_kafka.libs", "librdkafka*")))
    if not found:
        raise MockClusterError(f"no librdkafka shared library under {base}/confluent_kafka.libs")
    try:
        lib = ctypes.CDLL(found[0])
    except OSError as exc:
        raise MockClusterError(f"cannot load {found[0]}: {exc}") from exc
    for name, (restype, argtypes) in _SIGNATURES.items():
        try:
            fn = getattr(lib, name)
        except AttributeError as exc:
            raise MockClusterError(f"{found[0]} lacks {name} (librdkafka too old?)") from exc
        fn.restype = restype
        fn.argtypes = argtypes
    _LIB = lib
    return lib


def librdkafka_version() -> str:
    """The bundled librdkafka's version (``rd_kafka_version_str``), for artifacts and reports."""
    return load_librdkafka().rd_kafka_version_str().decode()


@dataclass(frozen=True, slots=True)
class MockRequest:
    """One request the mock received. The C API exposes broker, API key and time, not the version."""

    broker_id: int
    api_key: int
    timestamp_us: int


class MockCluster:
    """A running mock cluster of ``brokers`` brokers (node ids 1..N) on loopback ports."""

    def __init__(self, brokers: int = 3, *, hide_broken_versions: bool = True) -> None:
        """``hide_broken_versions``: stop advertising the versions the mock itself cannot parse
        (:data:`BROKEN_VERSIONS`), so that clients which pick the highest version still work."""
        lib = load_librdkafka()
        self._lib = lib
        conf = lib.rd_kafka_conf_new()
        errstr = ctypes.create_string_buffer(512)
        # A quiet producer handle only owns the cluster; it never connects anywhere.
        for key, value in ((b"log_level", b"0"), (b"bootstrap.servers", b"")):
            lib.rd_kafka_conf_set(conf, key, value, errstr, len(errstr))
        rk = lib.rd_kafka_new(0, conf, errstr, len(errstr))
        if not rk:
            raise MockClusterError(f"rd_kafka_new failed: {errstr.value.decode(errors='replace')}")
        self._rk: int | None = rk
        mc = lib.rd_kafka_mock_cluster_new(rk, brokers)
        if not mc:
            lib.rd_kafka_destroy(rk)
            self._rk = None
            raise MockClusterError(f"rd_kafka_mock_cluster_new({brokers}) failed")
        self._mc: int | None = mc
        self.broker_ids = list(range(1, brokers + 1))
        self.bootstrap: str = lib.rd_kafka_mock_cluster_bootstraps(mc).decode()
        if hide_broken_versions:
            for api_key, (low, high) in BROKEN_VERSIONS.items():
                self.set_apiversion(api_key, low, high)

    # -- lifecycle -------------------------------------------------------------------------

    def close(self) -> None:
        """Destroy the cluster and its owning handle (every topic and record is gone). Idempotent."""
        if self._mc is not None:
            self._lib.rd_kafka_mock_cluster_destroy(self._mc)
            self._mc = None
        if self._rk is not None:
            self._lib.rd_kafka_destroy(self._rk)
            self._rk = None

    def __enter__(self) -> MockCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<MockCluster {self.bootstrap or 'closed'}>"

    @property
    def _handle(self) -> int:
        if self._mc is None:
            raise MockClusterError("the mock cluster is closed")
        return self._mc

    def _check(self, err: int, what: str) -> None:
        if err:
            name = self._lib.rd_kafka_err2name(err)
            raise MockClusterError(f"{what}: {name.decode() if name else err}")

    # -- topology --------------------------------------------------------------------------

    def create_topic(self, name: str, partitions: int = 3, replication: int = 3) -> str:
        """Create ``name``; leaders are spread over the brokers. Returns the name."""
        err = self._lib.rd_kafka_mock_topic_create(self._handle, name.encode(), partitions, replication)
        self._check(err, f"topic_create({name!r}, {partitions}, {replication})")
        return name

    def set_leader(self, topic: str, partition: int, broker_id: int) -> None:
        """Move the partition's leadership (-1: no leader). Clients learn it from errors/metadata."""
        err = self._lib.rd_kafka_mock_partition_set_leader(self._handle, topic.encode(), partition, broker_id)
        self._check(err, f"set_leader({topic}-{partition} -> {broker_id})")

    def set_follower(self, topic: str, partition: int, broker_id: int) -> None:
        """The broker consumers are told to fetch from (KIP-392), -1 to clear."""
        err = self._lib.rd_kafka_mock_partition_set_follower(
            self._handle, topic.encode(), partition, broker_id
        )
        self._check(err, f"set_follower({topic}-{partition} -> {broker_id})")

    def set_followers(self, topic: str, partitions: int, broker_id: int) -> None:
        for p in range(partitions):
            self.set_follower(topic, p, broker_id)

    def broker_down(self, broker_id: int) -> None:
        """Close the broker's connections and refuse new ones until :meth:`broker_up`."""
        self._check(
            self._lib.rd_kafka_mock_broker_set_down(self._handle, broker_id), f"broker_down({broker_id})"
        )

    def broker_up(self, broker_id: int) -> None:
        self._check(self._lib.rd_kafka_mock_broker_set_up(self._handle, broker_id), f"broker_up({broker_id})")

    def set_rtt(self, broker_id: int, rtt_ms: int) -> None:
        """Delay every response of this broker by ``rtt_ms`` (a slow broker)."""
        err = self._lib.rd_kafka_mock_broker_set_rtt(self._handle, broker_id, rtt_ms)
        self._check(err, f"set_rtt({broker_id}, {rtt_ms})")

    def coordinator_set(self, key_type: str, key: str, broker_id: int) -> None:
        """Pin the coordinator for a ``"group"`` or ``"transaction"`` key to a broker."""
        if key_type not in ("group", "transaction"):
            raise ValueError(f"key_type must be 'group' or 'transaction', not {key_type!r}")
        err = self._lib.rd_kafka_mock_coordinator_set(
            self._handle, key_type.encode(), key.encode(), broker_id
        )
        self._check(err, f"coordinator_set({key_type}, {key!r}, {broker_id})")

    def set_apiversion(self, api_key: int, min_version: int, max_version: int) -> None:
        """Narrow what every broker advertises (and accepts) for ``api_key``."""
        err = self._lib.rd_kafka_mock_set_apiversion(self._handle, api_key, min_version, max_version)
        self._check(err, f"set_apiversion({api_key}, {min_version}, {max_version})")

    def set_group_initial_rebalance_delay_ms(self, delay_ms: int) -> None:
        """How long a new group waits for more members before its first rebalance (mock default 3 s)."""
        self._lib.rd_kafka_mock_group_initial_rebalance_delay_ms(self._handle, delay_ms)

    def set_follower_wmarks(self, topic: str, partition: int, low: int, high: int) -> None:
        """The low and high watermarks a follower reports (-1 each: follow the leader again);
        a follower behind the leader is how a log is truncated when it becomes leader."""
        err = self._lib.rd_kafka_mock_partition_set_follower_wmarks(
            self._handle, topic.encode(), partition, low, high
        )
        self._check(err, f"set_follower_wmarks({topic}-{partition}, {low}, {high})")

    def push_leader_response(self, topic: str, partition: int, leader_id: int, leader_epoch: int) -> None:
        """The next Metadata answer names this leader and epoch for the partition (once)."""
        err = self._lib.rd_kafka_mock_partition_push_leader_response(
            self._handle, topic.encode(), partition, leader_id, leader_epoch
        )
        self._check(err, f"push_leader_response({topic}-{partition}, {leader_id}, {leader_epoch})")

    def delete_records(self, topic: str, partition: int, before_offset: int) -> None:
        """Move the log start of the partition to ``before_offset`` (records before it are gone)."""
        err = self._lib.rd_kafka_mock_partition_delete_records(
            self._handle, topic.encode(), partition, before_offset
        )
        self._check(err, f"delete_records({topic}-{partition}, {before_offset})")

    def delete_topic(self, topic: str) -> None:
        self._check(
            self._lib.rd_kafka_mock_topic_delete(self._handle, topic.encode()), f"delete_topic({topic})"
        )

    def set_group_consumer_timeouts(self, *, session_timeout_ms: int, heartbeat_interval_ms: int) -> None:
        """The KIP-848 group's ``group.consumer.session.timeout.ms`` and heartbeat interval."""
        self._lib.rd_kafka_mock_set_group_consumer_session_timeout_ms(self._handle, session_timeout_ms)
        self._lib.rd_kafka_mock_set_group_consumer_heartbeat_interval_ms(self._handle, heartbeat_interval_ms)

    def set_consumer_target_assignment(
        self, group_id: str, assignment: dict[str, list[tuple[str, int]]]
    ) -> None:
        """The next KIP-848 target assignment of ``group_id``: member id -> (topic, partition) list,
        in place of the mock's own assignor."""
        ids = list(assignment)
        names = (_S * len(ids))(*(m.encode() for m in ids))
        lists = (_V * len(ids))()
        lib = self._lib
        try:
            for i, member in enumerate(ids):
                lists[i] = lib.rd_kafka_topic_partition_list_new(max(1, len(assignment[member])))
                for topic, partition in assignment[member]:
                    lib.rd_kafka_topic_partition_list_add(lists[i], topic.encode(), partition)
            target = lib.rd_kafka_mock_cgrp_consumer_target_assignment_new(names, len(ids), lists)
            if not target:
                raise MockClusterError(f"cgrp_consumer_target_assignment_new({group_id!r}) failed")
            try:
                lib.rd_kafka_mock_cgrp_consumer_target_assignment(self._handle, group_id.encode(), target)
            finally:
                lib.rd_kafka_mock_cgrp_consumer_target_assignment_destroy(target)
        finally:
            for i in range(len(ids)):
                if lists[i]:
                    lib.rd_kafka_topic_partition_list_destroy(lists[i])

    # -- faults ----------------------------------------------------------------------------

    def push_request_errors(self, api_key: int, *codes: int) -> None:
        """The next ``len(codes)`` requests of ``api_key`` (to any broker) get these error codes."""
        arr = (_ERR * len(codes))(*codes)
        self._lib.rd_kafka_mock_push_request_errors_array(self._handle, api_key, len(codes), arr)

    def clear_request_errors(self, api_key: int) -> None:
        self._lib.rd_kafka_mock_clear_request_errors(self._handle, api_key)

    def broker_push_request_error_rtts(self, broker_id: int, api_key: int, *pairs: tuple[int, int]) -> None:
        """Per broker: the next requests of ``api_key`` get (error code, delay ms) in turn."""
        flat: list[Any] = []
        for code, rtt in pairs:
            flat += [_ERR(code), _I32(rtt)]
        err = self._lib.rd_kafka_mock_broker_push_request_error_rtts(
            self._handle, broker_id, api_key, len(pairs), *flat
        )
        self._check(err, f"broker_push_request_error_rtts({broker_id}, {api_key})")

    def broker_error_stack_count(self, broker_id: int, api_key: int) -> int:
        """How many of the errors pushed for this broker and API are still waiting for requests."""
        count = _SIZE(0)
        err = self._lib.rd_kafka_mock_broker_error_stack_cnt(
            self._handle, broker_id, api_key, ctypes.byref(count)
        )
        self._check(err, f"broker_error_stack_cnt({broker_id}, {api_key})")
        return count.value

    def set_topic_error(self, topic: str, code: int) -> None:
        """Metadata reports ``code`` for the topic (0 clears it)."""
        self._lib.rd_kafka_mock_topic_set_error(self._handle, topic.encode(), code)

    # -- observing -------------------------------------------------------------------------

    def start_request_tracking(self) -> None:
        self._lib.rd_kafka_mock_start_request_tracking(self._handle)

    def stop_request_tracking(self) -> None:
        self._lib.rd_kafka_mock_stop_request_tracking(self._handle)

    def clear_requests(self) -> None:
        self._lib.rd_kafka_mock_clear_requests(self._handle)

    def get_requests(self) -> list[MockRequest]:
        """Requests received since tracking started (or was cleared), oldest first."""
        count = _SIZE(0)
        arr = self._lib.rd_kafka_mock_get_requests(self._handle, ctypes.byref(count))
        if not arr:
            return []
        try:
            return [
                MockRequest(
                    broker_id=self._lib.rd_kafka_mock_request_id(arr[i]),
                    api_key=self._lib.rd_kafka_mock_request_api_key(arr[i]),
                    timestamp_us=self._lib.rd_kafka_mock_request_timestamp(arr[i]),
                )
                for i in range(count.value)
            ]
        finally:
            self._lib.rd_kafka_mock_request_destroy_array(arr, count.value)
