"""The client's flat OAuth options (what ``from_config``, Spark's ``kafka.*`` options and the CLI
give) turned into one cached token provider."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from kafka_core.auth.cache import shared_token_cache
from kafka_core.auth.oidc import OidcTokenProvider
from kafka_core.errors import KafkaConfigError

__all__ = ["mechanism_options", "oauth_settings_provider", "parse_extensions"]

_AWS_OPTIONS = frozenset({"region", "profile", "role_arn", "role_session_name", "sts_region", "credentials"})


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


def mechanism_options(mechanism: str | None, options: Mapping[str, Any] | None) -> dict[str, Any]:
    """``sasl_options`` completed for ``mechanism``: AWS_MSK_IAM gets its credentials source from
    botocore's chain (``profile``, ``role_arn``, ``role_session_name``, ``sts_region``) and its
    ``region`` from ``AWS_REGION`` / ``AWS_DEFAULT_REGION`` when not given."""
    out = dict(options or {})
    if (mechanism or "").strip().upper() != "AWS_MSK_IAM":
        return out
    unknown = sorted(set(out) - _AWS_OPTIONS)
    if unknown:
        raise KafkaConfigError(f"unknown AWS_MSK_IAM sasl_options {unknown}; known: {sorted(_AWS_OPTIONS)}")
    out.setdefault("region", os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION"))
    if "credentials" not in out:
        from kafka_core.auth.aws import DEFAULT_ROLE_SESSION, aws_credentials_source

        out["credentials"] = aws_credentials_source(
            profile=out.pop("profile", None),
            role_arn=out.pop("role_arn", None),
            role_session_name=out.pop("role_session_name", DEFAULT_ROLE_SESSION),
            sts_region=out.pop("sts_region", None),
        )
    return out
