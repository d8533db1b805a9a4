"""Apache Kafka, the reference broker, on loopback from its Maven Central jars (no Docker): one
combined KRaft node, or a three-node cluster (three processes, each broker and controller).

Every node has five listeners: PLAINTEXT, SASL_PLAINTEXT (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512),
SSL and SASL_SSL (a certificate made for the run), and CONTROLLER; given a running
:class:`~kafka_core.devtools.kerberos.KerberosRealm`, a sixth: GSSAPI (kafka_kerberos.py). The StandardAuthorizer
enforces ACLs; ``admin`` and anonymous (PLAINTEXT, SSL) principals are super users, so only the
SASL user ``alice`` is ever refused. Readiness is read from each node's log ("Kafka Server
started"), never slept for; a failed start raises with the log's tail.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kafka_core.devtools.brokers.common import (
    QUICK_JVM_OPTIONS,
    BrokerStartError,
    EmbeddedBroker,
    NodeExit,
    admin_create_topic,
    die_with_parent,
    free_ports,
    kill_process,
    port_open,
    read_tail,
    stop_process,
)
from kafka_core.devtools.brokers.jvm_archive import ClassArchive
from kafka_core.devtools.brokers.kafka_jars import KAFKA_VERSION, kafka_classpath
from kafka_core.devtools.brokers.kafka_kerberos import KerberosListener
from kafka_core.devtools.brokers.kafka_security import (
    MECHANISMS,
    OAUTH_LISTENER,
    ServerCertificates,
    TestUser,
    jaas_config,
    make_certificates,
    make_users,
    oauth_jvm_options,
    oauth_listener_properties,
    scram_format_arguments,
)
from kafka_core.devtools.brokers.oauth_server import AUDIENCE, CLIENT_ID, OAuthServer

if TYPE_CHECKING:  # kerberos.py imports this package's common module: no import at run time
    from kafka_core.devtools.kerberos import KerberosRealm

__all__ = ["KafkaCluster", "KafkaNode"]

LISTENERS = ("PLAINTEXT", "SASL_PLAINTEXT", "SSL", "SASL_SSL")
# The leaders' choice of a replica for a consumer to read from, given racks (follower fetching).
RACK_AWARE_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
_READY = b"Kafka Server started"
# The JVM options of each KafkaCluster(jit=...) profile.
_JVM_PROFILES: dict[str, tuple[str, ...]] = {
    "server": (
        "-XX:+UseG1GC",
        "-XX:MaxGCPauseMillis=20",
        "-XX:InitiatingHeapOccupancyPercent=35",
        "-XX:+ExplicitGCInvokesConcurrent",
    ),
    "quick": QUICK_JVM_OPTIONS,
}
_LOG4J = """\
status = warn
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.out.ref = OUT
logger.server.name = kafka.server.KafkaRaftServer
logger.server.level = INFO
logger.broker.name = kafka.server.BrokerServer
logger.broker.level = INFO
logger.controller.name = kafka.server.ControllerServer
logger.controller.level = INFO
"""


@dataclass
class KafkaNode:
    """One process of the cluster: ports that stay the same across restarts."""

    node_id: int
    ports: dict[str, int]  # listener name (and CONTROLLER) -> port
    directory: Path
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    ready_from: int = 0  # where in the log this start's lines begin

    @property
    def port(self) -> int:
        return self.ports["PLAINTEXT"]

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None and self.proc.poll() is None else None

    @property
    def running(self) -> bool:
        return self.pid is not None

    @property
    def properties_file(self) -> Path:
        return self.directory / "server.properties"

    @property
    def log_path(self) -> Path:
        return self.directory / "server.log"

    def log_tail(self, limit: int = 4000) -> str:
        return read_tail(self.log_path, limit)


class KafkaCluster(EmbeddedBroker):
    """``nodes`` Apache Kafka processes (1 or 3) on loopback. :meth:`start` fetches the jars
    (first use only), formats storage and starts every node; :meth:`close` stops them and removes
    their data. Nodes can be stopped, killed and restarted one at a time for fault tests."""

    def __init__(
        self,
        nodes: int = 1,
        *,
        version: str = KAFKA_VERSION,
        host: str = "127.0.0.1",
        heap_mb: int | None = None,
        overrides: dict[str, str] | None = None,
        workdir: Path | None = None,
        startup_timeout: float = 120.0,
        advertised_ports: dict[int, int] | None = None,
        kerberos: KerberosRealm | None = None,
        oauth: OAuthServer | None = None,
        extra_classpath: tuple[Path | str, ...] = (),
        racks: Sequence[str] | None = None,
        jit: str | None = None,
    ) -> None:
        if nodes < 1:
            raise ValueError("a cluster needs at least one node")
        if racks is not None and (len(racks) != nodes or not all(isinstance(r, str) and r for r in racks)):
            raise ValueError(f"racks: one non-empty rack name per node ({nodes}), not {racks!r}")
        # Each node's broker.rack, in node order (None: no racks). With racks the leaders pick a
        # replica in the consumer's rack to read from (KIP-392's RackAwareReplicaSelector).
        self.racks = list(racks) if racks is not None else None
        self.version = version
        self.host = host
        self.heap_mb = heap_mb or (768 if nodes == 1 else 448)
        # "server": G1 and the full JIT (the default; the bench measures clients against it).
        # "quick": the serial collector and C1 only. A test suite starts brokers by the dozen and
        # sends them little: there a node's start, 14 s of CPU with C2 compiling the start-up path,
        # takes 8 (measured on 2 cores, one node: start, 50k records, stop).
        self.jit = jit or os.environ.get("KAFKA_CORE_DEV_JVM") or "server"
        if self.jit not in _JVM_PROFILES:
            raise ValueError(f"jit: one of {sorted(_JVM_PROFILES)}, not {self.jit!r} (KAFKA_CORE_DEV_JVM)")
        self.overrides = dict(overrides or {})
        # Folders or jars after Kafka's own (a plugin the tests compile, e.g. a metrics reporter).
        self.extra_classpath = tuple(str(p) for p in extra_classpath)
        # node id -> the PLAINTEXT port that node advertises instead of its own (a fault proxy's)
        self.advertised_ports = dict(advertised_ports or {})
        self.startup_timeout = startup_timeout
        self._owns_workdir = workdir is None
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix=f"kafka-{version}-"))
        self.cluster_id = _cluster_id()
        self.users: list[TestUser] = make_users()
        self.certificates: ServerCertificates | None = None
        # An OIDC provider (started by the caller) behind an extra OAUTHBEARER listener.
        self.oauth = oauth
        # Listeners beyond the four every node has: name -> security protocol.
        self.extra_listeners: dict[str, str] = {}
        if oauth is not None:
            self.extra_listeners[OAUTH_LISTENER] = "SASL_PLAINTEXT"
        # A GSSAPI listener with a Kerberos realm (the caller's: started before, closed after).
        self.kerberos: KerberosListener | None = KerberosListener(kerberos) if kerberos is not None else None
        if self.kerberos is not None:
            self.extra_listeners[self.kerberos.name] = self.kerberos.security_protocol
        names = (*self._listener_names, "CONTROLLER")
        ports = iter(free_ports(len(names) * nodes, host))
        self.nodes = [
            KafkaNode(i, {name: next(ports) for name in names}, self.workdir / f"node-{i}")
            for i in range(1, nodes + 1)
        ]
        self._classpath: Path | None = None
        # per JIT profile: the class-data-sharing archive of Kafka's classpath (jvm_archive.py)
        self._archives: dict[str, ClassArchive] = {}
        self.start_seconds: float | None = None  # the last start, from the first java to all ready

    # -- addresses ------------------------------------------------------------------------------

    def _advertised_host(self, listener: str) -> str:
        if self.kerberos is not None and listener == self.kerberos.name:
            return self.kerberos.advertised_host
        return self.host

    def addresses(self, listener: str = "PLAINTEXT") -> str:
        host = self._advertised_host(listener)
        return ",".join(f"{host}:{node.ports[listener]}" for node in self.nodes)

    @property
    def bootstrap(self) -> str:
        return self.addresses("PLAINTEXT")

    @property
    def _listener_names(self) -> tuple[str, ...]:
        return (*LISTENERS, *self.extra_listeners)

    @property
    def listeners(self) -> dict[str, str]:
        return {name: self.addresses(name) for name in self._listener_names}

    def user(self, mechanism: str, name: str = "alice") -> TestUser:
        return next(u for u in self.users if u.mechanism == mechanism and u.name == name)

    def describe(self) -> dict[str, Any]:
        """What ``python -m kafka_core.devbroker --json`` prints: addresses, users and nodes."""
        described: dict[str, Any] = {
            "broker": "kafka",
            "version": self.version,
            "bootstrap": self.bootstrap,
            "listeners": {name: addresses.split(",") for name, addresses in self.listeners.items()},
            "users": [user.as_json() for user in self.users],
            "ca_file": str(self.certificates.ca_file) if self.certificates else None,
            "nodes": [
                {"id": n.node_id, "pid": n.pid, "port": n.port, "log": str(n.log_path)}
                | ({"rack": self.racks[n.node_id - 1]} if self.racks is not None else {})
                for n in self.nodes
            ],
            "start_seconds": self.start_seconds,
            **self._describe_oauth(),
        }
        if self.kerberos is not None:
            described["kerberos"] = self.kerberos.describe(self.addresses(self.kerberos.name))
        return described

    def _describe_oauth(self) -> dict[str, Any]:
        if self.oauth is None:
            return {}
        # the client options that log in there, so the entry is all a user needs (it once named
        # no protocol, and a client following the docs' SASL_SSL met a plain listener)
        entry = {
            **self.oauth.describe(self.addresses(OAUTH_LISTENER), OAUTH_LISTENER),
            "security_protocol": self.extra_listeners[OAUTH_LISTENER],
            "sasl_mechanism": "OAUTHBEARER",
        }
        return {"oauth": entry}

    # -- configuration --------------------------------------------------------------------------

    def _properties(self, node: KafkaNode) -> str:
        host = self.host
        names = self._listener_names
        listeners = ",".join(f"{name}://{host}:{node.ports[name]}" for name in (*names, "CONTROLLER"))
        voters = ",".join(f"{n.node_id}@{host}:{n.ports['CONTROLLER']}" for n in self.nodes)
        single = len(self.nodes) == 1
        assert self.certificates is not None
        props: dict[str, str] = {
            "process.roles": "broker,controller",
            "node.id": str(node.node_id),
            "controller.quorum.voters": voters,
            "listeners": listeners,
            "advertised.listeners": ",".join(
                f"{name}://{self._advertised_host(name)}:{self._advertised_port(node, name)}"
                for name in names
            ),
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": ",".join(
                [
                    "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL",
                    *(f"{name}:{protocol}" for name, protocol in self.extra_listeners.items()),
                ]
            ),
            "log.dirs": str(node.directory / "data"),
            "sasl.enabled.mechanisms": ",".join(MECHANISMS),
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(self.certificates.keystore_file),
            "ssl.client.auth": "none",
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": ";".join(["User:admin", "User:ANONYMOUS", *self._oauth_super_users()]),
            "allow.everyone.if.no.acl.found": "false",
            "group.initial.rebalance.delay.ms": "0",
            "offsets.topic.num.partitions": "1" if single else "3",
            "transaction.state.log.num.partitions": "1" if single else "3",
            "offsets.topic.replication.factor": "1" if single else "3",
            "transaction.state.log.replication.factor": "1" if single else "3",
            "transaction.state.log.min.isr": "1" if single else "2",
            "share.coordinator.state.topic.replication.factor": "1" if single else "3",
            "share.coordinator.state.topic.min.isr": "1" if single else "2",
            "default.replication.factor": "1" if single else "3",
            "min.insync.replicas": "1" if single else "2",
            "num.network.threads": "2",
            "num.io.threads": "4",
            "controlled.shutdown.enable": "true",
            # The active controller writes a no-op record to the metadata log when it has written
            # nothing for this long (KIP-835; Kafka's default is 500 ms), and every node applies it:
            # a node nobody uses took 3.8% of a core, 2.4% at 5 s (quick JVM, 2 cores). A test run
            # keeps a dozen nodes up for most of its length.
            "metadata.max.idle.interval.ms": "5000",
        }
        for listener in ("sasl_plaintext", "sasl_ssl"):
            for mechanism in MECHANISMS:
                props[f"listener.name.{listener}.{mechanism.lower()}.sasl.jaas.config"] = jaas_config(
                    mechanism, self.users
                )
        if self.racks is not None:
            props["broker.rack"] = self.racks[node.node_id - 1]
            props["replica.selector.class"] = RACK_AWARE_SELECTOR
        props.update(self._oauth_properties())
        if self.kerberos is not None:
            props.update(self.kerberos.properties())
        props.update(self.overrides)
        return "".join(f"{key}={value}\n" for key, value in props.items())

    def _oauth_properties(self) -> dict[str, str]:
        if self.oauth is None:
            return {}
        return oauth_listener_properties(
            OAUTH_LISTENER, jwks_url=self.oauth.jwks_url, issuer=self.oauth.issuer, audience=AUDIENCE
        )

    def _oauth_super_users(self) -> list[str]:
        return [] if self.oauth is None else [f"User:{CLIENT_ID}"]

    def _jvm_options(self) -> list[str]:
        """System properties for every Kafka JVM (the OAuth URLs Kafka may fetch)."""
        if self.oauth is None:
            return []
        return oauth_jvm_options(self.oauth.jwks_url, self.oauth.token_endpoint)

    def _advertised_port(self, node: KafkaNode, listener: str) -> int:
        if listener == "PLAINTEXT":
            return self.advertised_ports.get(node.node_id, node.ports[listener])
        return node.ports[listener]

    def advertise_port(self, node_id: int, port: int | None) -> None:
        """Have ``node_id`` advertise ``port`` on PLAINTEXT (None: its own again), from its next
        start on. Clients and the other nodes' replica fetchers then reach it there (PLAINTEXT is
        the inter-broker listener), e.g. through a fault proxy; controller traffic is unchanged."""
        node = self.node(node_id)
        if port is None:
            self.advertised_ports.pop(node_id, None)
        else:
            self.advertised_ports[node_id] = port
        if node.properties_file.is_file():
            node.properties_file.write_text(self._properties(node))

    def active_controller(self, timeout: float = 30.0) -> int:
        """The node id of the KRaft quorum's leader (the active controller), asked with a
        DescribeQuorum request through a running node (brokers forward it to the controller)."""
        from kafka_core.protocol.messages import DescribeQuorumRequest
        from kafka_core.sync_client import KafkaClient

        running = ",".join(f"{self.host}:{n.port}" for n in self.nodes if n.running)
        if not running:
            raise BrokerStartError("no node of the cluster is running")
        request = DescribeQuorumRequest(
            topics=[
                DescribeQuorumRequest.TopicData(
                    topic_name="__cluster_metadata",
                    partitions=[DescribeQuorumRequest.PartitionData(partition_index=0)],
                )
            ]
        )
        deadline = time.monotonic() + timeout
        last = "no answer"
        with KafkaClient(running) as client:
            while True:
                try:
                    response = client.send(client.any_node(), request, max_version=1)
                    part = response.topics[0].partitions[0]
                    if response.error_code == 0 and part.error_code == 0 and part.leader_id >= 0:
                        return int(part.leader_id)
                    last = f"error {response.error_code or part.error_code}, leader {part.leader_id}"
                except Exception as exc:  # a node going down meanwhile: ask again
                    last = f"{type(exc).__name__}: {exc}"
                if time.monotonic() > deadline:
                    raise BrokerStartError(f"no active controller within {timeout:.0f} s ({last})")
                time.sleep(0.2)

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> KafkaCluster:
        """Fetch, format (first start only) and start every node; return when all are ready."""
        self._classpath = self._classpath or kafka_classpath(self.version)
        if self.kerberos is not None:
            self.kerberos.prepare()
        if self.certificates is None:
            self.certificates = make_certificates(self.workdir / "tls")
            (self.workdir / "log4j2.properties").write_text(_LOG4J)
        fresh = [n for n in self.nodes if not (n.directory / "data" / "meta.properties").is_file()]
        for node in fresh:
            node.directory.mkdir(parents=True, exist_ok=True)
            node.properties_file.write_text(self._properties(node))
        self._format(fresh)
        began = time.monotonic()
        for attempt in range(1, 4):
            for node in self.nodes:
                self._spawn(node)
            try:
                self._wait_ready(self.nodes)
                break
            except BrokerStartError as exc:
                self.stop()
                # free_ports' ports are free when picked, not when Kafka binds them: another
                # process may take one in between. Before the first start nothing depends on
                # the ports yet, so pick new ones and try again.
                if self.start_seconds is not None or attempt == 3 or "Address already in use" not in str(exc):
                    raise
                self._pick_new_ports()
            except BaseException:
                self.stop()
                raise
        self.start_seconds = round(time.monotonic() - began, 2)
        return self

    def _pick_new_ports(self) -> None:
        ports = iter(free_ports(sum(len(node.ports) for node in self.nodes), self.host))
        for node in self.nodes:
            node.ports = {name: next(ports) for name in node.ports}
        for node in self.nodes:
            node.properties_file.write_text(self._properties(node))

    def _archive(self, jit: str) -> ClassArchive:
        assert self._classpath is not None
        if jit not in self._archives:
            classpath = os.pathsep.join((f"{self._classpath}/*", *self.extra_classpath))
            self._archives[jit] = ClassArchive(classpath, _JVM_PROFILES[jit])
        return self._archives[jit]

    def _java(
        self, main: str, *args: str, heap_mb: int, jit: str | None = None, archive: list[str] | None = None
    ) -> list[str]:
        """The command line of a JVM running ``main``; ``archive``: its class-sharing options,
        else the archive's when it exists (a tool never makes it: it loads too few classes)."""
        assert self._classpath is not None
        jit = jit or self.jit
        if archive is None:
            path = self._archive(jit).path
            archive = [f"-XX:SharedArchiveFile={path}"] if path.exists() else []
        java = shutil.which("java")
        if java is None:  # the jars may be cached from a machine state that had it
            raise BrokerStartError(
                "Apache Kafka needs `java` on PATH: install a Java 17+ runtime "
                "(e.g. apt install openjdk-17-jre-headless)"
            )
        return [
            java,
            f"-Xmx{heap_mb}m",
            f"-Xms{min(heap_mb, 256)}m",
            *_JVM_PROFILES[jit],
            *archive,
            "-Djava.awt.headless=true",
            *(self.kerberos.jvm_options() if self.kerberos is not None else ()),
            f"-Dlog4j2.configurationFile={self.workdir / 'log4j2.properties'}",
            *self._jvm_options(),
            "-cp",
            os.pathsep.join((f"{self._classpath}/*", *self.extra_classpath)),
            main,
            *args,
        ]

    def _format(self, nodes: list[KafkaNode]) -> None:
        """``kafka-storage format`` for each new node, in parallel (a JVM start each)."""
        scram = scram_format_arguments(self.users)
        procs = [
            (
                node,
                subprocess.Popen(
                    self._java(
                        "kafka.tools.StorageTool",
                        "format",
                        "-t",
                        self.cluster_id,
                        "-c",
                        str(node.properties_file),
                        *scram,
                        heap_mb=256,
                        jit="quick",  # a tool that runs for a second: C2 would only cost CPU
                    ),
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                ),
            )
            for node in nodes
        ]
        failures = []
        for node, proc in procs:
            try:
                out, _ = proc.communicate(timeout=120)
            except subprocess.TimeoutExpired:
                proc.kill()
                out, _ = proc.communicate()
            if proc.returncode != 0:
                text = out.decode(errors="replace")
                failures.append(f"node {node.node_id}: {_redact(text, self.users)[-1500:]}")
        if failures:
            raise BrokerStartError("formatting Apache Kafka's storage failed: " + " | ".join(failures))

    def _spawn(self, node: KafkaNode) -> None:
        if node.running:
            return
        env = dict(os.environ)
        env.pop("KAFKA_OPTS", None)
        env.pop("JAVA_TOOL_OPTIONS", None)
        with node.log_path.open("ab") as log:
            log.write(f"--- kafka_core devbroker: starting node {node.node_id} ---\n".encode())
            log.flush()
            node.ready_from = log.tell()
            archive = self._archive(self.jit)
            sharing = archive.options()
            try:
                node.proc = subprocess.Popen(
                    self._java(
                        "kafka.Kafka", str(node.properties_file), heap_mb=self.heap_mb, archive=sharing
                    ),
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=env,
                    preexec_fn=die_with_parent if sys.platform == "linux" else None,
                )
            except BaseException:
                archive.abandoned(sharing)
                raise
            archive.started(sharing, node.proc)

    def _wait_ready(self, nodes: list[KafkaNode], timeout: float | None = None) -> None:
        deadline = time.monotonic() + (timeout or self.startup_timeout)
        pending = list(nodes)
        while pending:
            for node in list(pending):
                if node.proc is None or node.proc.poll() is not None:
                    code = node.proc.returncode if node.proc is not None else None
                    raise BrokerStartError(
                        f"Apache Kafka node {node.node_id} exited with {code} while starting; its log "
                        f"({node.log_path}) ends: {_redact(node.log_tail(), self.users)}"
                    )
                with node.log_path.open("rb") as log:
                    log.seek(node.ready_from)
                    ready = _READY in log.read()
                if ready and port_open(self.host, node.port):
                    pending.remove(node)
            if not pending:
                return
            if time.monotonic() > deadline:
                tails = " | ".join(
                    f"node {n.node_id}: {_redact(n.log_tail(1500), self.users)}" for n in pending
                )
                raise BrokerStartError(
                    f"Apache Kafka did not start within {timeout or self.startup_timeout:.0f} s: {tails}"
                )
            time.sleep(0.1)

    def node(self, node_id: int) -> KafkaNode:
        return next(n for n in self.nodes if n.node_id == node_id)

    def stop_node(self, node_id: int, timeout: float = 60.0) -> None:
        """A clean shutdown (SIGTERM: the node hands its leaderships over first)."""
        node = self.node(node_id)
        proc, node.proc = node.proc, None
        stop_process(proc, timeout)
        self._settle_archives()

    def kill_node(self, node_id: int) -> None:
        """A crash (SIGKILL): nothing is handed over, nothing flushed."""
        node = self.node(node_id)
        proc, node.proc = node.proc, None
        kill_process(proc)
        self._settle_archives()

    def start_node(self, node_id: int, timeout: float | None = None) -> None:
        node = self.node(node_id)
        self._spawn(node)
        self._wait_ready([node], timeout)

    def restart_node(self, node_id: int, *, crash: bool = False, pause: float = 0.0) -> None:
        if crash:
            self.kill_node(node_id)
        else:
            self.stop_node(node_id)
        if pause > 0:
            time.sleep(pause)
        self.start_node(node_id)

    @property
    def running(self) -> bool:
        return all(node.running for node in self.nodes)

    def exits(self) -> list[NodeExit]:
        """Nodes whose process ended by itself (stop_node and kill_node forget theirs first)."""
        return [
            NodeExit(n.node_id, n.proc.returncode, _redact(n.log_tail(2000), self.users))
            for n in self.nodes
            if n.proc is not None and n.proc.poll() is not None
        ]

    def running_nodes(self) -> list[int]:
        return [n.node_id for n in self.nodes if n.running]

    def stop(self, timeout: float = 60.0) -> None:
        """Stop every node; a node that does not stop within ``timeout`` is killed."""
        for node in self.nodes:
            if node.proc is not None and node.proc.poll() is None:
                node.proc.terminate()
        deadline = time.monotonic() + timeout
        for node in self.nodes:
            proc, node.proc = node.proc, None
            if proc is None:
                continue
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(30)
        self._settle_archives()

    def _settle_archives(self) -> None:
        for archive in self._archives.values():
            archive.settle()

    def kill(self) -> None:
        """Crash every node (SIGKILL)."""
        for node in self.nodes:
            self.kill_node(node.node_id)

    def log_tail(self, limit: int = 4000) -> str:
        return "\n".join(
            f"--- node {n.node_id} ---\n{_redact(n.log_tail(limit), self.users)}" for n in self.nodes
        )

    def close(self) -> None:
        try:
            self.stop()
        finally:
            if self._owns_workdir:
                shutil.rmtree(self.workdir, ignore_errors=True)

    def __repr__(self) -> str:
        return (
            f"KafkaCluster(version={self.version!r}, nodes={len(self.nodes)}, bootstrap={self.bootstrap!r})"
        )

    def create_topic(
        self,
        name: str,
        partitions: int = 3,
        replication_factor: int | None = None,
        configs: dict[str, str] | None = None,
        timeout: float = 60.0,
    ) -> None:
        """Create a topic through kafka_core's admin (a topic that already exists is fine)."""
        factor = replication_factor or min(3, len(self.nodes))
        admin_create_topic(self.bootstrap, name, partitions, factor, configs, timeout)


def _cluster_id() -> str:
    """A random 22-character base64url cluster id, as ``kafka-storage random-uuid`` prints."""
    import base64

    while True:  # as Kafka's Uuid.randomUuid: never an id the tools would read as an option
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


def _redact(text: str, users: list[TestUser]) -> str:
    """The broker echoes its configuration (JAAS lines included) into its log: hide the passwords."""
    for user in users:
        text = text.replace(user.password, "[hidden]")
    return text
