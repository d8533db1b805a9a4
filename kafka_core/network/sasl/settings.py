"""What a connection needs to log in, in one immutable value passed from the client down.

The client builds a :class:`SaslSettings` once from its options and hands the same object to every
connection; each mechanism reads its own part (credentials, a token provider, Kerberos or AWS
options). Secrets are held as :class:`~kafka_core.network.sasl.secret.Secret` and every field
that could carry one is left out of ``repr``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kafka_core.network.sasl.secret import secret

__all__ = ["KerberosOptions", "SaslSettings"]


@dataclass(frozen=True, slots=True)
class KerberosOptions:
    """GSSAPI's options, as Java's ``sasl.kerberos.*`` and ``Krb5LoginModule``'s (the GSSAPI
    mechanism reads them; ``service_name`` is the broker principal's first part)."""

    service_name: str = "kafka"
    principal: str | None = None
    keytab: str | None = field(default=None, repr=False)  # a path to secrets: out of reprs
    host_name: str | None = None


@dataclass(frozen=True, slots=True)
class SaslSettings:
    """One client's SASL configuration.

    ``token_provider`` is for OAUTHBEARER (see :mod:`kafka_core.auth`): a callable, sync or async,
    returning an :class:`~kafka_core.auth.OAuthBearerToken`; ``extra`` carries options a mechanism
    module defines for itself (e.g. AWS_MSK_IAM's region), so adding one needs no change here.
    """

    mechanism: str
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    token_provider: Any = field(default=None, repr=False)
    kerberos: KerberosOptions | None = None
    extra: tuple[tuple[str, Any], ...] = field(default=(), repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "mechanism", self.mechanism.strip().upper())
        object.__setattr__(self, "password", secret(self.password))

    def option(self, name: str, default: Any = None) -> Any:
        """The mechanism-specific option ``name`` from ``extra``."""
        for key, value in self.extra:
            if key == name:
                return value
        return default
