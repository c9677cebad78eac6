"""Connection-level limits of the judge service: idle and slow clients, overload, descriptors.

- Idle or slow connections: aiohttp's keep-alive timer runs from the moment a connection opens
  and after every response, and closes a connection still waiting for a complete request head
  when it fires; the service sets it to `--limit idle-timeout=S` seconds, so a client that connects
  and sends nothing, or trickles a partial request head, is dropped after that long. A body that
  does not arrive in time is a 408 (`judges.service.requests`).
- Overload: at most `cap` connections are served at once. One more is answered at once with
  `503 Service Unavailable` and `Retry-After` and closed, never left hanging.
- Descriptors: `descriptor_budget` raises the soft RLIMIT_NOFILE to the hard one and keeps a
  reserve for the sandboxes and the store, so connections alone cannot exhaust descriptors;
  should they run out anyway, `error_middleware` turns the failure into a 503 with Retry-After.
  Any other unexpected failure is a JSON 500 without a traceback (logged in full).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import resource
from collections.abc import Awaitable, Callable

from aiohttp import web

from judges.sandbox.outcome import is_resource_exhaustion

log = logging.getLogger("judges.service.connections")

RETRY_AFTER_S = 2
_FD_RESERVE_BASE = 64  # the service's own files, logs, store writes, spooled uploads
_FD_PER_WORKER = 12  # one sandboxed run: pipes, stdin memfd, stdout/stderr, cgroup files
_LINGER_S = 0.5  # time a refused client has to read its 503 before the socket closes


def descriptor_budget(requested: int, workers: int) -> int:
    """The connection cap: `requested`, or less where the descriptor limit would not leave
    room for the sandboxes; raises ValueError naming the limit when almost no room is left."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        soft = hard
    in_use = len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else 16
    room = soft - in_use - _FD_RESERVE_BASE - _FD_PER_WORKER * workers
    if room < 4:
        raise ValueError(
            f"the descriptor limit (RLIMIT_NOFILE {soft}) leaves room for {max(room, 0)} "
            f"connections beside {workers} workers; raise it (ulimit -n) or lower --workers"
        )
    return min(requested, room)


def _overload_response() -> bytes:
    body = json.dumps(
        {"error": "the judge is serving its maximum number of connections; retry later"}
    ).encode()
    head = (
        "HTTP/1.1 503 Service Unavailable\r\n"
        f"Retry-After: {RETRY_AFTER_S}\r\n"
        "Content-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    )
    return head.encode() + body


class _Refuse(asyncio.Protocol):
    """Answers 503 at once and closes once the client's request head is read (closing with
    unread data would reset the connection and could lose the answer), or after _LINGER_S."""

    def __init__(self) -> None:
        self._tail = b""
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        transport.write(_overload_response())
        asyncio.get_running_loop().call_later(_LINGER_S, transport.close)

    def data_received(self, data: bytes) -> None:
        window = self._tail + data
        self._tail = window[-3:]
        if b"\r\n\r\n" in window and self._transport is not None:
            self._transport.close()


class CappedServer:
    """A protocol factory over aiohttp's server that refuses connections beyond `cap`."""

    def __init__(self, server: web.Server, cap: int) -> None:
        self.server = server
        self.cap = cap
        self.refused = 0

    def __call__(self) -> asyncio.BaseProtocol:
        if len(self.server.connections) >= self.cap:
            self.refused += 1
            if self.refused in (1, 10, 100) or self.refused % 1000 == 0:
                log.warning("overload: %d connections refused with 503 so far", self.refused)
            return _Refuse()
        return self.server()


async def listen(runner: web.AppRunner, host: str, port: int, cap: int) -> asyncio.Server:
    """Serve `runner` (already set up) on host:port with the connection cap."""
    assert runner.server is not None
    loop = asyncio.get_running_loop()
    return await loop.create_server(
        CappedServer(runner.server, cap), host, port, reuse_address=True, backlog=1024
    )


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Resource exhaustion → 503 with Retry-After; any other unexpected failure → JSON 500."""
    try:
        return await handler(request)
    except web.HTTPException:
        raise
    except Exception as error:
        if is_resource_exhaustion(error):
            log.warning("%s %s: out of resources: %s", request.method, request.path, error)
            return web.json_response(
                {"error": f"the judge is out of resources ({error.strerror}); retry later"},
                status=503,
                headers={"Retry-After": str(RETRY_AFTER_S)},
            )
        log.exception("%s %s: unexpected failure", request.method, request.path)
        return web.json_response({"error": f"internal error: {type(error).__name__}"}, status=500)
