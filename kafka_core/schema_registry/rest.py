"""HTTP to the registry over httpx: the URLs in turn, retries of what may pass on a retry, auth
headers, TLS with the user's CA, one deadline per call; registry errors as SchemaRegistryError.

Secrets (passwords, tokens, client secrets) live only in the auth objects below, whose repr
hides them, and never go into an error's text.
"""

from __future__ import annotations

import base64
import os
import random
import ssl
import threading
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote, urlsplit, urlunsplit

import httpx

from kafka_core.auth.oidc import OidcTokenProvider
from kafka_core.errors import KafkaConfigError, KafkaError, SchemaRegistryError, SchemaRegistryTimeoutError

__all__ = ["RestClient", "RestConfig", "urlencode"]

_ACCEPT = "application/vnd.schemaregistry.v1+json, application/vnd.schemaregistry+json, application/json"
_RETRIABLE_STATUS = frozenset({408, 429, 500, 502, 503, 504})


def urlencode(value: str) -> str:
    return quote(value, safe="")


class _Secret:
    """A credential's value, hidden from repr and str."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "<hidden>"

    __str__ = __repr__


class _BasicAuth:
    def __init__(self, user: str, password: str) -> None:
        self.user = user
        self._header = _Secret("Basic " + base64.b64encode(f"{user}:{password}".encode()).decode())

    def headers(self, deadline: float) -> dict[str, str]:
        return {"Authorization": self._header.reveal()}

    def __repr__(self) -> str:
        return f"BasicAuth(user={self.user!r})"


class _StaticBearer:
    def __init__(self, token: str, extra: dict[str, str]) -> None:
        self._token = _Secret(token)
        self._extra = extra

    def headers(self, deadline: float) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._token.reveal()}", **self._extra}

    def __repr__(self) -> str:
        return "StaticBearer()"


class _OAuthBearer:
    """OAuth 2 client credentials: the project's OIDC grant (kafka_core.auth), its token reused
    until 80 % of its life has passed."""

    def __init__(self, provider: OidcTokenProvider, extra: dict[str, str]) -> None:
        self._provider = provider
        self._extra = extra
        self._lock = threading.Lock()  # guards _token and _refresh_at
        self._token: _Secret | None = None
        self._refresh_at = 0.0

    def headers(self, deadline: float) -> dict[str, str]:
        with self._lock:
            if self._token is None or time.time() >= self._refresh_at:
                try:
                    token = self._provider()
                except KafkaError as exc:
                    raise SchemaRegistryError(-1, -1, f"no OAuth token for the registry: {exc}") from None
                now = time.time()
                self._token = _Secret(token.value)
                self._refresh_at = now + 0.8 * max(0.0, token.expires_at - now)
            return {"Authorization": f"Bearer {self._token.reveal()}", **self._extra}

    def __repr__(self) -> str:
        return f"OAuthBearer({self._provider!r})"


@dataclass
class RestConfig:
    """The connection half of the client's configuration (confluent-kafka's keys)."""

    urls: list[str]
    verify: ssl.SSLContext
    auth: Any
    timeout: float
    max_retries: int
    retries_wait_ms: int
    retries_max_wait_ms: int
    proxy: str | None

    @classmethod
    def pop_from(cls, conf: dict[str, Any]) -> RestConfig:
        """Takes its keys out of ``conf`` (what is left is the caller's or unknown)."""
        raw = conf.pop("url", None)
        if not isinstance(raw, str) or not raw.strip():
            raise KafkaConfigError(
                "schema registry: 'url' is required (one URL, or several separated by commas)"
            )
        urls: list[str] = []
        url_user: tuple[str, str] | None = None
        for part in raw.split(","):
            parsed = urlsplit(part.strip().rstrip("/"))
            if parsed.scheme not in ("http", "https") or not parsed.hostname:
                raise KafkaConfigError(f"schema registry: invalid url {_without_userinfo(part.strip())!r}")
            if parsed.username is not None:
                url_user = (unquote(parsed.username), unquote(parsed.password or ""))
            urls.append(_without_userinfo(part.strip().rstrip("/")))
        verify = _ssl_context(conf)
        timeout = float(conf.pop("timeout", 30.0) or 30.0)
        if timeout <= 0:
            raise KafkaConfigError("schema registry: 'timeout' must be positive (seconds)")
        auth = _auth(conf, url_user, verify, timeout)
        return cls(
            urls=urls,
            verify=verify,
            auth=auth,
            timeout=timeout,
            max_retries=int(conf.pop("max.retries", 3)),
            retries_wait_ms=int(conf.pop("retries.wait.ms", 1000)),
            retries_max_wait_ms=int(conf.pop("retries.max.wait.ms", 20000)),
            proxy=conf.pop("proxy", None),
        )


def _without_userinfo(url: str) -> str:
    parsed = urlsplit(url)
    if parsed.username is None:
        return url
    netloc = parsed.hostname or ""
    if ":" in netloc:  # an IPv6 address keeps its brackets
        netloc = f"[{netloc}]"
    if parsed.port:
        netloc += f":{parsed.port}"
    return urlunsplit((parsed.scheme, netloc, parsed.path, parsed.query, parsed.fragment))


def _ssl_context(conf: dict[str, Any]) -> ssl.SSLContext:
    ca = conf.pop("ssl.ca.location", None)
    cert = conf.pop("ssl.certificate.location", None)
    key = conf.pop("ssl.key.location", None)
    key_password = conf.pop("ssl.key.password", None)
    try:
        if ca is False:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        elif isinstance(ca, str):
            context = (
                ssl.create_default_context(capath=ca)
                if os.path.isdir(ca)
                else ssl.create_default_context(cafile=ca)
            )
        else:
            context = ssl.create_default_context()
        if cert is not None:
            context.load_cert_chain(certfile=cert, keyfile=key, password=key_password)
    except (OSError, ssl.SSLError) as exc:
        raise KafkaConfigError(
            f"schema registry: cannot load the TLS files: {type(exc).__name__}: {exc.strerror or exc}"
        ) from None
    if cert is None and (key is not None or key_password is not None):
        raise KafkaConfigError("schema registry: ssl.key.location needs ssl.certificate.location")
    return context


def _auth(
    conf: dict[str, Any], url_user: tuple[str, str] | None, verify: ssl.SSLContext, timeout: float
) -> Any:
    source = str(
        conf.pop("basic.auth.credentials.source", "USER_INFO" if "basic.auth.user.info" in conf else "URL")
    )
    if source.upper() not in ("URL", "USER_INFO"):
        raise KafkaConfigError(
            f"schema registry: basic.auth.credentials.source {source!r} is not supported here (URL or USER_INFO)"
        )
    user_info = conf.pop("basic.auth.user.info", None)
    bearer_source = conf.pop("bearer.auth.credentials.source", None)
    extra = {}
    cluster = conf.pop("bearer.auth.logical.cluster", None)
    pool = conf.pop("bearer.auth.identity.pool.id", None)
    if cluster:
        extra["target-sr-cluster"] = str(cluster)
    if pool:
        extra["Confluent-Identity-Pool-Id"] = str(pool)
    token = conf.pop("bearer.auth.token", None)
    oauth = {
        k: conf.pop(k, None)
        for k in (
            "bearer.auth.client.id",
            "bearer.auth.client.secret",
            "bearer.auth.scope",
            "bearer.auth.issuer.endpoint.url",
        )
    }
    if bearer_source is not None:
        if user_info is not None or url_user is not None:
            raise KafkaConfigError("schema registry: basic auth and bearer auth are exclusive")
        if str(bearer_source).upper() == "STATIC_TOKEN":
            if not token:
                raise KafkaConfigError("schema registry: STATIC_TOKEN needs bearer.auth.token")
            return _StaticBearer(str(token), extra)
        if str(bearer_source).upper() == "OAUTHBEARER":
            missing = [
                k
                for k in (
                    "bearer.auth.client.id",
                    "bearer.auth.client.secret",
                    "bearer.auth.issuer.endpoint.url",
                )
                if not oauth[k]
            ]
            if missing:
                raise KafkaConfigError(f"schema registry: OAUTHBEARER needs {', '.join(missing)}")
            provider = OidcTokenProvider(
                str(oauth["bearer.auth.issuer.endpoint.url"]),
                str(oauth["bearer.auth.client.id"]),
                str(oauth["bearer.auth.client.secret"]),
                scope=oauth["bearer.auth.scope"],
                ssl_context=verify,
                timeout_s=timeout,
            )
            return _OAuthBearer(provider, extra)
        raise KafkaConfigError(
            f"schema registry: bearer.auth.credentials.source {bearer_source!r} is not one of STATIC_TOKEN, OAUTHBEARER"
        )
    if user_info is not None:
        if url_user is not None:
            raise KafkaConfigError(
                "schema registry: give credentials in the url or in basic.auth.user.info, not both"
            )
        user, sep, password = str(user_info).partition(":")
        if not sep:
            raise KafkaConfigError("schema registry: basic.auth.user.info must be USER:PASSWORD")
        return _BasicAuth(user, password)
    if url_user is not None and source.upper() in ("URL", "USER_INFO"):
        return _BasicAuth(*url_user)
    return None


class RestClient:
    """One httpx.Client (kept-alive connections) shared by the caller's threads."""

    def __init__(self, config: RestConfig) -> None:
        self._config = config
        self._http = httpx.Client(verify=config.verify, proxy=config.proxy, headers={"Accept": _ACCEPT})

    @property
    def urls(self) -> list[str]:
        return list(self._config.urls)

    def close(self) -> None:
        self._http.close()

    def request(self, method: str, path: str, body: Any = None, query: dict[str, Any] | None = None) -> Any:
        """The decoded JSON answer; SchemaRegistryError for an error answer, none in time, or no URL reachable."""
        config = self._config
        deadline = time.monotonic() + config.timeout
        params = {k: _query_value(v) for k, v in (query or {}).items() if v is not None}
        attempt = 0
        while True:
            last: SchemaRegistryError | None = None
            for base in config.urls:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise SchemaRegistryTimeoutError(
                        -1,
                        -1,
                        f"{method} /{path}: no answer from the registry within {config.timeout} s"
                        + (f" (last: {last.error_message})" if last else ""),
                    )
                headers = config.auth.headers(deadline) if config.auth is not None else {}
                try:
                    answer = self._http.request(
                        method,
                        f"{base}/{path}",
                        json=body,
                        params=params,
                        headers=headers,
                        timeout=remaining,
                    )
                except httpx.TimeoutException:
                    last = SchemaRegistryTimeoutError(
                        -1, -1, f"{method} /{path}: {base} did not answer within {config.timeout} s"
                    )
                    continue
                except httpx.HTTPError as exc:
                    last = SchemaRegistryError(
                        -1, -1, f"{method} /{path}: cannot reach {base}: {type(exc).__name__}: {exc}"
                    )
                    continue
                if answer.status_code < 400:
                    return answer.json() if answer.content else None
                last = _error_of(answer)
                if answer.status_code not in _RETRIABLE_STATUS:
                    raise last
            assert last is not None
            if attempt >= config.max_retries:
                raise last
            pause = min(config.retries_max_wait_ms, config.retries_wait_ms * 2**attempt) / 1000
            pause *= random.uniform(0.8, 1.0)
            if time.monotonic() + pause >= deadline:
                if isinstance(last, SchemaRegistryTimeoutError):
                    raise last
                raise SchemaRegistryTimeoutError(
                    last.http_status_code,
                    last.error_code,
                    f"{method} /{path}: gave up within {config.timeout} s (last: {last.error_message})",
                )
            time.sleep(pause)
            attempt += 1


def _query_value(value: Any) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def _error_of(answer: httpx.Response) -> SchemaRegistryError:
    try:
        body = answer.json()
        code = int(body.get("error_code", answer.status_code))
        message = str(body.get("message", answer.reason_phrase))
    except (ValueError, AttributeError, TypeError):
        code, message = (
            -1,
            f"{answer.reason_phrase or 'error'} (not a registry answer: {answer.text[:200]!r})",
        )
    return SchemaRegistryError(answer.status_code, code, message)
