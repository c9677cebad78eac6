"""The lifecycle the rehearsal's loopback HTTP stand-ins share: a `ThreadingHTTPServer` on
127.0.0.1 served from a daemon thread, stopped once (twice is harmless), usable as a context
manager. Each stand-in binds its own handler in `start` and hands the server to `_serve`."""

from __future__ import annotations

import threading
from http.server import ThreadingHTTPServer
from typing import Self


class LoopbackServer:
    """Base of a stand-in served on loopback; a subclass implements `start`."""

    _server: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None

    def start(self) -> Self:
        raise NotImplementedError

    def _serve(self, server: ThreadingHTTPServer, name: str, poll_interval: float = 0.5) -> None:
        """Serve `server` (already bound) on a daemon thread named `name`."""
        server.daemon_threads = True
        self._server = server
        self._thread = threading.Thread(
            target=lambda: server.serve_forever(poll_interval=poll_interval),
            name=name,
            daemon=True,
        )
        self._thread.start()

    def stop(self) -> None:
        """Stop serving and close the socket; safe to call twice."""
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
