"""Java-style configuration names (``linger.ms``) mapped to kafka_core's keyword arguments.

Users bring configs from the Java client, librdkafka and Spark's connector (``kafka.*`` options).
One table says what each name means here, per role, so that an unknown or meaningless key is
refused with its name rather than silently ignored.
"""

from __future__ import annotations

import difflib
import functools
import inspect
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, ParamSpec

from kafka_core.errors import KafkaConfigError

__all__ = [
    "ROLES",
    "check_bootstrap",
    "client_keywords",
    "java_keyword",
    "keywords_from_config",
    "names_markdown",
    "refused_reason",
    "role_keywords",
    "takes_config",
    "translate",
    "transport_keywords",
]

ROLES = ("client", "producer", "consumer")

Convert = Callable[[str], Any]


def _int(value: str) -> int:
    return int(str(value).strip())


def _float(value: str) -> float:
    return float(str(value).strip())


def _bool(value: str) -> bool:
    text = str(value).strip().lower()
    if text in ("true", "1", "yes", "on"):
        return True
    if text in ("false", "0", "no", "off"):
        return False
    raise ValueError(f"not a boolean: {value!r}")


def _str(value: str) -> str:
    return str(value).strip()


def _upper(value: str) -> str:
    return str(value).strip().upper()


def _lower(value: str) -> str:
    return str(value).strip().lower()


def _as_secret(value: str) -> str:
    # Imported here: importing the network package builds the whole connection stack, which
    # option parsing (the Spark source's planner, for one) does not need.
    from kafka_core.network.sasl.secret import Secret

    return Secret(value)


def _secret(value: str) -> str:
    return _as_secret(str(value).strip())


def _acks(value: str) -> int | str:
    text = str(value).strip().lower()
    return "all" if text == "all" else int(text)


def _utf8_encode(value: Any) -> bytes:
    return str(value).encode()


def _utf8_decode(data: bytes) -> str:
    return bytes(data).decode()


_JAVA_SERDES = "org.apache.kafka.common.serialization."


def _serializer(value: str) -> Callable[[Any], bytes] | None:
    """Java's two plain serializers: StringSerializer (UTF-8) and ByteArraySerializer (bytes as
    they are); any other class is Java code, which a Python function replaces."""
    name = str(value).strip().removeprefix(_JAVA_SERDES)
    if name == "StringSerializer":
        return _utf8_encode
    if name == "ByteArraySerializer":
        return None
    raise ValueError(
        "only StringSerializer and ByteArraySerializer have a Python twin; pass the serializer function as a keyword"
    )


def _deserializer(value: str) -> Callable[[bytes], Any] | None:
    """StringDeserializer (UTF-8) and ByteArrayDeserializer (bytes as they are), as ``_serializer``."""
    name = str(value).strip().removeprefix(_JAVA_SERDES)
    if name == "StringDeserializer":
        return _utf8_decode
    if name == "ByteArrayDeserializer":
        return None
    raise ValueError(
        "only StringDeserializer and ByteArrayDeserializer have a Python twin; pass the deserializer function as a keyword"
    )


# librdkafka's partitioners that place records as a kafka_core one does. murmur2 and
# murmur2_random hash keys as the Java client; they differ only for null keys, which kafka_core's
# "murmur2" spreads stickily (as Java) rather than to one partition (murmur2) or at random.
_LIBRDKAFKA_PARTITIONERS = {"murmur2": "murmur2", "murmur2_random": "murmur2", "random": "round_robin"}
_JAVA_PARTITIONERS = {
    "org.apache.kafka.clients.producer.internals.DefaultPartitioner": "murmur2",
    "org.apache.kafka.clients.producer.RoundRobinPartitioner": "round_robin",
}


def _librdkafka_partitioner(value: str) -> str:
    name = str(value).strip().lower()
    if name in _LIBRDKAFKA_PARTITIONERS:
        return _LIBRDKAFKA_PARTITIONERS[name]
    raise ValueError(
        "CRC32 and FNV-1a placement (consistent, consistent_random, fnv1a...) is not built in: keyed"
        " records would land on other partitions than librdkafka's; murmur2_random is the Java"
        " client's placement, or pass partitioner= a function"
    )


def _java_partitioner(value: str) -> str:
    name = str(value).strip()
    if name in _JAVA_PARTITIONERS:
        return _JAVA_PARTITIONERS[name]
    raise ValueError(
        "a Java class; DefaultPartitioner and RoundRobinPartitioner have twins, else pass partitioner= a function"
    )


_ASSIGNORS = {
    "range": "range",
    "roundrobin": "roundrobin",
    "cooperative-sticky": "cooperative-sticky",
    "org.apache.kafka.clients.consumer.RangeAssignor": "range",
    "org.apache.kafka.clients.consumer.RoundRobinAssignor": "roundrobin",
    "org.apache.kafka.clients.consumer.CooperativeStickyAssignor": "cooperative-sticky",
}


def _assignors(value: str) -> tuple[str, ...]:
    """Java's assignor classes or librdkafka's names, a comma list, preferred first."""
    names = [item.strip() for item in str(value).split(",") if item.strip()]
    unknown = [name for name in names if name not in _ASSIGNORS]
    if unknown or not names:
        raise ValueError(
            f"{', '.join(unknown) or 'nothing'}: kafka_core's assignors are range, roundrobin and"
            " cooperative-sticky (Java's RangeAssignor, RoundRobinAssignor, CooperativeStickyAssignor;"
            " the eager StickyAssignor's incremental successor is CooperativeStickyAssignor)"
        )
    return tuple(_ASSIGNORS[name] for name in names)


# name -> (our keyword, converter). The client's options apply to every role.
_CLIENT: dict[str, tuple[str, Convert]] = {
    "bootstrap.servers": ("bootstrap_servers", _str),
    "client.id": ("client_id", _str),
    "request.timeout.ms": ("request_timeout_ms", _float),
    "default.api.timeout.ms": ("api_timeout_ms", _float),
    "socket.connection.setup.timeout.ms": ("connect_timeout_ms", _float),
    "metadata.max.age.ms": ("metadata_max_age_ms", _float),
    "metadata.recovery.strategy": ("metadata_recovery_strategy", _lower),
    "metadata.recovery.rebootstrap.trigger.ms": ("metadata_recovery_rebootstrap_trigger_ms", _float),
    "retry.backoff.ms": ("retry_backoff_ms", _float),
    "retry.backoff.max.ms": ("retry_backoff_max_ms", _float),
    "reconnect.backoff.ms": ("reconnect_backoff_ms", _float),
    "reconnect.backoff.max.ms": ("reconnect_backoff_max_ms", _float),
    "connections.max.idle.ms": ("connections_max_idle_ms", _float),
    "allow.auto.create.topics": ("allow_auto_create_topics", _bool),
    "enable.metrics.push": ("enable_metrics_push", _bool),
    "security.protocol": ("security_protocol", _upper),
    "ssl.ca.location": ("ssl_cafile", _str),  # librdkafka's name
    "ssl.truststore.location": ("ssl_cafile", _str),  # a PEM file (JKS stores are Java-only)
    "ssl.certificate.location": ("ssl_certfile", _str),
    "ssl.keystore.location": ("ssl_certfile", _str),
    "ssl.key.location": ("ssl_keyfile", _str),
    "ssl.key.password": ("ssl_password", _str),
    "ssl.endpoint.identification.algorithm": ("ssl_check_hostname", lambda v: _lower(v) == "https"),
    "sasl.mechanism": ("sasl_mechanism", _upper),
    "sasl.mechanisms": ("sasl_mechanism", _upper),  # librdkafka's name
    "sasl.username": ("sasl_username", _str),
    "sasl.password": ("sasl_password", _secret),
    # OAUTHBEARER with the built-in OIDC client-credentials grant: Java 4.x's names, then librdkafka's
    "sasl.oauthbearer.token.endpoint.url": ("sasl_oauth_token_endpoint_url", _str),
    "sasl.oauthbearer.client.credentials.client.id": ("sasl_oauth_client_id", _str),
    "sasl.oauthbearer.client.credentials.client.secret": ("sasl_oauth_client_secret", _secret),
    "sasl.oauthbearer.scope": ("sasl_oauth_scope", _str),
    "sasl.oauthbearer.client.id": ("sasl_oauth_client_id", _str),
    "sasl.oauthbearer.client.secret": ("sasl_oauth_client_secret", _secret),
    "sasl.oauthbearer.extensions": ("sasl_oauth_extensions", _str),
    "https.ca.location": ("sasl_oauth_ssl_cafile", _str),
    # GSSAPI (Kerberos): Java's service name, librdkafka's principal and keytab
    "sasl.kerberos.service.name": ("sasl_kerberos_service_name", _str),
    "sasl.kerberos.principal": ("sasl_kerberos_principal", _str),
    "sasl.kerberos.keytab": ("sasl_kerberos_keytab", _str),
}

_PRODUCER: dict[str, tuple[str, Convert]] = {
    "acks": ("acks", _acks),
    "linger.ms": ("linger_ms", _float),
    "batch.size": ("batch_size", _int),
    "compression.type": ("compression", _lower),
    "compression.level": ("compression_level", _int),
    "enable.idempotence": ("idempotent", _bool),
    "max.in.flight.requests.per.connection": ("max_in_flight", _int),
    "delivery.timeout.ms": ("delivery_timeout_ms", _float),
    "buffer.memory": ("buffer_memory", _int),
    "max.block.ms": ("max_block_ms", _float),
    "transactional.id": ("transactional_id", _str),
    "transaction.timeout.ms": ("transaction_timeout_ms", _int),
    "max.request.size": ("max_request_size", _int),
    # librdkafka's names for the same settings
    "message.timeout.ms": ("delivery_timeout_ms", _float),
    "queue.buffering.max.ms": ("linger_ms", _float),
    "message.max.bytes": ("max_request_size", _int),
    "queue.buffering.max.kbytes": ("buffer_memory", lambda v: _int(v) * 1024),
    "partitioner": ("partitioner", _librdkafka_partitioner),
    "partitioner.class": ("partitioner", _java_partitioner),
    "key.serializer": ("key_serializer", _serializer),
    "value.serializer": ("value_serializer", _serializer),
}

_CONSUMER: dict[str, tuple[str, Convert]] = {
    "group.id": ("group_id", _str),
    "group.instance.id": ("group_instance_id", _str),
    "group.protocol": ("group_protocol", _lower),
    "group.remote.assignor": ("group_remote_assignor", _str),
    "client.rack": ("client_rack", _str),
    "auto.offset.reset": ("auto_offset_reset", _lower),
    "enable.auto.commit": ("enable_auto_commit", _bool),
    "auto.commit.interval.ms": ("auto_commit_interval_ms", _int),
    "isolation.level": ("isolation_level", _lower),
    "session.timeout.ms": ("session_timeout_ms", _int),
    "heartbeat.interval.ms": ("heartbeat_interval_ms", _int),
    "max.poll.interval.ms": ("max_poll_interval_ms", _int),
    "max.poll.records": ("max_poll_records", _int),
    "fetch.max.wait.ms": ("fetch_max_wait_ms", _int),
    "fetch.min.bytes": ("fetch_min_bytes", _int),
    "fetch.max.bytes": ("fetch_max_bytes", _int),
    "max.partition.fetch.bytes": ("max_partition_fetch_bytes", _int),
    "check.crcs": ("check_crcs", _bool),
    "partition.assignment.strategy": ("assignors", _assignors),
    "key.deserializer": ("key_deserializer", _deserializer),
    "value.deserializer": ("value_deserializer", _deserializer),
}

_ROLE_TABLES = {
    "client": (_CLIENT,),
    "producer": (_CLIENT, _PRODUCER),
    "consumer": (_CLIENT, _CONSUMER),
}

# Names that tune the Java client's internals and mean nothing here: accepted, with no effect,
# each with the reason (docs/migrating.md lists them from this table).
_NO_EFFECT: dict[str, str] = {
    "send.buffer.bytes": "socket buffers are left to the OS",
    "receive.buffer.bytes": "socket buffers are left to the OS",
    "client.dns.lookup": "every address a name resolves to is tried",
    "metrics.sample.window.ms": "metrics() keeps its own counters",
    "metrics.num.samples": "metrics() keeps its own counters",
    "metrics.recording.level": "metrics() keeps its own counters",
    "metric.reporters": "metrics() keeps its own counters (kafka_core.metrics exports them)",
    "ssl.protocol": "Python's ssl module negotiates the newest TLS both sides have",
    "ssl.enabled.protocols": "Python's ssl module negotiates the newest TLS both sides have",
    "ssl.truststore.type": "the trust store is a PEM file",
    "ssl.keystore.type": "the key store is a PEM file",
    "sasl.login.callback.handler.class": "the sasl.oauthbearer.* options wire OAuth here",
    "sasl.oauthbearer.method": "a token endpoint URL means OIDC here",
    "sasl.client.callback.handler.class": "AWS_MSK_IAM is built in",
    "sasl.kerberos.kinit.cmd": "MIT's library renews the ticket from the keytab by itself",
    "sasl.kerberos.min.time.before.relogin": "MIT's library renews the ticket from the keytab by itself",
    "sasl.kerberos.ticket.renew.window.factor": "MIT's library renews the ticket from the keytab by itself",
    "sasl.kerberos.ticket.renew.jitter": "MIT's library renews the ticket from the keytab by itself",
}

# Common names with no counterpart here: refused, with the reason (and what to do instead).
_REFUSED: dict[str, str] = {
    "retries": "resends are bounded by time, not a count: set delivery.timeout.ms (delivery_timeout_ms; the Java client's"
    " own bound since 2.1; its retries default is effectively unlimited)",
    "message.send.max.retries": "resends are bounded by time, not a count: set delivery.timeout.ms"
    " (delivery_timeout_ms)",
    "queue.buffering.max.messages": "the queue is bounded by bytes: set buffer.memory (buffer_memory)",
    "batch.num.messages": "batches are bounded by bytes: set batch.size (batch_size)",
    "interceptor.classes": "interceptors are Java classes; wrap send() or poll() instead",
}

# Names whose values are credentials: never echoed in an error, whatever went wrong with them.
_SECRET_NAMES = frozenset(
    {
        "sasl.jaas.config",
        "sasl.password",
        "ssl.key.password",
        "sasl.oauthbearer.client.credentials.client.secret",
        "sasl.oauthbearer.client.secret",
    }
)

_JAAS = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')
_JAAS_MODULE = re.compile(r"\s*([\w.$]+)\s+(required|requisite|sufficient|optional)\b")
# Krb5LoginModule's options are quoted or not: useKeyTab=true keyTab="/k/app.keytab"
_JAAS_ANY = re.compile(r'(\w+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s;"]+))')


def _jaas_options(value: str) -> dict[str, str]:
    """A login module's options, quoted or not (``useKeyTab=true``, ``tokenauth="true"``)."""
    return {
        m.group(1): m.group(2) if m.group(2) is not None else m.group(3) for m in _JAAS_ANY.finditer(value)
    }


def _krb5_jaas(value: str) -> dict[str, Any]:
    """``Krb5LoginModule``'s options, as Java reads them: ``keyTab`` counts only with
    ``useKeyTab=true``; without a keytab, the ticket cache (``KRB5CCNAME``) is used."""
    fields = _jaas_options(value)
    out: dict[str, Any] = {}
    if "principal" in fields:
        out["sasl_kerberos_principal"] = fields["principal"]
    if fields.get("useKeyTab", "false").lower() == "true":
        if not fields.get("keyTab"):
            raise ValueError('Krb5LoginModule: useKeyTab=true needs keyTab="..."')
        out["sasl_kerberos_keytab"] = fields["keyTab"]
    if "ticketCache" in fields:
        raise ValueError("Krb5LoginModule: ticketCache is not taken here; name the cache in KRB5CCNAME")
    if "serviceName" in fields:  # Kafka reads it when sasl.kerberos.service.name is not set
        out["sasl_kerberos_service_name"] = fields["serviceName"]
    return out


def _jaas(value: str) -> dict[str, Any]:
    """``sasl.jaas.config``: the credentials of a PLAIN or SCRAM login module, or the OIDC client
    of ``OAuthBearerLoginModule`` (``clientId``, ``clientSecret``, ``scope``, ``extension_*``), or
    the principal and keytab of ``Krb5LoginModule``. Its text is never put in an error: it holds
    a password."""
    head = _JAAS_MODULE.match(value)
    if head is None:
        raise ValueError("expected '<LoginModule class> required key=\"value\" ...;'")
    module = head.group(1).rsplit(".", 1)[-1]
    if module == "Krb5LoginModule":
        return _krb5_jaas(value)
    fields = dict(_JAAS.findall(value))
    if module == "OAuthBearerLoginModule":
        out: dict[str, Any] = {}
        if "clientId" in fields:
            out["sasl_oauth_client_id"] = fields["clientId"]
        if "clientSecret" in fields:
            out["sasl_oauth_client_secret"] = _as_secret(fields["clientSecret"])
        if "scope" in fields:
            out["sasl_oauth_scope"] = fields["scope"]
        extensions = {k[len("extension_") :]: v for k, v in fields.items() if k.startswith("extension_")}
        if extensions:
            out["sasl_oauth_extensions"] = extensions
        return out
    if module == "IAMLoginModule":  # software.amazon.msk.auth.iam: SASL AWS_MSK_IAM
        aws = {
            "awsProfileName": "profile",
            "awsRoleArn": "role_arn",
            "awsRoleSessionName": "role_session_name",
        }
        aws["awsStsRegion"] = "sts_region"
        return {"sasl_options": {ours: fields[theirs] for theirs, ours in aws.items() if theirs in fields}}
    if module not in ("PlainLoginModule", "ScramLoginModule"):
        raise ValueError(f"login module {module} is not one kafka_core takes")
    if "username" not in fields or "password" not in fields:
        raise ValueError('needs username="..." and password="..." (PlainLoginModule or ScramLoginModule)')
    login: dict[str, Any] = {
        "sasl_username": fields["username"],
        "sasl_password": _as_secret(fields["password"]),
    }
    tokenauth = _jaas_options(value).get("tokenauth") if module == "ScramLoginModule" else None
    if tokenauth is not None:  # a delegation token's id and HMAC (KIP-48)
        login["sasl_options"] = {"tokenauth": _bool(tokenauth)}
    return login


def translate(config: Mapping[str, Any], role: str, *, prefix: str = "") -> dict[str, Any]:
    """Keyword arguments for a ``role`` object from Java-style ``config`` names.

    ``prefix`` is only for messages (Spark's options carry ``kafka.``). An unknown name, or a
    value that does not convert, raises :class:`KafkaConfigError` naming it.
    """
    if role not in _ROLE_TABLES:
        raise KafkaConfigError(f"role must be one of {ROLES}, not {role!r}")
    tables = _ROLE_TABLES[role]
    out: dict[str, Any] = {}
    unknown: list[str] = []
    refused: list[str] = []
    for raw_name, value in config.items():
        name = raw_name.strip().lower()
        if name in _NO_EFFECT:
            continue
        if name in _REFUSED:
            refused.append(f"{prefix}{raw_name} has no equivalent in kafka_core: {_REFUSED[name]}")
            continue
        try:
            if name == "sasl.jaas.config":
                out.update(_jaas(str(value)))
                continue
            for table in tables:
                if name in table:
                    keyword, convert = table[name]
                    out[keyword] = convert(value)
                    break
            else:
                unknown.append(f"'{prefix}{raw_name}'")
        except (ValueError, TypeError) as exc:
            if isinstance(exc, KafkaConfigError):
                raise
            shown = "(value not shown: it holds a credential)" if name in _SECRET_NAMES else repr(value)
            raise KafkaConfigError(f"bad value for {prefix}{raw_name}: {shown} ({exc})") from None
    # Every one of them at once: a config from another client often has several.
    problems = list(refused)
    if unknown:
        known = sorted({n for t in tables for n in t} | {"sasl.jaas.config"} | set(_NO_EFFECT))
        hints = [_hint(name.strip("'")[len(prefix) :], role, known, prefix) for name in unknown]
        problems.insert(
            0,
            f"unknown {role} option{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}"
            + "".join(f"; {h}" for h in hints)
            + " (docs/migrating.md lists every name kafka_core maps)",
        )
    if problems:
        raise KafkaConfigError("; ".join(problems))
    return out


def _hint(name: str, role: str, known: list[str], prefix: str) -> str:
    """What an unknown name in a config may have meant: another role's option, or the closest
    names (a few, not the whole table)."""
    found = java_keyword(name)
    if found is not None:
        return f"{prefix}{name} is a {found[1]} option, not a {role} one"
    close = difflib.get_close_matches(name.strip().lower(), known, n=3, cutoff=0.6)
    if not close:
        return f"{prefix}{name}: no name close to it"
    return f"{prefix}{name}: did you mean " + " or ".join(f"{prefix}{c}" for c in close) + "?"


def refused_reason(name: str) -> str | None:
    """Why a Java-style or librdkafka name (``retries``, ``batch.num.messages``) has no counterpart
    here, else None: the keyword arguments' check gives the same reason."""
    return _REFUSED.get(name.strip().lower())


def java_keyword(name: str) -> tuple[str, str] | None:
    """(our keyword, its role) for a Java-style or librdkafka name of any role, else None; the
    client's own names say role "client"."""
    key = name.strip().lower()
    for role, table in (("client", _CLIENT), ("producer", _PRODUCER), ("consumer", _CONSUMER)):
        if key in table:
            return table[key][0], role
    return None


def keywords_from_config(
    config: Mapping[str, Any], role: str, overrides: Mapping[str, Any]
) -> dict[str, Any]:
    """What a class's ``from_config(config, **overrides)`` passes to its constructor: the
    translated ``config``, with ``overrides`` (keyword names, e.g. a serializer) on top."""
    kwargs = translate(config, role)
    kwargs.update(overrides)
    return kwargs


def client_keywords(kwargs: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Split translated keyword arguments into the client's and the rest (the role's own)."""
    ours = {keyword for keyword, _ in _CLIENT.values()} | {
        "sasl_username",
        "sasl_password",
        "sasl_oauth_client_id",
        "sasl_oauth_client_secret",
        "sasl_oauth_scope",
        "sasl_oauth_extensions",
        "sasl_options",
    }
    client = {k: v for k, v in kwargs.items() if k in ours}
    return client, {k: v for k, v in kwargs.items() if k not in ours}


def transport_keywords(config: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """A ``KafkaStreamTransport``'s keywords from Java-style names: the client's as they are, a
    producer's as ``producer_<keyword>`` and a consumer's as ``consumer_<keyword>`` (the
    transport's own prefixes), with ``overrides`` on top."""
    parts: dict[str, dict[str, Any]] = {"client": {}, "producer": {}, "consumer": {}}
    for name, value in config.items():
        key = str(name).strip().lower()
        role = "producer" if key in _PRODUCER else "consumer" if key in _CONSUMER else "client"
        parts[role][name] = value
    out = translate(parts["client"], "client")
    for role in ("producer", "consumer"):
        out.update({f"{role}_{k}": v for k, v in translate(parts[role], role).items()})
    out.update(overrides)
    return out


def role_keywords(role: str) -> Callable[[Mapping[str, Any], Mapping[str, Any]], dict[str, Any]]:
    """``keywords_from_config`` for one role, in the form ``takes_config`` takes."""

    def keywords(config: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
        return keywords_from_config(config, role, overrides)

    return keywords


def check_bootstrap(value: object) -> str | list[str]:
    """``bootstrap_servers`` as a str or a list of str; any other type is refused here, at
    construction, not found out by a connect that fails a minute later."""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        raise KafkaConfigError(
            "bootstrap_servers is a dict: a config dict of Java-style names goes first, positionally"
            " (KafkaProducer({'bootstrap.servers': ...})), or through from_config"
        )
    if isinstance(value, bytes | bytearray) or not isinstance(value, Iterable):
        raise KafkaConfigError(
            f"bootstrap_servers must be a str ('host:port,host:port') or a list of str, not {type(value).__name__}"
        )
    items = list(value)
    wrong = [item for item in items if not isinstance(item, str)]
    if wrong:
        raise KafkaConfigError(
            f"bootstrap_servers must hold str ('host:port'), not {type(wrong[0]).__name__}: {wrong[0]!r}"
        )
    return items


Translator = Callable[[Mapping[str, Any], Mapping[str, Any]], dict[str, Any]]
_P = ParamSpec("_P")


def takes_config(translator: Translator) -> Callable[[Callable[_P, None]], Callable[_P, None]]:
    """Decorate a public class's ``__init__`` so that it takes confluent-kafka's calling convention:
    a dict of Java-style names first, positionally (``KafkaProducer({"bootstrap.servers": ...,
    "enable.idempotence": True}, value_serializer=...)``). The dict is translated as
    ``from_config`` does (``translator``: the class's), and keyword arguments beside it go on top
    (a keyword wins over the same option in the dict, as in confluent-kafka, where keyword
    arguments update the dict). ``bootstrap_servers``' type is checked here too, so every class
    refuses a wrong one at once."""

    def decorate(init: Callable[_P, None]) -> Callable[_P, None]:
        params = list(inspect.signature(init).parameters.values())[1:]  # after self
        first = params[0] if params else None
        takes_topics = first is not None and first.kind is inspect.Parameter.VAR_POSITIONAL

        @functools.wraps(init)
        def __init__(*args: Any, **kwargs: Any) -> None:
            self, rest = args[0], list(args[1:])
            if rest and isinstance(rest[0], Mapping):
                config, rest = rest[0], rest[1:]
                if rest and not takes_topics:
                    raise KafkaConfigError(
                        f"{type(self).__name__}() takes a config dict alone positionally; give other"
                        " options as keyword arguments"
                    )
                kwargs = translator(config, kwargs)
            if any(isinstance(arg, Mapping) for arg in rest):
                raise KafkaConfigError(
                    f"{type(self).__name__}(): a config dict goes first, positionally, and only once"
                )
            if takes_topics:
                wrong = [arg for arg in rest if not isinstance(arg, str)]
                if wrong:  # found here, not by a Metadata request that cannot encode it
                    raise KafkaConfigError(
                        f"{type(self).__name__}(): positional arguments are topic names (str; a list goes as"
                        " topics=[...]), not"
                        f" {type(wrong[0]).__name__}: {wrong[0]!r}"
                    )
            elif rest:
                rest[0] = check_bootstrap(rest[0])
            if (takes_topics or not rest) and "bootstrap_servers" in kwargs:
                kwargs["bootstrap_servers"] = check_bootstrap(kwargs["bootstrap_servers"])
            init(self, *rest, **kwargs)

        return __init__

    return decorate


# What a mapped name's value becomes when it is not simply the same value (docs/migrating.md).
_NOTES: dict[str, str] = {
    "ssl.ca.location": "librdkafka's name",
    "ssl.truststore.location": "a PEM file (JKS stores are Java's)",
    "ssl.keystore.location": "a PEM file",
    "ssl.endpoint.identification.algorithm": "`https` checks the host name, empty does not",
    "sasl.mechanisms": "librdkafka's name",
    "sasl.jaas.config": "PLAIN/SCRAM username and password (SCRAM's tokenauth too), OAuthBearerLoginModule's client,"
    " Krb5LoginModule's principal and keytab, IAMLoginModule's options",
    "message.timeout.ms": "librdkafka's name for delivery.timeout.ms",
    "max.request.size": "the most bytes of batches in one Produce request; a record larger than it is"
    " not refused here, as Java does, but by the broker over the topic's max.message.bytes",
    "message.max.bytes": "librdkafka's name for max.request.size",
    "queue.buffering.max.ms": "librdkafka's name for linger.ms",
    "queue.buffering.max.kbytes": "librdkafka's; KiB, so times 1024",
    "partitioner": "librdkafka's: `murmur2_random` and `murmur2` are `\"murmur2\"` (the Java client's"
    ' placement), `random` is `"round_robin"`; CRC32/FNV-1a ones are refused',
    "partitioner.class": 'Java\'s DefaultPartitioner is `"murmur2"`, RoundRobinPartitioner `"round_robin"`;'
    " other classes are refused",
    "key.serializer": "StringSerializer is UTF-8, ByteArraySerializer bytes as they are; other classes are refused",
    "value.serializer": "StringSerializer is UTF-8, ByteArraySerializer bytes as they are; other classes are refused",
    "key.deserializer": "StringDeserializer is UTF-8, ByteArrayDeserializer bytes as they are;"
    " other classes are refused",
    "value.deserializer": "StringDeserializer is UTF-8, ByteArrayDeserializer bytes as they are;"
    " other classes are refused",
    "compression.type": "`none`, `gzip`, `snappy`, `lz4` or `zstd`",
    "partition.assignment.strategy": "Java's RangeAssignor, RoundRobinAssignor and CooperativeStickyAssignor,"
    " or librdkafka's `range`, `roundrobin`, `cooperative-sticky`; a comma list, preferred first",
}


def names_markdown() -> str:
    """The table of every Java-style and librdkafka name ``translate`` knows, as docs/migrating.md
    shows it (tests/unit/config/test_config_names.py keeps the two equal): mapped names with their
    keyword, then the names accepted with no effect and those refused, each with its reason."""
    rows = ["| name | role | kafka_core | note |", "|---|---|---|---|"]
    for role, table in (("every role", _CLIENT), ("producer", _PRODUCER), ("consumer", _CONSUMER)):
        for name, (keyword, _) in table.items():
            rows.append(f"| `{name}` | {role} | `{keyword}` | {_NOTES.get(name, '')} |")
        if table is _CLIENT:
            rows.append(f"| `sasl.jaas.config` | every role | `sasl_*` | {_NOTES['sasl.jaas.config']} |")
    for name, reason in _NO_EFFECT.items():
        rows.append(f"| `{name}` | every role | accepted, no effect | {reason} |")
    for name, reason in _REFUSED.items():
        rows.append(f"| `{name}` | every role | refused | {reason} |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":  # python -m kafka_core.config: the table docs/migrating.md shows
    print(names_markdown(), end="")
