"""The committed messages/ package is what the generator makes from the definitions (no drift),
and the package imports its modules lazily.

Only the drift check reads Kafka's definitions, from the kafka-clients jar on Maven Central (failed
without it, skipped only under KAFKA_CORE_ALLOW_SKIP=1); the generator's own behaviour is checked
on small definitions written here.
"""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

try:  # tests/unit is a package when it has an __init__.py, a rootdir otherwise
    from .test_protocol_support import REPO, gen, need_definitions
except ImportError:
    from test_protocol_support import REPO, gen, need_definitions  # type: ignore[no-redef]

from protocol_gen.schema_table import SCHEMA  # on sys.path once test_protocol_support loaded gen

OUT = REPO / "kafka_core" / "protocol" / "messages"

# Small definitions in Kafka's format (comments included): enough for the generator's own tests.
_DEFINITIONS = {
    "ApiVersionsRequest.json": {
        "apiKey": 18,
        "type": "request",
        "listeners": ["broker"],
        "name": "ApiVersionsRequest",
        "validVersions": "0-3",
        "flexibleVersions": "3+",
        "fields": [
            {"name": "ClientSoftwareName", "type": "string", "versions": "3+", "ignorable": True},
        ],
    },
    "ApiVersionsResponse.json": {
        "apiKey": 18,
        "type": "response",
        "name": "ApiVersionsResponse",
        "validVersions": "0-3",
        "flexibleVersions": "3+",
        "fields": [
            {"name": "ErrorCode", "type": "int16", "versions": "0+"},
            {
                "name": "ApiKeys",
                "type": "[]ApiVersion",
                "versions": "0+",
                "fields": [
                    {"name": "ApiKey", "type": "int16", "versions": "0+", "mapKey": True},
                    {"name": "MaxVersion", "type": "int16", "versions": "0+"},
                ],
            },
            {"name": "ThrottleTimeMs", "type": "int32", "versions": "1+", "ignorable": True},
            {
                "name": "FinalizedFeaturesEpoch",
                "type": "int64",
                "versions": "3+",
                "taggedVersions": "3+",
                "tag": 1,
                "default": "-1",
                "ignorable": True,
            },
        ],
    },
    # an API Kafka removed keeps a file with its name and key, and no versions: no classes
    "LeaderAndIsrRequest.json": {
        "apiKey": 4,
        "type": "request",
        "name": "LeaderAndIsrRequest",
        "validVersions": "none",
    },
    "ConsumerProtocolSubscription.json": {
        "type": "data",
        "name": "ConsumerProtocolSubscription",
        "validVersions": "0-1",
        "flexibleVersions": "none",
        "fields": [
            {"name": "Topics", "type": "[]string", "versions": "0+"},
            {
                "name": "UserData",
                "type": "bytes",
                "versions": "0+",
                "nullableVersions": "0+",
                "default": "null",
            },
        ],
    },
}


def gen_from_schema(schema: dict) -> list:
    from protocol_gen import from_schema  # on sys.path once gen_protocol is loaded

    return from_schema(schema)


def _definitions(tmp_path: Path) -> Path:
    defs = tmp_path / "defs"
    defs.mkdir()
    for name, spec in _DEFINITIONS.items():
        (defs / name).write_text(
            "// Licensed to the Apache Software Foundation\n" + json.dumps(spec, indent=2)
        )
    return defs


def test_committed_package_matches_the_generator(tmp_path: Path) -> None:
    definitions = need_definitions(tmp_path / "definitions")
    fresh = gen.generate(definitions)
    stale = [
        name for name, text in fresh.items() if not (OUT / name).is_file() or (OUT / name).read_text() != text
    ]
    assert not stale, f"{stale[:5]} are stale: run `python tools/gen_protocol.py`"
    extra = {p.name for p in OUT.glob("*.py")} - set(fresh)
    assert not extra, f"{sorted(extra)} are not generated any more: run `python tools/gen_protocol.py`"
    # the single module this package replaced: the package would win the import, leaving it dead code
    assert not (OUT.parent / "messages.py").exists()
    # the tests' field schemas are the loader's model of these definitions, field for field
    assert gen.DEFAULT_SCHEMA.read_text() == gen.schema_table(definitions), (
        "the schema table is stale: run `python tools/gen_protocol.py`"
    )
    assert gen_from_schema(SCHEMA) == gen.load_all(definitions)


def test_schema_table_reads_back_as_the_loader_model(tmp_path: Path) -> None:
    defs = _definitions(tmp_path)
    namespace: dict = {}
    exec(compile(gen.schema_table(defs), "schema_table.py", "exec"), namespace)
    loaded = gen.load_all(defs)
    assert [m.name for m in loaded] == [
        "ApiVersionsRequest",
        "ApiVersionsResponse",
        "ConsumerProtocolSubscription",
    ]  # not the removed LeaderAndIsrRequest
    assert gen_from_schema(namespace["SCHEMA"]) == loaded
    response = next(m for m in loaded if m.name == "ApiVersionsResponse")
    assert [f.attr for f in response.structs[0].fields] == [
        "api_key",
        "max_version",
    ]  # the model is not empty


def test_check_flag_reports_drift(tmp_path: Path) -> None:
    defs = ["--messages", str(_definitions(tmp_path))]
    out = tmp_path / "messages"
    assert gen.main([*defs, "--out", str(out)]) == 0
    assert gen.main([*defs, "--out", str(out), "--check"]) == 0
    edited = out / "_api_versions.py"
    edited.write_text(edited.read_text() + "# edited\n")
    assert gen.main([*defs, "--out", str(out), "--check"]) == 1
    assert gen.main([*defs, "--out", str(out)]) == 0
    # a module left over from a definition that is gone is drift too, and a rewrite removes it
    leftover = out / "_gone.py"
    leftover.write_text((out / "_api_versions.py").read_text())
    assert gen.main([*defs, "--out", str(out), "--check"]) == 1
    assert gen.main([*defs, "--out", str(out)]) == 0
    assert not leftover.exists()
    (edited).unlink()
    assert gen.main([*defs, "--out", str(out), "--check"]) == 1
    assert gen.main([*defs, "--out", str(out)]) == 0
    # the tests' schema table (beside another --out, never the repository's) is checked too
    table = tmp_path / "schema_table.py"
    assert table.read_text().startswith(gen.BANNER[0])
    table.write_text(table.read_text() + "# edited\n")
    assert gen.main([*defs, "--out", str(out), "--check"]) == 1
    assert gen.main([*defs, "--out", str(out)]) == 0
    assert gen.main([*defs, "--out", str(out), "--check"]) == 0
    moved = tmp_path / "elsewhere.py"
    assert gen.main([*defs, "--out", str(out), "--schema", str(moved), "--check"]) == 1
    assert gen.main([*defs, "--out", str(out), "--schema", str(moved)]) == 0
    assert moved.read_text() == table.read_text()


def _jar(tmp_path: Path, defs: Path) -> Path:
    """A kafka-clients-like jar: the definitions under common/message/, beside other entries."""
    jar = tmp_path / "kafka-clients-test.jar"
    with zipfile.ZipFile(jar, "w") as archive:
        archive.writestr("org/apache/kafka/common/message/MetadataRequestData.class", b"\xca\xfe")
        archive.writestr("common/message/README.md", "not a definition")
        archive.writestr("common/message/nested/Other.json", "{}")
        for p in sorted(defs.glob("*.json")):
            archive.writestr(f"common/message/{p.name}", p.read_bytes())
    return jar


def test_definitions_come_out_of_a_kafka_clients_jar(tmp_path: Path) -> None:
    defs = _definitions(tmp_path)
    jar = _jar(tmp_path, defs)
    taken = gen.extract(jar, tmp_path / "taken")
    assert sorted(p.name for p in taken.iterdir()) == sorted(p.name for p in defs.glob("*.json"))
    assert gen.generate(taken) == gen.generate(defs)
    out = tmp_path / "from_jar"
    assert gen.main(["--jar", str(jar), "--out", str(out)]) == 0
    assert gen.main(["--messages", str(defs), "--out", str(out), "--check"]) == 0
    empty = tmp_path / "empty.jar"
    with zipfile.ZipFile(empty, "w") as archive:
        archive.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\n")
    with pytest.raises(ValueError, match=r"holds no common/message/\*\.json"):
        gen.extract(empty, tmp_path / "none")


def test_generator_refuses_two_definitions_of_one_api_key(tmp_path: Path) -> None:
    # a folder mixing releases (4.0's ListClientMetricsResources, 4.1's ListConfigResources: key 74)
    defs = _definitions(tmp_path)
    clash = dict(_DEFINITIONS["ApiVersionsRequest.json"], name="OtherVersionsRequest")
    (defs / "OtherVersionsRequest.json").write_text(json.dumps(clash))
    with pytest.raises(ValueError, match="API key 18 is defined twice"):
        gen.generate(defs)


def test_generator_reads_a_definition_directory(tmp_path: Path) -> None:
    # a directory with a few definitions: only those messages come out, comments stripped
    defs = _definitions(tmp_path)
    files = gen.generate(defs)
    assert sorted(files) == [
        "__init__.py",
        "_api_versions.py",
        "_consumer_protocol_subscription.py",
    ]
    assert "class ApiVersionsRequest(Struct):" in files["_api_versions.py"]
    assert "class MetadataRequest(" not in "".join(files.values())
    pkg = tmp_path / "subset_pkg"
    assert gen.main(["--messages", str(defs), "--out", str(pkg)]) == 0
    sys.path.insert(0, str(tmp_path))
    try:
        import subset_pkg  # type: ignore[import-not-found]

        assert subset_pkg.REQUEST_CLASSES[18].__name__ == "ApiVersionsRequest"
        assert subset_pkg.DATA_CLASSES["ConsumerProtocolSubscription"].__module__ == (
            "subset_pkg._consumer_protocol_subscription"
        )
    finally:
        sys.path.remove(str(tmp_path))
        for name in [n for n in sys.modules if n.startswith("subset_pkg")]:
            del sys.modules[name]


_LAZY_PROBE = """
import sys
import kafka_core.protocol as p
from kafka_core.protocol import REQUEST_CLASSES, messages
loaded = lambda: sorted(n.rsplit(".", 1)[1] for n in sys.modules if n.startswith("kafka_core.protocol.messages."))
print(loaded())
from kafka_core.protocol.messages import MetadataRequest
assert messages.FetchResponse.API_KEY == 1
assert REQUEST_CLASSES.get(0).__name__ == "ProduceRequest" and 0 in REQUEST_CLASSES
print(loaded())
print(len(list(REQUEST_CLASSES)), loaded() == ["_fetch", "_metadata", "_produce"])
"""


def test_messages_are_imported_on_first_use() -> None:
    # a fresh interpreter: this one has imported every family already
    out = subprocess.run(
        [sys.executable, "-c", _LAZY_PROBE], capture_output=True, text=True, check=True, timeout=120
    ).stdout.splitlines()
    assert out[0] == "[]"
    assert out[1] == "['_fetch', '_metadata', '_produce']"
    assert out[2].endswith(" True")  # iterating over the keys imports nothing


def test_unknown_names_raise_attribute_error() -> None:
    from kafka_core.protocol import REQUEST_CLASSES, messages

    with pytest.raises(AttributeError, match="NoSuchRequest"):
        _ = messages.NoSuchRequest
    assert REQUEST_CLASSES.get(9999) is None
    with pytest.raises(KeyError):
        REQUEST_CLASSES[9999]
    assert "MetadataRequest" in dir(messages)


def test_generator_refuses_unknown_spec_features(tmp_path: Path) -> None:
    spec = {
        "apiKey": 999,
        "type": "request",
        "name": "FutureRequest",
        "validVersions": "0",
        "flexibleVersions": "0+",
        "fields": [{"name": "X", "type": "int32", "versions": "0+", "someNewFeature": True}],
    }
    (tmp_path / "FutureRequest.json").write_text("// a comment\n" + json.dumps(spec))
    with pytest.raises(ValueError, match="someNewFeature"):
        gen.generate(tmp_path)


def test_nothing_reads_the_old_definitions_folder_outside_the_repository() -> None:
    # the definitions once lived in a folder beside the checkout, which a user's clone does not have
    needles = ("../" + "shared", "/work/" + "shared")
    readers = [
        str(p.relative_to(REPO))
        for top in ("tools", "tests", "bench", "ci")
        for p in sorted((REPO / top).rglob("*"))
        if p.suffix in (".py", ".sh", ".toml", ".cfg", ".ini")
        and "__pycache__" not in p.parts
        and any(n in p.read_text(errors="replace") for n in needles)
    ]
    assert not readers, f"{readers} name a folder outside the repository"
