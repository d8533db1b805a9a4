"""The top-level names: each one in ``__all__`` resolves (lazily), and to the class it names."""

from __future__ import annotations

import subprocess
import sys

import kafka_core


def test_every_public_name_resolves() -> None:
    for name in kafka_core.__all__:
        assert getattr(kafka_core, name) is not None, name
    assert set(kafka_core.__all__) <= set(dir(kafka_core))


def test_consumer_names_are_the_consumer_packages_own() -> None:
    from kafka_core import consumer

    for name in ("ConsumerGroupMetadata", "IsolationLevel", "KafkaDeserializationError", "OffsetReset"):
        assert getattr(kafka_core, name) is getattr(consumer, name)
    assert issubclass(kafka_core.KafkaDeserializationError, kafka_core.errors.KafkaCodecError)


def test_importing_the_package_loads_no_client() -> None:
    """The names load on first use: ``import kafka_core`` stays cheap."""
    code = "import sys, kafka_core; print(sorted(m for m in sys.modules if m.startswith('kafka_core.')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "kafka_core.consumer" not in out and "kafka_core.producer" not in out
