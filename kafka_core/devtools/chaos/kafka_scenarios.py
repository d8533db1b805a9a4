"""Chaos capabilities on a three-node Apache Kafka cluster: what the reference broker must survive.

Each node is broker and controller (static KRaft quorum); topics have replication factor 3 and
``min.insync.replicas=2``. The traffic and the books are those of the Tansu scenarios (a paced
idempotent acks=all producer, a committing group consumer, the log read back by confluent-kafka
up to the sentinels, duplicates judged from the batch headers). Kafka is trusted here: any
acknowledged record missing or stored twice is counted against the client.

Time to resume is measured per fault from the moment the cluster can serve again: from the
SIGKILL or SIGTERM of a node (the cluster must carry on without it), from the heal of a cut-off
node and from the restart of a stopped cluster; each is the time until every partition the fault
touched (a killed node's: all it holds a replica of; a stopped or cut-off node's: those it led,
or all when it was the group's coordinator) has a new acknowledgement, and a delivery beyond
everything acknowledged or delivered when the fault struck.
The helpers of :mod:`kafka_core.devtools.chaos.scenarios` are imported when a run starts, not at import
time, because that module registers these capabilities.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import random
import shutil
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from kafka_core.devtools.brokers import BrokerStartError, KafkaCluster
from kafka_core.devtools.chaos.artifacts import Outcome
from kafka_core.devtools.chaos.faulted import faulted_run
from kafka_core.devtools.chaos.proxy import FaultProxy
from kafka_core.devtools.chaos.workload import Workload

__all__ = ["CAPABILITIES", "missing_prerequisite", "on_cluster", "parameters"]

NODES = 3
RESUME_TIMEOUT_S = 45.0  # a cycle fails when a touched partition has not resumed by then
ISR_TIMEOUT_S = 90.0  # a restarted node must be back in every ISR before the next fault
CUT_S = 30.0
# Every node SIGTERMed at once sometimes finishes in seconds and sometimes is still in its
# controlled shutdown a minute later (the quorum it would hand over to is going too): a node still
# running after this is SIGKILLed, and the cycle says how long the stop took.
STOP_TIMEOUT_S = 20.0
SCALES: dict[str, dict[str, Any]] = {
    "short": {
        "leader_kills": 3,
        "controller_kills": 1,
        "rolling_rounds": 1,
        "cuts": 1,
        "cluster_restarts": 1,
        "rate": 400,
    },
    "full": {
        "leader_kills": 100,
        "controller_kills": 20,
        "rolling_rounds": 5,
        "cuts": 3,
        "cluster_restarts": 5,
        "rate": 1_000,
    },
}
# The whole cluster down and up outlasts the workload's default 60 s delivery timeout on a slow
# machine; a record the producer gives up on would hide whether it resumes by itself.
PRODUCER_OPTIONS = {"delivery_timeout_ms": 180_000}

# The cluster a run uses: the caller's (on_cluster), else a fresh one per capability.
_CLUSTER: contextvars.ContextVar[KafkaCluster | None] = contextvars.ContextVar(
    "kafka_chaos_cluster", default=None
)


def missing_prerequisite() -> str | None:
    """Why Apache Kafka cannot run here (exactly), or None; the jars are fetched on first start."""
    if shutil.which("java") is None:
        return "no java on PATH for Apache Kafka (Java 17+)"
    return None


def parameters(capability: str, mode: str, seed: int, common: dict[str, Any]) -> dict[str, Any]:
    s = SCALES[mode]
    base = {
        **common,
        "rate": s["rate"],
        "nodes": NODES,
        "replication_factor": NODES,
        "min_insync_replicas": 2,
        "resume_timeout_s": RESUME_TIMEOUT_S,
        "producer": {"idempotent": True, "acks": "all", **PRODUCER_OPTIONS},
    }
    if capability == "kafka-leader-kill":
        return {**base, "cycles": s["leader_kills"]}
    if capability == "kafka-controller-kill":
        return {**base, "cycles": s["controller_kills"]}
    if capability == "kafka-rolling-restart":
        return {**base, "rounds": s["rolling_rounds"], "shutdown": "SIGTERM (controlled)"}
    if capability == "kafka-node-cutoff":
        rng = random.Random(f"{seed}:{capability}")
        return {**base, "cuts": s["cuts"], "cut_s": CUT_S, "node_pick": rng.randrange(NODES)}
    if capability == "kafka-cluster-restart":
        return {
            **base,
            "cycles": s["cluster_restarts"],
            "shutdown": f"SIGTERM, every node at once; SIGKILL for any still running after {STOP_TIMEOUT_S:.0f}s",
        }
    raise KeyError(capability)


@dataclass
class _Setup:
    """The cluster of a run and, on a cluster of the run's own, a capture proxy per node."""

    cluster: KafkaCluster
    proxies: dict[int, FaultProxy] = field(default_factory=dict)  # node id -> its proxy

    @property
    def bootstrap(self) -> str:
        if self.proxies:
            return ",".join(proxy.address for proxy in self.proxies.values())
        return self.cluster.bootstrap


@contextlib.contextmanager
def _cluster(seed: int) -> Iterator[_Setup]:
    """The caller's cluster (:func:`on_cluster`), else a fresh one whose every node advertises a
    fault proxy of its own from the start: each records the Produce traffic to its node (the
    wire evidence a lost record is explained with) and can cut the node off."""
    given = _CLUSTER.get()
    if given is not None:
        yield _Setup(given)
        return
    cluster = KafkaCluster(NODES)
    proxies = {n.node_id: FaultProxy(cluster.host, n.port, seed=seed, capture=True) for n in cluster.nodes}
    try:
        for node_id, proxy in proxies.items():
            proxy.start()
            cluster.advertise_port(node_id, proxy.port)
        cluster.start()
        yield _Setup(cluster, proxies)
    finally:
        cluster.close()
        for proxy in proxies.values():
            proxy.close()


@contextlib.contextmanager
def on_cluster(cluster: KafkaCluster) -> Iterator[None]:
    """Within it, the capabilities run on ``cluster`` (already started, three nodes) instead of a
    cluster of their own (:func:`kafka_core.devtools.chaos.scenarios.run_on`)."""
    token = _CLUSTER.set(cluster)
    try:
        yield
    finally:
        _CLUSTER.reset(token)


# --- what the cluster looks like ---


def _partitions(bootstrap: str, topic: str) -> dict[int, Any] | None:
    """partition -> its metadata; None when the topic does not exist (yet)."""
    from kafka_core.protocol import ErrorCode
    from kafka_core.sync_client import KafkaClient

    with KafkaClient(bootstrap) as client:
        meta = client.metadata([topic], allow_auto_topic_creation=False).topic(topic)
    if meta is None or meta.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        return None
    return {p.partition: p for p in meta.partitions}


def _leaders(bootstrap: str, topic: str) -> dict[int, int]:
    return {p: m.leader for p, m in (_partitions(bootstrap, topic) or {}).items()}


def _coordinator(bootstrap: str, group: str) -> int | None:
    from kafka_core.sync_client import KafkaClient

    try:
        with KafkaClient(bootstrap) as client:
            return int(client.find_coordinator(group).node_id)
    except Exception:  # evidence only: the cycle goes on without it
        return None


def _running_bootstrap(cluster: KafkaCluster) -> str:
    return ",".join(f"{cluster.host}:{n.port}" for n in cluster.nodes if n.running)


def _wait_full_isr(cluster: KafkaCluster, topics: list[str], timeout: float = ISR_TIMEOUT_S) -> float:
    """Seconds until every partition of ``topics`` (those that exist) has a leader and all three
    replicas in sync: the next fault must not find a replica still catching up (a second fault)."""
    began = time.monotonic()
    deadline = began + timeout
    lagging: dict[str, list[int]] | str = {}
    while True:
        try:
            lagging = {}
            for topic in topics:
                parts = _partitions(_running_bootstrap(cluster), topic)
                if parts is None:
                    continue
                short = [p for p, m in parts.items() if m.leader < 0 or len(m.isr) < NODES]
                if short or not parts:
                    lagging[topic] = short
            if not lagging:
                return round(time.monotonic() - began, 3)
        except Exception as exc:  # asked again until the deadline; the last failure is told
            lagging = f"metadata failed: {type(exc).__name__}: {exc}"
        if time.monotonic() > deadline:
            raise BrokerStartError(f"replicas not back in sync within {timeout:.0f} s: {lagging}")
        time.sleep(0.2)


def _heal_cluster(cluster: KafkaCluster) -> None:
    """Leave the cluster as found: every node running (a failed cycle may have left one down)."""
    for node in cluster.nodes:
        if not node.running:
            cluster.start_node(node.node_id)


# --- time to resume ---


def _marks(wl: Workload) -> dict[int, tuple[int, int]]:
    """Per partition: (acknowledged count, highest offset acknowledged or delivered)."""
    out: dict[int, tuple[int, int]] = {}
    for p, e in wl.ledger.partition_progress().items():
        out[p] = (e["acked"], max(e["acked_max_offset"], e.get("delivered_max_offset", -1)))
    return out


def _resume(
    wl: Workload, partitions: list[int], since: float, base: dict[int, tuple[int, int]]
) -> dict[str, Any]:
    """Seconds from ``since`` until each of ``partitions`` had a new acknowledgement and a
    delivery beyond every offset acknowledged or delivered at ``base`` (taken when the fault
    struck). The cycle's figure is the slowest partition's; None when one never resumed."""
    acked: dict[int, float] = {}
    got: dict[int, float] = {}
    deadline = time.monotonic() + RESUME_TIMEOUT_S
    while len(acked) < len(partitions) or len(got) < len(partitions):
        progress = wl.ledger.partition_progress()
        now = time.monotonic()
        for p in partitions:
            count, high = base.get(p, (0, -1))
            e = progress.get(p, {})
            if p not in acked and e.get("acked", 0) > count:
                acked[p] = round(now - since, 3)
            if p not in got and e.get("delivered_max_offset", -1) > high:
                got[p] = round(now - since, 3)
        if now > deadline:
            break
        time.sleep(0.05)
    whole = len(acked) == len(partitions) and len(got) == len(partitions)
    return {
        "resumed_partitions": partitions,
        "ack_resume_s_per_partition": acked,
        "delivery_resume_s_per_partition": got,
        "recovery_ack_s": max(acked.values()) if whole else None,
        "recovery_delivery_s": max(got.values()) if whole else None,
        "passed": whole,
    }


# --- the run ---


def _broker_info(cluster: KafkaCluster, proxied: int | None = None) -> dict[str, Any]:
    return {
        "name": "apache-kafka",
        "version": cluster.version,
        "nodes": len(cluster.nodes),
        "kraft": "every node broker and controller, static quorum",
        "bootstrap": cluster.bootstrap,
        "replication_factor": NODES,
        "min_insync_replicas": 2,
        "through_fault_proxy": proxied is not None,
        **({"proxied_node": proxied} if proxied is not None else {}),
    }


Fault = Callable[[Workload], dict[str, Any]]


def _run(
    outcome: Outcome,
    setup: _Setup,
    faults: Sequence[tuple[str, Fault]],
    bootstrap: str | None = None,
    *,
    cluster_stays_up: bool = True,
) -> None:
    """Traffic through ``faults``, then the books and the wire. ``cluster_stays_up``: a majority
    answers throughout, so a poll that raised (the consumer calling itself cut off) fails the
    run: a failover is no outage, the consumer must ride it out by itself (as Java's does)."""
    failures: list[str] = []
    _wait_full_isr(setup.cluster, ["__consumer_offsets"])  # a healthy cluster to begin with
    faulted_run(
        outcome,
        setup.cluster,  # type: ignore[arg-type]  # create_topic(name, partitions), as TansuBroker's
        bootstrap or setup.bootstrap,
        faults,
        failures,
        producer_options=PRODUCER_OPTIONS,
    )
    if outcome.tally.failed:  # the producer gave up on records: it did not ride the fault out
        failures.append(f"{outcome.tally.failed} records failed (the producer gave up on them)")
    raised = [e for e in outcome.details.get("consumer_errors", []) if e.get("where") == "poll"]
    if cluster_stays_up and raised:
        failures.append(
            f"poll raised {len(raised)} times while the cluster answered (first: {raised[0]['type']}: "
            f"{raised[0]['message']})"
        )
    _wire(outcome, setup)
    outcome.judge(failures)


def _wire(outcome: Outcome, setup: _Setup) -> None:
    """What the capture proxies saw: Produce answers per node and, for each lost record in the
    artifact's ``lost_detail``, every Produce request that carried it (producer id, epoch,
    sequence, the answer or none): a loss on Kafka is ours to explain from these."""
    captured = [
        (node, w) for node, proxy in setup.proxies.items() if proxy.capture for w in proxy.capture.writes
    ]
    outcome.details["wire_capture"] = bool(setup.proxies)
    if not setup.proxies:
        return
    answers: dict[int, dict[str, int]] = {}
    for node, w in captured:
        key = "unanswered" if w.error is None else str(w.error)
        answers.setdefault(node, {}).setdefault(key, 0)
        answers[node][key] += 1
    outcome.details["produce_capture"] = {"batches": len(captured), "answers_per_node": answers}
    captured.sort(key=lambda nw: nw[1].sent_at)
    for detail in outcome.tally.lost_detail:
        record = detail.get("record")
        detail["wire"] = [
            {"node": node, **w.summary(), "sequence": w.sequence_of(record)}
            for node, w in captured
            if isinstance(record, int) and record in w.numbers
        ][:10]


def _kill_and_heal(
    cluster: KafkaCluster,
    wl: Workload,
    victim: int,
    role: dict[str, Any],
    watch: Callable[[float], dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """SIGKILL ``victim``, time the resume of every partition it holds a replica of, start it
    again and wait until it is back in every ISR. Not only the partitions it led stall: acks=all
    waits for every replica in the ISR, and a killed follower leaves the ISR only when the
    controller fences it (``broker.session.timeout.ms``). ``watch`` (given the kill's instant)
    runs on a thread of its own while the victim is down; what it returns joins the cycle."""
    parts = _partitions(cluster.bootstrap, wl.topic) or {}
    leaders = {p: m.leader for p, m in parts.items()}
    coordinator = _coordinator(cluster.bootstrap, wl.consumer_options["group_id"])
    touched = sorted(p for p, m in parts.items() if victim in m.replicas)
    cluster.kill_node(victim)
    killed = time.monotonic()
    base = _marks(wl)  # after the kill: nothing the victim answers can count as resumed
    watched: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: watched.update(watch(killed)) if watch else None, daemon=True)
    thread.start()
    resume = _resume(wl, touched or list(range(wl.partitions)), killed, base)
    thread.join(RESUME_TIMEOUT_S)
    began = time.monotonic()
    cluster.start_node(victim)
    restart_s = round(time.monotonic() - began, 3)
    isr_s = _wait_full_isr(cluster, [wl.topic, "__consumer_offsets"])
    return {
        "killed_node": victim,
        **role,
        "leaders_before": leaders,
        "led_by_killed_node": sorted(p for p, leader in leaders.items() if leader == victim),
        "leaders_after": _leaders(cluster.bootstrap, wl.topic),
        "group_coordinator": coordinator,
        "measured_from": "SIGKILL",
        **resume,
        "node_restart_s": restart_s,
        "isr_full_after_s": isr_s,
        **watched,
    }


def _faulted(
    outcome: Outcome,
    faults_for: Callable[[KafkaCluster], list[tuple[str, Fault]]],
    *,
    cluster_stays_up: bool = True,
) -> None:
    """The run of every capability but the cut-off (which sets up a proxy of its own): the
    cluster, ``faults_for`` it in turn under traffic, the books, and the cluster left whole."""
    with _cluster(outcome.seed) as setup:
        cluster = setup.cluster
        outcome.broker = _broker_info(cluster)
        try:
            _run(outcome, setup, faults_for(cluster), cluster_stays_up=cluster_stays_up)
        finally:
            _heal_cluster(cluster)


Pick = Callable[[KafkaCluster, Workload, int], tuple[int, dict[str, Any]]]


def _kill_cycles(
    outcome: Outcome,
    label: str,
    pick: Pick,
    watch: Callable[[KafkaCluster, float], dict[str, Any]] | None = None,
) -> None:
    """``cycles`` SIGKILLs, each of the node ``pick`` names for that cycle (with what role it
    had), each followed by its restart: the leader and the controller kills differ only there
    and in what ``watch`` records while the node is down."""

    def faults(cluster: KafkaCluster) -> list[tuple[str, Fault]]:
        def kill(wl: Workload, k: int) -> dict[str, Any]:
            victim, role = pick(cluster, wl, k)
            seen = functools.partial(watch, cluster) if watch is not None else None
            return _kill_and_heal(cluster, wl, victim, role, seen)

        return [(label, functools.partial(kill, k=k)) for k in range(outcome.parameters["cycles"])]

    _faulted(outcome, faults)


def _partition_leader(cluster: KafkaCluster, wl: Workload, k: int) -> tuple[int, dict[str, Any]]:
    partition = k % wl.partitions  # another partition's leader each cycle
    return _leaders(cluster.bootstrap, wl.topic)[partition], {"leader_of_partition": partition}


def _active_controller(cluster: KafkaCluster, wl: Workload, k: int) -> tuple[int, dict[str, Any]]:
    controller = cluster.active_controller()
    return controller, {"active_controller": controller}


def _elected(cluster: KafkaCluster, killed: float) -> dict[str, Any]:
    """The quorum's new leader, timed from the SIGKILL."""
    new = cluster.active_controller()
    return {"new_controller": new, "new_controller_s": round(time.monotonic() - killed, 3)}


def kafka_leader_kill(outcome: Outcome) -> None:
    _kill_cycles(outcome, "SIGKILL the leader", _partition_leader)


def kafka_controller_kill(outcome: Outcome) -> None:
    _kill_cycles(outcome, "SIGKILL the active controller", _active_controller, _elected)


def _rolling_restart(cluster: KafkaCluster, wl: Workload, node_id: int) -> dict[str, Any]:
    leaders = _leaders(cluster.bootstrap, wl.topic)
    coordinator = _coordinator(cluster.bootstrap, wl.consumer_options["group_id"])
    touched = sorted(p for p, leader in leaders.items() if leader == node_id)
    if coordinator == node_id:
        touched = list(range(wl.partitions))
    base = _marks(wl)
    began = time.monotonic()
    # A controlled shutdown hands the node's leaderships over while it runs: the resume of its
    # partitions is timed from the SIGTERM, beside the shutdown itself.
    stopper = threading.Thread(target=cluster.stop_node, args=(node_id,), daemon=True)
    stopper.start()
    resume = _resume(wl, touched or list(range(wl.partitions)), began, base)
    stopper.join(120)
    stop_s = round(time.monotonic() - began, 3)
    cluster.start_node(node_id)
    start_s = round(time.monotonic() - began - stop_s, 3)
    return {
        "restarted_node": node_id,
        "leaders_before": leaders,
        "leaders_after": _leaders(cluster.bootstrap, wl.topic),
        "group_coordinator": coordinator,
        "measured_from": "SIGTERM",
        **resume,
        "stop_s": stop_s,
        "start_s": start_s,
        "isr_full_after_s": _wait_full_isr(cluster, [wl.topic, "__consumer_offsets"]),
    }


def kafka_rolling_restart(outcome: Outcome) -> None:
    def faults(cluster: KafkaCluster) -> list[tuple[str, Fault]]:
        return [
            (
                f"SIGTERM restart of node {n.node_id}",
                functools.partial(_rolling_restart, cluster, node_id=n.node_id),
            )
            for _ in range(outcome.parameters["rounds"])
            for n in cluster.nodes
        ]

    _faulted(outcome, faults)


def kafka_node_cutoff(outcome: Outcome) -> None:
    """One node behind the fault proxy (it advertises the proxy's port, so clients and the other
    nodes' replica fetchers reach it only through it) cut off: every connection reset and new
    ones refused for ``cut_s``. The node keeps its controller link, so it stays leader of its
    partitions: they wait for the heal. On the caller's cluster the node is restarted to advertise
    the proxy (and again after, to advertise itself): the topic is made after that restart, so
    the node leads a partition again."""
    seconds = outcome.parameters["cut_s"]
    with _cluster(outcome.seed) as setup:
        cluster = setup.cluster
        victim = cluster.nodes[outcome.parameters["node_pick"]].node_id
        own = victim not in setup.proxies  # the caller's cluster: a proxy and a restart of our own
        proxy = (
            FaultProxy(cluster.host, cluster.node(victim).port, seed=outcome.seed).start()
            if own
            else setup.proxies[victim]
        )
        outcome.broker = _broker_info(cluster, victim)

        def cut(wl: Workload) -> dict[str, Any]:
            leaders = _leaders(cluster.bootstrap, wl.topic)
            coordinator = _coordinator(cluster.bootstrap, wl.consumer_options["group_id"])
            touched = sorted(p for p, leader in leaders.items() if leader == victim)
            if coordinator == victim:
                touched = list(range(wl.partitions))
            proxy.refuse(seconds)
            reset = proxy.reset_all()
            base = _marks(wl)
            time.sleep(seconds)
            during = _marks(wl)
            proxy.heal()
            healed = time.monotonic()
            resume = _resume(wl, touched or list(range(wl.partitions)), healed, during)
            return {
                "cut_node": victim,
                "leaders_before": leaders,
                "group_coordinator": coordinator,
                "connections_reset": reset,
                "refused_s": seconds,
                "acked_during_cut": {p: during.get(p, (0, -1))[0] - base.get(p, (0, -1))[0] for p in leaders},
                "measured_from": "heal",
                **resume,
            }

        try:
            bootstrap = setup.bootstrap
            if own:
                cluster.advertise_port(victim, proxy.port)
                cluster.restart_node(victim)
                bootstrap = ",".join(
                    proxy.address if n.node_id == victim else f"{cluster.host}:{n.port}"
                    for n in cluster.nodes
                )
            faults = [(f"node {victim} cut off {seconds:.0f}s", cut)] * outcome.parameters["cuts"]
            _run(outcome, setup, faults, bootstrap)
            outcome.details["proxy"] = {"connections": proxy.connections, "resets": proxy.resets}
        finally:
            proxy.heal()
            if own:
                cluster.advertise_port(victim, None)
                cluster.restart_node(victim)
                proxy.close()
            _heal_cluster(cluster)


def _cluster_restart(cluster: KafkaCluster, wl: Workload) -> dict[str, Any]:
    began = time.monotonic()
    cluster.stop(STOP_TIMEOUT_S)
    stopped = time.monotonic()
    base = _marks(wl)  # every node down: nothing more can be acknowledged before the start
    cluster.start()
    up = time.monotonic()
    return {
        "stop_s": round(stopped - began, 3),
        "stop_timed_out": stopped - began >= STOP_TIMEOUT_S,  # then the rest were SIGKILLed
        "start_s": round(up - stopped, 3),
        "measured_from": "every node ready",
        **_resume(wl, list(range(wl.partitions)), up, base),
        "isr_full_after_s": _wait_full_isr(cluster, [wl.topic, "__consumer_offsets"]),
    }


def kafka_cluster_restart(outcome: Outcome) -> None:
    """Every node stopped, then started: the consumer is cut off meanwhile, and saying so (poll
    raising KafkaConnectionError once per request_timeout_ms) is what it must do."""

    def faults(cluster: KafkaCluster) -> list[tuple[str, Fault]]:
        restart = functools.partial(_cluster_restart, cluster)
        return [("every node stopped, then started", restart)] * outcome.parameters["cycles"]

    _faulted(outcome, faults, cluster_stays_up=False)


CAPABILITIES: dict[str, Callable[[Outcome], None]] = {
    "kafka-leader-kill": kafka_leader_kill,
    "kafka-controller-kill": kafka_controller_kill,
    "kafka-rolling-restart": kafka_rolling_restart,
    "kafka-node-cutoff": kafka_node_cutoff,
    "kafka-cluster-restart": kafka_cluster_restart,
}
