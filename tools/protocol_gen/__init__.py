"""Code generator for kafka_core/protocol/messages/ from Apache Kafka's JSON message definitions.

``spec`` loads the definitions into a model, ``emit`` writes readers, writers and classes for one
message, ``package`` lays them out as one lazily imported module per API family, ``schema``
writes the model out as data for the tests (and reads it back).
"""

from __future__ import annotations

from .package import family, generate
from .schema import from_schema
from .spec import MessageDef, StructDef, load

__all__ = ["MessageDef", "StructDef", "family", "from_schema", "generate", "load"]
