"""A throwaway MIT Kerberos realm on loopback, for the GSSAPI tests and the dev broker's GSSAPI
listener: its own database, ``krb5kdc -n`` on a free TCP port, a ``krb5.conf`` for clients and the
JVM, and principals with keytabs made on demand.

Nothing outside its directory is touched: clients find the realm through ``KRB5_CONFIG`` (see
:attr:`KerberosRealm.env`), never ``/etc/krb5.conf``. Needs Debian's ``krb5-kdc`` and
``krb5-admin-server`` (``ci/kerberos.sh`` installs them).
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Self

from kafka_core.devtools.brokers.common import (
    BrokerStartError,
    die_with_parent,
    free_port,
    port_open,
    read_tail,
    stop_process,
)

__all__ = ["DEFAULT_REALM", "KerberosError", "KerberosRealm", "kerberos_available", "kerberos_tools"]

DEFAULT_REALM = "KAFKA-CORE.TEST"
# Where Debian puts the KDC's programs; not on a non-root user's PATH.
_SBIN = ("/usr/sbin", "/usr/local/sbin", "/sbin")
_TOOLS = ("krb5kdc", "kdb5_util", "kadmin.local")
# Enctypes Java 17's Krb5LoginModule and MIT both take; MIT 1.20 would otherwise also make
# aes-sha2 keys, which older JDKs refuse.
_ENCTYPES = "aes256-cts-hmac-sha1-96 aes128-cts-hmac-sha1-96"


class KerberosError(BrokerStartError):
    """The realm could not be made or its KDC did not start (names the tool and its output)."""


def kerberos_tools() -> dict[str, str] | None:
    """The MIT KDC programs' paths, or None when any is missing."""
    path = os.pathsep.join([os.environ.get("PATH", ""), *_SBIN])
    found = {tool: shutil.which(tool, path=path) for tool in _TOOLS}
    if any(where is None for where in found.values()):
        return None
    return {tool: str(where) for tool, where in found.items()}


def kerberos_available() -> bool:
    """Whether a realm can be started here (the MIT KDC packages are installed)."""
    return kerberos_tools() is not None


class KerberosRealm:
    """A realm whose KDC runs until :meth:`close`. ``start()`` makes the database and starts the
    KDC; ``principal(name)`` adds a principal with a random key and returns its keytab."""

    def __init__(
        self,
        realm: str = DEFAULT_REALM,
        *,
        workdir: Path | None = None,
        host: str = "127.0.0.1",
        startup_timeout: float = 30.0,
    ) -> None:
        self.realm = realm
        self.host = host
        self.startup_timeout = startup_timeout
        self._owns_workdir = workdir is None
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="kafka-core-krb5-"))
        self.port = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._tools: dict[str, str] | None = None
        self._keytabs: dict[str, Path] = {}

    # -- files ----------------------------------------------------------------------------------

    @property
    def krb5_conf(self) -> Path:
        """The client configuration: ``KRB5_CONFIG`` for MIT, ``-Djava.security.krb5.conf`` for Java."""
        return self.workdir / "krb5.conf"

    @property
    def kdc_conf(self) -> Path:
        return self.workdir / "kdc.conf"

    @property
    def log_path(self) -> Path:
        return self.workdir / "kdc.log"

    @property
    def env(self) -> dict[str, str]:
        """What a process needs in its environment to use this realm and only this one (its own
        ticket cache too, so a user's tickets are neither used nor overwritten)."""
        return {
            "KRB5_CONFIG": str(self.krb5_conf),
            "KRB5_KDC_PROFILE": str(self.kdc_conf),
            "KRB5CCNAME": f"FILE:{self.workdir / 'ccache'}",
        }

    def _write_configs(self) -> None:
        d = self.workdir
        self.kdc_conf.write_text(
            f"""[kdcdefaults]
 kdc_listen = {self.host}:{self.port}
 kdc_tcp_listen = {self.host}:{self.port}

[realms]
 {self.realm} = {{
  database_name = {d / "principal"}
  key_stash_file = {d / "stash"}
  acl_file = {d / "kadm5.acl"}
  kdc_listen = {self.host}:{self.port}
  kdc_tcp_listen = {self.host}:{self.port}
  max_life = 10h
  max_renewable_life = 1d
  supported_enctypes = {" ".join(e + ":normal" for e in _ENCTYPES.split())}
 }}

[logging]
 kdc = FILE:{self.log_path}
"""
        )
        # udp_preference_limit = 1: always TCP (one port to pick); no DNS: names are taken as written.
        self.krb5_conf.write_text(
            f"""[libdefaults]
 default_realm = {self.realm}
 dns_lookup_kdc = false
 dns_lookup_realm = false
 dns_canonicalize_hostname = false
 rdns = false
 udp_preference_limit = 1
 ignore_acceptor_hostname = false
 permitted_enctypes = {_ENCTYPES}
 default_tkt_enctypes = {_ENCTYPES}
 default_tgs_enctypes = {_ENCTYPES}
 kdc_timeout = 5000
 max_retries = 2

[realms]
 {self.realm} = {{
  kdc = {self.host}:{self.port}
 }}

[domain_realm]
 localhost = {self.realm}
 {self.host} = {self.realm}
"""
        )
        (d / "kadm5.acl").write_text(f"*/admin@{self.realm} *\n")

    # -- lifecycle ------------------------------------------------------------------------------

    def _run(self, tool: str, *args: str, timeout: float = 30.0) -> str:
        assert self._tools is not None
        try:
            proc = subprocess.run(
                [self._tools[tool], *args],
                env={**os.environ, **self.env},
                capture_output=True,
                text=True,
                timeout=timeout,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired as exc:
            raise KerberosError(f"{tool} did not finish within {timeout:.0f} s") from exc
        # kadmin.local exits 0 whatever its query did: what it says on stderr is the verdict
        # (bar the notice that a principal gets no password policy).
        complaints = [
            line
            for line in proc.stderr.splitlines()
            if line.strip() and not line.startswith("No policy specified") and "already exists" not in line
        ]
        if proc.returncode != 0 or (tool == "kadmin.local" and complaints):
            what = " ".join(args[-1:]) if tool == "kadmin.local" else args[0]
            raise KerberosError(
                f"{tool} {what!r} failed ({proc.returncode}): {(proc.stderr or proc.stdout)[-800:]}"
            )
        return proc.stdout

    def start(self) -> Self:
        """Make the database and start the KDC; return once it takes connections."""
        self._tools = kerberos_tools()
        if self._tools is None:
            raise KerberosError(
                "a Kerberos realm needs MIT Kerberos's KDC (krb5kdc, kdb5_util, kadmin.local): "
                "apt-get install krb5-kdc krb5-admin-server (ci/kerberos.sh does it)"
            )
        self.workdir.mkdir(parents=True, exist_ok=True)
        for attempt in range(1, 4):
            self.port = free_port(self.host)
            self._write_configs()
            if not (self.workdir / "principal").exists():
                # the master key protects only this throwaway database
                self._run("kdb5_util", "create", "-s", "-r", self.realm, "-P", secrets.token_urlsafe(16))
            try:
                self._spawn()
                return self
            except KerberosError as exc:
                self._stop_kdc()
                # free_port's port is free when picked, not when the KDC binds it
                if attempt == 3 or "Address already in use" not in str(exc):
                    raise
        raise AssertionError("unreachable")

    def _spawn(self) -> None:
        assert self._tools is not None
        with self.log_path.open("ab") as log:
            self._proc = subprocess.Popen(
                [self._tools["krb5kdc"], "-n", "-r", self.realm],
                env={**os.environ, **self.env},
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                preexec_fn=die_with_parent if sys.platform == "linux" else None,
            )
        deadline = time.monotonic() + self.startup_timeout
        while not port_open(self.host, self.port):
            if self._proc.poll() is not None:
                raise KerberosError(
                    f"krb5kdc exited with {self._proc.returncode} while starting; its log ends: "
                    f"{read_tail(self.log_path, 1500)}"
                )
            if time.monotonic() > deadline:
                raise KerberosError(
                    f"krb5kdc did not listen on {self.host}:{self.port} within {self.startup_timeout:.0f} s: "
                    f"{read_tail(self.log_path, 1500)}"
                )
            time.sleep(0.05)

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def _stop_kdc(self) -> None:
        proc, self._proc = self._proc, None
        stop_process(proc, 10.0)

    def close(self) -> None:
        try:
            self._stop_kdc()
        finally:
            if self._owns_workdir:
                shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"KerberosRealm(realm={self.realm!r}, kdc={self.host}:{self.port}, running={self.running})"

    # -- principals -----------------------------------------------------------------------------

    def qualified(self, name: str) -> str:
        """``name`` with the realm: ``alice`` -> ``alice@REALM``."""
        return name if "@" in name else f"{name}@{self.realm}"

    def principal(self, name: str) -> Path:
        """Add ``name`` (e.g. ``alice``, ``kafka/localhost``) with a random key; its keytab (made
        once, mode 0600). The key exists only in the database and that file."""
        full = self.qualified(name)
        keytab = self._keytabs.get(full)
        if keytab is not None:
            return keytab
        keytab = self.workdir / "keytabs" / (full.replace("/", "_").replace("@", "_") + ".keytab")
        keytab.parent.mkdir(mode=0o700, exist_ok=True)
        self._run("kadmin.local", "-r", self.realm, "-q", f"addprinc -randkey {full}")
        self._run("kadmin.local", "-r", self.realm, "-q", f"ktadd -k {keytab} {full}")
        keytab.chmod(0o600)
        self._keytabs[full] = keytab
        return keytab

    def rekey(self, name: str) -> None:
        """Give ``name`` a new random key: a keytab made before no longer logs in (a stale keytab)."""
        self._run("kadmin.local", "-r", self.realm, "-q", f"cpw -randkey {self.qualified(name)}")

    def delete(self, name: str) -> None:
        """Remove ``name`` from the database: its keytab then names a principal the KDC does not know."""
        self._run("kadmin.local", "-r", self.realm, "-q", f"delprinc -force {self.qualified(name)}")
        self._keytabs.pop(self.qualified(name), None)
