"""Code generator for kafka_core/protocol/messages/ from Apache Kafka's JSON message definitions.

``spec`` loads the definitions into a model, ``emit`` writes readers, writers and classes for one
message, ``package`` lays them out as one lazily imported module per API family, ``schema``
writes the model out as data for the tests (``schema_table.py`` here, never in the package) and
reads it back; ``definitions`` takes the definitions out of Kafka's kafka-clients jar.
"""

from __future__ import annotations

from .package import family, generate
from .schema import TABLE, from_schema, schema_table
from .spec import MessageDef, StructDef, load, load_all

__all__ = [
    "TABLE",
    "MessageDef",
    "StructDef",
    "family",
    "from_schema",
    "generate",
    "load",
    "load_all",
    "schema_table",
]
