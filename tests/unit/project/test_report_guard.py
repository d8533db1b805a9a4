"""The conftest guard that keeps a traceback with a line-less entry from stopping the session."""

from __future__ import annotations

import types

import pytest
from report_guard import with_line_numbers


def _lineless_error() -> ValueError:
    """A ValueError whose innermost traceback entry stopped on an instruction with no line, as
    one does when a signal arrives in compiler-made clean-up code."""

    def raiser() -> None:
        with open(__file__):
            pass
        raise ValueError("boom")

    try:
        raiser()
    except ValueError as exc:
        tb = exc.__traceback__
        assert tb is not None and tb.tb_next is not None
        inner = tb.tb_next
        lineless = [start for start, _, line in inner.tb_frame.f_code.co_lines() if line is None]
        if not lineless:
            pytest.skip("this interpreter gives every instruction a line")
        bad = types.TracebackType(None, inner.tb_frame, lineless[0], -1)
        if bad.tb_lineno is not None:
            pytest.skip("this interpreter never answers tb_lineno None")
        cause = ValueError("cause")
        error = ValueError("boom").with_traceback(
            types.TracebackType(bad, tb.tb_frame, tb.tb_lasti, tb.tb_lineno)
        )
        cause.__traceback__ = types.TracebackType(None, inner.tb_frame, lineless[0], -1)
        error.__cause__ = cause
        return error
    raise AssertionError("unreachable")


def test_pytest_cannot_render_a_lineless_traceback_unmended() -> None:
    error = _lineless_error()
    with pytest.raises(TypeError):
        pytest.ExceptionInfo.from_exception(error).getrepr()


def test_a_mended_traceback_renders_with_the_frames_lines() -> None:
    error = _lineless_error()
    assert with_line_numbers(error)
    text = str(pytest.ExceptionInfo.from_exception(error).getrepr())
    assert "ValueError: boom" in text and "ValueError: cause" in text
    assert "def raiser" in text or "raiser" in text
    assert not with_line_numbers(error)  # nothing left to mend


def test_an_ordinary_traceback_is_left_alone() -> None:
    try:
        raise KeyError("k")
    except KeyError as exc:
        before = exc.__traceback__
        assert not with_line_numbers(exc)
        assert exc.__traceback__ is before
