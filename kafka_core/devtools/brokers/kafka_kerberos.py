"""The embedded Apache Kafka's GSSAPI (Kerberos) listener, backed by a :class:`KerberosRealm`.

The broker's service principal is ``kafka/localhost@REALM`` and the listener is advertised as
``localhost``: a client builds the service name from the host it connects to (``kafka@localhost``),
and the realm's krb5.conf turns off DNS canonicalisation, so that name is used as written. Two
client principals get keytabs: ``admin`` (a super user, as the SASL ``admin``) and ``alice``
(governed by ACLs, as the SASL ``alice``); Kafka maps ``name@REALM`` to ``User:name``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # kerberos.py imports this package's common module: no import at run time
    from kafka_core.devtools.kerberos import KerberosRealm

__all__ = ["CLIENTS", "LISTENER", "SERVICE_NAME", "KerberosListener"]

LISTENER = "GSSAPI"
SERVICE_NAME = "kafka"
CLIENTS = ("admin", "alice")
ADVERTISED_HOST = "localhost"


class KerberosListener:
    """What one cluster's GSSAPI listener needs: the broker's keytab, the clients' keytabs, the
    broker properties and the JVM options. The realm must be running; it is not owned here."""

    name = LISTENER
    security_protocol = "SASL_PLAINTEXT"
    advertised_host = ADVERTISED_HOST

    def __init__(self, realm: KerberosRealm) -> None:
        self.realm = realm
        self.service_principal = realm.qualified(f"{SERVICE_NAME}/{ADVERTISED_HOST}")
        self._service_keytab: Path | None = None
        self.client_keytabs: dict[str, Path] = {}

    def prepare(self) -> None:
        """Make the principals and keytabs (once)."""
        if self._service_keytab is None:
            self._service_keytab = self.realm.principal(self.service_principal)
            self.client_keytabs = {self.realm.qualified(n): self.realm.principal(n) for n in CLIENTS}

    def properties(self) -> dict[str, str]:
        assert self._service_keytab is not None, "prepare() first"
        prefix = f"listener.name.{LISTENER.lower()}"
        return {
            f"{prefix}.sasl.enabled.mechanisms": "GSSAPI",
            f"{prefix}.gssapi.sasl.jaas.config": (
                "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true "
                f'keyTab="{self._service_keytab}" principal="{self.service_principal}";'
            ),
            "sasl.kerberos.service.name": SERVICE_NAME,
        }

    def jvm_options(self) -> list[str]:
        return [f"-Djava.security.krb5.conf={self.realm.krb5_conf}"]

    def client(self, name: str = "admin") -> tuple[str, Path]:
        """A client principal (``admin`` or ``alice``) and its keytab."""
        principal = self.realm.qualified(name)
        return principal, self.client_keytabs[principal]

    def describe(self, bootstrap: str) -> dict[str, Any]:
        """The ``"kerberos"`` entry of the dev broker's JSON: credentials that work (the super user's)."""
        principal, keytab = self.client("admin")
        return {
            "listener": LISTENER,
            "bootstrap": bootstrap,
            "realm": self.realm.realm,
            "krb5_conf": str(self.realm.krb5_conf),
            "service_name": SERVICE_NAME,
            "principal": principal,
            "keytab": str(keytab),
            "principals": {p: str(k) for p, k in self.client_keytabs.items()},
        }
