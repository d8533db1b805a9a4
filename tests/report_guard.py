"""Tracebacks pytest can render.

CPython 3.11 gives ``tb_lineno = None`` for a traceback entry that stopped on an instruction with
no line (a signal, such as pytest-timeout's, arriving in compiler-made clean-up code). pytest then
fails inside its own report (INTERNALERROR) and the whole session stops without naming the test.
``with_line_numbers`` rebuilds such a chain with each frame's current line so the failure, or the
expected failure, is reported as usual.
"""

from __future__ import annotations

import types


def _chain_ok(tb: types.TracebackType | None) -> bool:
    while tb is not None:
        if tb.tb_lineno is None:
            return False
        tb = tb.tb_next
    return True


def _rebuilt(tb: types.TracebackType | None) -> types.TracebackType | None:
    entries = []
    while tb is not None:
        entries.append(tb)
        tb = tb.tb_next
    rebuilt: types.TracebackType | None = None
    for entry in reversed(entries):
        line = entry.tb_lineno
        if line is None:
            line = entry.tb_frame.f_lineno or entry.tb_frame.f_code.co_firstlineno
        rebuilt = types.TracebackType(rebuilt, entry.tb_frame, entry.tb_lasti, line)
    return rebuilt


def with_line_numbers(exc: BaseException) -> bool:
    """Mend ``exc`` and the exceptions chained to it in place; True when any needed it."""
    mended, seen = False, set()
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        if not _chain_ok(e.__traceback__):
            e.__traceback__ = _rebuilt(e.__traceback__)
            mended = True
        todo.extend((e.__cause__, e.__context__))
        todo.extend(getattr(e, "exceptions", ()))  # an ExceptionGroup's members
    return mended
