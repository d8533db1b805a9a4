"""``python -m kafka_core.devtools.registry [--port 0] [--user NAME:PASSWORD] [--token-env VAR]
[--kafka BOOTSTRAP [--topic _schemas]]``: run the dev registry until interrupted, its schemas in
memory or kept in a Kafka topic. The first stdout line is one JSON object (``url``, ``port``,
``pid``, ``auth``, ``storage``) for scripts, as the dev broker's ``--json`` prints."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from types import FrameType

from kafka_core.devtools.registry.server import RegistryServer
from kafka_core.devtools.registry.store import LEVELS, SchemaStore


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m kafka_core.devtools.registry", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 (the default): a free port")
    parser.add_argument(
        "--user", action="append", default=[], metavar="NAME:PASSWORD", help="require basic auth (repeatable)"
    )
    parser.add_argument(
        "--token-env", metavar="VAR", help="require this bearer token, read from environment variable VAR"
    )
    parser.add_argument("--compatibility", default="BACKWARD", choices=sorted(LEVELS))
    parser.add_argument(
        "--kafka",
        metavar="BOOTSTRAP",
        help="keep the schemas in a Kafka topic on this cluster (default: memory only)",
    )
    parser.add_argument(
        "--topic", default="_schemas", help="the topic --kafka keeps them in (default _schemas)"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    users = dict(u.split(":", 1) for u in args.user if ":" in u)
    if len(users) != len(args.user):
        print("registry: --user takes NAME:PASSWORD", file=sys.stderr)
        return 2
    token = os.environ.get(args.token_env) if args.token_env else None
    if args.token_env and not token:
        print(f"registry: environment variable {args.token_env} is empty", file=sys.stderr)
        return 2

    def on_term(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    log = None
    try:
        store = SchemaStore(args.compatibility)
        if args.kafka:
            from kafka_core.devtools.registry.kafka_log import KafkaSchemaLog

            log = KafkaSchemaLog(args.kafka, args.topic)
            store = SchemaStore(args.compatibility, journal=log.append)
            store.replay(log.events())
        server = RegistryServer(args.host, args.port, store=store, users=users, token=token)
    except OSError as exc:
        print(f"registry: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # the Kafka log: a broker that cannot be reached, a topic of several partitions
        print(f"registry: cannot use the Kafka log: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    auth = "basic" if users else "bearer" if token else "none"
    storage = f"kafka:{args.kafka}/{args.topic}" if args.kafka else "memory"
    print(
        json.dumps(
            {"url": server.url, "port": server.port, "pid": os.getpid(), "auth": auth, "storage": storage}
        ),
        flush=True,
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        return 0
    finally:
        server.close()
        if log is not None:
            log.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
