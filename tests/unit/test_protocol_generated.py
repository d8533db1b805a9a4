"""The committed messages.py is what the generator makes from the definitions (no drift)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

try:  # tests/unit is a package when it has an __init__.py, a rootdir otherwise
    from .test_protocol_support import REPO, gen, need_definitions
except ImportError:
    from test_protocol_support import REPO, gen, need_definitions  # type: ignore[no-redef]

OUT = REPO / "kafka_core" / "protocol" / "messages.py"


def test_committed_module_matches_the_generator() -> None:
    need_definitions()
    fresh = gen.generate(gen.DEFAULT_MESSAGES)
    assert fresh == OUT.read_text(), "messages.py is stale: run `python tools/gen_protocol.py`"


def test_check_flag_reports_drift(tmp_path: Path) -> None:
    need_definitions()
    out = tmp_path / "messages.py"
    assert gen.main(["--out", str(out)]) == 0
    assert gen.main(["--out", str(out), "--check"]) == 0
    out.write_text(out.read_text() + "# edited\n")
    assert gen.main(["--out", str(out), "--check"]) == 1


def test_generator_reads_a_definition_directory(tmp_path: Path) -> None:
    need_definitions()
    # a directory with a subset of the files: only those messages come out, comments stripped
    for name in ("ApiVersionsRequest.json", "ApiVersionsResponse.json"):
        shutil.copy(gen.DEFAULT_MESSAGES / name, tmp_path / name)
    text = gen.generate(tmp_path)
    assert "class ApiVersionsRequest(Struct):" in text
    assert "class MetadataRequest(" not in text
    namespace: dict[str, object] = {}
    exec(compile(text, "subset", "exec"), namespace)
    assert namespace["REQUEST_CLASSES"][18].__name__ == "ApiVersionsRequest"  # type: ignore[index]


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
