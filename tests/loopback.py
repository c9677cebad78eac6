"""A request handler of a test served on loopback for the length of a `with` block."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@contextlib.contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """`handler` served by a `ThreadingHTTPServer` on 127.0.0.1 (a free port) from a daemon
    thread; yields the base URL (`http://127.0.0.1:PORT`), then stops the server and closes
    its socket. Request threads are daemons and are not joined: a test that counts threads
    counts only those it started (tests/harness/test_stand_in_server.py)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
