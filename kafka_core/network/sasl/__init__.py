"""SASL client mechanisms, one module each, registered by name (``mechanism.register_mechanism``).

Importing this package imports every built-in mechanism module, so that each registers itself;
a mechanism whose library is optional (GSSAPI's ``gssapi``, AWS's ``botocore``) imports it only
when an exchange starts, and says which extra to install when it is missing.
"""

from __future__ import annotations

from kafka_core.network.sasl import aws_msk_iam as _aws_msk_iam
from kafka_core.network.sasl import gssapi as _gssapi
from kafka_core.network.sasl import oauthbearer as _oauthbearer
from kafka_core.network.sasl import plain as _plain
from kafka_core.network.sasl import scram as _scram
from kafka_core.network.sasl.mechanism import (
    MechanismContext,
    SaslMechanism,
    create_mechanism,
    mechanism_names,
    register_mechanism,
    validate_settings,
)
from kafka_core.network.sasl.oauthbearer import OAuthBearerToken, TokenProvider, TokenSource
from kafka_core.network.sasl.plain import PlainMechanism
from kafka_core.network.sasl.scram import SCRAM_HASHES, ScramMechanism, delegation_token_options, saslprep
from kafka_core.network.sasl.secret import Secret, secret
from kafka_core.network.sasl.settings import KerberosOptions, SaslSettings

__all__ = [
    "SCRAM_HASHES",
    "KerberosOptions",
    "MechanismContext",
    "OAuthBearerToken",
    "PlainMechanism",
    "SaslMechanism",
    "SaslSettings",
    "ScramMechanism",
    "Secret",
    "TokenProvider",
    "TokenSource",
    "create_mechanism",
    "delegation_token_options",
    "make_mechanism",
    "mechanism_names",
    "register_mechanism",
    "saslprep",
    "secret",
    "validate_settings",
]

_BUILT_IN = (_plain, _scram, _oauthbearer, _aws_msk_iam, _gssapi)


def make_mechanism(
    mechanism: str, username: str | None, password: str | None, *, host: str = "", port: int = 0
) -> SaslMechanism:
    """A fresh user/password mechanism for one exchange (kept for callers of the first API;
    :func:`create_mechanism` takes the whole :class:`SaslSettings`)."""
    settings = SaslSettings(mechanism, username=username, password=password)
    return create_mechanism(settings, MechanismContext(host, port))
