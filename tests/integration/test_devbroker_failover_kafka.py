"""A node of the dev cluster dies: ``python -m kafka_core.devbroker --broker kafka --nodes 3``
names it (exit code, log tail) and the other two keep serving, so a failover can be tried on it.

On the session's three-node cluster (``kafka_three``), whose killed node is started again for
the tests after it.
"""

from __future__ import annotations

import io
import json
import os
import signal
import threading
import uuid

import pytest
from fakes.timing import wait_until

from kafka_core import KafkaConsumer, KafkaProducer
from kafka_core.devbroker import KafkaCluster
from kafka_core.devtools.brokers.supervise import supervise

pytestmark = [pytest.mark.broker, pytest.mark.timeout(240)]


def test_a_dead_node_is_named_and_the_other_two_keep_serving(kafka_three: KafkaCluster) -> None:
    cluster = kafka_three
    topic = f"survivors-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(topic, 3, 3)
    victim = cluster.nodes[1]
    out, err = io.StringIO(), io.StringIO()
    stop = threading.Event()
    watcher = threading.Thread(
        target=supervise,
        args=(cluster,),
        kwargs={"nodes": 3, "out": out, "err": err, "json_events": True, "interval": 0.1, "until": stop},
    )
    watcher.start()
    try:
        assert victim.pid is not None
        os.kill(victim.pid, signal.SIGKILL)  # a crash the cluster did not ask for (not kill_node)
        assert wait_until(lambda: f"node {victim.node_id} stopped by itself" in err.getvalue(), 30)
        survivors = [n.node_id for n in cluster.nodes if n.node_id != victim.node_id]
        expected = f"exit code -9 (signal 9); 2 of 3 nodes keep running ({survivors[0]}, {survivors[1]})"
        assert expected in err.getvalue()
        assert cluster.running_nodes() == survivors
        event = json.loads(out.getvalue().splitlines()[0])
        assert event == {
            "event": "node_exited",
            "node": victim.node_id,
            "exit_code": -9,
            "running": survivors,
        }
        # The two left serve the replicated topic (min.insync.replicas 2): writes and reads.
        alive = ",".join(f"{cluster.host}:{n.port}" for n in cluster.nodes if n.node_id in survivors)
        with KafkaProducer(alive, request_timeout_ms=10_000) as producer:
            for i in range(30):
                producer.send(topic, str(i).encode(), partition=i % 3).result(60)
        consumer = KafkaConsumer(
            bootstrap_servers=alive, topics=[topic], group_id=None, auto_offset_reset="earliest"
        )
        try:
            got: list[bytes] = []

            def read_all() -> bool:
                got.extend(m.value for m in consumer.poll(timeout_ms=500))
                return len(got) >= 30

            assert wait_until(read_all, 60), f"read {len(got)} of 30"
            assert sorted(int(v) for v in got) == list(range(30))
        finally:
            consumer.close()
    finally:
        stop.set()
        watcher.join(10)
        cluster.start_node(victim.node_id)
    assert cluster.running
