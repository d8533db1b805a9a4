"""A pyarrow headers column (``list<struct<key, value>>``, what Spark's sink hands over) encodes to
the same bytes as the same headers given as Python lists, in both codecs.

The Cython encoder reads such a column in place (no Python object per header); a type it does not
read in place goes through ``to_pylist()`` as before, with that form's errors.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_core._env import env_flag
from kafka_core.codec._python import columnar as pcol
from kafka_core.errors import KafkaCodecError

IMPLS: list[tuple[str, Any]] = [("python", pcol)]
if not env_flag("KAFKA_CORE_PURE_PYTHON"):
    from kafka_core.codec._cython import columnar as ccol  # a missing extension fails here

    IMPLS.append(("cython", ccol))

impls = pytest.mark.parametrize(("name", "cols"), IMPLS, ids=[i[0] for i in IMPLS])


STRING, BINARY = pa.string(), pa.binary()


def header_type(list_type: Any = pa.list_, key: Any = STRING, value: Any = BINARY) -> Any:
    return list_type(pa.struct([pa.field("key", key), pa.field("value", value)]))


def encode(cols: Any, n: int, headers: Any) -> bytes:
    keys = pa.array([b"k%d" % i for i in range(n)], pa.binary())
    values = pa.array([b"v" * (i % 7) for i in range(n)], pa.binary())
    return bytes(cols.encode_record_batch_columns(keys, values, headers=headers, base_timestamp=1_700_000))


def as_pairs(rows: list[Any]) -> list[Any]:
    return [None if hs is None else [(h["key"], h["value"]) for h in hs] for hs in rows]


header = st.fixed_dictionaries(
    {"key": st.text(max_size=8), "value": st.one_of(st.none(), st.binary(max_size=12))}
)
rows = st.lists(st.one_of(st.none(), st.lists(header, max_size=4)), min_size=1, max_size=30)


@impls
@settings(max_examples=150, deadline=None)
@given(
    rows=rows,
    cut=st.integers(0, 5),
    list_type=st.sampled_from([pa.list_, pa.large_list]),
    key=st.sampled_from([pa.string(), pa.large_string()]),
    value=st.sampled_from([pa.binary(), pa.large_binary()]),
)
def test_arrow_headers_encode_as_their_lists(
    name: str, cols: Any, rows: list[Any], cut: int, list_type: Any, key: Any, value: Any
) -> None:
    arr = pa.array(rows, header_type(list_type, key, value))
    cut = min(cut, len(rows) - 1)
    arr = arr.slice(cut)  # offsets into buffers that start earlier
    expected = encode(pcol, len(arr), as_pairs(arr.to_pylist()))
    assert encode(cols, len(arr), arr) == expected
    assert encode(cols, len(arr), pa.chunked_array([arr.slice(0, 1), arr.slice(1)])) == expected


@impls
def test_sliced_struct_children_and_fixed_size_values(name: str, cols: Any) -> None:
    """Lists whose struct child is itself a slice (its own offset), and fixed-size values."""
    structs = pa.array(
        [{"key": "x", "value": b"00"}, {"key": "a", "value": b"12"}, {"key": "bb", "value": None}],
        pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary(2))]),
    ).slice(1)
    arr = pa.ListArray.from_arrays(pa.array([0, 1, 1, 2], pa.int32()), structs)
    expected = encode(pcol, 3, [[("a", b"12")], [], [("bb", None)]])
    assert encode(cols, 3, arr) == expected


@impls
def test_a_null_key_or_header_is_refused(name: str, cols: Any) -> None:
    null_key = pa.array([[{"key": None, "value": b"v"}]], header_type())
    with pytest.raises(KafkaCodecError, match="header key may not be None"):
        encode(cols, 1, null_key)
    null_header = pa.array([[{"key": "a", "value": b"v"}, None]], header_type())
    with pytest.raises(KafkaCodecError, match=r"a header must be a \(str, bytes.*\) pair, not None"):
        encode(cols, 1, null_header)


@impls
def test_other_header_types_keep_their_checks(name: str, cols: Any) -> None:
    """String values are not bytes (refused as before); a column of the wrong length is named."""
    strings = pa.array([[{"key": "a", "value": "text"}]], header_type(value=pa.string()))
    with pytest.raises(KafkaCodecError, match="must be bytes-like"):
        encode(cols, 1, strings)
    with pytest.raises(KafkaCodecError, match="headers has 1 entries, values has 2"):
        encode(cols, 2, pa.array([[]], header_type()))
