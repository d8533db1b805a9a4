"""The dev registry's API, checked by confluent-kafka's own SchemaRegistryClient talking to it:
what Confluent's client sends and expects back is the contract the dev registry must keep."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from prerequisites import need_module

from kafka_core.devtools.registry import RegistryServer, SchemaStore

need_module("confluent_kafka.schema_registry")
from confluent_kafka.schema_registry import (  # noqa: E402
    Schema,
    SchemaReference,
    SchemaRegistryClient,
)
from confluent_kafka.schema_registry.error import SchemaRegistryError  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]


def _avro(fields: list[dict[str, object]], name: str = "Order") -> Schema:
    return Schema(json.dumps({"type": "record", "name": name, "fields": fields}), "AVRO")


ID = {"name": "id", "type": "long"}
NOTE = {"name": "note", "type": ["null", "string"], "default": None}
NOTE_NO_DEFAULT = {"name": "note", "type": "string"}


@pytest.fixture
def client(schema_registry: str) -> Iterator[SchemaRegistryClient]:
    with SchemaRegistryClient({"url": schema_registry}) as c:
        yield c


@pytest.fixture
def uncached(schema_registry: str) -> Callable[[], SchemaRegistryClient]:
    """A new client each call: nothing cached, so the server answers."""
    return lambda: SchemaRegistryClient({"url": schema_registry})


def _error(call: Callable[[], object]) -> SchemaRegistryError:
    with pytest.raises(SchemaRegistryError) as info:
        call()
    return info.value


def test_register_lookup_and_fetch(
    client: SchemaRegistryClient,
    uncached: Callable[[], SchemaRegistryClient],
    unique_subject: Callable[[str], str],
) -> None:
    subject = unique_subject("orders-value")
    v1, v2 = _avro([ID]), _avro([ID, NOTE])
    id1 = client.register_schema(subject, v1)
    id2 = client.register_schema(subject, v2)
    assert id1 != id2
    assert client.register_schema(subject, v1) == id1  # already there: same id, no new version
    assert client.get_versions(subject) == [1, 2]
    latest = client.get_latest_version(subject)
    assert (latest.schema_id, latest.version, latest.subject) == (id2, 2, subject)
    assert json.loads(latest.schema.schema_str) == json.loads(v2.schema_str)
    first = client.get_version(subject, 1)
    assert (first.schema_id, first.version) == (id1, 1)
    found = client.lookup_schema(subject, v1)
    assert (found.schema_id, found.version) == (id1, 1)
    assert json.loads(uncached().get_schema(id2).schema_str) == json.loads(v2.schema_str)
    assert subject in client.get_subjects()
    # other tests of the session may hold the same schema under their subjects: same schema, same id
    assert subject in client.get_subjects_by_schema_id(id1)
    assert (subject, 2) in [(v.subject, v.version) for v in client.get_schema_versions(id2)]
    assert sorted(client.get_schema_types()) == ["AVRO", "JSON", "PROTOBUF"]


def test_same_schema_same_id_across_subjects_whatever_the_spacing(
    client: SchemaRegistryClient, unique_subject: Callable[[str], str]
) -> None:
    a, b = unique_subject("a"), unique_subject("b")
    compact = _avro([ID, NOTE], name="Shared")
    spaced = Schema(json.dumps(json.loads(compact.schema_str), indent=4), "AVRO")
    assert client.register_schema(a, compact) == client.register_schema(b, spaced)
    assert sorted(client.get_subjects_by_schema_id(client.lookup_schema(a, compact).schema_id)) == sorted(
        [a, b]
    )


def test_errors_carry_confluents_codes(
    client: SchemaRegistryClient, unique_subject: Callable[[str], str]
) -> None:
    subject = unique_subject("err")
    missing = _error(lambda: client.get_latest_version(subject))
    assert (missing.http_status_code, missing.error_code) == (404, 40401)
    assert _error(lambda: client.get_schema(2**31 - 1)).error_code == 40403
    client.register_schema(subject, _avro([ID]))
    assert _error(lambda: client.get_version(subject, 7)).error_code == 40402
    assert _error(lambda: client.lookup_schema(subject, _avro([ID, NOTE]))).error_code == 40403
    invalid = _error(lambda: client.register_schema(subject, Schema('{"type": "recrod"}', "AVRO")))
    assert (invalid.http_status_code, invalid.error_code) == (422, 42201)
    not_json = _error(lambda: client.register_schema(subject, Schema("{", "JSON")))
    assert not_json.error_code == 42201
    level = _error(lambda: client.set_compatibility(subject, "SIDEWAYS"))
    assert level.error_code == 42203
    assert _error(lambda: client.get_compatibility(unique_subject("unset"))).error_code == 40408


@pytest.mark.parametrize(
    ("level", "old", "new", "compatible"),
    [
        ("BACKWARD", [ID], [ID, NOTE], True),  # new reader fills the default
        ("BACKWARD", [ID], [ID, NOTE_NO_DEFAULT], False),  # new reader has nothing for note
        ("BACKWARD", [ID, NOTE_NO_DEFAULT], [ID], True),  # dropping a field: the reader ignores it
        ("FORWARD", [ID, NOTE_NO_DEFAULT], [ID], False),  # old reader needs note, new writer lacks it
        ("FORWARD", [ID], [ID, NOTE_NO_DEFAULT], True),
        ("FULL", [ID], [ID, NOTE], True),
        ("FULL", [ID], [ID, NOTE_NO_DEFAULT], False),
        ("BACKWARD", [{"name": "n", "type": "int"}], [{"name": "n", "type": "long"}], True),  # promotion
        ("BACKWARD", [{"name": "n", "type": "long"}], [{"name": "n", "type": "int"}], False),
        ("FORWARD", [{"name": "n", "type": "long"}], [{"name": "n", "type": "int"}], True),
        ("BACKWARD", [{"name": "n", "type": "string"}], [{"name": "n", "type": ["null", "string"]}], True),
        ("BACKWARD", [{"name": "n", "type": ["null", "string"]}], [{"name": "n", "type": "string"}], False),
        (
            "BACKWARD",
            [{"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B"]}}],
            [{"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A"]}}],
            False,
        ),
        (
            "BACKWARD",
            [{"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B"]}}],
            [{"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A"], "default": "A"}}],
            True,
        ),
        ("NONE", [ID], [{"name": "id", "type": "string"}], True),
    ],
)
def test_compatibility_levels(
    client: SchemaRegistryClient,
    unique_subject: Callable[[str], str],
    level: str,
    old: list[dict[str, object]],
    new: list[dict[str, object]],
    compatible: bool,
) -> None:
    subject = unique_subject("compat")
    client.register_schema(subject, _avro(old))
    client.set_compatibility(subject, level)
    assert client.get_compatibility(subject) == level
    assert client.test_compatibility(subject, _avro(new)) is compatible
    if compatible:
        client.register_schema(subject, _avro(new))
        assert client.get_versions(subject) == [1, 2]
    else:
        refused = _error(lambda: client.register_schema(subject, _avro(new)))
        assert (refused.http_status_code, refused.error_code) == (409, 409)
        assert client.get_versions(subject) == [1]


def test_transitive_checks_every_version(
    client: SchemaRegistryClient, unique_subject: Callable[[str], str]
) -> None:
    subject = unique_subject("transitive")
    client.set_compatibility(subject, "BACKWARD")
    client.register_schema(subject, _avro([ID, NOTE_NO_DEFAULT]))
    client.register_schema(subject, _avro([ID]))
    back_again = _avro([ID, {"name": "note", "type": "string", "default": ""}])
    assert client.test_compatibility(subject, back_again) is True  # against the latest only
    client.set_compatibility(subject, "BACKWARD_TRANSITIVE")
    needs_note = _avro([ID, {"name": "extra", "type": "int"}])
    assert client.test_compatibility(subject, needs_note) is False
    assert client.test_compatibility(subject, back_again) is True
    assert client.test_compatibility(subject, _avro([ID, NOTE_NO_DEFAULT]), version=1) is True


def test_global_config(schema_registry: str) -> None:
    with RegistryServer() as own:  # its own server: the shared one's global level stays put
        c = SchemaRegistryClient({"url": own.url})
        assert c.get_compatibility() == "BACKWARD"
        c.set_compatibility(level="FULL")
        assert c.get_compatibility() == "FULL"
        assert c.get_config().compatibility_level is not None


def test_references(
    client: SchemaRegistryClient,
    uncached: Callable[[], SchemaRegistryClient],
    unique_subject: Callable[[str], str],
) -> None:
    address_subject, person_subject = unique_subject("addr"), unique_subject("person-value")
    address = Schema(
        json.dumps(
            {
                "type": "record",
                "name": "Address",
                "namespace": "t",
                "fields": [{"name": "city", "type": "string"}],
            }
        ),
        "AVRO",
    )
    client.register_schema(address_subject, address)
    person = Schema(
        json.dumps(
            {
                "type": "record",
                "name": "Person",
                "namespace": "t",
                "fields": [{"name": "home", "type": "t.Address"}],
            }
        ),
        "AVRO",
        [SchemaReference("t.Address", address_subject, 1)],
    )
    person_id = client.register_schema(person_subject, person)
    fetched = uncached().get_schema(person_id)
    assert [(r.name, r.subject, r.version) for r in fetched.references] == [("t.Address", address_subject, 1)]
    assert client.get_referenced_by(address_subject, 1) == [person_id]
    unresolved = Schema(person.schema_str, "AVRO")  # without the reference, t.Address is unknown
    assert _error(lambda: client.register_schema(unique_subject("bad"), unresolved)).error_code == 42201
    assert _error(lambda: client.delete_subject(address_subject)).error_code == 42206


def test_soft_then_hard_delete(client: SchemaRegistryClient, unique_subject: Callable[[str], str]) -> None:
    subject = unique_subject("del")
    client.register_schema(subject, _avro([ID]))
    client.register_schema(subject, _avro([ID, NOTE]))
    assert _error(lambda: client.delete_version(subject, 1, permanent=True)).error_code == 40407
    assert client.delete_version(subject, 1) == 1
    assert client.get_versions(subject) == [2]
    assert _error(lambda: client.delete_subject(subject, permanent=True)).error_code == 40405
    assert client.delete_subject(subject) == [2]
    assert subject not in client.get_subjects()
    assert _error(lambda: client.delete_subject(subject)).error_code == 40404
    assert client.delete_subject(subject, permanent=True) == [1, 2]
    assert _error(lambda: client.get_versions(subject)).error_code == 40401


def test_json_schema_and_protobuf_are_validated(
    client: SchemaRegistryClient, unique_subject: Callable[[str], str]
) -> None:
    subject = unique_subject("json")
    schema = Schema(json.dumps({"type": "object", "properties": {"id": {"type": "integer"}}}), "JSON")
    schema_id = client.register_schema(subject, schema)
    assert client.get_latest_version(subject).schema.schema_type == "JSON"
    assert client.lookup_schema(subject, schema).schema_id == schema_id
    bad_json_schema = Schema(json.dumps({"type": "objekt"}), "JSON")
    assert _error(lambda: client.register_schema(subject, bad_json_schema)).error_code == 42201
    proto_text = Schema('syntax = "proto3"; message M { int32 id = 1; }', "PROTOBUF")
    refused = _error(lambda: client.register_schema(unique_subject("proto"), proto_text))
    assert refused.error_code == 42201 and "FileDescriptorProto" in refused.error_message


def test_basic_auth_and_bearer() -> None:
    store = SchemaStore()
    with RegistryServer(store=store, users={"alice": "s3cret-pw"}) as secured:
        good = SchemaRegistryClient({"url": secured.url, "basic.auth.user.info": "alice:s3cret-pw"})
        assert good.get_subjects() == []
        wrong = SchemaRegistryClient({"url": secured.url, "basic.auth.user.info": "alice:nope"})
        assert (_error(wrong.get_subjects).http_status_code, _error(wrong.get_subjects).error_code) == (
            401,
            40101,
        )
        assert "s3cret-pw" not in repr(secured)
    with RegistryServer(token="tok-123") as bearer:
        c = SchemaRegistryClient(
            {
                "url": bearer.url,
                "bearer.auth.credentials.source": "STATIC_TOKEN",
                "bearer.auth.token": "tok-123",
                "bearer.auth.logical.cluster": "lsrc-1",
                "bearer.auth.identity.pool.id": "pool-1",
            }
        )
        assert c.get_subjects() == []
        assert _error(SchemaRegistryClient({"url": bearer.url}).get_subjects).error_code == 40101


def test_ccompat_prefix_is_served(unique_subject: Callable[[str], str]) -> None:
    """Apicurio's Confluent-compatible API lives under /apis/ccompat/v7; the dev registry answers there too."""
    with RegistryServer() as registry:
        c = SchemaRegistryClient({"url": registry.url + "/apis/ccompat/v7"})
        subject = unique_subject("cc")
        assert c.register_schema(subject, _avro([ID])) == 1


def test_command_prints_its_url_and_stops_on_sigterm() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "kafka_core.devtools.registry", "--user", "u:pw"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        info = json.loads(proc.stdout.readline())
        assert info["auth"] == "basic" and info["url"].startswith("http://127.0.0.1:")
        c = SchemaRegistryClient({"url": info["url"], "basic.auth.user.info": "u:pw"})
        assert c.register_schema("cmd-value", _avro([ID])) == 1
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_concurrent_registrations_agree() -> None:
    """Eight clients at once, each registering the same four versions under its own subject and a
    shared one: one id per schema across every subject, the shared subject gets each version once."""
    import threading

    versions = [
        _avro([ID, *[{"name": f"f{i}", "type": "int", "default": 0} for i in range(n)]]) for n in range(4)
    ]
    with RegistryServer() as registry:
        ids: list[list[int]] = []
        lock = threading.Lock()

        def work(n: int) -> None:
            c = SchemaRegistryClient({"url": registry.url})
            mine = [c.register_schema(f"own-{n}", v) for v in versions]
            shared = [c.register_schema("shared", v) for v in versions]
            assert mine == shared
            with lock:
                ids.append(mine)

        threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert len(ids) == 8 and all(row == ids[0] for row in ids) and len(set(ids[0])) == 4
        assert SchemaRegistryClient({"url": registry.url}).get_versions("shared") == [1, 2, 3, 4]


def _proto(
    fields: list[tuple[str, int, int, int]], *, package: str = "t", extra_message: bool = True
) -> Schema:
    """A base64 FileDescriptorProto (as confluent-kafka registers) of message M with ``fields``
    (name, number, type, label), and a second message unless told otherwise."""
    import base64

    from google.protobuf import descriptor_pb2

    file = descriptor_pb2.FileDescriptorProto(name="t.proto", package=package, syntax="proto2")
    message = file.message_type.add(name="M")
    for name, number, kind, label in fields:
        message.field.add(name=name, number=number, type=kind, label=label)
    if extra_message:
        file.message_type.add(name="Other")
    return Schema(base64.b64encode(file.SerializeToString()).decode(), "PROTOBUF")


def _proto_field_types() -> Any:
    from google.protobuf import descriptor_pb2

    return descriptor_pb2.FieldDescriptorProto


@pytest.mark.parametrize(
    ("change", "compatible"),
    [
        ("add a field", True),
        ("int32 -> int64", True),
        ("int32 -> string", False),
        ("remove a field", True),
        ("remove a message", False),
        ("change the package", False),
        ("add a required field", False),
    ],
)
def test_protobuf_compatibility(
    client: SchemaRegistryClient, unique_subject: Callable[[str], str], change: str, compatible: bool
) -> None:
    F = _proto_field_types()
    opt, req = F.LABEL_OPTIONAL, F.LABEL_REQUIRED
    base = [("id", 1, F.TYPE_INT32, opt), ("note", 2, F.TYPE_STRING, opt)]
    new = {
        "add a field": _proto([*base, ("extra", 3, F.TYPE_BOOL, opt)]),
        "int32 -> int64": _proto([("id", 1, F.TYPE_INT64, opt), base[1]]),
        "int32 -> string": _proto([("id", 1, F.TYPE_STRING, opt), base[1]]),
        "remove a field": _proto(base[:1]),
        "remove a message": _proto(base, extra_message=False),
        "change the package": _proto(base, package="u"),
        "add a required field": _proto([*base, ("must", 3, F.TYPE_INT32, req)]),
    }[change]
    subject = unique_subject("proto-compat")
    client.set_compatibility(subject, "BACKWARD")
    client.register_schema(subject, _proto(base))
    assert client.test_compatibility(subject, new) is compatible
