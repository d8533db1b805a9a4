"""Shared test helpers: the generator's model of the message definitions, and hypothesis strategies.

Strategies are built from the field schemas (tools/protocol_gen/schema_table.py, the generator's
loader model written out as data), not from the generated classes' wire code, so a generator bug
cannot hide by agreeing with itself; and they need no file outside the repository. Only the drift
check reads the JSON definitions, from Apache Kafka's kafka-clients jar on Maven Central
(tools/protocol_gen/definitions.py): ``need_definitions()`` fails when it cannot be had (a skip
only under ``KAFKA_CORE_ALLOW_SKIP=1``, tests/prerequisites.py). ``KAFKA_CORE_PROTOCOL_DEFINITIONS``
names a folder of definitions to use instead.
"""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path
from typing import Any

from file_modules import load_file_module
from hypothesis import strategies as st
from prerequisites import unavailable

from kafka_core.protocol import messages

REPO = Path(__file__).resolve().parents[3]
GEN_PATH = REPO / "tools" / "gen_protocol.py"


gen = load_file_module("gen_protocol", GEN_PATH)

from protocol_gen.schema_table import SCHEMA  # noqa: E402  (on sys.path once gen_protocol is loaded)


def need_definitions(tmp: Path) -> Path:
    """The folder of definitions the package is generated from: ``KAFKA_CORE_PROTOCOL_DEFINITIONS``
    if set, else the kafka-clients jar's, extracted into ``tmp``. The jar is fetched from Maven
    Central when absent; a failure saying so when it cannot be (the drift check must run), a skip
    only under KAFKA_CORE_ALLOW_SKIP=1."""
    override = os.environ.get("KAFKA_CORE_PROTOCOL_DEFINITIONS")
    if override:
        assert Path(override).is_dir(), f"KAFKA_CORE_PROTOCOL_DEFINITIONS={override} is not a folder"
        return Path(override)
    version = gen.kafka_version()
    try:
        jar = gen.clients_jar(version)
    except Exception as exc:  # no Maven or Java, no network: say which and why
        unavailable(
            f"Apache Kafka {version}'s kafka-clients jar from Maven Central (the protocol drift check)", exc
        )
    return gen.extract(jar, tmp)


@cache
def all_messages() -> list[Any]:
    from protocol_gen import from_schema  # on sys.path once gen_protocol is loaded

    return from_schema(SCHEMA)


def message_versions() -> list[tuple[str, int]]:
    return [(m.name, v) for m in all_messages() for v in range(m.valid.lo, m.valid.hi + 1)]


def message_by_name(name: str) -> Any:
    return next(m for m in all_messages() if m.name == name)


_INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "uint32": (0, 2**32 - 1),
    "int64": (-(2**63), 2**63 - 1),
}


def _scalar(ftype: str) -> st.SearchStrategy[Any]:
    if ftype in _INT_RANGES:
        lo, hi = _INT_RANGES[ftype]
        return st.integers(lo, hi)
    if ftype == "bool":
        return st.booleans()
    if ftype == "float64":
        return st.floats(allow_nan=False)
    if ftype == "string":
        return st.text(max_size=12)
    if ftype in ("bytes", "records"):
        return st.binary(max_size=24)
    if ftype == "uuid":
        return st.uuids()
    raise AssertionError(ftype)


def struct_strategy(m: Any, sd: Any, v: int) -> st.SearchStrategy[Any]:
    top = getattr(messages, m.name)
    cls = top if sd is m.top else getattr(top, sd.name)
    flex = v in m.flexible
    kwargs: dict[str, st.SearchStrategy[Any]] = {}
    known_tags = set()
    for f in sd.fields:
        if v not in f.versions:
            continue
        if flex and v in f.tagged:
            known_tags.add(f.tag)
        elem = struct_strategy(m, f.struct, v) if f.struct is not None else _scalar(f.type)
        value = st.lists(elem, max_size=3) if f.is_array else elem
        if v in f.nullable:
            value = st.none() | value
        kwargs[f.attr] = value
    if flex:
        kwargs["unknown_tagged_fields"] = st.dictionaries(
            st.integers(0, 400).filter(lambda t: t not in known_tags), st.binary(max_size=6), max_size=2
        ).map(lambda d: sorted(d.items()))
    return st.builds(cls, **kwargs)
