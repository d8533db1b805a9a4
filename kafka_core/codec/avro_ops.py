"""The Avro encoder's plan vocabulary: node opcodes and error codes, shared by the plan builder
(``avro_encode``) and the pure-Python twin that runs it; ``_codec/avro_enc.pyx`` holds the same
numbers as C constants."""

from __future__ import annotations

__all__ = [
    "E_DIGITS",
    "E_ENUM",
    "E_FIXED",
    "E_FLOAT",
    "E_NOT_NULL",
    "E_NO_MEMBER",
    "E_NULL",
    "E_RANGE",
    "E_TOO_BIG",
    "E_UNION_NULL",
    "OP_ARRAY",
    "OP_BOOL",
    "OP_BYTES",
    "OP_DECIMAL",
    "OP_DOUBLE",
    "OP_ENUM",
    "OP_FIXED",
    "OP_FLOAT",
    "OP_INT",
    "OP_MAP",
    "OP_MEMBERS",
    "OP_NULL",
    "OP_NULLABLE",
    "OP_RECORD",
    "OP_UNION_NULL",
]

OP_NULL = 1
OP_BOOL = 2
OP_INT = 3
OP_FLOAT = 4
OP_DOUBLE = 5
OP_BYTES = 6
OP_FIXED = 7
OP_ENUM = 8
OP_DECIMAL = 9
OP_ARRAY = 10
OP_MAP = 11
OP_RECORD = 12
OP_UNION_NULL = 13
OP_NULLABLE = 14
OP_MEMBERS = 15

E_NULL = 1
E_NOT_NULL = 2
E_RANGE = 3
E_FLOAT = 4
E_FIXED = 5
E_ENUM = 6
E_DIGITS = 7
E_UNION_NULL = 8
E_NO_MEMBER = 9
E_TOO_BIG = 10
