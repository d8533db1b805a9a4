"""The built-in OIDC client-credentials grant against an in-test token endpoint (the real OIDC
provider, NAV's mock-oauth2-server, is in tests/integration/test_oauth_kafka.py)."""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs

import pytest

from kafka_core.auth import OidcTokenProvider
from kafka_core.config import translate
from kafka_core.errors import KafkaAuthenticationError, KafkaConfigError, KafkaConnectionError

pytestmark = pytest.mark.timeout(60)

SECRET = "cl1ent-s3cret/+="


def jwt(claims: dict[str, object]) -> str:
    def part(obj: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'RS256'})}.{part(claims)}.c2ln"


class Endpoint(BaseHTTPRequestHandler):
    requests: list[dict[str, Any]] = []
    status = 200

    def do_POST(self) -> None:
        body = parse_qs(self.rfile.read(int(self.headers["Content-Length"])).decode())
        auth = self.headers.get("Authorization", "")
        Endpoint.requests.append({"form": body, "auth": auth})
        basic = base64.b64decode(auth[6:]).decode() if auth.startswith("Basic ") else ""
        good = basic == "svc:" + SECRET.replace("/", "%2F").replace("+", "%2B").replace("=", "%3D") or (
            body.get("client_id") == ["svc"] and body.get("client_secret") == [SECRET]
        )
        if Endpoint.status != 200:
            self._answer(Endpoint.status, {"error": "temporarily_unavailable"})
        elif not good:
            self._answer(401, {"error": "invalid_client", "error_description": "bad client credentials"})
        elif body.get("scope") == ["opaque"]:
            self._answer(200, {"access_token": "opaque-token", "expires_in": 60, "token_type": "Bearer"})
        else:
            now = int(time.time())
            token = jwt({"sub": "svc", "exp": now + 300, "iat": now, "aud": body.get("scope", [""])[0]})
            self._answer(200, {"access_token": token, "expires_in": 300, "token_type": "Bearer"})

    def _answer(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def endpoint() -> Iterator[str]:
    Endpoint.requests = []
    Endpoint.status = 200
    server = ThreadingHTTPServer(("127.0.0.1", 0), Endpoint)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/token"
    server.shutdown()
    server.server_close()


def test_client_credentials_with_basic_auth_scope_and_extensions(endpoint: str) -> None:
    provider = OidcTokenProvider(endpoint, "svc", SECRET, scope="kafka", extensions={"logicalCluster": "lkc"})
    token = provider()
    assert token.principal == "svc" and 290 < token.remaining() <= 300
    assert dict(token.extensions) == {"logicalCluster": "lkc"}
    sent = Endpoint.requests[-1]
    assert sent["form"] == {"grant_type": ["client_credentials"], "scope": ["kafka"]}
    assert sent["auth"].startswith("Basic ")  # as Kafka's Java client sends it


def test_client_secret_post_and_opaque_tokens(endpoint: str) -> None:
    token = OidcTokenProvider(endpoint, "svc", SECRET, scope="opaque", client_auth="post")()
    assert token.value == "opaque-token" and 50 < token.remaining() <= 60 and token.principal == "svc"
    assert Endpoint.requests[-1]["form"]["client_secret"] == [SECRET]


def test_a_wrong_secret_is_an_authentication_error_without_the_secret(endpoint: str) -> None:
    wrong = "not-the-secret-" + SECRET
    with pytest.raises(KafkaAuthenticationError) as info:
        OidcTokenProvider(endpoint, "svc", wrong)()
    assert "invalid_client" in str(info.value) and "HTTP 401" in str(info.value)
    assert wrong not in str(info.value) and SECRET not in str(info.value)


def test_an_endpoint_that_is_down_is_a_retriable_connection_error(endpoint: str) -> None:
    Endpoint.status = 503
    with pytest.raises(KafkaConnectionError, match="HTTP 503"):
        OidcTokenProvider(endpoint, "svc", SECRET)()
    with pytest.raises(KafkaConnectionError, match="cannot reach"):
        OidcTokenProvider("http://127.0.0.1:1/token", "svc", SECRET, timeout_s=2)()


@pytest.mark.parametrize("status", [400, 403, 404, 405, 410])
def test_a_4xx_answer_is_final(endpoint: str, status: int) -> None:
    """A wrong URL (404), method (405) or client will not answer otherwise the next time: the
    client fails at once (KafkaAuthenticationError is never retried), not at its deadline."""
    Endpoint.status = status
    with pytest.raises(KafkaAuthenticationError, match=f"HTTP {status}"):
        OidcTokenProvider(endpoint, "svc", SECRET)()


@pytest.mark.parametrize("status", [408, 429, 500, 503])
def test_a_timeout_a_rate_limit_or_a_5xx_is_retried(endpoint: str, status: int) -> None:
    Endpoint.status = status
    with pytest.raises(KafkaConnectionError, match=f"HTTP {status}") as info:
        OidcTokenProvider(endpoint, "svc", SECRET)()
    assert not isinstance(info.value, KafkaAuthenticationError)


def test_a_token_file(tmp_path: Any) -> None:
    path = tmp_path / "token.jwt"
    path.write_text(jwt({"sub": "file-user", "exp": int(time.time()) + 100}) + "\n")
    token = OidcTokenProvider(f"file://{path}")()
    assert token.principal == "file-user"


def test_bad_settings_are_config_errors() -> None:
    with pytest.raises(KafkaConfigError):
        OidcTokenProvider("ftp://idp/token", "svc", SECRET)
    with pytest.raises(KafkaConfigError):
        OidcTokenProvider("https://idp/token", "svc", None)


def test_java_names_through_translate(endpoint: str) -> None:
    kwargs = translate(
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER",
            "sasl.oauthbearer.token.endpoint.url": endpoint,
            "sasl.oauthbearer.client.credentials.client.id": "svc",
            "sasl.oauthbearer.client.credentials.client.secret": SECRET,
            "sasl.oauthbearer.scope": "kafka",
        },
        "client",
    )
    assert kwargs["sasl_oauth_token_endpoint_url"] == endpoint
    assert (kwargs["sasl_oauth_client_id"], kwargs["sasl_oauth_scope"]) == ("svc", "kafka")
    assert kwargs["sasl_oauth_client_secret"] == SECRET and SECRET not in repr(kwargs)
    jaas = translate(
        {
            "sasl.oauthbearer.token.endpoint.url": endpoint,
            "sasl.jaas.config": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule "
            f'required clientId="svc" clientSecret="{SECRET}" scope="kafka" extension_logicalCluster="lkc";',
        },
        "client",
    )
    assert (jaas["sasl_oauth_client_id"], jaas["sasl_oauth_client_secret"]) == ("svc", SECRET)
    assert jaas["sasl_oauth_scope"] == "kafka" and jaas["sasl_oauth_extensions"] == {"logicalCluster": "lkc"}


def test_tls_to_the_token_endpoint_with_the_users_ca(tmp_path: Any) -> None:
    """An https endpoint whose certificate a private CA signed: trusted with ``ssl_cafile``,
    refused (a retriable connection error naming the certificate problem) without it."""
    import ssl

    from kafka_core.devtools.brokers.kafka_security import make_certificates

    certs = make_certificates(tmp_path)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Endpoint)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certs.keystore_file)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"https://127.0.0.1:{server.server_address[1]}/token"
    try:
        Endpoint.status = 200
        token = OidcTokenProvider(url, "svc", SECRET, scope="kafka", ssl_cafile=str(certs.ca_file))()
        assert token.principal == "svc"
        with pytest.raises(
            KafkaConnectionError, match=r"CERTIFICATE_VERIFY_FAILED|certificate verify failed"
        ):
            OidcTokenProvider(url, "svc", SECRET, timeout_s=5)()
    finally:
        server.shutdown()
        server.server_close()
