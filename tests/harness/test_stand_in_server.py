"""The rehearsal's stand-in model server (`harness.rehearsal.openai_server`) when a client goes
away: a run stopped by Ctrl-C resets its keep-alive connections, and the server must take that
quietly (CI once saw `ConnectionResetError` tracebacks on a stopped rehearsal's stderr)."""

from __future__ import annotations

import socket
import struct
import threading
import time

from tests.openai_fixture import OpenAIFixture


def _request_threads(before: frozenset[threading.Thread]) -> list[threading.Thread]:
    """Request threads of this process that were not there `before` (another test's server in
    the same worker may have left its own)."""
    return [
        t for t in threading.enumerate() if "process_request_thread" in t.name and t not in before
    ]


def test_a_client_that_resets_its_connection_leaves_no_traceback(capsys) -> None:  # type: ignore[no-untyped-def]
    before = frozenset(threading.enumerate())
    with OpenAIFixture(reply="x") as server:
        client = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        client.sendall(b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert client.recv(65536).startswith(b"HTTP/1.1 200")
        # The handler now waits in readline for the next keep-alive request; close with a reset
        # (SO_LINGER on, timeout 0), as a process killed mid-connection does.
        client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        client.close()
        deadline = time.monotonic() + 10
        while _request_threads(before) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not _request_threads(before), "the handler never saw the reset"
        # still serving after it
        again = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        again.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        assert again.recv(65536).startswith(b"HTTP/1.1 200")
        again.close()
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err, captured.err
    assert "Exception occurred" not in captured.err, captured.err
