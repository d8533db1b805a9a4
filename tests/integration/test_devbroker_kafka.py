"""The embedded Apache Kafka itself (kafka_core.devbroker.KafkaCluster): what the command line
prints, a restart that keeps the log, a start that survives a port taken under it, a stop that
leaves nothing running. Each test starts a cluster of its own."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from prerequisites import unavailable

from kafka_core import KafkaConsumer, KafkaProducer
from kafka_core.devbroker import BrokerStartError, KafkaCluster
from kafka_core.devtools.kerberos import kerberos_available

pytestmark = [pytest.mark.broker, pytest.mark.timeout(240)]


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.fixture
def cluster() -> Iterator[KafkaCluster]:
    c = KafkaCluster(1)
    try:
        c.start()
    except BrokerStartError as exc:
        c.close()
        unavailable("Apache Kafka", f"it did not start: {exc}")
    try:
        yield c
    finally:
        c.close()


def test_the_command_line_prints_one_json_line_and_stops_cleanly() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "kafka_core.devbroker", "--broker", "kafka", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line, proc.stderr.read() if proc.stderr else ""
        info = json.loads(line)
        assert info["broker"] == "kafka"
        # with MIT's KDC installed (ci/kerberos.sh), a GSSAPI listener and its realm too
        kerberos = kerberos_available()
        assert set(info["listeners"]) == {"PLAINTEXT", "SASL_PLAINTEXT", "SSL", "SASL_SSL", "SASL_OAUTH"} | (
            {"GSSAPI"} if kerberos else set()
        )
        if kerberos:
            krb = info["kerberos"]
            assert krb["listener"] == "GSSAPI" and krb["service_name"] == "kafka"
            assert krb["bootstrap"] == ",".join(info["listeners"]["GSSAPI"])
            assert krb["principal"] == f"admin@{krb['realm']}"
            assert os.path.isfile(krb["keytab"]) and os.path.isfile(krb["krb5_conf"])
        else:
            assert "kerberos" not in info
        assert info["bootstrap"] == ",".join(info["listeners"]["PLAINTEXT"])
        mechanisms = {(u["mechanism"], u["name"]) for u in info["users"]}
        assert ("SCRAM-SHA-512", "alice") in mechanisms and ("PLAIN", "admin") in mechanisms
        [node] = info["nodes"]
        assert node["port"] == int(info["bootstrap"].rsplit(":", 1)[1])
        with KafkaProducer(info["bootstrap"]) as producer:
            assert producer.send("cli-json", b"x").result(30).offset == 0
        oauth = info["oauth"]  # the OAUTHBEARER listener, and a client of its OIDC provider that works
        assert set(oauth) == {
            "listener",
            "bootstrap",
            "token_endpoint",
            "client_id",
            "client_secret",
            "security_protocol",
            "sasl_mechanism",
        }
        assert oauth["bootstrap"] == ",".join(info["listeners"][oauth["listener"]])
        assert (oauth["security_protocol"], oauth["sasl_mechanism"]) == ("SASL_PLAINTEXT", "OAUTHBEARER")
        with KafkaProducer(
            oauth["bootstrap"],
            security_protocol=oauth["security_protocol"],
            sasl_mechanism=oauth["sasl_mechanism"],
            sasl_oauth_token_endpoint_url=oauth["token_endpoint"],
            sasl_oauth_client_id=oauth["client_id"],
            sasl_oauth_client_secret=oauth["client_secret"],
        ) as producer:
            assert producer.send("cli-json", b"y").result(30).offset == 1
        proc.send_signal(signal.SIGINT)
        assert proc.wait(90) == 0
        deadline = time.monotonic() + 30
        while not _gone(node["pid"]) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _gone(node["pid"]), "the broker's JVM outlived the command"
        if kerberos:  # the realm (its KDC, keytabs and database) went with it
            assert not os.path.exists(os.path.dirname(info["kerberos"]["krb5_conf"]))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)


def test_a_restart_keeps_the_log_and_the_ports(cluster: KafkaCluster) -> None:
    cluster.create_topic("kept", 2)
    with KafkaProducer(cluster.bootstrap) as producer:
        for i in range(20):
            producer.send("kept", b"%d" % i, partition=i % 2)
    bootstrap = cluster.bootstrap
    cluster.restart(crash=True)
    assert cluster.bootstrap == bootstrap and cluster.running
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, topics=["kept"], group_id=None, auto_offset_reset="earliest"
    )
    try:
        got: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(got) < 20 and time.monotonic() < deadline:
            got += [m.value for m in consumer.poll(timeout_ms=1000) if m.value is not None]
    finally:
        consumer.close()
    assert sorted(got, key=int) == [b"%d" % i for i in range(20)]


def test_a_port_taken_before_the_first_start_is_replaced() -> None:
    c = KafkaCluster(1)
    taken = c.nodes[0].ports["SSL"]
    squatter = socket.socket()
    squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    squatter.bind((c.host, taken))
    squatter.listen()
    try:
        c.start()
        assert c.nodes[0].ports["SSL"] != taken
        with KafkaProducer(c.bootstrap) as producer:
            assert producer.send("after-retry", b"x").result(30).offset == 0
    finally:
        squatter.close()
        c.close()


def test_close_leaves_no_process_and_no_files() -> None:
    c = KafkaCluster(1).start()
    pid = c.nodes[0].pid
    workdir = c.workdir
    assert pid is not None and workdir.is_dir()
    assert all(u.password not in repr(c) for u in c.users)
    c.close()
    assert _gone(pid) and not workdir.exists()
