"""``python -m kafka_core.devbroker [--broker tansu|kafka] [--nodes 3] [--json]``: run a broker
until interrupted. With ``--json`` the first stdout line is one JSON object (``bootstrap``,
``listeners``, ``users``, ``nodes``; for Kafka ``oauth``: the OAUTHBEARER listener's ``listener``,
``bootstrap``, ``token_endpoint``, ``client_id``, ``client_secret``, ``security_protocol``,
``sasl_mechanism``; with Kerberos, ``kerberos``)
for scripts; without it, a sentence for people. Apache Kafka gets a GSSAPI listener, with a
throwaway Kerberos realm of its own, where MIT Kerberos's KDC is installed (``--no-kerberos``
leaves it out)."""

from __future__ import annotations

import argparse
import json
import signal
import sys
from types import FrameType

from kafka_core.devtools.brokers.common import BrokerStartError, PortInUseError
from kafka_core.devtools.brokers.kafka import KafkaCluster
from kafka_core.devtools.brokers.kafka_jars import KAFKA_VERSION
from kafka_core.devtools.brokers.oauth_server import OAuthServer
from kafka_core.devtools.brokers.supervise import READER_GONE, supervise, write_line
from kafka_core.devtools.brokers.tansu import TansuBroker
from kafka_core.devtools.kerberos import KerberosRealm, kerberos_available

# --help's text: the module docstring's, in plain words (argparse prints reST markup as it is)
DESCRIPTION = (
    "Run a broker until interrupted (Ctrl-C): Tansu by default, on PORT (9092), or Apache Kafka "
    "(--broker kafka, one node or three, on free ports). With --json the first line on stdout is "
    "one JSON object describing it (bootstrap, listeners, users, nodes; for Kafka also oauth: the "
    "OAUTHBEARER listener, its token endpoint, client id and secret; and kerberos when it has a "
    "GSSAPI listener), for scripts; without it, a sentence for people. Apache Kafka gets a GSSAPI "
    "listener, with a throwaway Kerberos realm of its own, where MIT Kerberos's KDC is installed "
    "(--no-kerberos leaves it out). Exit status: 0 stopped by Ctrl-C, 1 the broker failed, "
    "2 bad arguments or a port in use."
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m kafka_core.devbroker", description=DESCRIPTION)
    parser.add_argument(
        "port", nargs="?", type=int, help="Tansu's port (default 9092); Kafka picks free ports"
    )
    parser.add_argument("--broker", choices=("tansu", "kafka"), default="tansu")
    parser.add_argument("--nodes", type=int, choices=(1, 3), default=1, help="Apache Kafka nodes")
    parser.add_argument(
        "--version", default=KAFKA_VERSION, help=f"Apache Kafka version (default {KAFKA_VERSION})"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON line describing the broker first")
    parser.add_argument(
        "--no-oauth",
        action="store_true",
        help="Apache Kafka without its OAUTHBEARER listener (and the OIDC provider behind it)",
    )
    parser.add_argument(
        "--no-kerberos",
        action="store_true",
        help="no GSSAPI listener (Apache Kafka has one, with a realm of its own, where the MIT KDC is installed)",
    )
    return parser


def _describe_tansu(broker: TansuBroker) -> dict[str, object]:
    return {
        "broker": "tansu",
        "bootstrap": broker.bootstrap,
        "listeners": {"PLAINTEXT": [broker.bootstrap]},
        "users": [],
        "nodes": [{"id": 0, "pid": broker.pid, "port": broker.port, "log": str(broker.log_path)}],
    }


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.broker == "tansu" and args.nodes != 1:
        print("devbroker: Tansu runs as one node; --nodes 3 needs --broker kafka", file=sys.stderr)
        return 2

    def on_term(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    broker: TansuBroker | KafkaCluster
    oauth: OAuthServer | None = None
    realm: KerberosRealm | None = None
    try:
        try:
            if args.broker == "kafka":
                oauth = None if args.no_oauth else _start_oauth()
                realm = _start_realm(args)
                broker = KafkaCluster(args.nodes, version=args.version, oauth=oauth, kerberos=realm)
            else:
                broker = TansuBroker(args.port or 9092)
            try:
                broker.start()
            except BaseException:
                broker.close()
                raise
        except PortInUseError as exc:
            print(
                f"devbroker: {exc}: give another PORT (python -m kafka_core.devbroker 9093)", file=sys.stderr
            )
            return 2
        except BrokerStartError as exc:
            print(f"devbroker: {exc}", file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            return 130
        return _serve(args, broker)
    finally:  # after the broker: it uses them while it runs
        if oauth is not None:
            oauth.close()
        if realm is not None:
            realm.close()


def _serve(args: argparse.Namespace, broker: TansuBroker | KafkaCluster) -> int:
    """Describe the started broker, then wait until interrupted or it stops; close it."""
    try:
        info = broker.describe() if isinstance(broker, KafkaCluster) else _describe_tansu(broker)
        if args.json:
            line = json.dumps(info)
        else:
            name = (
                f"Apache Kafka {args.version} ({args.nodes} node{'s' if args.nodes > 1 else ''})"
                if args.broker == "kafka"
                else "tansu"
            )
            started = f" in {info['start_seconds']} s" if info.get("start_seconds") is not None else ""
            line = f"{name} listening on {broker.bootstrap}{started}; Ctrl-C stops it"
        if not write_line(sys.stdout, line):
            return READER_GONE
        nodes = args.nodes if args.broker == "kafka" else 1
        return supervise(broker, nodes=nodes, out=sys.stdout, err=sys.stderr, json_events=args.json)
    except KeyboardInterrupt:
        return 0
    finally:
        broker.close()


def _start_oauth() -> OAuthServer:
    """The OIDC provider behind Kafka's OAUTHBEARER listener (tokens for an hour)."""
    server = OAuthServer()
    try:
        return server.start()
    except BaseException:
        server.close()
        raise


def _start_realm(args: argparse.Namespace) -> KerberosRealm | None:
    """The realm of the GSSAPI listener, started; None without the KDC or with --no-kerberos."""
    if args.no_kerberos or not kerberos_available():
        return None
    realm = KerberosRealm()
    try:
        return realm.start()
    except BaseException:
        realm.close()
        raise


if __name__ == "__main__":
    sys.exit(main())
