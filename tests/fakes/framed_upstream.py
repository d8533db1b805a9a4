"""A Kafka-framed upstream for the fault proxy's tests: each connection's requests are answered
one at a time, in order, as Kafka does; a subclass says what to answer and may hold an answer."""

from __future__ import annotations

import contextlib
import socket
import struct
import threading


def recv_exact(sock: socket.socket, n: int) -> bytes:
    """``n`` bytes, or b"" when the peer closed first."""
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            return b""
        out += chunk
    return out


class FramedUpstream:
    """Answers each request frame with [size][correlation id][body] (a thread per connection)."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.received = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def body(self, api_key: int) -> bytes:
        """The answer's body after the correlation id; it may block to hold the connection."""
        return b"ok"

    def close(self) -> None:
        self.sock.close()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):
            while head := recv_exact(conn, 4):
                frame = recv_exact(conn, struct.unpack(">i", head)[0])
                api_key, _, corr = struct.unpack(">hhi", frame[:8])
                self.received += 1
                body = struct.pack(">i", corr) + self.body(api_key)
                conn.sendall(struct.pack(">i", len(body)) + body)
