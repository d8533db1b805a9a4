"""SASL GSSAPI (Kerberos V5), as Kafka speaks it (RFC 4752): a GSS-API security context for
``service@host``, then the security-layer negotiation, choosing no security layer (Kafka has none).

Through PyPI's ``gssapi`` (the ``gssapi`` extra), imported when a client is built for GSSAPI
(checking its options), so the library imports without it. Credentials come
from a keytab (``sasl_kerberos_keytab`` with ``sasl_kerberos_principal``; the tickets got with it are
kept in a process-wide in-memory cache per principal and keytab, so the KDC is asked once, not per
connection) or else from the ticket cache (``KRB5CCNAME``, ``kinit``). The KDC round trips block,
so the steps run in a worker thread, bounded by the connection's timeout.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import struct
from typing import Any

from kafka_core.errors import KafkaAuthenticationError, KafkaConfigError
from kafka_core.network.sasl.mechanism import MechanismContext, SaslMechanism, register_mechanism
from kafka_core.network.sasl.settings import KerberosOptions, SaslSettings

__all__ = ["GssapiMechanism", "keytab_principals", "load_gssapi"]

NAME = "GSSAPI"
# RFC 4752 section 3.3: the security layers, as bits of the first octet.
NO_SECURITY_LAYER = 0x01


def load_gssapi() -> Any:
    """The ``gssapi`` module, or a :class:`KafkaConfigError` naming the extra that provides it."""
    try:
        import gssapi
    except ImportError as exc:
        raise KafkaConfigError(
            "sasl_mechanism='GSSAPI' needs the gssapi package: pip install 'kafka-core[gssapi]' "
            f"(it builds against MIT Kerberos's headers, e.g. Debian's libkrb5-dev) ({exc})"
        ) from None
    return gssapi


def _status(exc: Exception) -> str:
    """A GSSError's text, cause first: 'Major (851968): Unspecified GSS failure..., Minor (...):
    Client not found' -> 'Client not found (Unspecified GSS failure...)'."""
    text = str(exc)
    match = re.fullmatch(r"Major \(\d+\): (.*?), Minor \(\d+\): (.*)", text, re.S)
    if match is None:
        return text
    major, minor = match.group(1).strip().rstrip("."), match.group(2).strip().rstrip(".")
    return f"{minor} ({major})" if minor and minor.lower() != "unknown error" else major


def keytab_principals(path: str) -> list[str]:
    """The principals a keytab file holds keys for (MIT's format, version 0x502), to say why
    credentials could not be had; the keys themselves are skipped, never kept."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:2] != b"\x05\x02":
        raise ValueError("not a version 0x502 keytab")
    names: list[str] = []
    pos = 2
    while pos + 4 <= len(data):
        (size,) = struct.unpack_from(">i", data, pos)
        pos += 4
        if size <= 0:  # a hole left by a removed entry
            pos += -size
            continue
        entry, pos = data[pos : pos + size], pos + size
        (count,) = struct.unpack_from(">H", entry, 0)
        at, parts = 2, []
        for _ in range(count + 1):  # the realm, then the components
            (length,) = struct.unpack_from(">H", entry, at)
            parts.append(entry[at + 2 : at + 2 + length].decode("utf-8", "replace"))
            at += 2 + length
        name = "/".join(parts[1:]) + "@" + parts[0]
        if name not in names:
            names.append(name)
    return names


def _keytab_problem(path: str, principal: str | None) -> str | None:
    """Why a keytab cannot give ``principal`` credentials, when the file itself says so."""
    if not os.access(path, os.R_OK):
        return "the keytab (sasl_kerberos_keytab) does not exist or cannot be read"
    try:
        held = keytab_principals(path)
    except (OSError, ValueError, struct.error, IndexError):
        return "the keytab (sasl_kerberos_keytab) is not a Kerberos keytab"
    if principal and not any(principal in (name, name.split("@")[0]) for name in held):
        return f"the keytab holds no key for {principal} (it holds {', '.join(held) or 'none'})"
    return None


# What MIT says when the KDC could not decrypt what a key made: the key is not the principal's.
_STALE_KEY = ("Preauthentication failed", "Decrypt integrity check failed", "Password incorrect")


class GssapiMechanism(SaslMechanism):
    """One GSSAPI exchange with the broker at ``host``."""

    name = NAME

    def __init__(self, options: KerberosOptions, host: str) -> None:
        self._options = options
        self._host = options.host_name or host
        self._target = f"{options.service_name}@{self._host}"
        self._context: Any = None
        self._state = "start"  # start -> context -> layer-sent -> done

    def __repr__(self) -> str:
        return f"<GssapiMechanism {self._target} principal={self._options.principal} {self._state}>"

    async def evaluate(self, challenge: bytes | None) -> bytes | None:
        # A step may ask the KDC for tickets (blocking network I/O): off the event loop.
        return await asyncio.to_thread(self.step, challenge)

    @property
    def complete(self) -> bool:
        return self._state == "done"

    def step(self, challenge: bytes | None) -> bytes | None:
        gssapi = load_gssapi()
        try:
            if self._state == "start":
                self._context = self._new_context(gssapi)
                self._state = "context"
                return self._context.step() or b""
            if self._state == "context":
                if not self._context.complete:
                    token = self._context.step(challenge or None)
                    # Established by the broker's last token (mutual authentication): an empty
                    # message asks it for the security-layer offer.
                    return token if token is not None else b""
                reply = self._security_layer(challenge or b"")
                self._state = "layer-sent"
                return reply
            if self._state == "layer-sent":
                self._state = "done"
                return None
        except gssapi.exceptions.GSSError as exc:
            raise KafkaAuthenticationError(
                f"SASL GSSAPI authentication as {self._who()} to {self._target} failed: {_status(exc)}"
            ) from None
        return None

    def _who(self) -> str:
        return self._options.principal or "the ticket cache's principal"

    def _new_context(self, gssapi: Any) -> Any:
        options = self._options
        name = None
        if options.principal:
            name = gssapi.Name(options.principal, gssapi.NameType.kerberos_principal)
        store = None
        if options.keytab:
            # A MEMORY cache named for this principal and keytab: every connection of the process
            # shares its tickets, which MIT renews from the keytab when they run out.
            key = hashlib.sha256(f"{options.principal}\0{options.keytab}".encode()).hexdigest()[:24]
            store = {"client_keytab": options.keytab, "ccache": f"MEMORY:kafka-core-{key}"}
        try:
            creds = gssapi.Credentials(name=name, usage="initiate", store=store)
        except gssapi.exceptions.GSSError as exc:
            cause = _status(exc)
            if options.keytab:
                source = "its keytab"
                cause = _keytab_problem(options.keytab, options.principal) or cause
                if any(sign in cause for sign in _STALE_KEY):
                    cause += "; the keytab's key is not the principal's current one (a wrong or stale keytab)"
            else:
                source = "the ticket cache (KRB5CCNAME; kinit)"
            raise KafkaAuthenticationError(
                f"SASL GSSAPI authentication as {self._who()} to {self._target} failed: "
                f"no Kerberos credentials from {source}: {cause}"
            ) from None
        flags = gssapi.RequirementFlag.mutual_authentication | gssapi.RequirementFlag.integrity
        target = gssapi.Name(self._target, gssapi.NameType.hostbased_service)
        return gssapi.SecurityContext(name=target, creds=creds, usage="initiate", flags=flags)

    def _security_layer(self, challenge: bytes) -> bytes:
        """RFC 4752 3.1: unwrap the broker's offer (layers, max size), choose no security layer
        (max size then 0), name the authorization identity (the authenticated principal, as
        Java's client), wrap it without confidentiality."""
        if not challenge:
            raise KafkaAuthenticationError(
                f"SASL GSSAPI authentication to {self._target} failed: no security-layer offer"
            )
        offer = self._context.unwrap(challenge).message
        if len(offer) != 4:
            raise KafkaAuthenticationError(
                f"SASL GSSAPI authentication to {self._target} failed: a security-layer offer of "
                f"{len(offer)} bytes, not 4"
            )
        if not offer[0] & NO_SECURITY_LAYER:
            raise KafkaAuthenticationError(
                f"SASL GSSAPI authentication to {self._target} failed: the broker requires a "
                f"security layer (offer {offer[0]:#04x}), which Kafka clients do not use"
            )
        identity = str(self._context.initiator_name).encode()
        reply = bytes([NO_SECURITY_LAYER, 0, 0, 0]) + identity
        return bytes(self._context.wrap(reply, False).message)


def _validate(settings: SaslSettings) -> None:
    load_gssapi()  # a missing extra is a config error at construction, not at the first connection
    options = settings.kerberos or KerberosOptions()
    if not options.service_name:
        raise KafkaConfigError("GSSAPI needs sasl_kerberos_service_name (the broker principal's first part)")
    if options.keytab and not options.principal:
        raise KafkaConfigError(
            "GSSAPI with sasl_kerberos_keytab needs sasl_kerberos_principal (whose key it holds)"
        )


def _create(settings: SaslSettings, context: MechanismContext) -> SaslMechanism:
    return GssapiMechanism(settings.kerberos or KerberosOptions(), context.host)


register_mechanism(NAME, _create, _validate)
