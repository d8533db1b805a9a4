"""Without the schema-registry extra, naming a serializer says which extra to install."""

from __future__ import annotations

import sys

import pytest


def test_a_missing_format_library_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import kafka_core.schema_registry as sr

    # as on a machine without fastavro: the import of fastavro fails, and avro is imported afresh
    monkeypatch.setitem(sys.modules, "fastavro", None)
    for name in [m for m in sys.modules if m.startswith("kafka_core.schema_registry.avro")]:
        monkeypatch.delitem(sys.modules, name)
    with pytest.raises(ModuleNotFoundError) as caught:
        sr.AvroSerializer  # noqa: B018 - the lazy attribute's import is what is tested
    assert caught.value.name == "fastavro"
    assert "pip install 'kafka-core[schema-registry]'" in str(caught.value)
    assert "fastavro" in str(caught.value)


def test_an_unknown_name_is_still_an_attribute_error() -> None:
    import kafka_core.schema_registry as sr

    with pytest.raises(AttributeError):
        sr.NoSuchSerializer  # noqa: B018
