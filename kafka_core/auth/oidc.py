"""The OAuth 2 client-credentials grant (RFC 6749 section 4.4) against an OIDC token endpoint, as
Java's ``sasl.oauthbearer.token.endpoint.url`` and librdkafka's ``sasl.oauthbearer.method=oidc``.

A plain synchronous callable: :class:`~kafka_core.auth.cache.TokenCache` runs it on a worker
thread and decides when to call it, so it holds no state between calls beyond its settings. The
client secret is a :class:`~kafka_core.network.sasl.Secret` and never appears in its ``repr``, in
logs or in the errors it raises (an endpoint's error body is quoted only up to 300 characters,
and never the request).
"""

from __future__ import annotations

import base64
import hashlib
import json
import ssl
import time
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any
from urllib.parse import quote, urlsplit

from kafka_core.errors import KafkaAuthenticationError, KafkaConfigError, KafkaConnectionError
from kafka_core.network.sasl import OAuthBearerToken, Secret
from kafka_core.network.sasl.oauthbearer import token_from_jwt

__all__ = ["OidcTokenProvider"]

DEFAULT_TIMEOUT_S = 10.0


class OidcTokenProvider:
    """``provider()`` -> a fresh :class:`OAuthBearerToken` from ``token_endpoint_url``.

    - ``client_id`` / ``client_secret``: sent as HTTP Basic (``client_auth="basic"``, what Kafka's
      Java client does) or in the form body (``client_auth="post"``).
    - ``scope``: the ``scope`` parameter; ``extensions``: SASL extensions sent with the token.
    - ``ssl_cafile`` / ``ssl_context``: the CA that signed the endpoint's certificate.
    - ``principal_claim``: the JWT claim naming the principal (``sub``, as Kafka's default).
    - A ``file://`` URL reads a token (a JWT) from that file at each refresh instead, as Java's.
    Needs ``httpx`` (``pip install 'kafka-core[oauth]'``) for http(s) URLs.
    """

    def __init__(
        self,
        token_endpoint_url: str,
        client_id: str | None = None,
        client_secret: str | None = None,
        *,
        scope: str | None = None,
        extensions: Mapping[str, str] | None = None,
        ssl_cafile: str | None = None,
        ssl_context: ssl.SSLContext | None = None,
        client_auth: str = "basic",
        principal_claim: str = "sub",
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        parts = urlsplit(token_endpoint_url)
        if parts.scheme not in ("http", "https", "file"):
            raise KafkaConfigError(
                f"the OAuth token endpoint must be an http(s):// or file:// URL, not {token_endpoint_url!r}"
            )
        if parts.scheme != "file" and (not client_id or client_secret is None):
            raise KafkaConfigError("the OAuth client-credentials grant needs a client id and a client secret")
        if client_auth not in ("basic", "post"):
            raise KafkaConfigError(f"client_auth must be 'basic' or 'post', not {client_auth!r}")
        self.token_endpoint_url = token_endpoint_url
        self.client_id = client_id
        self._client_secret = None if client_secret is None else Secret(client_secret)
        self.scope = scope
        self.extensions: Mapping[str, str] = MappingProxyType(dict(extensions or {}))
        self.ssl_cafile = ssl_cafile
        self._ssl_context = ssl_context
        self.client_auth = client_auth
        self.principal_claim = principal_claim
        self.timeout_s = timeout_s
        # Clients with the same settings share one cached token (kafka_core.auth.shared_token_cache);
        # the secret enters the key only as a digest.
        digest = hashlib.sha256(str.encode(self._client_secret or "")).hexdigest()
        self.cache_key = (
            "oidc",
            token_endpoint_url,
            client_id,
            digest,
            scope,
            tuple(sorted(self.extensions.items())),
            ssl_cafile,
            id(ssl_context) if ssl_context is not None else None,
            client_auth,
            principal_claim,
        )

    def __repr__(self) -> str:
        return (
            f"<OidcTokenProvider {self.token_endpoint_url} client_id={self.client_id!r} scope={self.scope!r}>"
        )

    def __call__(self) -> OAuthBearerToken:
        if urlsplit(self.token_endpoint_url).scheme == "file":
            return self._from_file()
        body = self._request()
        token = body.get("access_token")
        if not isinstance(token, str) or not token:
            raise KafkaAuthenticationError(
                f"OAuth token endpoint {self.token_endpoint_url} answered without an access_token"
            )
        now = time.time()
        try:
            parsed = token_from_jwt(token, principal_claim=self.principal_claim, now=now)
            expires_at, principal = parsed.expires_at, parsed.principal
        except KafkaAuthenticationError:  # an opaque token: the endpoint's expires_in is all we have
            expires_in = body.get("expires_in")
            if not isinstance(expires_in, int | float):
                raise KafkaAuthenticationError(
                    f"OAuth token endpoint {self.token_endpoint_url} gave an opaque token without expires_in"
                ) from None
            expires_at, principal = now + float(expires_in), self.client_id
        return OAuthBearerToken(
            token, expires_at, principal=principal, extensions=self.extensions, issued_at=now
        )

    def _from_file(self) -> OAuthBearerToken:
        path = Path(urlsplit(self.token_endpoint_url).path)
        try:
            text = path.read_text().strip()
        except OSError as exc:
            raise KafkaAuthenticationError(
                f"cannot read the OAuth token file {path}: {exc.strerror}"
            ) from None
        token = token_from_jwt(text, principal_claim=self.principal_claim)
        return OAuthBearerToken(
            token.value, token.expires_at, token.principal, self.extensions, issued_at=token.issued_at
        )

    def _request(self) -> dict[str, Any]:
        try:
            import httpx
        except ImportError:
            raise KafkaConfigError(
                "the OAuth client-credentials grant needs httpx: pip install 'kafka-core[oauth]'"
            ) from None
        form: dict[str, str] = {"grant_type": "client_credentials"}
        if self.scope:
            form["scope"] = self.scope
        headers = {"Accept": "application/json", "Cache-Control": "no-cache"}
        assert self.client_id is not None and self._client_secret is not None
        if self.client_auth == "basic":
            pair = f"{quote(self.client_id, safe='')}:{quote(str.__str__(self._client_secret), safe='')}"
            headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
        else:
            form["client_id"] = self.client_id
            form["client_secret"] = str.__str__(self._client_secret)
        verify: ssl.SSLContext | str | bool = True
        if self._ssl_context is not None:
            verify = self._ssl_context
        elif self.ssl_cafile:
            verify = ssl.create_default_context(cafile=self.ssl_cafile)
        url = self.token_endpoint_url
        try:
            with httpx.Client(verify=verify, timeout=self.timeout_s, follow_redirects=False) as client:
                response = client.post(url, data=form, headers=headers)
        except httpx.TimeoutException:
            raise KafkaConnectionError(
                f"OAuth token endpoint {url} did not answer within {self.timeout_s:.0f} s"
            ) from None
        except httpx.HTTPError as exc:
            raise KafkaConnectionError(f"cannot reach the OAuth token endpoint {url}: {exc}") from None
        if response.status_code != 200:
            status = response.status_code
            reason = _endpoint_error(response.text)
            if status in (404, 405):
                reason += " (is this URL the token endpoint? it takes a POST)"
            raise (KafkaAuthenticationError if final_status(status) else KafkaConnectionError)(
                f"OAuth token endpoint {url} refused client {self.client_id!r} (HTTP {status}): {reason}"
            )
        try:
            body = response.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            raise KafkaAuthenticationError(f"OAuth token endpoint {url} answered with something not JSON")
        return body


def final_status(status: int) -> bool:
    """An endpoint's refusal that asking again will not change: any 4xx (a wrong URL, method,
    client or scope) but 408 and 429 (a timeout, a rate limit), as Java's token retriever
    judges; a 5xx or those two are retried until the client's deadline."""
    return 400 <= status < 500 and status not in (408, 429)


def _endpoint_error(text: str) -> str:
    """RFC 6749's ``error`` and ``error_description``, else the start of the body."""
    try:
        body = json.loads(text)
    except ValueError:
        body = None
    if isinstance(body, dict) and "error" in body:
        description = body.get("error_description")
        return f"{body['error']}" + (f": {description}" if description else "")
    return text[:300] or "no body"
