"""The committed messages/ package is what the generator makes from the definitions (no drift),
and the package imports its modules lazily."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

try:  # tests/unit is a package when it has an __init__.py, a rootdir otherwise
    from .test_protocol_support import REPO, gen, need_definitions
except ImportError:
    from test_protocol_support import REPO, gen, need_definitions  # type: ignore[no-redef]

OUT = REPO / "kafka_core" / "protocol" / "messages"


def test_committed_package_matches_the_generator() -> None:
    need_definitions()
    fresh = gen.generate(gen.DEFAULT_MESSAGES)
    stale = [
        name for name, text in fresh.items() if not (OUT / name).is_file() or (OUT / name).read_text() != text
    ]
    assert not stale, f"{stale[:5]} are stale: run `python tools/gen_protocol.py`"
    extra = {p.name for p in OUT.glob("*.py")} - set(fresh)
    assert not extra, f"{sorted(extra)} are not generated any more: run `python tools/gen_protocol.py`"
    # the single module this package replaced: the package would win the import, leaving it dead code
    assert not (OUT.parent / "messages.py").exists()


def test_check_flag_reports_drift(tmp_path: Path) -> None:
    need_definitions()
    out = tmp_path / "messages"
    assert gen.main(["--out", str(out)]) == 0
    assert gen.main(["--out", str(out), "--check"]) == 0
    edited = out / "_metadata.py"
    edited.write_text(edited.read_text() + "# edited\n")
    assert gen.main(["--out", str(out), "--check"]) == 1
    assert gen.main(["--out", str(out)]) == 0
    # a module left over from a definition that is gone is drift too, and a rewrite removes it
    leftover = out / "_gone.py"
    leftover.write_text((out / "_metadata.py").read_text())
    assert gen.main(["--out", str(out), "--check"]) == 1
    assert gen.main(["--out", str(out)]) == 0
    assert not leftover.exists()
    (edited).unlink()
    assert gen.main(["--out", str(out), "--check"]) == 1


def test_generator_reads_a_definition_directory(tmp_path: Path) -> None:
    need_definitions()
    # a directory with a subset of the files: only those messages come out, comments stripped
    defs = tmp_path / "defs"
    defs.mkdir()
    for name in ("ApiVersionsRequest.json", "ApiVersionsResponse.json", "ConsumerProtocolSubscription.json"):
        shutil.copy(gen.DEFAULT_MESSAGES / name, defs / name)
    files = gen.generate(defs)
    assert sorted(files) == ["__init__.py", "_api_versions.py", "_consumer_protocol_subscription.py"]
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
    need_definitions()
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
