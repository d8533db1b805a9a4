"""Who may connect and how much they may use: SCRAM credentials, client quotas, delegation tokens.

Any broker takes these (a KRaft broker forwards the changes to the controller). Secrets stay
here: a SCRAM password is salted and hashed before it is sent and is in no repr, log or error;
a token's HMAC is in no repr or error either.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from kafka_core.admin.engine import any_broker, call_timeout, outcome, per_resource
from kafka_core.admin.results import (
    ClientQuotaEntity,
    DelegationToken,
    Result,
    ScramCredentialInfo,
    ScramDeletion,
    ScramUpsertion,
)
from kafka_core.errors import KafkaConfigError
from kafka_core.network.sasl.scram import saslprep
from kafka_core.protocol.messages import (
    AlterClientQuotasRequest,
    AlterUserScramCredentialsRequest,
    CreateDelegationTokenRequest,
    DescribeClientQuotasRequest,
    DescribeDelegationTokenRequest,
    DescribeUserScramCredentialsRequest,
    ExpireDelegationTokenRequest,
    RenewDelegationTokenRequest,
)

if TYPE_CHECKING:
    from kafka_core.client.cluster import KafkaClient

# Kafka's ScramMechanism codes, and the hash each salts with.
SCRAM_MECHANISMS = {"SCRAM-SHA-256": (1, "sha256"), "SCRAM-SHA-512": (2, "sha512")}
SCRAM_NAMES = {code: name for name, (code, _) in SCRAM_MECHANISMS.items()}
# The broker refuses fewer (4096, RFC 7677's floor) and more (16384) iterations.
SCRAM_ITERATIONS = (4096, 16384)
SALT_BYTES = 32
# DescribeClientQuotas match types
MATCH_EXACT, MATCH_DEFAULT = 0, 1


def _mechanism(name: str) -> tuple[int, str]:
    try:
        return SCRAM_MECHANISMS[name.upper()]
    except KeyError:
        raise KafkaConfigError(
            f"SCRAM mechanism must be one of {list(SCRAM_MECHANISMS)}, not {name!r}"
        ) from None


def _principal(text: str) -> tuple[str, str]:
    kind, sep, name = text.partition(":")
    if not sep or not kind or not name:
        raise KafkaConfigError(f"a principal looks like 'User:alice', not {text!r}")
    return kind, name


def _token(t: Any, requester: str) -> DelegationToken:
    return DelegationToken(
        token_id=t.token_id,
        hmac=bytes(t.hmac),
        owner=f"{t.principal_type}:{t.principal_name}",
        requester=requester,
        renewers=[f"{r.principal_type}:{r.principal_name}" for r in getattr(t, "renewers", [])],
        issue_timestamp_ms=getattr(t, "issue_timestamp", getattr(t, "issue_timestamp_ms", -1)),
        expiry_timestamp_ms=getattr(t, "expiry_timestamp", getattr(t, "expiry_timestamp_ms", -1)),
        max_timestamp_ms=getattr(t, "max_timestamp", getattr(t, "max_timestamp_ms", -1)),
    )


def _requester(t: Any) -> str:
    kind = getattr(t, "token_requester_principal_type", "") or t.principal_type
    name = getattr(t, "token_requester_principal_name", "") or t.principal_name
    return f"{kind}:{name}"


def _expiry(resp: Any) -> int:
    """A renewed or expired token's expiry time (the answers name no HMAC, so neither do errors)."""
    return int(resp.expiry_timestamp_ms)


class SecurityCalls:
    """The SCRAM, quota and token calls of :class:`kafka_core.aio.KafkaAdmin` (which documents them)."""

    def __init__(self, client: KafkaClient, default_timeout_ms: float) -> None:
        self.client = client
        self.default_timeout_ms = default_timeout_ms

    # -- SCRAM -------------------------------------------------------------------------------------

    async def describe_user_scram_credentials(
        self, users: Iterable[str] | None = None, *, timeout_ms: float | None = None
    ) -> dict[str, Result[list[ScramCredentialInfo]]]:
        await self.client.start()
        names = None if users is None else ([users] if isinstance(users, str) else list(users))
        name_cls = DescribeUserScramCredentialsRequest.UserName

        body = DescribeUserScramCredentialsRequest(
            users=None if names is None else [name_cls(name=n) for n in names]
        )

        def read(resp: Any) -> dict[str, Result[list[ScramCredentialInfo]]]:
            out: dict[str, Result[list[ScramCredentialInfo]]] = {}
            for r in resp.results:
                error = outcome(r.error_code, f"SCRAM credentials of {r.user!r}", r.error_message)
                if error is not None:
                    out[r.user] = Result(error=error)
                else:
                    out[r.user] = Result(
                        [
                            ScramCredentialInfo(
                                SCRAM_NAMES.get(c.mechanism, f"UNKNOWN-{c.mechanism}"), c.iterations
                            )
                            for c in r.credential_infos
                        ]
                    )
            return out if names is None else {n: out[n] for n in names if n in out}

        return await any_broker(
            self.client,
            "describe_user_scram_credentials",
            body,
            read,
            timeout_ms,
            request="DescribeUserScramCredentials",
        )

    async def alter_user_scram_credentials(
        self,
        alterations: Iterable[ScramUpsertion | ScramDeletion],
        *,
        timeout_ms: float | None = None,
    ) -> dict[str, Result[None]]:
        await self.client.start()
        upserts: list[Any] = []
        deletes: list[Any] = []
        users: list[str] = []
        up_cls = AlterUserScramCredentialsRequest.ScramCredentialUpsertion
        del_cls = AlterUserScramCredentialsRequest.ScramCredentialDeletion
        for change in alterations:
            code, hash_name = _mechanism(change.mechanism)
            if not change.user:
                raise KafkaConfigError("a SCRAM credential needs a user name")
            users.append(change.user)
            if isinstance(change, ScramUpsertion):
                low, high = SCRAM_ITERATIONS
                if not low <= change.iterations <= high:
                    raise KafkaConfigError(f"SCRAM iterations must be {low}..{high}, not {change.iterations}")
                if not change.password:
                    raise KafkaConfigError(f"the SCRAM password of {change.user!r} is empty")
                salt = os.urandom(SALT_BYTES)
                salted = hashlib.pbkdf2_hmac(
                    hash_name, saslprep(change.password).encode(), salt, change.iterations
                )
                upserts.append(
                    up_cls(
                        name=change.user,
                        mechanism=code,
                        iterations=change.iterations,
                        salt=salt,
                        salted_password=salted,
                    )
                )
            elif isinstance(change, ScramDeletion):
                deletes.append(del_cls(name=change.user, mechanism=code))
            else:
                raise KafkaConfigError(
                    f"not a SCRAM change: {type(change).__name__} (ScramUpsertion, ScramDeletion)"
                )
        wanted = list(dict.fromkeys(users))

        async def attempt(pending: list[str]) -> dict[str, Any]:
            # One request carries every change; a user whose answer did not come back gets its
            # whole set sent again (an upsert or deletion applied twice ends the same).
            node = await self.client.any_node()
            body = AlterUserScramCredentialsRequest(
                deletions=[d for d in deletes if d.name in pending],
                upsertions=[u for u in upserts if u.name in pending],
            )
            resp = await self.client.send(node, body)
            return {
                r.user: outcome(r.error_code, f"altering SCRAM credentials of {r.user!r}", r.error_message)
                for r in resp.results
            }

        timeout = call_timeout(timeout_ms, self.default_timeout_ms)
        return await per_resource("alter_user_scram_credentials", wanted, attempt, timeout)

    # -- client quotas -----------------------------------------------------------------------------

    async def describe_client_quotas(
        self,
        entity: Mapping[str, str | None] | None = None,
        *,
        strict: bool = False,
        timeout_ms: float | None = None,
    ) -> dict[ClientQuotaEntity, dict[str, float]]:
        await self.client.start()
        comp_cls = DescribeClientQuotasRequest.ComponentData
        components = []
        for kind, name in (entity or {}).items():
            ClientQuotaEntity.of({kind: name})  # checks the type
            components.append(
                comp_cls(
                    entity_type=kind, match_type=MATCH_DEFAULT if name is None else MATCH_EXACT, match=name
                )
            )

        def read(resp: Any) -> dict[ClientQuotaEntity, dict[str, float]]:
            out: dict[ClientQuotaEntity, dict[str, float]] = {}
            for e in resp.entries or ():
                key = ClientQuotaEntity(tuple(sorted((d.entity_type, d.entity_name) for d in e.entity)))
                out[key] = {v.key: v.value for v in e.values}
            return out

        body = DescribeClientQuotasRequest(components=components, strict=strict)
        return await any_broker(
            self.client, "describe_client_quotas", body, read, timeout_ms, request="DescribeClientQuotas"
        )

    async def alter_client_quotas(
        self,
        changes: Mapping[ClientQuotaEntity, Mapping[str, float | None]],
        *,
        validate_only: bool = False,
        timeout_ms: float | None = None,
    ) -> dict[ClientQuotaEntity, Result[None]]:
        await self.client.start()
        entity_cls = AlterClientQuotasRequest.EntityData
        op_cls = AlterClientQuotasRequest.OpData
        entry_cls = AlterClientQuotasRequest.EntryData
        wanted = {ClientQuotaEntity.of(k): dict(v) for k, v in changes.items()}

        async def attempt(pending: list[ClientQuotaEntity]) -> dict[ClientQuotaEntity, Any]:
            node = await self.client.any_node()
            entries = [
                entry_cls(
                    entity=[entity_cls(entity_type=k, entity_name=n) for k, n in e.parts],
                    ops=[
                        op_cls(key=key, value=0.0 if value is None else float(value), remove=value is None)
                        for key, value in wanted[e].items()
                    ],
                )
                for e in pending
            ]
            resp = await self.client.send(
                node, AlterClientQuotasRequest(entries=entries, validate_only=validate_only)
            )
            out: dict[ClientQuotaEntity, Any] = {}
            for r in resp.entries:
                key = ClientQuotaEntity(tuple(sorted((d.entity_type, d.entity_name) for d in r.entity)))
                out[key] = outcome(r.error_code, f"altering quotas of {key.as_dict()}", r.error_message)
            return out

        timeout = call_timeout(timeout_ms, self.default_timeout_ms)
        return await per_resource("alter_client_quotas", list(wanted), attempt, timeout)

    # -- delegation tokens -------------------------------------------------------------------------

    async def create_delegation_token(
        self,
        *,
        renewers: Iterable[str] = (),
        max_lifetime_ms: int = -1,
        owner: str | None = None,
        timeout_ms: float | None = None,
    ) -> DelegationToken:
        await self.client.start()
        renewer_cls = CreateDelegationTokenRequest.CreatableRenewers
        renew = [renewer_cls(principal_type=k, principal_name=n) for k, n in map(_principal, renewers)]
        owner_kind, owner_name = _principal(owner) if owner is not None else (None, None)

        body = CreateDelegationTokenRequest(
            owner_principal_type=owner_kind,
            owner_principal_name=owner_name,
            renewers=renew,
            max_lifetime_ms=int(max_lifetime_ms),
        )

        def read(resp: Any) -> DelegationToken:
            token = _token(resp, _requester(resp))
            return DelegationToken(
                token_id=token.token_id,
                hmac=token.hmac,
                owner=token.owner,
                requester=token.requester,
                renewers=[f"{r.principal_type}:{r.principal_name}" for r in renew],
                issue_timestamp_ms=token.issue_timestamp_ms,
                expiry_timestamp_ms=token.expiry_timestamp_ms,
                max_timestamp_ms=token.max_timestamp_ms,
            )

        return await any_broker(
            self.client, "create_delegation_token", body, read, timeout_ms, request="CreateDelegationToken"
        )

    async def renew_delegation_token(
        self, hmac: bytes, *, renew_period_ms: int = -1, timeout_ms: float | None = None
    ) -> int:
        await self.client.start()
        body = RenewDelegationTokenRequest(hmac=bytes(hmac), renew_period_ms=int(renew_period_ms))
        return await any_broker(self.client, "RenewDelegationToken", body, _expiry, timeout_ms)

    async def expire_delegation_token(
        self, hmac: bytes, *, expiry_time_period_ms: int = -1, timeout_ms: float | None = None
    ) -> int:
        await self.client.start()
        body = ExpireDelegationTokenRequest(
            hmac=bytes(hmac), expiry_time_period_ms=int(expiry_time_period_ms)
        )
        return await any_broker(self.client, "ExpireDelegationToken", body, _expiry, timeout_ms)

    async def describe_delegation_tokens(
        self, owners: Iterable[str] | None = None, *, timeout_ms: float | None = None
    ) -> list[DelegationToken]:
        await self.client.start()
        owner_cls = DescribeDelegationTokenRequest.DescribeDelegationTokenOwner
        wanted = (
            None
            if owners is None
            else [owner_cls(principal_type=k, principal_name=n) for k, n in map(_principal, owners)]
        )

        def read(resp: Any) -> list[DelegationToken]:
            return sorted((_token(t, _requester(t)) for t in resp.tokens), key=lambda t: t.token_id)

        return await any_broker(
            self.client,
            "describe_delegation_tokens",
            DescribeDelegationTokenRequest(owners=wanted),
            read,
            timeout_ms,
            request="DescribeDelegationToken",
        )


__all__ = ["SCRAM_MECHANISMS", "SecurityCalls"]
