"""kafka_core.schema_registry.SchemaRegistryClient against the dev registry: confluent-kafka's
method names and answers, caching, auth, TLS with the user's CA, deadlines, typed errors, and
secrets kept out of repr and error texts."""

from __future__ import annotations

import json
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from prerequisites import need_module

need_module("httpx")
need_module("fastavro")

from kafka_core.devtools.brokers.kafka_security import make_certificates  # noqa: E402
from kafka_core.devtools.registry import RegistryServer, SchemaStore  # noqa: E402
from kafka_core.errors import KafkaConfigError, KafkaTimeoutError  # noqa: E402
from kafka_core.schema_registry import (  # noqa: E402
    RegistryErrorCode,
    Schema,
    SchemaReference,
    SchemaRegistryClient,
    SchemaRegistryError,
    SchemaRegistryTimeoutError,
)

ORDER_V1 = Schema(json.dumps({"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]}))
ORDER_V2 = Schema(
    json.dumps(
        {
            "type": "record",
            "name": "Order",
            "fields": [
                {"name": "id", "type": "long"},
                {"name": "note", "type": ["null", "string"], "default": None},
            ],
        }
    )
)
ORDER_BAD = Schema(
    json.dumps({"type": "record", "name": "Order", "fields": [{"name": "id", "type": "string"}]})
)


class CountingStore(SchemaStore):
    """The dev registry's store, counting fetches by id: the client's cache is seen from the server."""

    def __init__(self) -> None:
        super().__init__()
        self.by_id_calls = 0

    def by_id(self, schema_id: int):  # type: ignore[no-untyped-def]
        self.by_id_calls += 1
        return super().by_id(schema_id)


@pytest.fixture
def client(schema_registry: str) -> Iterator[SchemaRegistryClient]:
    with SchemaRegistryClient({"url": schema_registry}) as c:
        yield c


def _raises(code: RegistryErrorCode, call: Callable[[], object]) -> SchemaRegistryError:
    with pytest.raises(SchemaRegistryError) as info:
        call()
    assert info.value.error_code == code, info.value
    return info.value


def test_the_confluent_workflow(client: SchemaRegistryClient, unique_subject: Callable[[str], str]) -> None:
    subject = unique_subject("orders-value")
    id1 = client.register_schema(subject, ORDER_V1)
    id2 = client.register_schema(subject, ORDER_V2)
    latest = client.get_latest_version(subject)
    assert (latest.schema_id, latest.version, latest.subject) == (id2, 2, subject)
    assert client.get_version(subject, 1).schema_id == id1
    assert client.lookup_schema(subject, ORDER_V1).version == 1
    assert json.loads(client.get_schema(id1).schema_str) == json.loads(ORDER_V1.schema_str)
    assert client.get_versions(subject) == [1, 2]
    assert subject in client.get_subjects()
    # One schema, one id across subjects: another test may have registered ORDER_V2 under its own.
    assert subject in client.get_subjects_by_schema_id(id2)
    assert client.test_compatibility(subject, ORDER_BAD) is False
    assert client.test_compatibility(subject, ORDER_V2, version=1) is True
    assert client.test_compatibility_all_versions(subject, ORDER_V2) is True
    client.set_compatibility(subject, "none")
    assert client.get_compatibility(subject) == "NONE"
    assert client.register_schema(subject, ORDER_BAD) not in (id1, id2)
    assert client.delete_version(subject, 3) == 3
    assert client.delete_subject(subject) == [1, 2]
    assert client.delete_subject(subject, permanent=True) == [1, 2, 3]
    _raises(RegistryErrorCode.SUBJECT_NOT_FOUND, lambda: client.get_latest_version(subject))


def test_errors_are_typed_with_the_registrys_code(
    client: SchemaRegistryClient, unique_subject: Callable[[str], str]
) -> None:
    subject = unique_subject("typed")
    missing = _raises(RegistryErrorCode.SUBJECT_NOT_FOUND, lambda: client.get_latest_version(subject))
    assert missing.http_status_code == 404 and subject in missing.error_message
    assert RegistryErrorCode.of(missing.error_code) is RegistryErrorCode.SUBJECT_NOT_FOUND
    _raises(RegistryErrorCode.SCHEMA_NOT_FOUND, lambda: client.get_schema(2**31 - 2))
    client.register_schema(subject, ORDER_V1)
    incompatible = _raises(
        RegistryErrorCode.INCOMPATIBLE_SCHEMA, lambda: client.register_schema(subject, ORDER_BAD)
    )
    assert incompatible.http_status_code == 409
    _raises(
        RegistryErrorCode.INVALID_SCHEMA, lambda: client.register_schema(subject, Schema('{"type": "nope"}'))
    )
    _raises(RegistryErrorCode.VERSION_NOT_FOUND, lambda: client.get_version(subject, 9))
    _raises(RegistryErrorCode.SCHEMA_NOT_FOUND, lambda: client.lookup_schema(subject, ORDER_V2))


def test_schemas_by_id_are_fetched_once() -> None:
    store = CountingStore()
    with RegistryServer(store=store) as registry, SchemaRegistryClient({"url": registry.url}) as writer:
        schema_id = writer.register_schema("cache-value", ORDER_V1)
        reader = SchemaRegistryClient({"url": registry.url})
        for _ in range(5):
            assert reader.get_schema(schema_id).schema_type == "AVRO"
        assert store.by_id_calls == 1
        reader.clear_caches()
        reader.get_schema(schema_id)
        assert store.by_id_calls == 2


def test_latest_is_cached_for_its_ttl() -> None:
    with RegistryServer() as registry:
        forever = SchemaRegistryClient({"url": registry.url})
        fresh = SchemaRegistryClient({"url": registry.url, "cache.latest.ttl.sec": 0})
        forever.register_schema("ttl-value", ORDER_V1)
        assert forever.get_latest_version("ttl-value").version == 1
        assert fresh.get_latest_version("ttl-value").version == 1
        forever.register_schema("ttl-value", ORDER_V2)
        assert forever.get_latest_version("ttl-value").version == 1  # cached until cleared
        assert fresh.get_latest_version("ttl-value").version == 2
        forever.clear_latest_caches()
        assert forever.get_latest_version("ttl-value").version == 2


def test_references_round_trip(client: SchemaRegistryClient, unique_subject: Callable[[str], str]) -> None:
    address = unique_subject("address")
    client.register_schema(
        address,
        Schema(
            json.dumps(
                {
                    "type": "record",
                    "name": "Address",
                    "namespace": "x",
                    "fields": [{"name": "c", "type": "string"}],
                }
            )
        ),
    )
    person = Schema(
        json.dumps(
            {"type": "record", "name": "P", "namespace": "x", "fields": [{"name": "a", "type": "x.Address"}]}
        ),
        "AVRO",
        [SchemaReference("x.Address", address, 1)],
    )
    schema_id = client.register_schema(unique_subject("person"), person)
    fetched = SchemaRegistryClient({"url": client.config()["url"]}).get_schema(schema_id)
    assert fetched.references == (SchemaReference("x.Address", address, 1),)
    assert client.get_referenced_by(address, 1) == [schema_id]


def test_basic_auth_and_secrets_stay_hidden() -> None:
    password = "pw-8c1f2e"
    with RegistryServer(users={"app": password}) as registry:
        good = SchemaRegistryClient({"url": registry.url, "basic.auth.user.info": f"app:{password}"})
        assert good.get_subjects() == []
        in_url = SchemaRegistryClient({"url": registry.url.replace("http://", f"http://app:{password}@")})
        assert in_url.get_subjects() == []
        wrong = SchemaRegistryClient({"url": registry.url, "basic.auth.user.info": "app:wrong"})
        refused = _raises(RegistryErrorCode.UNAUTHORIZED, wrong.get_subjects)
        assert refused.http_status_code == 401
        for text in (
            repr(good),
            repr(in_url),
            str(good.config()),
            str(in_url.config()),
            str(refused),
            repr(refused),
        ):
            assert password not in text


def test_bearer_token_and_secrets_stay_hidden() -> None:
    token = "tok-5d0a91"
    with RegistryServer(token=token) as registry:
        c = SchemaRegistryClient(
            {
                "url": registry.url,
                "bearer.auth.credentials.source": "STATIC_TOKEN",
                "bearer.auth.token": token,
            }
        )
        assert c.get_subjects() == []
        assert token not in repr(c) and token not in str(c.config())
        _raises(RegistryErrorCode.UNAUTHORIZED, SchemaRegistryClient({"url": registry.url}).get_subjects)


def test_oauth_client_credentials(tmp_path: Path) -> None:
    """OAUTHBEARER: the token comes from the issuer's token endpoint and is reused until it nears expiry."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    issued: list[str] = []

    class Issuer(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            assert self.headers["Authorization"].startswith("Basic ")
            issued.append("token-1")
            body = json.dumps({"access_token": "token-1", "expires_in": 3600}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    issuer = ThreadingHTTPServer(("127.0.0.1", 0), Issuer)
    threading.Thread(target=issuer.serve_forever, daemon=True).start()
    try:
        with RegistryServer(token="token-1") as registry:
            c = SchemaRegistryClient(
                {
                    "url": registry.url,
                    "bearer.auth.credentials.source": "OAUTHBEARER",
                    "bearer.auth.client.id": "app",
                    "bearer.auth.client.secret": "client-secret-77",
                    "bearer.auth.scope": "registry",
                    "bearer.auth.issuer.endpoint.url": f"http://127.0.0.1:{issuer.server_address[1]}/token",
                }
            )
            assert c.get_subjects() == [] and c.get_subjects() == []
            assert issued == ["token-1"]
            assert "client-secret-77" not in repr(c)
    finally:
        issuer.shutdown()
        issuer.server_close()


def test_tls_with_the_users_ca(tmp_path: Path) -> None:
    certs = make_certificates(tmp_path)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(certs.keystore_file)
    with RegistryServer(ssl_context=context) as registry:
        assert registry.url.startswith("https://")
        trusting = SchemaRegistryClient({"url": registry.url, "ssl.ca.location": str(certs.ca_file)})
        assert trusting.get_subjects() == []
        untrusting = SchemaRegistryClient({"url": registry.url, "max.retries": 0})
        refused = _raises(RegistryErrorCode.UNKNOWN, untrusting.get_subjects)
        assert (
            "CERTIFICATE_VERIFY_FAILED" in refused.error_message
            or "certificate" in refused.error_message.lower()
        )


def test_a_silent_registry_times_out_within_the_timeout() -> None:
    """A server that accepts and never answers: the call ends in about ``timeout``, as a timeout."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        c = SchemaRegistryClient({"url": f"http://127.0.0.1:{silent.getsockname()[1]}", "timeout": 0.3})
        started = time.monotonic()
        with pytest.raises(SchemaRegistryTimeoutError) as info:
            c.get_schema(1)
        elapsed = time.monotonic() - started
        assert isinstance(info.value, KafkaTimeoutError)
        assert elapsed < 5  # a hang guard, not a timing assertion: without the deadline this never returns


def test_unreachable_url_falls_over_to_the_next() -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{closed.getsockname()[1]}"  # bound, not listening: refused
        with RegistryServer() as registry:
            c = SchemaRegistryClient({"url": f"{dead},{registry.url}", "max.retries": 0})
            assert c.get_subjects() == []
        only_dead = SchemaRegistryClient({"url": dead, "max.retries": 1, "retries.wait.ms": 1})
        refused = _raises(RegistryErrorCode.UNKNOWN, only_dead.get_subjects)
        assert "cannot reach" in refused.error_message


@pytest.mark.parametrize(
    "conf",
    [
        {},
        {"url": "ftp://x"},
        {"url": "http://x", "basic.auth.user.info": "no-colon"},
        {"url": "http://x", "bearer.auth.credentials.source": "STATIC_TOKEN"},
        {"url": "http://x", "bearer.auth.credentials.source": "OAUTHBEARER", "bearer.auth.client.id": "a"},
        {"url": "http://x", "unknown.key": 1},
        {"url": "http://x", "ssl.ca.location": "/nonexistent/ca.pem"},
        {"url": "http://x", "basic.auth.credentials.source": "SASL_INHERIT"},
    ],
)
def test_bad_settings_are_refused(conf: dict[str, object]) -> None:
    with pytest.raises(KafkaConfigError):
        SchemaRegistryClient(conf)


def test_errors_pickle() -> None:
    import pickle

    err = SchemaRegistryError(404, 40401, "Subject 'x' not found.")
    back = pickle.loads(pickle.dumps(err))
    assert (back.http_status_code, back.error_code, back.error_message) == (
        404,
        40401,
        "Subject 'x' not found.",
    )


class _Flaky:
    """An HTTP server answering 503 (Confluent's shape) ``failures`` times, then ``[]``: what a
    registry in the middle of a leader change does."""

    def __init__(self, failures: int) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.calls = 0
        flaky = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                flaky.calls += 1
                failing = flaky.calls <= failures
                body = json.dumps({"error_code": 50003, "message": "forwarding"} if failing else []).encode()
                self.send_response(503 if failing else 200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_a_passing_5xx_is_retried() -> None:
    flaky = _Flaky(failures=2)
    try:
        c = SchemaRegistryClient({"url": flaky.url, "retries.wait.ms": 1, "retries.max.wait.ms": 5})
        assert c.get_subjects() == [] and flaky.calls == 3
    finally:
        flaky.close()


def test_a_lasting_5xx_ends_with_the_registrys_error_or_the_deadline() -> None:
    flaky = _Flaky(failures=10**6)
    try:
        few = SchemaRegistryClient({"url": flaky.url, "max.retries": 2, "retries.wait.ms": 1})
        error = _raises(RegistryErrorCode.FORWARDING_ERROR, few.get_subjects)
        assert error.http_status_code == 503 and flaky.calls == 3
        patient = SchemaRegistryClient(
            {"url": flaky.url, "max.retries": 100, "retries.wait.ms": 200, "timeout": 0.5}
        )
        started = time.monotonic()
        with pytest.raises(SchemaRegistryTimeoutError, match="forwarding"):
            patient.get_subjects()
        assert time.monotonic() - started < 5  # a hang guard: the deadline, not 100 retries
    finally:
        flaky.close()


def test_credentials_in_an_ipv6_url_stay_out_of_the_url() -> None:
    c = SchemaRegistryClient({"url": "http://app:pw-ipv6@[::1]:8081"})
    assert c.config()["url"] == "http://[::1]:8081" and "pw-ipv6" not in repr(c)
