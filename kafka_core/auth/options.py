"""The client's flat OAuth options (what ``from_config``, Spark's ``kafka.*`` options and the CLI
give) turned into one cached token provider."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafka_core.auth.cache import shared_token_cache
from kafka_core.auth.oidc import OidcTokenProvider
from kafka_core.errors import KafkaConfigError

__all__ = ["oauth_settings_provider", "parse_extensions"]


def parse_extensions(value: Mapping[str, str] | str | None) -> dict[str, str]:
    """SASL extensions from a mapping or librdkafka's ``"k1=v1,k2=v2"``."""
    if value is None:
        return {}
    if isinstance(value, Mapping):
        return {str(k): str(v) for k, v in value.items()}
    out: dict[str, str] = {}
    for item in str(value).split(","):
        if not item.strip():
            continue
        key, sep, val = item.partition("=")
        if not sep:
            raise KafkaConfigError(f"a SASL extension is key=value, not {item.strip()!r}")
        out[key.strip()] = val.strip()
    return out


def oauth_settings_provider(
    *,
    token_provider: Any = None,
    token_endpoint_url: str | None = None,
    client_id: str | None = None,
    client_secret: str | None = None,
    scope: str | None = None,
    extensions: Mapping[str, str] | str | None = None,
    ssl_cafile: str | None = None,
) -> Any:
    """The token source for a client: the user's provider, or the built-in OIDC one for a token
    endpoint, wrapped in the process-wide cache; None when neither is given."""
    if token_provider is not None and token_endpoint_url is not None:
        raise KafkaConfigError("give sasl_oauth_token_provider or sasl_oauth_token_endpoint_url, not both")
    if token_endpoint_url is not None:
        token_provider = OidcTokenProvider(
            token_endpoint_url,
            client_id,
            client_secret,
            scope=scope,
            extensions=parse_extensions(extensions),
            ssl_cafile=ssl_cafile,
        )
    elif client_id is not None or client_secret is not None:
        raise KafkaConfigError("sasl_oauth_client_id/_secret need sasl_oauth_token_endpoint_url")
    return None if token_provider is None else shared_token_cache(token_provider)
