"""TLS context construction from the usual Kafka options (CA file, client cert/key, hostname check)."""

from __future__ import annotations

import ssl

from kafka_core.errors import KafkaConfigError


def build_ssl_context(
    *,
    cafile: str | None = None,
    certfile: str | None = None,
    keyfile: str | None = None,
    password: str | None = None,
    check_hostname: bool = True,
) -> ssl.SSLContext:
    """A client context that verifies the broker's certificate (and, by default, its host name).

    Without ``cafile`` the system trust store is used. Turning ``check_hostname`` off keeps chain
    verification on: certificates are still checked, only the name match is skipped.
    """
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        if cafile:
            ctx.load_verify_locations(cafile=cafile)
        if certfile:
            ctx.load_cert_chain(certfile, keyfile, password)
        elif keyfile:
            raise KafkaConfigError("ssl_keyfile given without ssl_certfile")
    except (OSError, ssl.SSLError) as exc:
        raise KafkaConfigError(f"cannot load TLS material: {exc}") from exc
    ctx.check_hostname = check_hostname
    ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx
