"""ACLs: describe, create, delete (any broker answers; it forwards to the authorizer)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from kafka_core.admin.engine import call_timeout, per_resource
from kafka_core.admin.results import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AclResourceType,
    PatternType,
    Result,
)
from kafka_core.protocol.errors import error_for
from kafka_core.protocol.messages import CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest

if TYPE_CHECKING:
    from kafka_core.client.cluster import KafkaClient


def _filter_fields(f: AclBindingFilter) -> dict[str, Any]:
    return {
        "resource_type_filter": int(f.resource_type),
        "resource_name_filter": f.resource_name,
        "pattern_type_filter": int(f.pattern_type),
        "principal_filter": f.principal,
        "host_filter": f.host,
        "operation": int(f.operation),
        "permission_type": int(f.permission_type),
    }


def _binding(resource: Any, acl: Any) -> AclBinding:
    return AclBinding(
        resource_type=AclResourceType(resource.resource_type),
        resource_name=resource.resource_name,
        principal=acl.principal,
        operation=AclOperation(acl.operation),
        permission_type=AclPermissionType(acl.permission_type),
        host=acl.host,
        pattern_type=PatternType(resource.pattern_type),
    )


class AclCalls:
    """The ACL calls of :class:`kafka_core.aio.KafkaAdmin` (which documents them)."""

    def __init__(self, client: KafkaClient, default_timeout_ms: float) -> None:
        self.client = client
        self.default_timeout_ms = default_timeout_ms

    async def describe_acls(
        self, acl_filter: AclBindingFilter | None = None, *, timeout_ms: float | None = None
    ) -> list[AclBinding]:
        await self.client.start()
        f = acl_filter or AclBindingFilter()

        async def attempt() -> list[AclBinding]:
            resp = await self.client.send(
                await self.client.any_node(), DescribeAclsRequest(**_filter_fields(f))
            )
            if resp.error_code:
                raise error_for(resp.error_code, f"DescribeAcls: {resp.error_message or ''}".rstrip(": "))
            return [_binding(r, a) for r in resp.resources for a in r.acls]

        return await self.client.retry("describe_acls", attempt, timeout_ms)

    async def create_acls(
        self, bindings: Iterable[AclBinding], *, timeout_ms: float | None = None
    ) -> dict[AclBinding, Result[None]]:
        await self.client.start()
        wanted = list(bindings)
        cls = CreateAclsRequest.AclCreation

        async def attempt(pending: list[AclBinding]) -> dict[AclBinding, Any]:
            body = CreateAclsRequest(
                creations=[
                    cls(
                        resource_type=int(b.resource_type),
                        resource_name=b.resource_name,
                        resource_pattern_type=int(b.pattern_type),
                        principal=b.principal,
                        host=b.host,
                        operation=int(b.operation),
                        permission_type=int(b.permission_type),
                    )
                    for b in pending
                ]
            )
            resp = await self.client.send(await self.client.any_node(), body)
            # Results come back in request order.
            return {
                b: error_for(r.error_code, f"creating ACL {b}: {r.error_message or ''}".rstrip(": "))
                if r.error_code
                else None
                for b, r in zip(pending, resp.results, strict=False)
            }

        timeout = call_timeout(timeout_ms, self.default_timeout_ms)
        return await per_resource("create_acls", wanted, attempt, timeout)

    async def delete_acls(
        self, filters: Iterable[AclBindingFilter], *, timeout_ms: float | None = None
    ) -> dict[AclBindingFilter, Result[list[AclBinding]]]:
        await self.client.start()
        wanted = list(filters)

        async def attempt(pending: list[AclBindingFilter]) -> dict[AclBindingFilter, Any]:
            body = DeleteAclsRequest(
                filters=[DeleteAclsRequest.DeleteAclsFilter(**_filter_fields(f)) for f in pending]
            )
            resp = await self.client.send(await self.client.any_node(), body)
            out: dict[AclBindingFilter, Any] = {}
            for f, r in zip(pending, resp.filter_results, strict=False):
                if r.error_code:
                    out[f] = error_for(
                        r.error_code, f"deleting ACLs {f}: {r.error_message or ''}".rstrip(": ")
                    )
                    continue
                out[f] = [_binding(m, m) for m in r.matching_acls]
            return out

        timeout = call_timeout(timeout_ms, self.default_timeout_ms)
        return await per_resource("delete_acls", wanted, attempt, timeout)
