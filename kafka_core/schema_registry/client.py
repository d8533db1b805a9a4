"""``SchemaRegistryClient``: confluent-kafka's client, by name, constructor and methods, over
Confluent's REST API (Confluent Schema Registry, Karapace, Apicurio's ccompat API, Redpanda).

Schemas by id never change, so they are cached for good (up to ``cache.capacity``); so are
(subject, schema) -> registration answers. A subject's latest version is cached for
``cache.latest.ttl.sec`` (unset: until ``clear_latest_caches``).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from typing import Any, Generic, Self, TypeVar

from kafka_core.errors import KafkaConfigError
from kafka_core.schema_registry.rest import RestClient, RestConfig, urlencode
from kafka_core.schema_registry.schema import RegisteredSchema, Schema, SchemaVersion

__all__ = ["SchemaRegistryClient"]

K = TypeVar("K")
V = TypeVar("V")


class _Lru(Generic[K, V]):
    """A bounded map, least recently used out first; the caller holds the lock."""

    def __init__(self, capacity: int) -> None:
        self._data: OrderedDict[K, V] = OrderedDict()
        self._capacity = capacity

    def get(self, key: K) -> V | None:
        value = self._data.get(key)
        if value is not None:
            self._data.move_to_end(key)
        return value

    def put(self, key: K, value: V) -> None:
        self._data[key] = value
        self._data.move_to_end(key)
        while len(self._data) > self._capacity:
            self._data.popitem(last=False)

    def pop_where(self, match: Any) -> None:
        for key in [k for k in self._data if match(k)]:
            del self._data[key]

    def clear(self) -> None:
        self._data.clear()


class SchemaRegistryClient:
    """``SchemaRegistryClient({"url": "https://registry:8081", "basic.auth.user.info": "user:pw"})``.

    Keys (confluent-kafka's): ``url`` (several, comma-separated, tried in turn),
    ``ssl.ca.location`` (a CA file or directory; ``False`` turns verification off),
    ``ssl.certificate.location``/``ssl.key.location``/``ssl.key.password`` (a client certificate),
    ``basic.auth.user.info`` (``USER:PASSWORD``, or credentials in the URL),
    ``bearer.auth.credentials.source`` (``STATIC_TOKEN`` with ``bearer.auth.token``, or
    ``OAUTHBEARER`` with ``bearer.auth.client.id``/``.client.secret``/``.issuer.endpoint.url``/
    ``.scope``), ``bearer.auth.logical.cluster``, ``bearer.auth.identity.pool.id``, ``timeout``
    (seconds a call may take in all, retries included; 30), ``max.retries`` (3),
    ``retries.wait.ms``, ``retries.max.wait.ms``, ``cache.capacity`` (1000),
    ``cache.latest.ttl.sec``, ``proxy``. Thread-safe.
    """

    def __init__(self, conf: dict[str, Any]) -> None:
        if not isinstance(conf, dict):
            raise KafkaConfigError(
                "SchemaRegistryClient takes a dict of settings, e.g. {'url': 'http://...'}"
            )
        rest_conf = dict(conf)
        capacity = int(rest_conf.pop("cache.capacity", 1000))
        ttl = rest_conf.pop("cache.latest.ttl.sec", None)
        self._config = RestConfig.pop_from(rest_conf)
        if rest_conf:
            raise KafkaConfigError(f"schema registry: unknown settings {sorted(rest_conf)}")
        self._rest = RestClient(self._config)
        self._latest_ttl = None if ttl is None or float(ttl) < 0 else float(ttl)
        self._lock = threading.Lock()  # guards the caches below
        self._by_id: _Lru[tuple[int, str | None], Schema] = _Lru(capacity)
        self._registered: _Lru[tuple[str, Schema, bool], RegisteredSchema] = _Lru(capacity)
        self._latest: dict[str, tuple[float, RegisteredSchema]] = {}
        self._versions: _Lru[tuple[str, int, str | None], RegisteredSchema] = _Lru(capacity)

    # --- life ------------------------------------------------------------------------------

    def close(self) -> None:
        self._rest.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SchemaRegistryClient(urls={self._config.urls!r}, auth={self._config.auth!r})"

    def config(self) -> dict[str, Any]:
        """The non-secret settings, for logs (a method, as confluent-kafka's)."""
        return {
            "url": ",".join(self._config.urls),
            "timeout": self._config.timeout,
            "auth": repr(self._config.auth),
        }

    # --- schemas -------------------------------------------------------------------------------

    def register_schema(self, subject_name: str, schema: Schema, normalize_schemas: bool = False) -> int:
        """The id of ``schema`` under ``subject_name``, registered if it was not (409: incompatible)."""
        return self.register_schema_full_response(subject_name, schema, normalize_schemas).schema_id

    def register_schema_full_response(
        self, subject_name: str, schema: Schema, normalize_schemas: bool = False
    ) -> RegisteredSchema:
        key = (subject_name, schema, normalize_schemas)
        with self._lock:
            found = self._registered.get(key)
        if found is not None:
            return found
        answer = self._rest.request(
            "POST",
            f"subjects/{urlencode(subject_name)}/versions",
            schema.to_dict(),
            {"normalize": normalize_schemas},
        )
        registered = RegisteredSchema(
            schema_id=int(answer["id"]),
            schema=Schema.from_dict(answer) if answer.get("schema") else schema,
            subject=answer.get("subject", subject_name),
            version=answer.get("version"),
            guid=answer.get("guid"),
        )
        with self._lock:
            self._registered.put(key, registered)
            self._by_id.put((registered.schema_id, None), registered.schema)
        return registered

    def get_schema(self, schema_id: int, subject_name: str | None = None, fmt: str | None = None) -> Schema:
        """The schema with this id (cached: ids never change)."""
        key = (schema_id, fmt)
        with self._lock:
            found = self._by_id.get(key)
        if found is not None:
            return found
        answer = self._rest.request(
            "GET", f"schemas/ids/{int(schema_id)}", query={"subject": subject_name, "format": fmt}
        )
        schema = Schema.from_dict(answer)
        with self._lock:
            self._by_id.put(key, schema)
        return schema

    def get_schema_types(self) -> list[str]:
        return list(self._rest.request("GET", "schemas/types"))

    def get_subjects_by_schema_id(
        self, schema_id: int, subject_name: str | None = None, deleted: bool = False
    ) -> list[str]:
        return list(
            self._rest.request(
                "GET",
                f"schemas/ids/{int(schema_id)}/subjects",
                query={"subject": subject_name, "deleted": deleted or None},
            )
        )

    def get_schema_versions(
        self, schema_id: int, subject_name: str | None = None, deleted: bool = False
    ) -> list[SchemaVersion]:
        answer = self._rest.request(
            "GET",
            f"schemas/ids/{int(schema_id)}/versions",
            query={"subject": subject_name, "deleted": deleted or None},
        )
        return [SchemaVersion(str(v["subject"]), int(v["version"])) for v in answer]

    def lookup_schema(
        self, subject_name: str, schema: Schema, normalize_schemas: bool = False, deleted: bool = False
    ) -> RegisteredSchema:
        """The registration of ``schema`` under ``subject_name`` (40401/40403 if there is none)."""
        key = (subject_name, schema, normalize_schemas)
        with self._lock:
            found = self._registered.get(key)
        if found is not None and found.version is not None:
            return found
        answer = self._rest.request(
            "POST",
            f"subjects/{urlencode(subject_name)}",
            schema.to_dict(),
            {"normalize": normalize_schemas, "deleted": deleted},
        )
        registered = RegisteredSchema(
            schema_id=int(answer["id"]),
            schema=schema,
            subject=answer.get("subject", subject_name),
            version=answer.get("version"),
            guid=answer.get("guid"),
        )
        with self._lock:
            self._registered.put(key, registered)
        return registered

    # --- subjects ------------------------------------------------------------------------------

    def get_subjects(self, subject_prefix: str | None = None, deleted: bool = False) -> list[str]:
        return list(
            self._rest.request(
                "GET", "subjects", query={"subjectPrefix": subject_prefix, "deleted": deleted or None}
            )
        )

    def delete_subject(self, subject_name: str, permanent: bool = False) -> list[int]:
        answer = self._rest.request(
            "DELETE", f"subjects/{urlencode(subject_name)}", query={"permanent": True} if permanent else None
        )
        self._forget_subject(subject_name)
        return [int(v) for v in answer]

    def get_latest_version(self, subject_name: str, fmt: str | None = None) -> RegisteredSchema:
        with self._lock:
            cached = self._latest.get(subject_name) if fmt is None else None
        if cached is not None and (
            self._latest_ttl is None or time.monotonic() - cached[0] < self._latest_ttl
        ):
            return cached[1]
        answer = self._rest.request(
            "GET", f"subjects/{urlencode(subject_name)}/versions/latest", query={"format": fmt}
        )
        registered = RegisteredSchema.from_dict(answer, subject=subject_name)
        if fmt is None:
            with self._lock:
                self._latest[subject_name] = (time.monotonic(), registered)
        return registered

    def get_version(
        self, subject_name: str, version: int | str, deleted: bool = False, fmt: str | None = None
    ) -> RegisteredSchema:
        if version == "latest":
            return self.get_latest_version(subject_name, fmt)
        key = (subject_name, int(version), fmt)
        with self._lock:
            found = None if deleted else self._versions.get(key)
        if found is not None:
            return found
        answer = self._rest.request(
            "GET",
            f"subjects/{urlencode(subject_name)}/versions/{int(version)}",
            query={"deleted": deleted or None, "format": fmt},
        )
        registered = RegisteredSchema.from_dict(answer, subject=subject_name)
        with self._lock:
            self._versions.put(key, registered)
        return registered

    def get_versions(self, subject_name: str) -> list[int]:
        return [int(v) for v in self._rest.request("GET", f"subjects/{urlencode(subject_name)}/versions")]

    def get_referenced_by(self, subject_name: str, version: int | str = "latest") -> list[int]:
        return [
            int(i)
            for i in self._rest.request(
                "GET", f"subjects/{urlencode(subject_name)}/versions/{version}/referencedby"
            )
        ]

    def delete_version(self, subject_name: str, version: int, permanent: bool = False) -> int:
        answer = self._rest.request(
            "DELETE",
            f"subjects/{urlencode(subject_name)}/versions/{int(version)}",
            query={"permanent": True} if permanent else None,
        )
        self._forget_subject(subject_name)
        return int(answer)

    # --- compatibility ------------------------------------------------------------------------

    def set_compatibility(self, subject_name: str | None = None, level: str | None = None) -> dict[str, Any]:
        if level is None:
            raise KafkaConfigError("set_compatibility needs a level, e.g. 'BACKWARD'")
        path = "config" if subject_name is None else f"config/{urlencode(subject_name)}"
        return dict(self._rest.request("PUT", path, {"compatibility": level.upper()}))

    def get_compatibility(self, subject_name: str | None = None) -> str:
        path = "config" if subject_name is None else f"config/{urlencode(subject_name)}"
        return str(self._rest.request("GET", path)["compatibilityLevel"])

    def test_compatibility(
        self, subject_name: str, schema: Schema, version: int | str = "latest", normalize: bool = False
    ) -> bool:
        """Whether ``schema`` could follow ``version`` of the subject, by the subject's level."""
        answer = self._rest.request(
            "POST",
            f"compatibility/subjects/{urlencode(subject_name)}/versions/{version}",
            schema.to_dict(),
            {"normalize": normalize},
        )
        return bool(answer["is_compatible"])

    def test_compatibility_all_versions(
        self, subject_name: str, schema: Schema, normalize: bool = False
    ) -> bool:
        answer = self._rest.request(
            "POST",
            f"compatibility/subjects/{urlencode(subject_name)}/versions",
            schema.to_dict(),
            {"normalize": normalize},
        )
        return bool(answer["is_compatible"])

    # --- caches --------------------------------------------------------------------------------

    def clear_latest_caches(self) -> None:
        with self._lock:
            self._latest.clear()

    def clear_caches(self) -> None:
        with self._lock:
            self._latest.clear()
            self._by_id.clear()
            self._registered.clear()
            self._versions.clear()

    def _forget_subject(self, subject_name: str) -> None:
        with self._lock:
            self._latest.pop(subject_name, None)
            self._registered.pop_where(lambda k: k[0] == subject_name)
            self._versions.pop_where(lambda k: k[0] == subject_name)
