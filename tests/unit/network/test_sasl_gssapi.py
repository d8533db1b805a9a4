"""The GSSAPI mechanism's exchange (RFC 4752 as Kafka speaks it) over a stand-in ``gssapi`` module:
the context tokens, the empty message after a mutual-authentication reply, the security-layer
answer (no layer, size 0, the principal as authorization identity), refusals of offers it cannot
take, the credentials asked for (keytab store or ticket cache), errors that name the cause, the
missing extra, and keytab files read for their principals. Against a real KDC and Apache Kafka:
tests/integration/test_gssapi_kafka.py."""

from __future__ import annotations

import asyncio
import struct
import sys
import threading
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafka_core.errors import KafkaAuthenticationError, KafkaConfigError
from kafka_core.network.sasl import (
    KerberosOptions,
    MechanismContext,
    SaslSettings,
    create_mechanism,
    mechanism_names,
)
from kafka_core.network.sasl.gssapi import keytab_principals
from kafka_core.sync_client import KafkaClient


class FakeGSSError(Exception):
    pass


class FakeContext:
    """A GSS-API initiator: one token out; complete at once, or after the acceptor's reply when
    mutual authentication is asked for. ``wrap`` prefixes ``W:``, ``unwrap`` takes it off."""

    made: list[FakeContext] = []
    mutual = True

    def __init__(self, *, name: Any, creds: Any, usage: str, flags: int) -> None:
        self.target = name
        self.creds = creds
        self.flags = flags
        self.complete = False
        self.initiator_name = creds.name or "default@REALM"
        self.step_threads: list[int] = []
        FakeContext.made.append(self)

    def step(self, token: bytes | None = None) -> bytes | None:
        self.step_threads.append(threading.get_ident())
        if token is None:
            self.complete = not FakeContext.mutual
            return b"ap-req"
        assert token == b"ap-rep", token
        self.complete = True
        return None

    def wrap(self, message: bytes, encrypt: bool) -> Any:
        assert encrypt is False, "no security layer: never encrypted"
        return types.SimpleNamespace(message=b"W:" + message)

    def unwrap(self, message: bytes) -> Any:
        assert message.startswith(b"W:"), message
        return types.SimpleNamespace(message=message[2:])


class FakeCredentials:
    asked: list[dict[str, Any]] = []
    fail_with: str | None = None

    def __init__(self, *, name: Any, usage: str, store: dict[str, str] | None) -> None:
        FakeCredentials.asked.append({"name": name, "usage": usage, "store": store})
        if FakeCredentials.fail_with:
            raise FakeGSSError(FakeCredentials.fail_with)
        self.name = name


@pytest.fixture
def fake_gssapi(monkeypatch: pytest.MonkeyPatch) -> Iterator[types.ModuleType]:
    module = types.ModuleType("gssapi")
    module.Name = lambda text, kind: f"{text}"  # type: ignore[attr-defined]
    module.NameType = types.SimpleNamespace(kerberos_principal="principal", hostbased_service="service")  # type: ignore[attr-defined]
    module.RequirementFlag = types.SimpleNamespace(mutual_authentication=2, integrity=32)  # type: ignore[attr-defined]
    module.Credentials = FakeCredentials  # type: ignore[attr-defined]
    module.SecurityContext = FakeContext  # type: ignore[attr-defined]
    module.exceptions = types.SimpleNamespace(GSSError=FakeGSSError)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "gssapi", module)
    FakeContext.made, FakeContext.mutual = [], True
    FakeCredentials.asked, FakeCredentials.fail_with = [], None
    yield module


def mechanism(host: str = "broker1", **options: Any) -> Any:
    settings = SaslSettings("GSSAPI", kerberos=KerberosOptions(**options))
    return create_mechanism(settings, MechanismContext(host, 9092))


def run(mech: Any, challenge: bytes | None) -> bytes | None:
    return asyncio.run(mech.evaluate(challenge))


def offer(layers: int = 0x07, size: int = 0x100000) -> bytes:
    return b"W:" + bytes([layers]) + size.to_bytes(3, "big")


def test_gssapi_is_registered() -> None:
    assert "GSSAPI" in mechanism_names()


@pytest.mark.parametrize("mutual", [True, False])
def test_the_exchange_ends_with_no_security_layer_and_the_principal(fake_gssapi: Any, mutual: bool) -> None:
    FakeContext.mutual = mutual
    mech = mechanism(principal="alice@REALM")
    assert run(mech, None) == b"ap-req"
    if mutual:  # the broker's AP-REP; the context is then complete and the client says so, empty
        assert run(mech, b"ap-rep") == b""
    # the broker's offer: every layer, 1 MiB; the answer: no layer, size 0, the principal
    assert run(mech, offer()) == b"W:\x01\x00\x00\x00alice@REALM"
    assert not mech.complete
    assert run(mech, b"") is None
    assert mech.complete
    [context] = FakeContext.made
    assert context.target == "kafka@broker1"
    assert context.flags == 2 | 32


def test_steps_run_off_the_event_loop_thread(fake_gssapi: Any) -> None:
    mech = mechanism(principal="alice@REALM")

    async def first() -> int:
        await mech.evaluate(None)
        return threading.get_ident()

    loop_thread = asyncio.run(first())
    assert FakeContext.made[0].step_threads and FakeContext.made[0].step_threads[0] != loop_thread


@pytest.mark.parametrize(
    ("options", "target"),
    [
        ({}, "kafka@broker1"),
        ({"service_name": "kfk"}, "kfk@broker1"),
        ({"host_name": "kafka.example.com"}, "kafka@kafka.example.com"),
    ],
)
def test_the_service_principal_asked_for(fake_gssapi: Any, options: dict[str, str], target: str) -> None:
    run(mechanism(**options), None)
    assert FakeContext.made[0].target == target


def test_an_offer_without_no_security_layer_is_refused(fake_gssapi: Any) -> None:
    FakeContext.mutual = False
    mech = mechanism(principal="alice@REALM")
    run(mech, None)
    with pytest.raises(KafkaAuthenticationError, match="requires a security layer"):
        run(mech, offer(layers=0x06))


def test_an_offer_of_the_wrong_size_is_refused(fake_gssapi: Any) -> None:
    FakeContext.mutual = False
    mech = mechanism(principal="alice@REALM")
    run(mech, None)
    with pytest.raises(KafkaAuthenticationError, match="offer of 5 bytes"):
        run(mech, b"W:\x01\x00\x00\x00\x00")
    mech = mechanism(principal="alice@REALM")
    run(mech, None)
    with pytest.raises(KafkaAuthenticationError, match="no security-layer offer"):
        run(mech, b"")


def test_a_keytab_is_asked_for_through_a_cache_shared_by_the_process(
    fake_gssapi: Any, tmp_path: Path
) -> None:
    for _ in range(2):
        run(mechanism(principal="alice@REALM", keytab="/k/alice.keytab"), None)
    run(mechanism(principal="bob@REALM", keytab="/k/bob.keytab"), None)
    run(mechanism(), None)  # no keytab, no principal: the ticket cache's principal
    first, again, other, cache = FakeCredentials.asked
    assert first["store"]["client_keytab"] == "/k/alice.keytab"
    assert first["store"]["ccache"].startswith("MEMORY:") and first["store"] == again["store"]
    assert other["store"]["ccache"] != first["store"]["ccache"]
    assert cache == {"name": None, "usage": "initiate", "store": None}


def test_credentials_that_cannot_be_had_name_the_principal_and_the_cause(
    fake_gssapi: Any, tmp_path: Path
) -> None:
    FakeCredentials.fail_with = (
        "Major (851968): Unspecified GSS failure.  Minor code may provide more information, "
        "Minor (2529638918): Client 'ghost@REALM' not found in Kerberos database"
    )
    with pytest.raises(KafkaAuthenticationError) as info:
        run(mechanism(principal="ghost@REALM"), None)
    text = str(info.value)
    assert text.startswith("SASL GSSAPI authentication as ghost@REALM to kafka@broker1 failed"), text
    assert "Client 'ghost@REALM' not found in Kerberos database" in text and "ticket cache" in text
    assert "Major (" not in text

    missing = tmp_path / "missing.keytab"
    with pytest.raises(KafkaAuthenticationError, match="does not exist or cannot be read") as info:
        run(mechanism(principal="ghost@REALM", keytab=str(missing)), None)
    assert str(missing) not in str(info.value)

    FakeCredentials.fail_with = (
        "Major (458752): No credentials, Minor (2529638943): Decrypt integrity check failed"
    )
    keytab = tmp_path / "alice.keytab"
    keytab.write_bytes(keytab_bytes([("REALM", ["alice"])]))
    with pytest.raises(KafkaAuthenticationError, match="stale") as info:
        run(mechanism(principal="alice@REALM", keytab=str(keytab)), None)
    assert "Decrypt integrity check failed" in str(info.value)
    with pytest.raises(
        KafkaAuthenticationError, match=r"holds no key for bob@REALM \(it holds alice@REALM\)"
    ):
        run(mechanism(principal="bob@REALM", keytab=str(keytab)), None)


def test_without_the_extra_a_client_fails_at_construction_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "gssapi", None)  # import gssapi raises ImportError
    with pytest.raises(KafkaConfigError, match=r"kafka-core\[gssapi\]"):
        KafkaClient("localhost:9092", security_protocol="SASL_PLAINTEXT", sasl_mechanism="GSSAPI")


def test_a_keytab_needs_its_principal(fake_gssapi: Any) -> None:
    with pytest.raises(KafkaConfigError, match="needs sasl_kerberos_principal"):
        KafkaClient(
            "localhost:9092",
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="GSSAPI",
            sasl_kerberos=KerberosOptions(keytab="/k/x.keytab"),
        )


def test_no_keytab_path_in_reprs(fake_gssapi: Any) -> None:
    options = KerberosOptions(principal="alice@REALM", keytab="/secret/place/alice.keytab")
    client = KafkaClient(
        "localhost:9092", security_protocol="SASL_PLAINTEXT", sasl_mechanism="GSSAPI", sasl_kerberos=options
    )
    mech = mechanism(principal="alice@REALM", keytab="/secret/place/alice.keytab")
    for text in (repr(options), repr(client), str(vars(client)), repr(mech), str(vars(mech))):
        assert "/secret/place" not in text, text


# -- keytab files ---------------------------------------------------------------------------------------


def keytab_bytes(entries: list[tuple[str, list[str]]], hole: bool = True) -> bytes:
    """MIT's keytab format 0x502: [size][components][realm][names...][type][time][kvno][key]."""

    def counted(data: bytes) -> bytes:
        return struct.pack(">H", len(data)) + data

    out = b"\x05\x02"
    if hole:
        out += struct.pack(">i", -7) + b"\x00" * 7
    for realm, names in entries:
        body = struct.pack(">H", len(names)) + counted(realm.encode())
        body += b"".join(counted(n.encode()) for n in names)
        body += (
            struct.pack(">IIB", 1, 0, 2) + struct.pack(">H", 18) + counted(b"k" * 32) + struct.pack(">I", 2)
        )
        out += struct.pack(">i", len(body)) + body
    return out


def test_keytab_principals(tmp_path: Path) -> None:
    path = tmp_path / "k.keytab"
    path.write_bytes(keytab_bytes([("R", ["alice"]), ("R", ["kafka", "localhost"]), ("R", ["alice"])]))
    assert keytab_principals(str(path)) == ["alice@R", "kafka/localhost@R"]
    path.write_bytes(b"[libdefaults]\n")
    with pytest.raises(ValueError):
        keytab_principals(str(path))


# -- Java's and librdkafka's names, Spark's kafka. options ----------------------------------------------

KRB5_JAAS = (
    "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true "
    'keyTab="/etc/security/keytabs/app.keytab" principal="app/host1@EXAMPLE.COM";'
)


def test_java_names_make_the_kerberos_options() -> None:
    from kafka_core.config import client_keywords, translate

    kwargs = translate(
        {"sasl.mechanism": "gssapi", "sasl.kerberos.service.name": "kfk", "sasl.jaas.config": KRB5_JAAS},
        "producer",
    )
    assert kwargs == {
        "sasl_mechanism": "GSSAPI",
        "sasl_kerberos_service_name": "kfk",
        "sasl_kerberos_principal": "app/host1@EXAMPLE.COM",
        "sasl_kerberos_keytab": "/etc/security/keytabs/app.keytab",
    }
    client, rest = client_keywords(kwargs)
    assert client == kwargs and rest == {}
    # librdkafka's names; a ticket-cache login names no keytab; Java's renewal knobs have no effect here
    assert translate(
        {
            "sasl.kerberos.principal": "app@R",
            "sasl.kerberos.keytab": "/k/app.keytab",
            "sasl.kerberos.min.time.before.relogin": "60000",
        },
        "consumer",
    ) == {"sasl_kerberos_principal": "app@R", "sasl_kerberos_keytab": "/k/app.keytab"}
    ticket_cache = "com.sun.security.auth.module.Krb5LoginModule required useTicketCache=true;"
    assert translate({"sasl.jaas.config": ticket_cache}, "client") == {}
    # keyTab counts only with useKeyTab=true, as in Java
    unused = KRB5_JAAS.replace("useKeyTab=true", "useKeyTab=false")
    assert translate({"sasl.jaas.config": unused}, "client") == {
        "sasl_kerberos_principal": "app/host1@EXAMPLE.COM"
    }


def test_a_krb5_login_module_line_that_cannot_work_is_refused() -> None:
    from kafka_core.config import translate

    bad = 'com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true principal="a@R";'
    with pytest.raises(KafkaConfigError, match="useKeyTab=true needs keyTab"):
        translate({"sasl.jaas.config": bad}, "client")


def test_spark_takes_the_kafka_prefixed_names() -> None:
    from kafka_core.spark.options import parse_sink, parse_source

    options = {
        "kafka.bootstrap.servers": "h:1",
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "GSSAPI",
        "kafka.sasl.kerberos.service.name": "kafka",
        "kafka.sasl.jaas.config": KRB5_JAAS,
    }
    source = parse_source({**options, "subscribe": "t"}, streaming=False)
    sink = parse_sink({**options, "topic": "t"})
    for client in (source.client, sink.producer):
        assert client["sasl_mechanism"] == "GSSAPI" and client["sasl_kerberos_service_name"] == "kafka"
        assert client["sasl_kerberos_principal"] == "app/host1@EXAMPLE.COM"
        assert client["sasl_kerberos_keytab"] == "/etc/security/keytabs/app.keytab"


def test_from_config_builds_a_gssapi_client(fake_gssapi: Any) -> None:
    import kafka_core

    config = {
        "bootstrap.servers": "localhost:9092",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "GSSAPI",
        "sasl.jaas.config": KRB5_JAAS,
    }
    kafka_core.KafkaProducer.from_config(config).close()
    with pytest.raises(KafkaConfigError, match="needs sasl_kerberos_principal"):
        config.pop("sasl.jaas.config")
        kafka_core.KafkaProducer.from_config({**config, "sasl.kerberos.keytab": "/k/app.keytab"})
