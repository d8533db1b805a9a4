"""Confluent's Schema Registry REST API over a :class:`SchemaStore`, on the standard library's
threading HTTP server (a dev tool: no dependency beyond fastavro/jsonschema for validation).

Basic auth (``users``) and a static bearer token (``token``) are optional, as is TLS
(``ssl_context``); without any of them every request is let in.
"""

from __future__ import annotations

import base64
import hmac
import json
import re
import ssl
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self
from urllib.parse import parse_qs, unquote, urlsplit

from kafka_core.devtools.registry.store import Reference, RegistryHTTPError, SchemaStore

__all__ = ["RegistryServer"]

_CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
_SEGMENT = r"([^/]+)"

Handler = Callable[["_Request"], Any]


class _Request:
    def __init__(self, method: str, groups: tuple[str, ...], query: dict[str, list[str]], body: Any) -> None:
        self.method = method
        self.groups = tuple(unquote(g) for g in groups)
        self.query = query
        self.body = body

    def flag(self, name: str) -> bool:
        return self.query.get(name, ["false"])[-1].lower() == "true"

    def arg(self, name: str, default: str = "") -> str:
        return self.query.get(name, [default])[-1]

    def schema_parts(self) -> tuple[str, str, list[Reference]]:
        if not isinstance(self.body, dict) or "schema" not in self.body:
            raise RegistryHTTPError(422, 42201, 'Invalid schema: the body needs a "schema" field')
        try:
            references = [
                Reference(str(r["name"]), str(r["subject"]), int(r["version"]))
                for r in self.body.get("references") or []
            ]
        except (KeyError, TypeError, ValueError):
            raise RegistryHTTPError(422, 42201, "Invalid schema: malformed references") from None
        return str(self.body.get("schemaType") or "AVRO").upper(), self.body["schema"], references


class RegistryServer:
    """A Confluent-API Schema Registry in this process, on a free port unless ``port`` is given.

    ``with RegistryServer() as registry: registry.url`` — or ``start()``/``close()``.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        store: SchemaStore | None = None,
        users: dict[str, str] | None = None,
        token: str | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.store = store or SchemaStore()
        self._host = host
        self._users = dict(users or {})
        self._token = token
        self._ssl_context = ssl_context
        self._routes = self._make_routes()
        self._httpd = ThreadingHTTPServer((host, port), self._handler_class())
        self._httpd.daemon_threads = True
        if ssl_context is not None:
            self._httpd.socket = ssl_context.wrap_socket(self._httpd.socket, server_side=True)
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        host = self._host
        return f"{'https' if self._ssl_context else 'http'}://{host}:{self.port}"

    def start(self) -> Self:
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="dev-registry", daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self._httpd.serve_forever()

    def close(self) -> None:
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join(timeout=10)
            self._thread = None
        self._httpd.server_close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"RegistryServer(url={self.url!r}, auth={'basic' if self._users else 'bearer' if self._token else 'none'})"

    # --- authentication ------------------------------------------------------------------------

    def _authorized(self, header: str | None) -> bool:
        if not self._users and self._token is None:
            return True
        if header is None:
            return False
        scheme, _, value = header.partition(" ")
        if scheme.lower() == "bearer" and self._token is not None:
            return hmac.compare_digest(value.strip().encode(), self._token.encode())
        if scheme.lower() == "basic" and self._users:
            try:
                user, _, password = base64.b64decode(value.strip()).decode().partition(":")
            except (ValueError, UnicodeDecodeError):
                return False
            expected = self._users.get(user)
            return expected is not None and hmac.compare_digest(password.encode(), expected.encode())
        return False

    # --- routes --------------------------------------------------------------------------------

    def _make_routes(self) -> list[tuple[str, re.Pattern[str], Handler]]:
        s = self.store
        table: list[tuple[str, str, Handler]] = [
            ("GET", r"/", lambda r: {}),
            ("GET", r"/schemas/types", lambda r: ["JSON", "PROTOBUF", "AVRO"]),
            ("GET", rf"/schemas/ids/{_SEGMENT}", lambda r: s.by_id(_int_id(r.groups[0])).to_json()),
            (
                "GET",
                rf"/schemas/ids/{_SEGMENT}/schema",
                lambda r: json.loads(s.by_id(_int_id(r.groups[0])).schema),
            ),
            (
                "GET",
                rf"/schemas/ids/{_SEGMENT}/versions",
                lambda r: [
                    {"subject": v.subject, "version": v.version}
                    for v in s.versions_of_id(_int_id(r.groups[0]), deleted=r.flag("deleted"))
                    if v.subject.startswith(r.arg("subject"))
                ],
            ),
            (
                "GET",
                rf"/schemas/ids/{_SEGMENT}/subjects",
                lambda r: sorted(
                    {
                        v.subject
                        for v in s.versions_of_id(_int_id(r.groups[0]), deleted=r.flag("deleted"))
                        if v.subject.startswith(r.arg("subject"))
                    }
                ),
            ),
            ("GET", rf"/schemas/guids/{_SEGMENT}", lambda r: _with_id(s.by_guid(r.groups[0]))),
            (
                "GET",
                r"/subjects",
                lambda r: s.subjects(
                    deleted=r.flag("deleted"), prefix=r.arg("subjectPrefix").replace(":*:", "")
                ),
            ),
            ("POST", rf"/subjects/{_SEGMENT}/versions", self._register),
            ("POST", rf"/subjects/{_SEGMENT}", self._lookup),
            (
                "DELETE",
                rf"/subjects/{_SEGMENT}",
                lambda r: s.delete_subject(r.groups[0], permanent=r.flag("permanent")),
            ),
            (
                "GET",
                rf"/subjects/{_SEGMENT}/versions",
                lambda r: s.versions(r.groups[0], deleted=r.flag("deleted")),
            ),
            ("GET", rf"/subjects/{_SEGMENT}/versions/{_SEGMENT}", self._get_version),
            (
                "GET",
                rf"/subjects/{_SEGMENT}/versions/{_SEGMENT}/schema",
                lambda r: json.loads(s.version(r.groups[0], r.groups[1])[0].schema),
            ),
            (
                "GET",
                rf"/subjects/{_SEGMENT}/versions/{_SEGMENT}/referencedby",
                lambda r: s.referenced_by(r.groups[0], r.groups[1]),
            ),
            (
                "DELETE",
                rf"/subjects/{_SEGMENT}/versions/{_SEGMENT}",
                lambda r: s.delete_version(r.groups[0], r.groups[1], permanent=r.flag("permanent")),
            ),
            ("POST", rf"/compatibility/subjects/{_SEGMENT}/versions/{_SEGMENT}", self._compatibility),
            ("POST", rf"/compatibility/subjects/{_SEGMENT}/versions", self._compatibility),
            ("GET", r"/config", lambda r: {"compatibilityLevel": s.global_compatibility()}),
            ("PUT", r"/config", lambda r: {"compatibility": s.set_compatibility(_level(r.body))}),
            ("DELETE", r"/config", lambda r: {"compatibilityLevel": s.delete_compatibility()}),
            (
                "GET",
                rf"/config/{_SEGMENT}",
                lambda r: {
                    "compatibilityLevel": s.subject_compatibility(
                        r.groups[0], default_to_global=r.flag("defaultToGlobal")
                    )
                },
            ),
            (
                "PUT",
                rf"/config/{_SEGMENT}",
                lambda r: {"compatibility": s.set_compatibility(_level(r.body), r.groups[0])},
            ),
            (
                "DELETE",
                rf"/config/{_SEGMENT}",
                lambda r: {"compatibilityLevel": s.delete_compatibility(r.groups[0])},
            ),
            ("GET", r"/mode", lambda r: {"mode": "READWRITE"}),
            ("GET", rf"/mode/{_SEGMENT}", lambda r: {"mode": "READWRITE"}),
            ("GET", r"/contexts", lambda r: ["."]),
        ]
        return [(method, re.compile(pattern + "/?$"), fn) for method, pattern, fn in table]

    def _register(self, r: _Request) -> dict[str, Any]:
        schema_type, schema, references = r.schema_parts()
        wanted = r.body.get("id") if isinstance(r.body, dict) else None
        stored, version = self.store.register(
            r.groups[0],
            schema_type,
            schema,
            references,
            schema_id=int(wanted) if wanted not in (None, -1, 0) else None,
        )
        return {
            "id": stored.id,
            "guid": stored.guid,
            "subject": version.subject,
            "version": version.version,
            **stored.to_json(),
        }

    def _lookup(self, r: _Request) -> dict[str, Any]:
        schema_type, schema, references = r.schema_parts()
        stored, version = self.store.lookup(
            r.groups[0], schema_type, schema, references, deleted=r.flag("deleted")
        )
        return {
            "subject": version.subject,
            "version": version.version,
            "id": stored.id,
            "guid": stored.guid,
            **stored.to_json(),
        }

    def _get_version(self, r: _Request) -> dict[str, Any]:
        stored, version = self.store.version(r.groups[0], r.groups[1], deleted=r.flag("deleted"))
        return {
            "subject": version.subject,
            "version": version.version,
            "id": stored.id,
            "guid": stored.guid,
            **stored.to_json(),
        }

    def _compatibility(self, r: _Request) -> dict[str, Any]:
        schema_type, schema, references = r.schema_parts()
        version = r.groups[1] if len(r.groups) > 1 else None
        problems = self.store.test_compatibility(r.groups[0], schema_type, schema, references, version)
        answer: dict[str, Any] = {"is_compatible": not problems}
        if r.flag("verbose"):
            answer["messages"] = problems
        return answer

    def _dispatch(self, method: str, path: str, query: dict[str, list[str]], body: Any) -> tuple[int, Any]:
        known_path = False
        for route_method, pattern, fn in self._routes:
            match = pattern.match(path)
            if match is not None:
                if route_method == method:
                    return 200, fn(_Request(method, match.groups(), query, body))
                known_path = True
        if known_path:
            return 405, {"error_code": 405, "message": "HTTP 405 Method Not Allowed"}
        return 404, {"error_code": 404, "message": "HTTP 404 Not Found"}

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class _Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(
                self, format: str, *args: Any
            ) -> None:  # quiet: the command's stdout is its JSON line
                pass

            def _answer(self, status: int, payload: Any) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", _CONTENT_TYPE)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                if not server._authorized(self.headers.get("Authorization")):
                    self._answer(401, {"error_code": 40101, "message": "Unauthorized"})
                    return
                parts = urlsplit(self.path)
                path = re.sub(r"^/apis/ccompat/v\d+", "", parts.path) or "/"
                try:
                    body = json.loads(raw) if raw.strip() else None
                except ValueError:
                    self._answer(400, {"error_code": 400, "message": "Unrecognized JSON body"})
                    return
                try:
                    status, payload = server._dispatch(self.command, path, parse_qs(parts.query), body)
                except RegistryHTTPError as exc:
                    status, payload = exc.status, {"error_code": exc.code, "message": exc.message}
                except Exception as exc:  # the answer a real registry gives to its own bugs
                    status, payload = 500, {"error_code": 50001, "message": f"{type(exc).__name__}: {exc}"}
                self._answer(status, payload)

            do_GET = do_POST = do_PUT = do_DELETE = _serve

        return _Handler


def _int_id(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise RegistryHTTPError(404, 40403, "Schema not found") from None


def _with_id(stored: Any) -> dict[str, Any]:
    return {"id": stored.id, "guid": stored.guid, **stored.to_json()}


def _level(body: Any) -> str:
    if not isinstance(body, dict) or not isinstance(body.get("compatibility"), str):
        raise RegistryHTTPError(422, 42203, 'Invalid compatibility level: the body needs "compatibility"')
    return str(body["compatibility"])
