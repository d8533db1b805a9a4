"""Java-style configuration names (``linger.ms``) mapped to kafka_core's keyword arguments.

Users bring configs from the Java client, librdkafka and Spark's connector (``kafka.*`` options).
One table says what each name means here, per role, so that an unknown or meaningless key is
refused with its name rather than silently ignored.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Mapping
from typing import Any

from kafka_core.errors import KafkaConfigError

__all__ = ["ROLES", "client_keywords", "java_keyword", "keywords_from_config", "translate"]

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


# name -> (our keyword, converter). The client's options apply to every role.
_CLIENT: dict[str, tuple[str, Convert]] = {
    "bootstrap.servers": ("bootstrap_servers", _str),
    "client.id": ("client_id", _str),
    "request.timeout.ms": ("request_timeout_ms", _float),
    "default.api.timeout.ms": ("api_timeout_ms", _float),
    "socket.connection.setup.timeout.ms": ("connect_timeout_ms", _float),
    "metadata.max.age.ms": ("metadata_max_age_ms", _float),
    "retry.backoff.ms": ("retry_backoff_ms", _float),
    "retry.backoff.max.ms": ("retry_backoff_max_ms", _float),
    "reconnect.backoff.ms": ("reconnect_backoff_ms", _float),
    "reconnect.backoff.max.ms": ("reconnect_backoff_max_ms", _float),
    "connections.max.idle.ms": ("connections_max_idle_ms", _float),
    "allow.auto.create.topics": ("allow_auto_create_topics", _bool),
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
}

_ROLE_TABLES = {
    "client": (_CLIENT,),
    "producer": (_CLIENT, _PRODUCER),
    "consumer": (_CLIENT, _CONSUMER),
}

# Names that tune the Java client's internals and mean nothing here: accepted, with no effect.
_NO_EFFECT = frozenset(
    {
        "send.buffer.bytes",
        "receive.buffer.bytes",
        "client.dns.lookup",
        "metrics.sample.window.ms",
        "metrics.num.samples",
        "metrics.recording.level",
        "metric.reporters",
        "ssl.protocol",
        "ssl.enabled.protocols",
        "ssl.truststore.type",
        "ssl.keystore.type",
        # Java wires OAuth through these classes; here the options above are enough.
        "sasl.login.callback.handler.class",
        "sasl.oauthbearer.method",  # librdkafka: "oidc" is what a token endpoint URL means here
        "sasl.client.callback.handler.class",  # MSK's IAMClientCallbackHandler: built in here
        # Kerberos ticket renewal: MIT's library renews from the keytab by itself
        "sasl.kerberos.kinit.cmd",
        "sasl.kerberos.min.time.before.relogin",
        "sasl.kerberos.ticket.renew.window.factor",
        "sasl.kerberos.ticket.renew.jitter",
    }
)

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


def _krb5_jaas(value: str) -> dict[str, Any]:
    """``Krb5LoginModule``'s options, as Java reads them: ``keyTab`` counts only with
    ``useKeyTab=true``; without a keytab, the ticket cache (``KRB5CCNAME``) is used."""
    fields = {
        m.group(1): m.group(2) if m.group(2) is not None else m.group(3) for m in _JAAS_ANY.finditer(value)
    }
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
    return {"sasl_username": fields["username"], "sasl_password": _as_secret(fields["password"])}


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
    for raw_name, value in config.items():
        name = raw_name.strip().lower()
        if name in _NO_EFFECT:
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
    if unknown:  # every one of them at once: a config from another client often has several
        known = sorted({n for t in tables for n in t} | {"sasl.jaas.config"})
        hints = [_hint(name.strip("'")[len(prefix) :], role, known, prefix) for name in unknown]
        raise KafkaConfigError(
            f"unknown {role} option{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}"
            + "".join(f"; {h}" for h in hints if h)
            + f" (kafka_core understands: {', '.join(known)})"
        )
    return out


def _hint(name: str, role: str, known: list[str], prefix: str) -> str:
    """What an unknown name in a config may have meant: another role's option, or a near name."""
    found = java_keyword(name)
    if found is not None:
        return f"{prefix}{name} is a {found[1]} option, not a {role} one"
    close = difflib.get_close_matches(name.strip().lower(), known, n=1, cutoff=0.6)
    return f"{prefix}{name}: did you mean {prefix}{close[0]}?" if close else ""


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
