"""A Cython extension that will not load: one policy for the codec and the Avro extensions, an
ImportError under KAFKA_CORE_REQUIRE_EXTENSION (CI) and otherwise a warning and the twin."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kafka_core import codec
from kafka_core.codec import _python
from kafka_core.codec.extension import extension_module
from kafka_core.codec.fallback import fall_back

# `writer` has a pure-Python module and no Cython one: its extension never loads.
MISSING = "writer"


@pytest.fixture
def cython_codec(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(codec, "IMPLEMENTATION", "cython")
    extension_module.cache_clear()
    yield
    extension_module.cache_clear()


def test_a_required_extension_that_does_not_load_is_an_import_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKA_CORE_REQUIRE_EXTENSION", "1")
    with pytest.raises(ImportError, match=r"the Cython Avro codec did not load \(no such\)"):
        fall_back("Avro codec", ImportError("no such"), stacklevel=1)


def test_otherwise_the_twin_is_used_with_a_warning(
    monkeypatch: pytest.MonkeyPatch, cython_codec: None
) -> None:
    monkeypatch.delenv("KAFKA_CORE_REQUIRE_EXTENSION", raising=False)
    with pytest.warns(RuntimeWarning, match="Cython test writer unavailable .* slower pure-Python one"):
        module = extension_module(MISSING, "test writer")
    assert module.__name__ == f"{_python.__name__}.{MISSING}"


def test_the_extension_loader_follows_the_policy(monkeypatch: pytest.MonkeyPatch, cython_codec: None) -> None:
    monkeypatch.setenv("KAFKA_CORE_REQUIRE_EXTENSION", "1")
    with pytest.raises(ImportError, match="the Cython test writer did not load"):
        extension_module(MISSING, "test writer")


def test_a_pure_python_codec_takes_the_twins_without_a_word(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(codec, "IMPLEMENTATION", "python")
    monkeypatch.setenv("KAFKA_CORE_REQUIRE_EXTENSION", "1")
    extension_module.cache_clear()
    try:
        assert extension_module("avro", "Avro codec").__name__ == f"{_python.__name__}.avro"
    finally:
        extension_module.cache_clear()
