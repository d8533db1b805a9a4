"""Where SASL credentials come from: OAuth tokens (a user's provider, or the built-in OIDC
client-credentials grant), cached process-wide and refreshed before they expire; AWS MSK IAM.

The SASL mechanisms themselves live in :mod:`kafka_core.network.sasl`; this package is what a
client builds from its options and hands them.
"""

from __future__ import annotations

from kafka_core.auth.aws import MskIamTokenProvider, aws_credentials_source
from kafka_core.auth.cache import TokenCache, shared_token_cache
from kafka_core.auth.oidc import OidcTokenProvider
from kafka_core.auth.options import mechanism_options, oauth_settings_provider, parse_extensions
from kafka_core.network.sasl import OAuthBearerToken, TokenProvider, TokenSource
from kafka_core.network.sasl.oauthbearer import token_from_jwt
from kafka_core.network.sasl.sigv4 import AwsCredentials

__all__ = [
    "AwsCredentials",
    "MskIamTokenProvider",
    "OAuthBearerToken",
    "OidcTokenProvider",
    "TokenCache",
    "TokenProvider",
    "TokenSource",
    "aws_credentials_source",
    "mechanism_options",
    "oauth_settings_provider",
    "parse_extensions",
    "shared_token_cache",
    "token_from_jwt",
]
