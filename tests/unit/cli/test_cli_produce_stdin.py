"""kafka-core produce reads stdin so that a signal always ends the wait: lines as before, and a
handler whose signal the kernel gave another thread still runs while no input comes."""

from __future__ import annotations

import io
import os
import signal
import threading
import time

import pytest

from kafka_core.cli.produce import _pipe_lines

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGUSR1"), reason="POSIX signals")


@pytest.mark.parametrize(
    "data",
    [b"", b"one\ntwo\n", b"a\r\nb\n\nc", b"\n\n", b"no newline", b"x" * 200_000 + b"\ny\r\n", b"\r\n\r"],
)
def test_the_lines_are_those_a_file_gives(data: bytes) -> None:
    r, w = os.pipe()

    def write() -> None:
        os.write(w, data)
        os.close(w)

    writer = threading.Thread(target=write)
    writer.start()
    try:
        assert list(_pipe_lines(r, wake_s=0.05)) == list(io.BytesIO(data))
    finally:
        writer.join()
        os.close(r)


class _Woken(Exception):
    pass


def test_a_signal_delivered_to_another_thread_ends_the_wait() -> None:
    """With the old blocking read, the handler ran only once the watchdog's line had come."""
    r, w = os.pipe()
    watchdog_wrote = threading.Event()

    def handler(signum: int, frame: object) -> None:
        raise _Woken(watchdog_wrote.is_set())

    def elsewhere() -> None:
        time.sleep(0.2)
        signal.raise_signal(signal.SIGUSR1)  # raise(3): to this thread, not the main one

    def watchdog() -> None:  # a hang guard: unblocks a reader that is never woken
        time.sleep(20)
        watchdog_wrote.set()
        os.write(w, b"the watchdog's line\n")

    previous = signal.signal(signal.SIGUSR1, handler)
    threading.Thread(target=elsewhere, daemon=True).start()
    threading.Thread(target=watchdog, daemon=True).start()
    try:
        with pytest.raises(_Woken) as woken:
            for line in _pipe_lines(r, wake_s=0.05):
                pytest.fail(f"a line came before the handler ran: {line!r}")
        assert woken.value.args == (False,), "the handler waited for input"
    finally:
        signal.signal(signal.SIGUSR1, previous)
        os.close(w)
        os.close(r)
