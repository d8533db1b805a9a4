"""A real OpenID Connect provider on loopback for OAUTHBEARER: NAV's ``mock-oauth2-server``
(``no.nav.security:mock-oauth2-server`` from Maven Central, run from its jars like the broker).

It issues RS256 JWTs by the client-credentials grant at ``/<issuer>/token`` and serves their keys
at ``/<issuer>/jwks``, which Kafka's own ``OAuthBearerValidatorCallbackHandler`` fetches. One
issuer, :data:`ISSUER`, with these clients (any client secret is accepted: the server does not
check secrets, so a token signed by another key stands for "wrong credentials" in the tests):

- any client id: a token for the audience ``kafka`` whose subject is the client id;
- scope ``not-kafka``: a token for the audience ``not-kafka`` (the broker must refuse it);
- client id ``expired-client``: a token whose ``exp`` lies in 2001 (the broker must refuse it).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Self

from kafka_core.devtools.brokers.common import (
    QUICK_JVM_OPTIONS,
    BrokerStartError,
    die_with_parent,
    free_port,
    read_tail,
    stop_process,
)
from kafka_core.devtools.brokers.kafka_jars import cache_root, maven_copy_dependencies

__all__ = ["AUDIENCE", "CLIENT_ID", "ISSUER", "OAUTH_SERVER_VERSION", "OAuthServer", "oauth_classpath"]

OAUTH_SERVER_VERSION = "6.0.2"
ISSUER = "kafka"
AUDIENCE = "kafka"
CLIENT_ID = "kafka-client"  # the client the dev broker's JSON line names (a super user there)
EXPIRED_CLIENT_ID = "expired-client"
WRONG_AUDIENCE_SCOPE = "not-kafka"
_MAIN = "no.nav.security.mock.oauth2.StandaloneMockOAuth2ServerKt"


def oauth_classpath(version: str = OAUTH_SERVER_VERSION, *, timeout: float = 900.0) -> Path:
    """The folder of mock-oauth2-server's jars, resolved with Maven once into the user cache."""
    return maven_copy_dependencies(
        "oauth-server.pom.xml",
        cache_root() / "oauth-server" / version / "libs",
        properties={"oauth.server.version": version},
        expect="mock-oauth2-server-*.jar",
        what=f"mock-oauth2-server {version} (no.nav.security:mock-oauth2-server)",
        timeout=timeout,
    )


def server_config(token_expiry_s: int) -> dict[str, Any]:
    """The provider's JSON_CONFIG: the request mappings the module docstring lists."""
    return {
        "interactiveLogin": False,
        "tokenCallbacks": [
            {
                "issuerId": ISSUER,
                "tokenExpiry": token_expiry_s,
                "requestMappings": [
                    {
                        "requestParam": "client_id",
                        "match": EXPIRED_CLIENT_ID,
                        "claims": {"sub": EXPIRED_CLIENT_ID, "aud": [AUDIENCE], "exp": 1_000_000_000},
                    },
                    {
                        "requestParam": "scope",
                        "match": WRONG_AUDIENCE_SCOPE,
                        "claims": {"sub": "${clientId}", "aud": [WRONG_AUDIENCE_SCOPE]},
                    },
                    {
                        "requestParam": "client_id",
                        "match": "*",
                        "claims": {"sub": "${clientId}", "aud": [AUDIENCE]},
                    },
                ],
            }
        ],
    }


class OAuthServer:
    """``start()`` fetches the jars (first use), starts the provider on a free loopback port and
    returns once its discovery document answers; ``stop()`` ends it; ``pause()``/``resume()``
    (SIGSTOP/SIGCONT) make the token endpoint unreachable for a while without losing its keys.
    Tokens live ``token_expiry_s`` seconds."""

    def __init__(
        self,
        *,
        token_expiry_s: int = 3600,
        host: str = "127.0.0.1",
        version: str = OAUTH_SERVER_VERSION,
        startup_timeout: float = 90.0,
    ) -> None:
        self.host = host
        self.port = 0
        self.version = version
        self.token_expiry_s = token_expiry_s
        self.startup_timeout = startup_timeout
        # Shown to users as the client's credentials; the provider accepts any secret.
        self.client_secret = secrets.token_urlsafe(16)
        self.workdir = Path(tempfile.mkdtemp(prefix="oauth-server-"))
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def issuer(self) -> str:
        return f"http://{self.host}:{self.port}/{ISSUER}"

    @property
    def token_endpoint(self) -> str:
        return f"{self.issuer}/token"

    @property
    def jwks_url(self) -> str:
        return f"{self.issuer}/jwks"

    @property
    def log_path(self) -> Path:
        return self.workdir / "server.log"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> Self:
        classpath = oauth_classpath(self.version)
        java = shutil.which("java")
        if java is None:
            raise BrokerStartError("mock-oauth2-server needs `java` on PATH (a Java 17+ runtime)")
        config = self.workdir / "config.json"
        config.write_text(json.dumps(server_config(self.token_expiry_s)))
        self.port = free_port(self.host)
        env = {
            **os.environ,
            "SERVER_HOSTNAME": self.host,
            "SERVER_PORT": str(self.port),
            "JSON_CONFIG_PATH": str(config),
        }
        env.pop("JAVA_TOOL_OPTIONS", None)
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                [
                    java,
                    "-Xmx128m",
                    *QUICK_JVM_OPTIONS,
                    "-cp",
                    f"{classpath}/*",
                    _MAIN,
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                preexec_fn=die_with_parent if sys.platform == "linux" else None,
            )
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        url = f"{self.issuer}/.well-known/openid-configuration"
        while True:
            if not self.running:
                code = self.proc.returncode if self.proc is not None else None
                self.stop()
                raise BrokerStartError(
                    f"mock-oauth2-server exited with {code} while starting: {read_tail(self.log_path, 1500)}"
                )
            try:
                with urllib.request.urlopen(url, timeout=2) as answer:
                    if answer.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise BrokerStartError(
                    f"mock-oauth2-server did not answer within {self.startup_timeout:.0f} s: "
                    f"{read_tail(self.log_path, 1500)}"
                )
            time.sleep(0.2)

    def pause(self) -> None:
        """The token endpoint stops answering (the process is stopped, its socket stays open)."""
        if self.proc is not None:
            self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        if self.proc is not None:
            self.proc.send_signal(18)  # SIGCONT

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None:
            proc.send_signal(signal.SIGCONT)  # a paused JVM cannot act on SIGTERM
            stop_process(proc, 10.0)

    def close(self) -> None:
        try:
            self.stop()
        finally:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def describe(self, bootstrap: str, listener: str) -> dict[str, str]:
        """The dev broker's ``"oauth"`` JSON entry: credentials that log in on ``listener``."""
        return {
            "listener": listener,
            "bootstrap": bootstrap,
            "token_endpoint": self.token_endpoint,
            "client_id": CLIENT_ID,
            "client_secret": self.client_secret,
        }

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"OAuthServer({self.issuer!r}, token_expiry_s={self.token_expiry_s})"
