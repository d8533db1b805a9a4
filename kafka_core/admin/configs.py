"""Describe and incrementally alter configs of topics and brokers.

A broker's own configs can only be read or changed on that broker, so resources are grouped by
destination: broker resources to their node, everything else to the controller.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from kafka_core.admin.engine import call_timeout, fan_out, outcome, per_resource
from kafka_core.admin.results import (
    AlterConfigOp,
    ConfigEntry,
    ConfigResource,
    ConfigResourceType,
    Result,
)
from kafka_core.errors import KafkaConfigError
from kafka_core.protocol import ApiKey
from kafka_core.protocol.errors import error_for
from kafka_core.protocol.messages import DescribeConfigsRequest, IncrementalAlterConfigsRequest

if TYPE_CHECKING:
    from kafka_core.client.cluster import KafkaClient

ConfigChanges = Mapping[str, str | None] | Iterable[AlterConfigOp]


def _ops(changes: ConfigChanges) -> list[AlterConfigOp]:
    """``{"k": "v"}`` sets, ``{"k": None}`` deletes; AlterConfigOp lists pass through."""
    if isinstance(changes, Mapping):
        return [AlterConfigOp(k, v, "set" if v is not None else "delete") for k, v in changes.items()]
    ops = list(changes)
    for op in ops:
        if not isinstance(op, AlterConfigOp):
            raise KafkaConfigError(f"config changes must be a mapping or AlterConfigOp items, not {op!r}")
        op.code()
    return ops


class ConfigCalls:
    """The config calls of :class:`kafka_core.aio.KafkaAdmin` (which documents them)."""

    def __init__(self, client: KafkaClient, default_timeout_ms: float) -> None:
        self.client = client
        self.default_timeout_ms = default_timeout_ms

    async def _config_destination(self, resource: ConfigResource) -> int:
        if resource.type in (ConfigResourceType.BROKER, ConfigResourceType.BROKER_LOGGER) and resource.name:
            try:
                return int(resource.name)
            except ValueError:
                raise KafkaConfigError(
                    f"a broker config resource needs a node id, not {resource.name!r}"
                ) from None
        return await self.client.controller_node()

    async def _by_destination(self, pending: list[ConfigResource]) -> dict[int, list[ConfigResource]]:
        groups: dict[int, list[ConfigResource]] = defaultdict(list)
        for r in pending:
            groups[await self._config_destination(r)].append(r)
        return groups

    async def describe_configs(
        self,
        resources: Iterable[ConfigResource | tuple[str | int, str | int]],
        *,
        include_synonyms: bool = False,
        timeout_ms: float | None = None,
    ) -> dict[ConfigResource, Result[dict[str, ConfigEntry]]]:
        await self.client.start()
        wanted = [ConfigResource.of(r) for r in resources]
        res_cls = DescribeConfigsRequest.DescribeConfigsResource

        async def ask(node: int, group: list[ConfigResource]) -> dict[ConfigResource, Any]:
            body = DescribeConfigsRequest(
                resources=[
                    res_cls(resource_type=int(r.type), resource_name=r.name, configuration_keys=None)
                    for r in group
                ],
                include_synonyms=include_synonyms,
            )
            resp = await self.client.send(node, body)
            out: dict[ConfigResource, Any] = {}
            for res in resp.results:
                key = ConfigResource(ConfigResourceType(res.resource_type), res.resource_name)
                if res.error_code:
                    out[key] = error_for(
                        res.error_code,
                        f"describing configs of {key.type.name.lower()} {key.name!r}"
                        + (f": {res.error_message}" if res.error_message else ""),
                    )
                    continue
                out[key] = {
                    c.name: ConfigEntry(
                        name=c.name,
                        value=c.value,
                        read_only=c.read_only,
                        is_default=bool(getattr(c, "is_default", False))
                        or getattr(c, "config_source", -1) == 5,
                        is_sensitive=c.is_sensitive,
                        source=getattr(c, "config_source", -1),
                    )
                    for c in res.configs
                }
            return out

        async def attempt(pending: list[ConfigResource]) -> dict[ConfigResource, Any]:
            return await fan_out(await self._by_destination(pending), ask)

        timeout = call_timeout(timeout_ms, self.default_timeout_ms)
        return await per_resource("describe_configs", wanted, attempt, timeout)

    async def incremental_alter_configs(
        self,
        changes: Mapping[ConfigResource | tuple[str | int, str | int], ConfigChanges],
        *,
        validate_only: bool = False,
        timeout_ms: float | None = None,
    ) -> dict[ConfigResource, Result[None]]:
        await self.client.start()
        ops = {ConfigResource.of(r): _ops(c) for r, c in changes.items()}
        res_cls = IncrementalAlterConfigsRequest.AlterConfigsResource
        cfg_cls = IncrementalAlterConfigsRequest.AlterableConfig

        async def ask(node: int, group: list[ConfigResource]) -> dict[ConfigResource, Any]:
            version = await self.client.api_version(node, ApiKey.INCREMENTAL_ALTER_CONFIGS)
            body = IncrementalAlterConfigsRequest(
                resources=[
                    res_cls(
                        resource_type=int(r.type),
                        resource_name=r.name,
                        configs=[
                            cfg_cls(name=o.name, config_operation=o.code(), value=o.value) for o in ops[r]
                        ],
                    )
                    for r in group
                ],
                validate_only=validate_only,
            )
            resp = await self.client.send(node, body, version)
            out: dict[ConfigResource, Any] = {}
            for res in resp.responses:
                key = ConfigResource(ConfigResourceType(res.resource_type), res.resource_name)
                out[key] = outcome(
                    res.error_code,
                    f"altering configs of {key.type.name.lower()} {key.name!r}",
                    res.error_message,
                )
            return out

        async def attempt(pending: list[ConfigResource]) -> dict[ConfigResource, Any]:
            return await fan_out(await self._by_destination(pending), ask)

        timeout = call_timeout(timeout_ms, self.default_timeout_ms)
        return await per_resource("incremental_alter_configs", ops, attempt, timeout)
